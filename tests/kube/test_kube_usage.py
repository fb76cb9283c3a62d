"""A placed job's cluster status as usage facts (pure), and the ledger rows `sync_usage` writes from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from geosched.core.models import Node, Pricing
from geosched.kube.submit import JobUsage, PlacedJob, UsageSync, job_times, job_usage, placed_job, sync_usage
from geosched.report.ledger import intervals
from geosched.store.db import Store

T0 = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
H = 3600.0
A100 = "NVIDIA-A100-SXM4-40GB"


def at(seconds: float) -> str:
    return datetime.fromtimestamp(T0 + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(kind: str, status: str, when: float) -> dict[str, str]:
    return {"type": kind, "status": status, "lastTransitionTime": at(when)}


def meta(name: str = "train", *, assignments: str = "n1=2", zones: str = "us-central1-a",
         regions: str = "gcp:us-central1", uid: str | None = "uid-1") -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name, "namespace": "ml", "creationTimestamp": at(0), "labels": {"geosched.io/job": name},
        "annotations": {"geosched.io/cluster": "gke-a", "geosched.io/zones": zones, "geosched.io/regions": regions,
                        "geosched.io/assignments": assignments, "geosched.io/policy": "zone-first"}}
    if uid:
        out["uid"] = uid
    return out


def pod(gpus: int = 4, product: str | None = A100) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "t", "image": "x", "resources": {"limits": {"nvidia.com/gpu":
                                                                                               str(gpus)}}}]}
    if product:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    return {"spec": spec}


def batch_job(status: Mapping[str, Any], *, workers: int = 2, **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(**kw),
            "spec": {"parallelism": workers, "completions": workers, "completionMode": "Indexed",
                     "template": pod()}, "status": dict(status)}


def jobset(status: Mapping[str, Any], **kw: Any) -> dict[str, Any]:
    rjob = {"name": "workers", "replicas": 1, "template": {"spec": {"parallelism": 2, "completions": 2,
                                                                    "completionMode": "Indexed", "template": pod()}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta(**kw),
            "spec": {"replicatedJobs": [rjob]}, "status": dict(status)}


def pytorchjob(status: Mapping[str, Any], **kw: Any) -> dict[str, Any]:
    specs = {"Master": {"replicas": 1, "template": pod()}, "Worker": {"replicas": 1, "template": pod()}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta(**kw),
            "spec": {"pytorchReplicaSpecs": specs}, "status": dict(status)}


def trainjob(status: Mapping[str, Any], **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": meta(**kw),
            "spec": {"trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}},
                     "runtimeRef": {"name": "torch-distributed"}}, "status": dict(status)}


def node(name: str, zone: str = "us-central1-a", instance_type: str = "a2-highgpu-8g",
         labels: Mapping[str, str] | None = None) -> Node:
    return Node(name=name, provider="gcp", region="us-central1", zone=zone, instance_type=instance_type, gpu="A100",
                gpus=8, gpus_free=0, labels=dict(labels or {}))


# --- times from status, per kind -----------------------------------------------------------------------

@pytest.mark.parametrize(("obj", "expected"), [
    # batch/v1 Job: startTime; completionTime when it succeeded; the Failed condition's time when it failed.
    (batch_job({}), (None, None)),
    (batch_job({"startTime": at(60), "active": 2}), (T0 + 60, None)),
    (batch_job({"startTime": at(60), "completionTime": at(H),
                "conditions": [cond("SuccessCriteriaMet", "True", H - 5), cond("Complete", "True", H)]}),
     (T0 + 60, T0 + H)),
    (batch_job({"startTime": at(60), "conditions": [cond("Failed", "True", 2 * H)]}), (T0 + 60, T0 + 2 * H)),
    # Held by Kueue (never started), and suspended after running: the run ended at the suspension.
    (batch_job({"conditions": [cond("Suspended", "True", 10)]}), (None, 10 + T0)),
    (batch_job({"startTime": at(60), "conditions": [cond("Suspended", "True", H)]}), (T0 + 60, T0 + H)),
    # JobSet: no start field; resumed (Suspended False) is the start, else creation once a child job ran.
    (jobset({}), (None, None)),
    (jobset({"conditions": [cond("Suspended", "False", 120)]}), (T0 + 120, None)),
    (jobset({"replicatedJobsStatus": [{"name": "workers", "active": 1, "ready": 0}]}), (T0, None)),
    (jobset({"conditions": [cond("Suspended", "False", 120), cond("Completed", "True", 3 * H)]}),
     (T0 + 120, T0 + 3 * H)),
    (jobset({"conditions": [cond("Failed", "True", H)], "terminalState": "Failed"}), (T0, T0 + H)),
    # PyTorchJob: startTime / completionTime, the Running condition when the start is missing.
    (pytorchjob({"startTime": at(30), "conditions": [cond("Created", "True", 0), cond("Running", "True", 40)]}),
     (T0 + 30, None)),
    (pytorchjob({"conditions": [cond("Running", "True", 40)]}), (T0 + 40, None)),
    (pytorchjob({"startTime": at(30), "completionTime": at(2 * H),
                 "conditions": [cond("Running", "False", 2 * H), cond("Succeeded", "True", 2 * H)]}),
     (T0 + 30, T0 + 2 * H)),
    # TrainJob: like JobSet, with jobsStatus and Complete.
    (trainjob({"jobsStatus": [{"name": "node", "active": 0, "ready": 0, "succeeded": 0, "failed": 0}]}),
     (None, None)),
    (trainjob({"jobsStatus": [{"name": "node", "active": 2}]}), (T0, None)),
    (trainjob({"conditions": [cond("Suspended", "False", 300), cond("Complete", "True", H)]}), (T0 + 300, T0 + H)),
])
def test_job_times_from_status(obj: dict[str, Any], expected: tuple[float | None, float | None]) -> None:
    assert job_times(obj["kind"], obj) == expected


def test_a_time_that_is_not_rfc3339_is_not_a_time() -> None:
    assert job_times("Job", batch_job({"startTime": "yesterday"})) == (None, None)
    assert job_times("Job", batch_job({"startTime": "2024-01-01T00:01:00.5+00:00"})) == (T0 + 60.5, None)


# --- what the run used ---------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [batch_job, jobset, pytorchjob, trainjob])
def test_gpus_are_workers_times_gpus_per_worker_on_the_assigned_node(make: Any) -> None:
    obj = make({"startTime": at(60)}, assignments="n1=2")
    found = job_usage("gke-a", obj["kind"], obj, {"n1": node("n1")})
    assert isinstance(found, JobUsage)
    (share,) = found.shares
    assert (share.kind, share.source, share.name, share.job, share.ref, share.cluster) == \
        ("job", "kube", "ml/train", "train", "uid-1", "gke-a")
    assert (share.provider, share.region, share.zone, share.instance_type, share.gpu, share.gpus, share.pricing) == \
        ("gcp", "us-central1", "us-central1-a", "a2-highgpu-8g", "A100", 8, Pricing.ON_DEMAND)


def test_a_job_on_several_nodes_gets_one_row_per_node_and_spot_nodes_are_spot() -> None:
    # The report charges a job row its GPUs' share of one node: a row per node keeps that share right.
    obj = batch_job({"startTime": at(0)}, workers=3, assignments="n1=2,n2=1", zones="us-central1-a,us-central1-b")
    nodes = {"n1": node("n1"), "n2": node("n2", "us-central1-b", labels={"cloud.google.com/gke-spot": "true"})}
    found = job_usage("gke-a", "Job", obj, nodes)
    assert isinstance(found, JobUsage)
    assert [(s.name, s.job, s.zone, s.gpus, s.pricing) for s in found.shares] == [
        ("ml/train@n1", "train", "us-central1-a", 8, Pricing.ON_DEMAND),
        ("ml/train@n2", "train", "us-central1-b", 4, Pricing.SPOT)]
    assert {s.ref for s in found.shares} == {"uid-1"}


def test_workers_on_a_node_that_is_gone_keep_the_placement_s_zone_and_the_selector_s_gpu() -> None:
    obj = batch_job({"startTime": at(0), "completionTime": at(H)})
    found = job_usage("gke-a", "Job", obj, {})
    assert isinstance(found, JobUsage)
    (share,) = found.shares
    assert (share.provider, share.region, share.zone, share.instance_type, share.gpu, share.gpus) == \
        ("gcp", "us-central1", "us-central1-a", None, "A100", 8)


def test_what_cannot_be_accounted_says_why() -> None:
    assert job_usage("gke-a", "Job", batch_job({}, uid=None), {}) == "gke-a: ml/train has no metadata.uid"
    no_gpus = batch_job({})
    no_gpus["spec"]["template"] = {"spec": {"containers": [{"name": "t", "image": "x"}]}}
    assert "cannot read its gang" in str(job_usage("gke-a", "Job", no_gpus, {}))
    nowhere = batch_job({}, regions="")
    assert "not found and no geosched.io/regions" in str(job_usage("gke-a", "Job", nowhere, {}))


# --- the ledger sync -----------------------------------------------------------------------------------

def listed(obj: dict[str, Any], nodes: Mapping[str, Node] | None = None) -> PlacedJob:
    placed = placed_job("gke-a", obj["kind"], obj)
    assert placed is not None
    found = job_usage("gke-a", obj["kind"], obj, nodes if nodes is not None else {"n1": node("n1")})
    assert isinstance(found, JobUsage)
    return replace(placed, usage=found)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path)


def rows(store: Store) -> list[tuple[str, float, float | None, str | None]]:
    return [(i.name, i.start, i.end, i.instance_type) for i in intervals(store)]


def test_sync_opens_then_closes_once_however_often_it_runs(store: Store) -> None:
    assert sync_usage(store, [listed(batch_job({}))], {"gke-a"}) == UsageSync(unchanged=1)  # not started
    assert rows(store) == []
    running = listed(batch_job({"startTime": at(60), "active": 2}))
    assert sync_usage(store, [running], {"gke-a"}).opened == 1
    assert sync_usage(store, [running], {"gke-a"}).unchanged == 1
    assert rows(store) == [("ml/train", T0 + 60, None, "a2-highgpu-8g")]
    # Finished, and its node scaled away since: the row already written is closed, no new row is made.
    done = listed(batch_job({"startTime": at(60), "completionTime": at(H)}), nodes={})
    assert sync_usage(store, [done], {"gke-a"}).closed == 1
    assert sync_usage(store, [done], {"gke-a"}).unchanged == 1
    assert rows(store) == [("ml/train", T0 + 60, T0 + H, "a2-highgpu-8g")]


def test_sync_records_a_finished_job_whole_and_a_resumed_job_as_a_second_run(store: Store) -> None:
    first = listed(batch_job({"startTime": at(0), "conditions": [cond("Suspended", "True", H)]}))
    assert sync_usage(store, [first], {"gke-a"}).recorded == 1
    resumed = listed(batch_job({"startTime": at(2 * H), "conditions": [cond("Suspended", "False", 2 * H)]}))
    assert sync_usage(store, [resumed], {"gke-a"}).opened == 1
    assert rows(store) == [("ml/train", T0, T0 + H, "a2-highgpu-8g"), ("ml/train", T0 + 2 * H, None, "a2-highgpu-8g")]


def test_sync_closes_rows_of_jobs_gone_from_a_cluster_that_answered(store: Store) -> None:
    sync_usage(store, [listed(batch_job({"startTime": at(0)}))], {"gke-a"})
    assert sync_usage(store, [], {"gke-b"}).gone == 0  # gke-a did not answer: its job is not known to be gone
    assert rows(store)[0][2] is None
    assert sync_usage(store, [], {"gke-a"}, now=T0 + 2 * H).gone == 1
    assert rows(store) == [("ml/train", T0, T0 + 2 * H, "a2-highgpu-8g")]
