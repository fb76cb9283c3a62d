"""Scheduler mode (`geosched scheduler run`) on the real API server: the Job controller makes the pods, geosched
binds them through pods/binding, kwok runs them; a half-bound gang is rolled back the way a real Job controller
sees it (realkube_support.strand leaves it as a crashed replica would)."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.kube.scheduler.pods import GANG_NOTE
from tests.realkube.plane import EKS, Plane
from tests.realkube.realkube_support import (
    H100_ZONE,
    create,
    gang_job,
    h100_nodes,
    job_condition,
    job_pods_selector,
    placement,
    pods,
    scheduler_running,
    strand,
    wait_all_running,
    wait_until,
)

pytestmark = pytest.mark.realkube
A100_ZONE = "us-east-1b"


def test_whole_gangs_are_bound_each_in_its_zone_and_run(realkube: Plane, tmp_path: Path) -> None:
    with realkube.namespace("sched-whole", clusters=(EKS,)) as ns, realkube.kube(EKS) as kube:
        create(kube, ns, gang_job("h100", 2, gpu_zone=H100_ZONE))
        create(kube, ns, gang_job("a100", 2, gpu_zone=A100_ZONE))
        with scheduler_running(realkube, ns, tmp_path / "home"):
            h100 = wait_all_running(kube, ns, 2, job_pods_selector("h100"))
            a100 = wait_all_running(kube, ns, 2, job_pods_selector("a100"))
        assert {b.zone for b in h100} == {H100_ZONE} and {b.zone for b in a100} == {A100_ZONE}
        assert len({b.node for b in h100}) == len({b.node for b in a100}) == 2
        for bound in (*h100, *a100):
            pod = kube.get(f"/api/v1/namespaces/{ns}/pods/{bound.pod}") or {}
            # The binding's annotation, which the API server copied onto the pod: the gang (a Job's pods).
            assert pod["metadata"]["annotations"][GANG_NOTE] == f"{ns}/job/{bound.pod.rsplit('-', 2)[0]}"


def test_a_gang_that_does_not_fit_binds_no_pod(realkube: Plane, tmp_path: Path) -> None:
    with realkube.namespace("sched-nofit", clusters=(EKS,)) as ns, realkube.kube(EKS) as kube:
        create(kube, ns, gang_job("big", 3, gpu_zone=H100_ZONE))  # 3 x 8 GPUs; the zone has 2 x 8
        create(kube, ns, gang_job("small", 1, gpu_zone=A100_ZONE))
        with scheduler_running(realkube, ns, tmp_path / "home"):
            wait_all_running(kube, ns, 1, job_pods_selector("small"))  # the scheduler is at work
            wait_until(lambda: len(pods(kube, ns, job_pods_selector("big"))) == 3, what="the big gang's pods")
        assert all(b.node is None for b in placement(kube, ns, job_pods_selector("big")))


def test_a_half_bound_gang_is_rolled_back_without_failing_its_job(realkube: Plane, tmp_path: Path) -> None:
    # 3 x 8 H100: us-east-1a has two p5 nodes, so the gang left half bound there cannot be completed.
    with realkube.namespace("sched-rollback", clusters=(EKS,)) as ns, realkube.kube(EKS) as kube:
        create(kube, ns, gang_job("train", 3, gpu_zone=H100_ZONE))
        stranded = strand(kube, ns, "train", f"{ns}/job/train", h100_nodes(kube), logs=realkube[EKS].directory)
        assert all(b.node for b in placement(kube, ns) if b.pod in stranded)
        uids = {p["metadata"]["uid"] for p in pods(kube, ns)}
        with scheduler_running(realkube, ns, tmp_path / "home"):
            # Released: deleted, so the Job controller makes new pods in their place, pending again.
            wait_until(lambda: uids.isdisjoint({p["metadata"]["uid"] for p in pods(kube, ns)
                                                if p["metadata"]["name"] in stranded}) or
                       not any(p["metadata"]["name"] in stranded for p in pods(kube, ns)), 60,
                       what="the stranded pods released")
            wait_until(lambda: len([p for p in pods(kube, ns) if not p["metadata"].get("deletionTimestamp")]) == 3,
                       60, what="the Job controller's replacements")
        assert not job_condition(kube, ns, "train", "Failed")
        assert all(b.node is None for b in placement(kube, ns))
        job = kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/train") or {}
        assert (job.get("status") or {}).get("failed", 0) == 0  # the rollback counted as no failure
