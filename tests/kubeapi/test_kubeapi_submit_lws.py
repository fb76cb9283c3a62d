"""submit and jobs with a LeaderWorkerSet (the upstream vLLM example, tests/kube/data/leaderworkerset.yaml): placed
on the one zone that holds its 4 x 8 GPUs, applied there with its leader Service, listed by `jobs`."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.kube import keys
from geosched.kube.submit import SubmitOptions, jobs, submit
from geosched.retry import RetryPolicy
from tests.kube.kube_support import DATA
from tests.kubeapi.kubeapi_support import one_zone_fleet
from tests.kubeemu import MultiCluster

pytestmark = pytest.mark.integration
FAST = SubmitOptions(retry=RetryPolicy(attempts=6, initial_s=0.05, max_s=0.2))


@pytest.fixture
def fleet(clusters: MultiCluster) -> MultiCluster:
    return one_zone_fleet(clusters)


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
