"""The cloud registry (geosched.clouds): one module per cloud, found by listing the package, and every fact a spec
names exists (its catalog file, its Terraform module); other modules ask it instead of naming a cloud."""

from __future__ import annotations

import pkgutil
from importlib import resources
from pathlib import Path

from geosched import clouds
from geosched.clouds import NodeShape
from geosched.core import netmodel, nodelabels
from geosched.core.gpus import part
from geosched.core.models import Zone
from geosched.kube import inventory, keys
from geosched.policies import spotrisk

ROOT = Path(__file__).parents[1]


def test_every_cloud_module_is_found_and_its_files_exist() -> None:
    # Every module of the package but spec.py is a cloud named as its module, found by listing (this test names no
    # new cloud: adding Nebius in the issue 25 audit's experiment failed here on a written-out tuple).
    modules = sorted(m.name for m in pkgutil.iter_modules(clouds.__path__) if m.name != "spec")
    assert list(clouds.names()) == modules
    assert {"aws", "gcp", "coreweave"} <= set(modules)
    schemes = [s for spec in clouds.all_specs() for s in spec.provider_id_schemes]
    assert len(schemes) == len(set(schemes))
    data = resources.files("geosched.data")
    for spec in clouds.all_specs():
        assert spec.catalog_file is None or data.joinpath(spec.catalog_file).is_file(), spec.name
        assert spec.terraform_module is None or (ROOT / spec.terraform_module / "main.tf").is_file(), spec.name
    assert clouds.get("ssh") is None and clouds.by_scheme("gcp") is None  # GCE nodes say `gce://`


def test_the_modules_that_ask_the_registry_get_each_clouds_answer() -> None:
    # The inventory: providerID scheme and zone-ID label.
    assert inventory.provider_of("gce://p/us-central1-a/vm") == "gcp"
    assert inventory.provider_of("kind://docker/kind/n1") == "kind"
    # The node labels a spec adds, and selectable's zone key.
    h100 = NodeShape(zone="use1-az1", pool="g", instance_type="p5.48xlarge", gpu=part("H100"), spot=True)
    aws = clouds.get("aws")
    gcp = clouds.get("gcp")
    assert aws is not None and gcp is not None
    assert aws.node_labels(h100)[keys.EKS_CAPACITY_TYPE] == "SPOT"
    assert gcp.node_labels(h100)[keys.GKE_ACCELERATOR] == "nvidia-h100-80gb"
    labels = nodelabels.cloud_labels(
        provider="coreweave",
        region="RNO2",
        zone="RNO2A",
        zone_label="RNO2A",
        instance_type="gd-8xh100ib-i128",
        gpu="H100",
        gpus=8,
        hostname="g1",
        pool="p",
    )
    assert labels[keys.ZONE] == "RNO2A" and keys.GKE_NODEPOOL not in labels and keys.EKS_NODEGROUP not in labels
    # The network model: AWS by region, GCP by zone (or a sibling), a cloud it did not measure not at all.
    assert netmodel.endpoint(Zone("use1-az1", "aws", "us-east-1")) == "aws:us-east-1"
    assert netmodel.endpoint(Zone("RNO2A", "coreweave", "RNO2")) is None
    # The spot default: GCP documents one, the others are UNKNOWN without a signal.
    gcp_spec = clouds.get("gcp")
    assert gcp_spec is not None and spotrisk.resolve("gcp") == spotrisk.documented_default(gcp_spec)
    assert spotrisk.resolve("gcp").known
    assert spotrisk.resolve("coreweave") == spotrisk.UNKNOWN


def test_a_clouds_settings_are_declared_in_its_module_and_nowhere_else() -> None:
    # The config file's `<cloud>.*` keys, their variables, help and checks come from the cloud's SETTINGS; the
    # settings table and the pydantic model name no cloud (issue 25 item 1).
    from geosched import settings
    from geosched.settings import model as settings_model

    declared = {f"{spec.name}.{s.name}": (spec, s) for spec in clouds.all_specs() for s in spec.settings}
    assert {"aws.regions", "aws.eks_node_role", "gcp.project", "gcp.public_ips"} <= set(declared)
    assert {k for k in settings.BY_KEY if k.split(".")[0] in clouds.names()} == set(declared)
    for key, (spec, s) in declared.items():
        assert settings.of_cloud(spec.name, s.name).env == s.env
        assert settings_model.field(key).description == s.help
    envs = [s.env for s in settings.SETTINGS]
    assert len(envs) == len(set(envs))
    values = settings_model.from_variables({"GEOSCHED_AWS_REGIONS": "us-east-1,eu-west-1"})
    assert values.of_cloud("aws")["regions"] == ("us-east-1", "eu-west-1")
    assert values.of_cloud("gcp")["public_ips"] is True  # a flag's declared default
    assert values.of_cloud("coreweave") == {}  # a Kubernetes-only cloud has no settings
