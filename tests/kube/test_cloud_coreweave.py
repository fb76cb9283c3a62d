"""A Kubernetes-only GPU cloud joins as one module plus data rows (issue 25 item 1): CoreWeave's nodes, as CKS
labels them, are recognised by the inventory (provider, region, zone, GPU model, price), build a fleet with the
cloud's carbon rows, and a gang places on them.

The Node objects are shaped as CKS documents its nodes:
- `topology.kubernetes.io/region` / `topology.kubernetes.io/zone` with CoreWeave's region and zone names (`RNO2`,
  `RNO2A`; `US-EAST-01`, `US-EAST-01A`): docs.coreweave.com/docs/platform/regions/general-access ("Region labels"),
  docs.coreweave.com/docs/platform/topology, docs.coreweave.com/platform/regions/all-availability-zones;
- `node.kubernetes.io/instance-type` (and the older `node.kubernetes.io/type`) holding the instance ID
  `gd-8xh100ib-i128`, `node.coreweave.cloud/state` and `node.coreweave.cloud/reserved`:
  docs.coreweave.com/docs/products/cks/concepts/workload-scheduling;
- `ib.coreweave.cloud/fabric`, `node.coreweave.cloud/rack`:
  docs.coreweave.com/docs/products/networking/hpc-interconnect/infiniband-labels;
- InternalIP in each zone's documented node range (RNO2A 10.168.192.0/18, US-EAST-01A 10.202.192.0/18):
  docs.coreweave.com/platform/regions/us-west and /us-east;
- providerID `coreweave://<node name>`: not in CoreWeave's documentation; the shape marin-community/marin records
  CKS nodes with (its iris CoreWeave platform tests).
Whether CKS runs NVIDIA GPU feature discovery is not documented, so one node carries `nvidia.com/gpu.product`
and the others only the instance type (the catalog names its GPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from geosched import api, clouds
from geosched.core import catalog, nodelabels
from geosched.core.models import Job, NoFit, Placement
from geosched.kube import keys
from geosched.kube.cluster_inventory import ClusterReading, build_fleet
from geosched.kube.inventory import nodes_from_kube, provider_of
from geosched.providers import registry

INSTANCE = "gd-8xh100ib-i128"
ORG = "cw1a2b"  # the customer's org ID, which `node.coreweave.cloud/reserved` carries on its production nodes


def cks_node(name: str, region: str, zone: str, ip: str, *, gfd: bool = False) -> dict[str, Any]:
    labels = {
        keys.HOSTNAME: name,
        keys.OS: "linux",
        keys.ARCH: "amd64",
        keys.REGION: region,
        keys.ZONE: zone,
        keys.INSTANCE_TYPE: INSTANCE,
        "node.kubernetes.io/type": INSTANCE,
        "node.coreweave.cloud/state": "production",
        "node.coreweave.cloud/reserved": ORG,
        "ib.coreweave.cloud/fabric": f"{region.lower()}-ib1",
        "node.coreweave.cloud/rack": "r042",
    }
    if gfd:
        labels |= {keys.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3", keys.GPU_COUNT: "8", keys.GPU_PRESENT: "true"}
    allocatable = {"cpu": "128", "memory": "2030Gi", keys.GPU: "8", "pods": "110", "rdma/ib": "1k"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": f"coreweave://{name}"},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
        },
    }


def training_pod(node: str, gpus: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"other-{node}", "namespace": "team"},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "t", "image": "x", "resources": {"limits": {keys.GPU: str(gpus)}}}],
        },
        "status": {"phase": "Running"},
    }


RNO2 = [cks_node(f"g{i:04d}a", "RNO2", "RNO2A", f"10.168.192.{10 + i}", gfd=i == 0) for i in range(4)]
EAST = [cks_node(f"g{i:04d}e", "US-EAST-01", "US-EAST-01A", f"10.202.192.{10 + i}") for i in range(2)]


def test_the_cloud_is_registered_as_one_module_without_a_provider() -> None:
    spec = clouds.get("coreweave")
    assert spec is not None and clouds.by_scheme("coreweave") is spec
    # Kubernetes-only: geosched reads its nodes and launches nothing there.
    assert "coreweave" not in registry.CLOUDS and registry.CLOUDS == ("aws", "gcp")
    assert provider_of("coreweave://g0001a") == "coreweave"
    assert nodelabels.provider_id("coreweave", "RNO2A", "g0001a", "") == "coreweave://g0001a"


def test_the_catalog_prices_its_instance_in_its_zones() -> None:
    offer = catalog.offering_index()[("coreweave", INSTANCE, "RNO2A")]
    assert (offer.gpu, offer.gpus, offer.region, offer.price_ondemand, offer.price_spot) == (
        "H100",
        8,
        "RNO2",
        49.24,
        None,
    )
    assert catalog.zones()["US-EAST-01A"].provider == "coreweave"
    assert catalog.regions()["coreweave:RNO2"].grid_gco2e_per_kwh == 322.167


def test_its_nodes_are_recognised_with_and_without_gpu_feature_discovery() -> None:
    inventory = nodes_from_kube([*RNO2, *EAST], [training_pod("g0001a", 8)], "cks-us")
    assert inventory.skipped == ()
    by_name = {n.name: n for n in inventory.nodes}
    assert {n.provider for n in inventory.nodes} == {"coreweave"}
    assert {(n.region, n.zone) for n in inventory.nodes} == {("RNO2", "RNO2A"), ("US-EAST-01", "US-EAST-01A")}
    assert {n.gpu for n in inventory.nodes} == {"H100"}  # g0000a by its GFD label, the others by the catalog
    assert by_name["g0002a"].price_ondemand == 49.24 and by_name["g0002a"].price_spot is None
    assert (by_name["g0001a"].gpus, by_name["g0001a"].gpus_free) == (8, 0)
    assert by_name["g0000e"].addresses == ("10.202.192.10",)
    assert nodelabels.selectable(by_name["g0002a"])[keys.ZONE] == "RNO2A"


def test_a_gang_places_on_its_nodes() -> None:
    view = build_fleet(
        [
            ClusterReading("cks-rno2", tuple(RNO2), (training_pod("g0001a", 8),)),
            ClusterReading("cks-east", tuple(EAST), ()),
        ]
    )
    assert view.skipped == ()
    assert view.fleet.zones["RNO2A"].provider == "coreweave"
    # RNO2's carbon row is shipped: no assumed grid for it (US-EAST-01 has none and is said to be assumed).
    assert not any("RNO2" in a for a in view.assumptions)
    placed = api.place(Job("train", workers=3, gpus_per_worker=8, gpu="H100"), view.fleet)
    assert isinstance(placed, Placement), placed
    assert (placed.cluster, placed.zones) == ("cks-rno2", ("RNO2A",))
    assert sorted(a.node for a in placed.assignments) == ["g0000a", "g0002a", "g0003a"]  # g0001a is busy
    too_big = api.place(Job("big", workers=6, gpus_per_worker=8, gpu="H100", max_zones=1), view.fleet)
    assert isinstance(too_big, NoFit)


def test_geosched_place_takes_a_fleet_file_of_its_nodes(tmp_path: Path) -> None:
    # No `regions:` declared: RNO2's grid and PUE come from the shipped carbon row, the GPU and price from the
    # catalog row of its instance type; beside an EKS p5 node in us-east-1, pricier and on a dirtier grid.
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "apiVersion: geosched.io/v1alpha1\nkind: Fleet\nnodes:\n"
        + "".join(
            f"  - {{name: g000{i}a, provider: coreweave, region: RNO2, zone: RNO2A, instance_type: {INSTANCE}, "
            "gpus: 8, cluster: cks-rno2}\n"
            for i in range(2)
        )
        + "  - {name: ip-10-0-1-23, provider: aws, region: us-east-1, zone: use1-az6, instance_type: p5.48xlarge, "
        "gpus: 8, cluster: eks-east}\n"
    )
    job = tmp_path / "job.yaml"
    job.write_text("name: train\nworkers: 2\ngpus_per_worker: 8\ngpu: H100\n")
    env = {**os.environ, "GEOSCHED_HOME": str(tmp_path), "COLUMNS": "200"}
    run = subprocess.run(
        [sys.executable, "-m", "geosched", "place", str(job), "--fleet", str(fleet), "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert (doc["cluster"], doc["zones"]) == ("cks-rno2", ["RNO2A"])
