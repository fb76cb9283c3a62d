"""Nodes whose `nvidia.com/gpu` are not whole GPUs (MIG slices, time-sliced or MPS replicas) and GPUs of another
form factor than the catalog's are no capacity for a gang of the catalog's model. The node objects in
data/nodes/ are shaped by NVIDIA's, GKE's and Lambda's documentation (each file's header cites its source), not
by geosched's label code; an audit found each read as whole GPUs of a catalog model before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.kube.inventory import nodes_from_kube
from tests.kubeapi.real_nodes import eks_us_east_1

NODES = Path(__file__).parent / "data" / "nodes"


def _nodes(name: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((NODES / name).read_text())
    return list(doc["items"]) if doc.get("kind") == "NodeList" else [doc]


@pytest.mark.parametrize(("name", "reason"), [
    ("mig-single-p4d.yaml", "MIG slices, not whole GPUs (nvidia.com/gpu.product=A100-SXM4-40GB-MIG-1g.5gb)"),
    ("mig-gke-a2.yaml", "MIG slices, not whole GPUs (cloud.google.com/gke-gpu-partition-size=1g.5gb)"),
    ("timeslice-t4-shared.yaml", "shared GPUs, not whole ones (nvidia.com/gpu.product=Tesla-T4-SHARED, "
                                 "nvidia.com/gpu.replicas=8)"),
    ("timesharing-gke-t4.yaml", "shared GPUs, not whole ones (cloud.google.com/gke-gpu-sharing-strategy=time-sharing)"),
])
def test_sliced_and_shared_gpus_are_left_out_with_the_label_that_says_so(name: str, reason: str) -> None:
    inventory = nodes_from_kube(_nodes(name), [], "c")
    assert inventory.nodes == () and [r.reason for r in inventory.skipped] == [reason]


def test_h100_pcie_and_nvl_are_not_the_catalogs_sxm_h100() -> None:
    inventory = nodes_from_kube(_nodes("h100-pcie-nvl.yaml"), [], "c")
    assert inventory.nodes == ()
    assert [r.reason.split(" (")[0] for r in inventory.skipped] == ["unknown GPU model"] * 2
    assert "NVIDIA-H100-PCIe" in inventory.skipped[0].reason and "NVIDIA-H100-NVL" in inventory.skipped[1].reason


def test_the_mig_strategy_label_alone_does_not_mean_slices() -> None:
    # The GPU operator labels every GPU node with its MIG strategy (`single` by default), MIG on or off; with MIG off
    # the product is the whole GPU's and the node counts whole.
    nodes = eks_us_east_1()
    for node in nodes:
        node["metadata"]["labels"].update({"nvidia.com/mig.strategy": "single", "nvidia.com/mig.capable": "true",
                                           "nvidia.com/mig.config": "all-disabled"})
    inventory = nodes_from_kube(nodes, [], "c")
    assert len(inventory.nodes) == len(nodes) and inventory.skipped == ()
    assert all(n.gpus == 8 for n in inventory.nodes)
