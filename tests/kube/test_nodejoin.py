"""Waiting for a node group's nodes to join and be Ready (geosched/kube/nodejoin.py): the reading of one Node's
conditions and taints (pure), the one-line shortfall, and the poll loop on a fake clock against the project's API
emulator over HTTP (tests/kubeemu), nodes joining one by one between polls as kubelets register.

Condition shapes: Kubernetes docs, "Nodes" (Node status, Conditions) and the node lifecycle controller's reasons
(NodeStatusUnknown, NodeStatusNeverUpdated); the taints, "Well-Known Labels, Annotations and Taints"."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geosched.kube.client import Kube
from geosched.kube.nodejoin import (
    NodesNotReady,
    NodeState,
    node_state,
    plugin_hint,
    plugin_seen,
    plugin_warning,
    selector_text,
    shortfall,
    unadvertised,
    wait_ready,
)
from tests.kubeemu import MultiCluster, node_manifest

GROUP = {"eks.amazonaws.com/nodegroup": "g-2"}
CNI = ("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network "
       "plugin returns error: cni plugin not initialized")


def node(name: str, conditions: list[dict[str, Any]] | None, taints: list[dict[str, str]] | None = None,
         **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {**spec, **({"taints": taints} if taints else {})},
            "status": {} if conditions is None else {"conditions": conditions}}


@pytest.mark.parametrize(("obj", "ready", "why"), [
    (node("a", [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]), True, ""),
    (node("b", [{"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": CNI}]), False,
     f"Ready=False (KubeletNotReady: {CNI})"),
    (node("c", [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                 "message": "Kubelet never posted node status."}]), False,
     "Ready=Unknown (NodeStatusNeverUpdated: Kubelet never posted node status.)"),
    (node("d", [{"type": "Ready", "status": "False"}, {"type": "DiskPressure", "status": "True"},
                {"type": "MemoryPressure", "status": "False"}]), False, "Ready=False, DiskPressure"),
    (node("e", None), False, "no Ready condition (its kubelet has not posted status)"),
    (node("f", [{"type": "Ready", "status": "True"}], [{"key": "node.kubernetes.io/not-ready",
                                                        "effect": "NoSchedule"}]), False,
     "Ready, still tainted node.kubernetes.io/not-ready"),
    (node("g", [{"type": "Ready", "status": "True"}], [{"key": "nvidia.com/gpu", "value": "true",
                                                        "effect": "NoSchedule"}]), True, ""),
    (node("h", [{"type": "Ready", "status": "True"}], unschedulable=True), False, "cordoned (spec.unschedulable)"),
    # A kubelet started with --cloud-provider=external registers with this taint until the cloud controller manager
    # has initialised the node (Kubernetes docs, "Well-Known Labels, Annotations and Taints").
    (node("i", [{"type": "Ready", "status": "True"}], [{"key": "node.cloudprovider.kubernetes.io/uninitialized",
                                                        "value": "true", "effect": "NoSchedule"}]), False,
     "Ready, still tainted node.cloudprovider.kubernetes.io/uninitialized"),
])
def test_a_node_is_ready_by_its_ready_condition_and_says_why_not(obj: dict[str, Any], ready: bool, why: str) -> None:
    obj["status"]["allocatable"] = {"cpu": "191450m", "nvidia.com/gpu": "8"}
    assert node_state(obj, "nvidia.com/gpu") == NodeState(obj["metadata"]["name"], ready, why)


# A Ready GPU node before its device plugin has registered: allocatable without nvidia.com/gpu (EKS AL2023 NVIDIA AMI,
# the plugin a DaemonSet still pulling), or at "0" (GKE, the driver installer still running; kubernetes/autoscaler
# cluster-autoscaler counts such a node unready for up to 15 minutes).
@pytest.mark.parametrize("allocatable", [{"cpu": "191450m", "pods": "100"}, {"cpu": "191450m", "nvidia.com/gpu": "0"},
                                         None])
def test_a_gpu_node_is_joined_only_once_its_gpus_are_allocatable(allocatable: dict[str, str] | None) -> None:
    obj = node("a", [{"type": "Ready", "status": "True", "reason": "KubeletReady"}])
    if allocatable is not None:
        obj["status"]["allocatable"] = allocatable
    assert node_state(obj, "nvidia.com/gpu") == NodeState("a", False, "Ready, no allocatable nvidia.com/gpu yet (its "
                                                                         "device plugin has not advertised them)")
    assert node_state(obj) == NodeState("a", True, "")


def test_the_shortfall_is_one_line_counting_up_registered_and_missing() -> None:
    states = [NodeState("n1", True, ""), *(NodeState(f"n{i}", False, "Ready=False (KubeletNotReady)")
                                           for i in range(2, 7)), NodeState("n7", False, "no Ready condition")]
    assert shortfall(states, 8, "node group g-2 (cluster ml)", 900) == (
        "1 of 8 nodes of node group g-2 (cluster ml) Ready after 900 s; 5 not Ready (n2, n3, n4 and 2 more): "
        "Ready=False (KubeletNotReady); 1 not Ready (n7): no Ready condition; 1 not registered")
    many = [NodeState(f"n{i}", False, f"reason {i}") for i in range(5)]
    assert shortfall(many, 5, "g", 1.5).endswith("1 not Ready (n2): reason 2; 2 more not Ready for other reasons")
    assert shortfall([], 450, "g", 60) == "0 of 450 nodes of g Ready after 60 s; 450 not registered"
    assert selector_text({"b": "2", "a": "1"}) == "a=1,b=2"


class FakeClock:
    """Time that moves only when the loop sleeps; `on_sleep` runs at each sleep (a kubelet registering)."""

    def __init__(self, on_sleep: Any = None) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep is not None:
            self.on_sleep(len(self.sleeps))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MultiCluster]:
    with MultiCluster(1, directory=tmp_path) as mc:
        yield mc


def group_node(name: str, *, ready: bool, group: str = "g-2") -> dict[str, Any]:
    return node_manifest(name, region="us-east-1", zone="us-east-1a", instance_type="p5.48xlarge",
                         gpu_product="NVIDIA-H100-80GB-HBM3", gpus=8,
                         labels={"eks.amazonaws.com/nodegroup": group}, ready=ready)


def test_the_wait_returns_once_every_node_of_the_group_is_ready(cluster: MultiCluster) -> None:
    api = cluster["cluster-a"]
    api.create(group_node("other-0", ready=True, group="other"))  # another group's Ready node does not count
    for i in range(3):
        api.create(group_node(f"ng-{i}", ready=False))

    def kubelet_reports(polls: int) -> None:  # one more node Ready after each poll; the fourth registers late
        if polls <= 3:
            api.set_status("v1/nodes", f"ng-{polls - 1}", {"conditions": [{"type": "Ready", "status": "True"}]})
        if polls == 2:
            api.create(group_node("ng-3", ready=True))

    clock = FakeClock(kubelet_reports)
    with Kube.open("cluster-a", cluster.kubeconfig) as kube:
        names = wait_ready(kube, GROUP, 4, what="node group g-2", timeout_s=900, poll_s=15, clock=clock,
                           sleep=clock.sleep)
    assert names == ("ng-0", "ng-1", "ng-2", "ng-3")
    assert clock.sleeps == [15, 15, 15]


def test_the_deadline_is_the_clocks_and_the_error_says_who_is_not_ready(cluster: MultiCluster) -> None:
    api = cluster["cluster-a"]
    api.create(group_node("ng-0", ready=True))
    api.create(group_node("ng-1", ready=False))
    clock = FakeClock()
    with Kube.open("cluster-a", cluster.kubeconfig) as kube, pytest.raises(NodesNotReady) as caught:
        wait_ready(kube, GROUP, 3, what="node group g-2", timeout_s=100, poll_s=30, clock=clock, sleep=clock.sleep)
    # A 100 s deadline in four polls, on the clock given (no real waiting): 30 + 30 + 30 + the 10 left.
    assert clock.sleeps == [30, 30, 30, 10]
    assert str(caught.value) == ("1 of 3 nodes of node group g-2 Ready after 100 s; 1 not Ready (ng-1): Ready=False "
                                 "(KubeletReady); 1 not registered")
    assert caught.value.exit_code == 1


def test_the_wait_holds_until_the_device_plugin_has_advertised_the_gpus(cluster: MultiCluster) -> None:
    """Every node Ready from the first poll, the GPUs advertised one node per poll after: the wait returns only once
    all are allocatable (before, `up` placed on the first poll, found no GPU on the new nodes and deleted the group)."""
    api = cluster["cluster-a"]
    for i in range(3):
        obj = group_node(f"ng-{i}", ready=True)
        del obj["status"]["allocatable"]["nvidia.com/gpu"]
        api.create(obj)

    def plugin_registers(polls: int) -> None:
        if polls <= 3:
            obj = group_node(f"ng-{polls - 1}", ready=True)
            api.set_status("v1/nodes", f"ng-{polls - 1}", {"allocatable": obj["status"]["allocatable"]})

    clock = FakeClock(plugin_registers)
    with Kube.open("cluster-a", cluster.kubeconfig) as kube:
        names = wait_ready(kube, GROUP, 3, what="node group g-2", timeout_s=900, poll_s=15, clock=clock,
                           sleep=clock.sleep, needs="nvidia.com/gpu")
    assert names == ("ng-0", "ng-1", "ng-2")
    assert clock.sleeps == [15, 15, 15]


def test_at_the_deadline_ready_nodes_without_gpus_name_the_missing_device_plugin(cluster: MultiCluster) -> None:
    """EKS AL2023 NVIDIA AMIs run no device plugin of their own (Amazon EKS User Guide, "Install Kubernetes device
    plugin for GPUs"): on a cluster without one the nodes are Ready and never advertise a GPU, and the error said only
    "not advertised yet" after 900 s of billed waiting. It now names the likely cause."""
    api = cluster["cluster-a"]
    for i in range(2):
        obj = group_node(f"ng-{i}", ready=True)
        del obj["status"]["allocatable"]["nvidia.com/gpu"]
        api.create(obj)
    api.create(group_node("ng-2", ready=False))
    clock = FakeClock()
    with Kube.open("cluster-a", cluster.kubeconfig) as kube, pytest.raises(NodesNotReady) as caught:
        wait_ready(kube, GROUP, 3, what="node group g-2", timeout_s=60, poll_s=30, clock=clock, sleep=clock.sleep,
                   needs="nvidia.com/gpu")
    assert str(caught.value) == (
        "0 of 3 nodes of node group g-2 Ready after 60 s; 2 not Ready (ng-0, ng-1): Ready, no allocatable "
        "nvidia.com/gpu yet (its device plugin has not advertised them); 1 not Ready (ng-2): Ready=False "
        "(KubeletReady); 2 Ready nodes advertise no nvidia.com/gpu: is the NVIDIA device plugin (or GPU operator) "
        "running in the cluster? (the EKS-optimized AL2023 NVIDIA AMIs need it installed; Bottlerocket's and GKE's "
        "bring their own)")
    # Without `needs`, or when every node is merely not Ready yet, no device plugin is blamed.
    states = [NodeState("a", False, "Ready=False (KubeletNotReady)")]
    assert plugin_hint(states, "nvidia.com/gpu") is None and plugin_hint(states, None) is None
    assert plugin_hint([NodeState("a", False, unadvertised("example.com/fpga"))], "example.com/fpga") == (
        "1 Ready node advertises no example.com/fpga: is its device plugin running in the cluster?")


def _plugin_daemonset(name: str, image: str) -> dict[str, Any]:
    """A device plugin DaemonSet as NVIDIA's chart (nvidia/k8s-device-plugin, deployments/helm) or GKE deploy it."""
    labels = {"app.kubernetes.io/name": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "nvidia-device-plugin-ctr", "image": image}]}}}}


def test_before_buying_a_cluster_without_a_device_plugin_is_warned_of(cluster: MultiCluster) -> None:
    """`up`'s preflight on the API: a cluster with no GPU advertised and no device plugin DaemonSet is warned of; one
    with NVIDIA's chart's DaemonSet is not; nor is one whose existing GPU nodes already advertise their GPUs."""
    api = cluster["cluster-a"]
    bare = group_node("cpu-0", ready=True, group="system")
    del bare["status"]["allocatable"]["nvidia.com/gpu"]
    api.create(bare)
    with Kube.open("cluster-a", cluster.kubeconfig) as kube:
        warned = plugin_warning(kube)
        assert warned is not None and warned.startswith(
            "no node of cluster cluster-a advertises nvidia.com/gpu and no NVIDIA device plugin (or GPU operator) "
            "DaemonSet runs there"), warned
        api.create(_plugin_daemonset("nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.4"))
        assert plugin_warning(kube) is None
        api.delete("apps/v1/daemonsets", "nvidia-device-plugin", "kube-system")
        assert plugin_warning(kube) is not None
        api.create(group_node("gpu-0", ready=True, group="train"))  # a GPU node already advertising its GPUs
        assert plugin_warning(kube) is None
    # GKE's own plugin, by its name (gke.gcr.io image), and the GPU operator's, by theirs.
    gke = _plugin_daemonset("nvidia-gpu-device-plugin-large-cos", "gke.gcr.io/nvidia-gpu-device-plugin@sha256:0")
    operator = _plugin_daemonset("gpu-operator", "nvcr.io/nvidia/gpu-operator:v24.9.0")
    assert plugin_seen([bare], [gke]) and plugin_seen([bare], [operator]) and not plugin_seen([bare], [])
