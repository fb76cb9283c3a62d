"""Nodes geosched describes itself (the embedded default fleet, `snapshot export --embedded`, the GitOps example's
snapshot) carry the labels and providerIDs real EKS and GKE GPU nodes carry. The expected shapes are written
out here from the platforms' documentation (see tests/kubeapi/real_nodes.py for the sources), not taken from
geosched's label code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from geosched.cli.main import app
from geosched.core.default_fleet import default_fleet
from geosched.core.gpus import PARTS, model_from_gke_accelerator, model_from_product, part
from geosched.core.models import Node
from geosched.files.documents import load_fleet

ROOT = Path(__file__).resolve().parents[2]

# GPU feature discovery's nvidia.com/gpu.product for the parts of the instance types the embedded fleet uses
# (p4d, a2-highgpu: A100 SXM4 40GB; p5, a3-highgpu: H100 80GB HBM3; g5: A10G; g6, g2: L4).
GFD_PRODUCTS = {"A100": "NVIDIA-A100-SXM4-40GB", "H100": "NVIDIA-H100-80GB-HBM3", "A10G": "NVIDIA-A10G",
                "L4": "NVIDIA-L4"}
# GKE's cloud.google.com/gke-accelerator (cloud.google.com/kubernetes-engine/docs/how-to/gpus).
GKE_ACCELERATORS = {"A100": "nvidia-tesla-a100", "H100": "nvidia-h100-80gb", "L4": "nvidia-l4"}
AWS_ZONE_NAME = re.compile(r"^(?P<region>[a-z]{2}-[a-z]+-\d)[a-z]$")
AWS_ZONE_ID = re.compile(r"^[a-z]+\d-az\d+$")


def assert_real_labels(node: Node) -> None:
    labels = node.labels
    assert labels["topology.kubernetes.io/region"] == node.region
    assert labels["node.kubernetes.io/instance-type"] == node.instance_type
    assert labels["kubernetes.io/hostname"] == node.name
    assert labels["nvidia.com/gpu.product"] == GFD_PRODUCTS[node.gpu], node.name
    assert labels["nvidia.com/gpu.count"] == str(node.gpus)
    if node.provider == "aws":
        # EKS: zone name in the zone label, zone ID (the fleet's zone) in topology.k8s.aws/zone-id.
        name = AWS_ZONE_NAME.match(labels["topology.kubernetes.io/zone"])
        assert name is not None and name["region"] == node.region, labels
        assert AWS_ZONE_ID.match(node.zone) and labels["topology.k8s.aws/zone-id"] == node.zone
        assert labels["eks.amazonaws.com/nodegroup"] and labels["eks.amazonaws.com/capacityType"] == "ON_DEMAND"
        assert re.fullmatch(rf"aws:///{labels['topology.kubernetes.io/zone']}/i-[0-9a-f]{{17}}", node.provider_id or "")
        assert "cloud.google.com/gke-accelerator" not in labels
    else:
        assert node.provider == "gcp"
        assert labels["topology.kubernetes.io/zone"] == node.zone
        assert labels["cloud.google.com/gke-accelerator"] == GKE_ACCELERATORS[node.gpu]
        assert labels["cloud.google.com/gke-nodepool"]
        assert re.fullmatch(rf"gce://[a-z][-a-z0-9]+/{node.zone}/{node.name}", node.provider_id or "")
        assert "topology.k8s.aws/zone-id" not in labels


def test_the_embedded_fleet_carries_the_labels_real_nodes_carry() -> None:
    fleet = default_fleet()
    for node in fleet.nodes:
        assert_real_labels(node)
    # One zone ID, one zone name: the example account's mapping is a mapping.
    names: dict[str, set[str]] = {}
    for node in fleet.nodes:
        if node.provider == "aws":
            names.setdefault(node.zone, set()).add(node.labels["topology.kubernetes.io/zone"])
    assert all(len(v) == 1 for v in names.values())
    assert len({next(iter(v)) for v in names.values()}) == len(names)


def test_snapshot_export_embedded_writes_real_labels(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--home", str(tmp_path / "home"), "snapshot", "export", "--embedded",
                                      str(tmp_path / "snap")])
    assert result.exit_code == 0, result.output
    fleet = load_fleet(tmp_path / "snap" / "fleet.yaml")
    for node in fleet.nodes:
        assert_real_labels(node)


def test_the_gitops_example_snapshot_is_a_slice_of_the_embedded_fleet_with_real_labels() -> None:
    example = load_fleet(ROOT / "examples" / "gitops" / "snapshot" / "fleet.yaml")
    embedded = default_fleet().by_name
    for node in example.nodes:
        assert_real_labels(node)
        assert node == embedded[node.name] and dict(node.labels) == dict(embedded[node.name].labels)


@pytest.mark.parametrize("model", sorted(PARTS))
def test_each_product_name_reads_back_as_its_model(model: str) -> None:
    product = part(model).product
    assert product is not None
    # The H100 of a3-megagpu is the same part as any H100: GFD cannot tell them apart, the catalog can.
    assert model_from_product(product) == ("H100" if model == "H100-MEGA" else model)
    accelerator = part(model).gke_accelerator
    assert accelerator is None or model_from_gke_accelerator(accelerator) == model
