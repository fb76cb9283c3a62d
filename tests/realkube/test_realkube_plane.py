"""The control plane itself is the real one: the release it reports, RBAC that refuses, the nodes as registered,
the Job controller making pods, kube-scheduler binding them to kwok nodes, kwok running them, and namespace
deletion taking them away."""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from geosched.kube.client import Kube, connect_config
from tests.realkube.cluster import kubeconfig, kubeconfig_entry
from tests.realkube.plane import EKS, GKE, KUEUE_CLUSTERS, Plane
from tests.realkube.realkube_support import job_pods_selector, pods, wait_all_running, wait_until

pytestmark = pytest.mark.realkube


def test_every_cluster_is_kubernetes_1_36_3_with_kueue_0_17(realkube: Plane) -> None:
    for name in KUEUE_CLUSTERS:
        with realkube.kube(name) as kube:
            assert kube.request("GET", "/version")["gitVersion"] == "v1.36.3"
            crds = {c["metadata"]["name"]
                    for c in kube.list_all("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")[0]}
            assert {"workloads.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "topologies.kueue.x-k8s.io"} <= crds


def test_rbac_is_on_a_service_account_may_not_list_nodes(realkube: Plane) -> None:
    with realkube.namespace("rbac-check", clusters=(EKS,)) as ns, realkube.kube(EKS) as kube:
        token = kube.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/default/token",
                             body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                   "spec": {"expirationSeconds": 600}})["status"]["token"]
        cluster = realkube[EKS]
        config = kubeconfig([kubeconfig_entry(EKS, cluster.server, cluster.ca.pem, {"token": token})], EKS)
        with Kube(connect_config(config, "test"), EKS) as as_default:
            with pytest.raises(ApiException) as refused:
                as_default.list_all("/api/v1/nodes")
            assert refused.value.status == 403


def test_the_nodes_are_ready_with_the_labels_and_taints_they_were_registered_with(realkube: Plane) -> None:
    with realkube.kube(GKE) as kube:
        nodes = {n["metadata"]["name"]: n for n in kube.list_all("/api/v1/nodes")[0]}
    assert len(nodes) == 7
    for node in nodes.values():
        labels = node["metadata"]["labels"]
        assert "nvidia.com/gpu.product" not in labels  # GKE without the GPU operator
        assert labels["cloud.google.com/gke-accelerator"] in {"nvidia-h100-80gb", "nvidia-l4"}
        assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
        assert node["spec"]["providerID"].startswith("gce://ml-platform-prod/us-central1-")
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert ready["Ready"] == "True"
    assert {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes.values()
            if n["metadata"]["labels"]["cloud.google.com/gke-accelerator"] == "nvidia-l4"} == {"us-central1-a"}


def test_a_job_runs_on_kwok_nodes_placed_by_kube_scheduler_and_goes_with_its_namespace(realkube: Plane) -> None:
    # pods_first=False: the pods are left for the real namespace controller to delete (the test's last line).
    with realkube.namespace("plane-smoke", clusters=(EKS,), pods_first=False) as ns, realkube.kube(EKS) as kube:
        kube.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body={
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "smoke"},
            "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {
                "restartPolicy": "Never",
                "nodeSelector": {"topology.kubernetes.io/zone": "us-east-1b"},
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}})
        bound = wait_all_running(kube, ns, 2, job_pods_selector("smoke"))
        assert {b.zone for b in bound} == {"us-east-1b"}
        assert {b.accelerator for b in bound} == {"NVIDIA-A100-SXM4-40GB"}
        assert len({b.node for b in bound}) == 2  # 8 GPUs each: one pod per node
        events = kube.list_all(f"/api/v1/namespaces/{ns}/events")[0]
        assert any(e["reason"] == "Scheduled" and e.get("reportingComponent") == "default-scheduler" for e in events)
    with realkube.kube(EKS) as kube:
        wait_until(lambda: not pods(kube, ns), 30, what="the namespace's pods deleted")
