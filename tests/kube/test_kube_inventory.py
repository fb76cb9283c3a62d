"""Kubernetes nodes and pods into geosched Node records: GPU arithmetic, readiness, labels, identity."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from geosched.core.models import Node, NodeState
from geosched.kube import keys
from geosched.kube.inventory import instance_id, merge_launched, nodes_from_kube, provider_of


def kube_node(name: str, *, gpus: int | str | None = 8, ready: str = "True", unschedulable: bool | None = None,
              provider_id: str | None = "aws:///us-east-1a/i-0aaa", labels: dict[str, str] | None = None,
              ) -> dict[str, Any]:
    base = {keys.REGION: "us-east-1", keys.ZONE: "us-east-1a", keys.AWS_ZONE_ID: "use1-az1",
            keys.INSTANCE_TYPE: "p4d.24xlarge", keys.GPU_PRODUCT: "NVIDIA-A100-SXM4-40GB",
            keys.HOSTNAME: name}
    allocatable: dict[str, Any] = {"cpu": "95", "memory": "1100Gi"}
    if gpus is not None:
        allocatable[keys.GPU] = gpus
    spec: dict[str, Any] = {"providerID": provider_id} if provider_id else {}
    if unschedulable is not None:
        spec["unschedulable"] = unschedulable
    return {
        "metadata": {"name": name, "labels": {**base, **(labels or {})}},
        "spec": spec,
        "status": {"allocatable": allocatable, "capacity": allocatable,
                   "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}],
                   "addresses": [{"type": "InternalIP", "address": "10.0.1.1"},
                                 {"type": "Hostname", "address": name}]},
    }


def pod(node: str | None, *gpus: int, phase: str = "Running", init: int = 0) -> dict[str, Any]:
    containers = [{"name": f"c{i}", "image": "x", "resources": {"limits": {keys.GPU: str(g)}}}
                  for i, g in enumerate(gpus)]
    spec: dict[str, Any] = {"containers": containers}
    if node:
        spec["nodeName"] = node
    if init:
        spec["initContainers"] = [{"name": "i", "image": "x", "resources": {"requests": {keys.GPU: init}}}]
    return {"metadata": {"name": "p"}, "spec": spec, "status": {"phase": phase}}


def test_allocatable_minus_requests_of_live_pods() -> None:
    pods = [
        pod("n1", 2, 1),                    # running: 3
        pod("n1", 1, phase="Pending"),      # bound, not yet running: still holds 1
        pod("n1", 8, phase="Succeeded"),    # terminated: holds nothing
        pod("n1", 8, phase="Failed"),
        pod(None, 8, phase="Pending"),      # not bound to a node yet
        pod("n2", 4),
        pod("n1", 0, init=2),               # init container alone: 2
    ]
    inventory = nodes_from_kube([kube_node("n1"), kube_node("n2", provider_id="aws:///us-east-1a/i-0bbb")],
                                pods, "eks-east")
    by_name = {n.name: n for n in inventory.nodes}
    assert by_name["n1"].gpus == 8 and by_name["n1"].gpus_free == 8 - 3 - 1 - 2
    assert by_name["n2"].gpus_free == 4


def test_overcommitted_node_has_no_free_gpus_not_negative() -> None:
    (node,) = nodes_from_kube([kube_node("n1")], [pod("n1", 8), pod("n1", 8)], "c").nodes
    assert node.gpus_free == 0


def test_labels_catalog_and_identity_fields() -> None:
    (node,) = nodes_from_kube([kube_node("n1")], [], "eks-east").nodes
    assert (node.provider, node.region, node.zone, node.instance_type, node.gpu) == (
        "aws", "us-east-1", "use1-az1", "p4d.24xlarge", "A100")
    assert node.price_ondemand == 32.7726 and node.price_spot is not None
    assert node.cluster == "eks-east" and node.state is NodeState.READY
    assert node.provider_id == "aws:///us-east-1a/i-0aaa"
    assert node.addresses == ("10.0.1.1",)
    assert node.labels[keys.ZONE] == "us-east-1a"


def test_not_ready_and_cordoned_stay_with_no_free_gpus() -> None:
    inventory = nodes_from_kube([kube_node("down", ready="False"), kube_node("unknown", ready="Unknown"),
                                 kube_node("cordoned", unschedulable=True), kube_node("up", unschedulable=False)],
                                [], "c")
    states = {n.name: (n.state, n.gpus_free) for n in inventory.nodes}
    assert states == {"down": (NodeState.NOT_READY, 0), "unknown": (NodeState.NOT_READY, 0),
                      "cordoned": (NodeState.NOT_READY, 0), "up": (NodeState.READY, 8)}


def test_skipped_nodes_say_why() -> None:
    inventory = nodes_from_kube([
        kube_node("cpu", gpus=None),
        kube_node("zero", gpus="0"),
        kube_node("nozone", labels={keys.ZONE: "", keys.AWS_ZONE_ID: ""}),
        kube_node("mystery", provider_id=None, labels={keys.INSTANCE_TYPE: "dgx", keys.GPU_PRODUCT: "Acme-X1"}),
    ], [], "c")
    reasons = {r.subject: r.reason for r in inventory.skipped}
    assert not inventory.nodes
    assert "no allocatable" in reasons["cpu"] and "no allocatable" in reasons["zero"]
    assert "unknown GPU model" in reasons["mystery"]
    assert set(reasons) == {"cpu", "zero", "mystery", "nozone"}


def test_on_prem_node_takes_the_gpu_from_its_product_label() -> None:
    (node,) = nodes_from_kube([kube_node("dgx-1", provider_id=None, labels={
        keys.INSTANCE_TYPE: "dgx-h100", keys.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3", keys.REGION: "lab",
        keys.ZONE: "lab-rack1"})], [], "lab").nodes
    assert (node.provider, node.gpu, node.zone, node.price_ondemand) == ("onprem", "H100", "lab-rack1", None)


def test_gce_provider_and_zone_name() -> None:
    (node,) = nodes_from_kube([kube_node("gke-a2", provider_id="gce://proj/us-central1-a/gke-a2", labels={
        keys.REGION: "us-central1", keys.ZONE: "us-central1-a", keys.INSTANCE_TYPE: "a2-highgpu-8g"})], [], "gke").nodes
    # The AWS zone-id label is ignored off AWS.
    assert (node.provider, node.zone, node.gpu, node.price_ondemand) == ("gcp", "us-central1-a", "A100", 29.38708)


def test_a_gke_node_without_gpu_feature_discovery_takes_the_gpu_from_its_accelerator_label() -> None:
    # A GKE zone the catalog does not price a3 in (so it is priced at its region's list price, geosched.kube.nodeprice),
    # and no GFD (GKE's own driver installer runs none).
    labels = {keys.REGION: "us-central1", keys.ZONE: "us-central1-f", keys.INSTANCE_TYPE: "a3-highgpu-8g",
              keys.GKE_ACCELERATOR: "nvidia-h100-80gb"}
    node = kube_node("gke-a3", provider_id="gce://proj/us-central1-f/gke-a3", labels=labels)
    del node["metadata"]["labels"][keys.GPU_PRODUCT]
    (found,) = nodes_from_kube([node], [], "gke").nodes
    assert (found.provider, found.zone, found.gpu, found.price_ondemand) == ("gcp", "us-central1-f", "H100",
                                                                             43.06615)


def test_client_models_are_accepted() -> None:
    v1 = client.V1Node(
        metadata=client.V1ObjectMeta(name="n1", labels=kube_node("n1")["metadata"]["labels"]),
        spec=client.V1NodeSpec(provider_id="aws:///us-east-1a/i-0aaa"),
        status=client.V1NodeStatus(allocatable={keys.GPU: "8"},
                                   conditions=[client.V1NodeCondition(type="Ready", status="True")]))
    v1pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="p"),
        spec=client.V1PodSpec(node_name="n1", containers=[client.V1Container(
            name="c", image="x", resources=client.V1ResourceRequirements(limits={keys.GPU: "3"}))]),
        status=client.V1PodStatus(phase="Running"))
    (node,) = nodes_from_kube([v1], [v1pod], "eks-east").nodes
    assert (node.name, node.gpus, node.gpus_free, node.zone) == ("n1", 8, 5, "use1-az1")


def test_provider_ids() -> None:
    assert provider_of("aws:///us-east-1a/i-0abc") == "aws"
    assert provider_of("gce://proj/zone/vm") == "gcp"
    assert provider_of("azure:///subscriptions/x/vm") == "azure"
    assert provider_of(None) == "onprem"
    assert instance_id("aws:///us-east-1a/i-0abc") == "i-0abc"
    assert instance_id("gce://proj/us-central1-a/vm-1") == "vm-1"
    assert instance_id("i-0abc") == "i-0abc"
    assert instance_id("") is None and instance_id(None) is None


def launched(name: str, provider_id: str | None) -> Node:
    return Node(name=name, provider="aws", region="us-east-1", zone="use1-az1", instance_type="p4d.24xlarge",
                gpu="A100", gpus=8, gpus_free=8, price_ondemand=30.0, addresses=("203.0.113.7",),
                labels={"geosched.io/launched-by": "geosched"}, state=NodeState.PROVISIONING,
                provider_id=provider_id)


def test_one_identity_with_a_launched_node() -> None:
    kube = nodes_from_kube([kube_node("ip-10-0-1-1"), kube_node("gpu-b", provider_id="aws:///us-east-1a/i-0ccc"),
                            kube_node("foreign", provider_id="aws:///us-east-1a/i-0ddd")],
                           [pod("ip-10-0-1-1", 8)], "eks-east").nodes
    ours = [launched("train-a", "i-0aaa"),                 # bare instance ID
            launched("gpu-b", None),                       # no ID: matched by name
            launched("pending", "aws:///us-east-1b/i-0eee")]  # not in any cluster yet
    merged = {n.name: n for n in merge_launched(kube, ours)}
    assert set(merged) == {"train-a", "gpu-b", "foreign", "pending"}
    a = merged["train-a"]
    assert (a.cluster, a.gpus_free, a.state, a.price_ondemand) == ("eks-east", 0, NodeState.READY, 30.0)
    assert a.addresses == ("203.0.113.7", "10.0.1.1")
    assert a.labels["geosched.io/launched-by"] == "geosched" and a.labels[keys.HOSTNAME] == "ip-10-0-1-1"
    assert a.provider_id == "i-0aaa"
    assert merged["gpu-b"].provider_id == "aws:///us-east-1a/i-0ccc" and merged["gpu-b"].cluster == "eks-east"
    assert merged["foreign"].cluster == "eks-east" and merged["foreign"].price_ondemand == 32.7726
    assert merged["pending"].state is NodeState.PROVISIONING and merged["pending"].cluster is None


def test_an_eks_node_without_a_zone_id_is_keyed_by_its_zone_name_and_said_so() -> None:
    from geosched.kube.cluster_inventory import ClusterReading, build_fleet

    node = kube_node("ip-10-0-1-9.ec2.internal")
    del node["metadata"]["labels"][keys.AWS_ZONE_ID]  # EKS before 1.30 sets no zone-id label
    view = build_fleet([ClusterReading("eks", (node,), ())])
    (found,) = view.fleet.nodes
    assert found.zone == "us-east-1a"  # never mapped to an ID by guess
    assert any("us-east-1a named by nodes without topology.k8s.aws/zone-id" in a for a in view.assumptions)
