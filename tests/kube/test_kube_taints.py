"""Issue 21 item 2 (part): the fleet submit and `snapshot export --from-clusters` place on leaves out nodes whose
NoSchedule/NoExecute taints geosched's pods do not tolerate, on GKE-shaped nodes (tests/kubeapi/real_nodes.py) with
the taints GKE sets on GPU pools (`nvidia.com/gpu=present:NoSchedule`, tolerated by GPU pods through the
ExtendedResourceToleration admission plugin GKE runs: cloud.google.com/kubernetes-engine/docs/how-to/gpus) and a
dedicated pool's taint in the form the Kubernetes docs give (taint-and-toleration, "Dedicated Nodes")."""

from __future__ import annotations

from typing import Any

import pytest

from geosched.kube.cluster_inventory import ClusterReading, build_fleet
from geosched.kube.inventory import nodes_from_kube
from tests.kubeapi.real_nodes import gke_node

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def node(suffix: str, *taints: dict[str, str]) -> dict[str, Any]:
    out = gke_node(f"gke-ml-central-h100-b-5c2f3a1b-{suffix}", project="ml-platform-prod", region="us-central1",
                   zone="us-central1-b", instance_type="a3-highgpu-8g", accelerator="nvidia-h100-80gb", pool="h100-b")
    if taints:
        out["spec"]["taints"] = list(taints)
    return out


@pytest.mark.parametrize(("taints", "kept"), [
    ((), True),
    ((GPU_TAINT,), True),
    ((GPU_TAINT, {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}), False),
    (({"key": "maintenance", "effect": "NoExecute"},), False),
    (({"key": "dedicated", "value": "inference", "effect": "PreferNoSchedule"},), True),
    (({"key": "nvidia.com/gpu", "value": "present", "effect": "NoExecute"},), False),
])
def test_the_fleet_keeps_only_nodes_geosched_pods_tolerate(taints: tuple[dict[str, str], ...], kept: bool) -> None:
    view = build_fleet([ClusterReading("gke", (node("t2w8", *taints),), ())])
    assert bool(view.fleet.nodes) == kept, view.skipped
    if not kept:
        (skipped,) = view.skipped
        assert "taint" in skipped.reason and taints[-1]["key"] in skipped.reason


def test_the_scheduler_reading_keeps_tainted_nodes_for_pods_that_tolerate_them() -> None:
    # The in-cluster scheduler matches each pod's own tolerations (scheduler/pods.py): its inventory keeps the node.
    tainted = node("q1n6", GPU_TAINT, {"key": "dedicated", "value": "inference", "effect": "NoSchedule"})
    assert [n.name for n in nodes_from_kube([tainted], [], "gke").nodes] == [tainted["metadata"]["name"]]
