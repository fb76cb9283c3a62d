"""submit and jobs with a LeaderWorkerSet (the upstream vLLM example, tests/kube/data/leaderworkerset.yaml): placed
on the one zone that holds its 4 x 8 GPUs, applied there with its leader Service, listed by `jobs`."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.core.retry import RetryPolicy
from geosched.kube import keys
from geosched.kube.submit import SubmitOptions, jobs, submit
from tests.kube.kube_support import DATA
from tests.kubeapi.kubeapi_support import one_zone_fleet
from tests.kubeemu import MultiCluster

pytestmark = pytest.mark.integration
FAST = SubmitOptions(retry=RetryPolicy(attempts=6, initial_s=0.05, max_s=0.2))
# The nodes are a3-highgpu-8g, sized as such a node reports itself (tests/realkube/nodes.py cites the figures: 208
# vCPU, 1872 GB, allocatable less the kubelet's reservations), with its 16 local SSDs (6,000 GiB) as ephemeral
# storage (cloud.google.com/compute/docs/accelerator-optimized-machines; GKE's --ephemeral-storage-local-ssd): the
# example's pods ask 125 cpu, 1124Gi of memory and 800Gi of ephemeral storage each, which only such machines hold.
A3 = {"cpu": "202930m", "memory": "1789982380Ki", "ephemeral_storage": "6000Gi"}


@pytest.fixture
def fleet(clusters: MultiCluster) -> MultiCluster:
    return one_zone_fleet(clusters, **A3)


def test_submit_refuses_nodes_without_memory_for_a_pod(clusters: MultiCluster) -> None:
    """The same fleet on nodes with 1 TiB of memory allocatable (the emulator's default): no node holds a 1124Gi
    pod, so nothing is placed, and the no-fit names the memory (audit finding 3)."""
    small = one_zone_fleet(clusters, cpu=A3["cpu"], ephemeral_storage=A3["ephemeral_storage"])
    outcome = submit(DATA / "leaderworkerset.yaml", kubeconfig=small.kubeconfig, options=FAST)
    assert outcome.status == "no-fit" and outcome.nofit is not None and not outcome.applied
    assert "without room for a worker's memory (1124Gi)" in outcome.nofit.message


def test_submit_places_and_applies_a_leaderworkerset(fleet: MultiCluster, tmp_path: Path) -> None:
    outcome = submit(DATA / "leaderworkerset.yaml", kubeconfig=fleet.kubeconfig, options=FAST)

    assert (outcome.status, outcome.cluster, outcome.zones) == ("applied", "cluster-b", ("europe-west4-b",))
    assert [(a.kind, a.action) for a in outcome.applied] == [("Service", "created"), ("LeaderWorkerSet", "created")]
    lws = fleet["cluster-b"].get("leaderworkerset.x-k8s.io/v1/leaderworkersets", "vllm", "default")
    assert lws is not None and lws["metadata"]["labels"][keys.JOB_LABEL] == "vllm"
    for role in ("leaderTemplate", "workerTemplate"):
        terms = lws["spec"]["leaderWorkerTemplate"][role]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert {"key": keys.ZONE, "operator": "In", "values": ["europe-west4-b"]} in terms[0]["matchExpressions"]

    fleet["cluster-b"].set_status("leaderworkerset.x-k8s.io/v1/leaderworkersets", "vllm", {
        "readyReplicas": 2, "replicas": 2,
        "conditions": [{"type": "Available", "status": "True", "reason": "AllGroupsReady", "message": "",
                        "lastTransitionTime": "2025-03-01T12:05:00Z"}]}, "default")
    found, unreachable = jobs(fleet.kubeconfig)
    assert unreachable == []
    assert [(j.cluster, j.name, j.kind, j.state, j.zones) for j in found] == [
        ("cluster-b", "vllm", "LeaderWorkerSet", "Running", ("europe-west4-b",))]
