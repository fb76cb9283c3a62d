"""submit: place on the live fleet, apply once on the chosen cluster, survive a flaky API; jobs: list them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from geosched.core.models import Weights
from geosched.core.retry import RetryPolicy
from geosched.grid.carbon import parse_carbon_csv
from geosched.kube import keys
from geosched.kube.client import Kube
from geosched.kube.config import Backend, ClusterConfig
from geosched.kube.submit import (
    SubmitError,
    SubmitOptions,
    SubmitRefused,
    apply_manifests,
    jobs,
    submit,
)
from tests.kube.kube_support import WORKLOAD_API_VERSIONS, validate_manifest
from tests.kubeapi.kubeapi_support import one_zone_fleet
from tests.kubeemu import WORKLOAD_API, MultiCluster

pytestmark = pytest.mark.integration
FAST = SubmitOptions(retry=RetryPolicy(attempts=6, initial_s=0.05, max_s=0.2))
JOB_PATH = r"/apis/batch/v1/namespaces/default/jobs/train"


def job_file(tmp_path: Path, workers: int = 4, name: str = "train") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"apiVersion: geosched.io/v1alpha1\nkind: Job\nname: {name}\nimage: ghcr.io/example/t:1\n"
                    f"workers: {workers}\ngpus_per_worker: 8\ngpu: H100\n", encoding="utf-8")
    return path


@pytest.fixture
def fleet(clusters: MultiCluster) -> MultiCluster:
    return one_zone_fleet(clusters)


def writes(clusters: MultiCluster) -> dict[str, int]:
    return {c.name: sum(c.count(m) for m in ("POST", "PUT", "PATCH", "DELETE")) for c in clusters}


def job_of(clusters: MultiCluster, name: str = "cluster-b") -> dict[str, Any]:
    found = clusters[name].get("batch/v1/jobs", "train", "default")
    assert found is not None
    return found


def test_submit_chooses_the_cluster_and_zone_and_applies_there(fleet: MultiCluster, tmp_path: Path) -> None:
    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=FAST)

    assert (outcome.status, outcome.cluster, outcome.zones) == ("applied", "cluster-b", ("europe-west4-b",))
    assert [(a.kind, a.action) for a in outcome.applied] == [("Service", "created"), ("Job", "created")]
    job = job_of(fleet)
    notes = job["metadata"]["annotations"]
    assert notes["geosched.io/cluster"] == "cluster-b" and notes["geosched.io/zones"] == "europe-west4-b"
    assert job["metadata"]["labels"][keys.JOB_LABEL] == "train"
    terms = job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": keys.ZONE, "operator": "In", "values": ["europe-west4-b"]} in terms[0]["matchExpressions"]
    # Written by server-side apply under geosched's field manager, nowhere else.
    assert job["metadata"]["managedFields"][0]["manager"] == "geosched"
    assert fleet["cluster-b"].count("PATCH", JOB_PATH) == 1 and fleet["cluster-b"].count("POST") == 0
    assert writes(fleet)["cluster-a"] == writes(fleet)["cluster-c"] == 0


def test_a_karmada_member_gets_its_job_through_the_karmada_control_plane(fleet: MultiCluster,
                                                                         tmp_path: Path) -> None:
    # cluster-c stands in for the Karmada API server: it serves PropagationPolicy and propagates the job.
    clusters = {"cluster-a": ClusterConfig("cluster-a", "cluster-a"),
                "cluster-b": ClusterConfig("cluster-b", "cluster-b", karmada=True, karmada_context="cluster-c")}
    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=clusters, options=FAST)

    assert (outcome.status, outcome.cluster, outcome.context) == ("applied", "cluster-b", "cluster-c")
    policy = fleet["cluster-c"].get("policy.karmada.io/v1alpha1/propagationpolicies", "geosched-train", "default")
    assert policy is not None and policy["spec"]["placement"]["clusterAffinity"]["clusterNames"] == ["cluster-b"]
    job = job_of(fleet, "cluster-c")
    assert fleet["cluster-b"].get("batch/v1/jobs", "train", "default") is None
    # Issue 21 item 5: owned on the Karmada plane by the UID it gave the job (its garbage collector deletes them
    # with the job; Karmada strips the references from what reaches the member).
    reference = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": job["metadata"]["uid"]}
    service = fleet["cluster-c"].get("v1/services", "train", "default")
    assert service is not None and service["metadata"]["ownerReferences"] == [reference]
    assert policy["metadata"]["ownerReferences"] == [reference]
    assert "ownerReferences" not in job["metadata"]


def test_submit_twice_is_one_job(fleet: MultiCluster, tmp_path: Path) -> None:
    path = job_file(tmp_path)
    submit(path, kubeconfig=fleet.kubeconfig, options=FAST)
    version = job_of(fleet)["metadata"]["resourceVersion"]
    before = writes(fleet)

    again = submit(path, kubeconfig=fleet.kubeconfig, options=FAST)

    assert (again.status, again.cluster, again.zones) == ("exists", "cluster-b", ("europe-west4-b",))
    assert again.existing is not None and again.existing.placed_by_geosched
    assert job_of(fleet)["metadata"]["resourceVersion"] == version  # unchanged
    assert writes(fleet) == before
    assert sum(len(c.list("batch/v1/jobs")) for c in fleet) == 1


def test_applying_the_same_manifests_again_changes_nothing(fleet: MultiCluster, tmp_path: Path) -> None:
    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=SubmitOptions(dry_run=True))
    with Kube.open("cluster-b", fleet.kubeconfig) as kube:
        first = apply_manifests(kube, outcome.manifests, default_namespace="default")
        second = apply_manifests(kube, outcome.manifests, default_namespace="default")
    assert [a.action for a in first] == ["created", "created"]
    assert [a.action for a in second] == ["unchanged", "unchanged"]
    assert [a.resource_version for a in first] == [a.resource_version for a in second]


@pytest.mark.parametrize(("status", "times"), [(429, 2), (500, 1), (503, 3), (409, 1)])
def test_submit_survives_throttling_server_errors_and_a_conflict(fleet: MultiCluster, tmp_path: Path,
                                                                 status: int, times: int) -> None:
    cluster = fleet["cluster-b"]
    # Retry-After 0 keeps the test fast; the retry honours the header (test below).
    cluster.inject(status, method="PATCH", path=JOB_PATH, times=times, retry_after=0 if status == 429 else None)

    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=FAST)

    assert outcome.status == "applied" and outcome.applied[-1].action == "created"
    assert cluster.count("PATCH", JOB_PATH, faulted=True) == times
    assert cluster.count("PATCH", JOB_PATH) == times + 1
    assert len(cluster.list("batch/v1/jobs")) == 1
    if status == 409:  # a conflict is read again before the second apply; then the job is read for its UID,
        # which its companions are owned by (geosched.kube.owners)
        on_job = [(r.method, r.status) for r in cluster.requests if r.path == JOB_PATH]
        assert on_job[-4:] == [("PATCH", 409), ("GET", 404), ("PATCH", 201), ("GET", 200)]


def test_retry_waits_at_least_retry_after(fleet: MultiCluster, tmp_path: Path) -> None:
    import time

    fleet["cluster-b"].inject(429, method="PATCH", path=JOB_PATH, retry_after=1)
    started = time.monotonic()
    assert submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=FAST).status == "applied"
    assert time.monotonic() - started >= 1.0


def test_a_persistent_failure_is_reported_with_the_servers_message(fleet: MultiCluster, tmp_path: Path) -> None:
    fleet["cluster-b"].inject(503, method="PATCH", path=JOB_PATH, times=None, message="etcd is down")
    with pytest.raises(SubmitError, match="Job default/train: 503 etcd is down"):
        submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=FAST)
    assert fleet["cluster-b"].count("PATCH", JOB_PATH) == FAST.retry.attempts


def test_a_field_owned_by_another_manager_is_a_conflict_unless_forced(fleet: MultiCluster, tmp_path: Path) -> None:
    # Someone applied the Service first, with another value for a field geosched sets.
    fleet["cluster-b"].apply({"apiVersion": "v1", "kind": "Service",
                              "metadata": {"name": "train", "namespace": "default"},
                              "spec": {"clusterIP": "None", "publishNotReadyAddresses": False}},
                             field_manager="kubectl")
    with pytest.raises(SubmitError, match=r"409.*--force-conflicts"):
        submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=FAST)
    assert fleet["cluster-b"].get("batch/v1/jobs", "train", "default") is None  # the job is applied last

    forced = SubmitOptions(force=True, retry=FAST.retry)
    assert submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=forced).status == "applied"


def test_dry_run_renders_and_creates_nothing(fleet: MultiCluster, tmp_path: Path) -> None:
    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=SubmitOptions(dry_run=True))
    assert (outcome.status, outcome.cluster) == ("dry-run", "cluster-b")
    assert [m["kind"] for m in outcome.manifests] == ["Service", "Job"]
    assert writes(fleet) == {"cluster-a": 0, "cluster-b": 0, "cluster-c": 0}


def test_an_unchecked_cluster_blocks_submit_unless_skipped(fleet: MultiCluster, tmp_path: Path) -> None:
    fleet["cluster-c"].stop()
    with pytest.raises(SubmitRefused, match="cluster-c"):
        submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=FAST)
    assert writes(fleet)["cluster-b"] == 0
    skip = SubmitOptions(skip_unreachable=True, retry=FAST.retry)
    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=skip)
    assert outcome.status == "applied" and [u.cluster for u in outcome.unreachable] == ["cluster-c"]


def test_no_fit_applies_nothing(fleet: MultiCluster, tmp_path: Path) -> None:
    outcome = submit(job_file(tmp_path, workers=40), kubeconfig=fleet.kubeconfig, options=FAST)
    assert outcome.status == "no-fit" and outcome.nofit is not None
    assert writes(fleet) == {"cluster-a": 0, "cluster-b": 0, "cluster-c": 0}


def test_cluster_config_backend_and_names(fleet: MultiCluster, tmp_path: Path) -> None:
    config = {"west": ClusterConfig(name="west", context="cluster-b", backend=Backend.COSCHEDULING,
                                    scheduler_name="geosched", namespace="default"),
              "east": ClusterConfig(name="east", context="cluster-a")}
    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=config, options=FAST)
    assert (outcome.cluster, outcome.context) == ("west", "cluster-b")
    assert [a.kind for a in outcome.applied] == ["PodGroup", "Service", "Job"]
    group = fleet["cluster-b"].get("scheduling.x-k8s.io/v1alpha1/podgroups", "train", "default")
    assert group is not None and group["spec"]["minMember"] == 4
    pod_spec = job_of(fleet)["spec"]["template"]["spec"]
    assert pod_spec["schedulerName"] == "geosched"
    assert writes(fleet)["cluster-c"] == 0  # not in the config: never touched


def test_the_native_gang_api_lands_workload_podgroup_and_a_job_that_joins_it(fleet: MultiCluster,
                                                                             tmp_path: Path) -> None:
    # cluster-b emulates a 1.36 control plane with GenericWorkload on: it serves scheduling.k8s.io/v1alpha2.
    for spec in WORKLOAD_API:
        fleet["cluster-b"].register(spec)
    config = {"west": ClusterConfig(name="west", context="cluster-b", backend=Backend.WORKLOAD_API,
                                    namespace="default")}
    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=config, options=FAST)
    assert (outcome.cluster, outcome.zones) == ("west", ("europe-west4-b",))
    # What the pods name exists before the pods' Job.
    assert [a.kind for a in outcome.applied] == ["Workload", "PodGroup", "Service", "Job"]
    workload = fleet["cluster-b"].get("scheduling.k8s.io/v1alpha2/workloads", "train", "default")
    group = fleet["cluster-b"].get("scheduling.k8s.io/v1alpha2/podgroups", "train", "default")
    job = job_of(fleet)
    assert workload is not None and group is not None
    for obj in (workload, group, job):
        validate_manifest(served(obj), WORKLOAD_API_VERSIONS)
    assert workload["spec"]["podGroupTemplates"] == [{
        "name": "gang", "schedulingPolicy": {"gang": {"minCount": 4}},
        "schedulingConstraints": {"topology": [{"key": keys.ZONE}]}}]
    assert workload["spec"]["controllerRef"] == {"apiGroup": "batch", "kind": "Job", "name": "train"}
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert group["spec"]["podGroupTemplateRef"] == {"workload": {"workloadName": "train",
                                                                 "podGroupTemplateName": "gang"}}
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["schedulingGroup"] == {"podGroupName": "train"}
    assert "schedulerName" not in pod_spec
    (term,) = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    assert {"key": keys.ZONE, "operator": "In", "values": ["europe-west4-b"]} in term["matchExpressions"]
    # Submitted again: the same three objects, nothing new.
    again = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=config, options=FAST)
    assert again.status == "exists"
    assert len(fleet["cluster-b"].list("scheduling.k8s.io/v1alpha2/podgroups", "default")) == 1


def test_a_cluster_without_the_native_gang_api_is_told_what_it_lacks(fleet: MultiCluster, tmp_path: Path) -> None:
    config = {"west": ClusterConfig(name="west", context="cluster-b", backend=Backend.WORKLOAD_API,
                                    namespace="default")}
    with pytest.raises(SubmitError, match=r"scheduling.k8s.io/v1alpha2 Workload is not served \(Kubernetes 1.36 "
                                          r"serves it with the GenericWorkload feature gate"):
        submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=config, options=FAST)
    assert fleet["cluster-b"].get("batch/v1/jobs", "train", "default") is None, "nothing of the gang is applied"


def served(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as read back, less what the server adds, for the schema check of what was sent."""
    meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace", "labels", "annotations")}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def test_jobs_lists_placed_jobs_across_clusters(fleet: MultiCluster, tmp_path: Path) -> None:
    submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=FAST)
    submit(job_file(tmp_path, workers=1, name="small"), kubeconfig=fleet.kubeconfig, options=FAST)
    fleet["cluster-b"].set_status("batch/v1/jobs", "train", {"active": 4}, "default")
    # A job nobody placed with geosched, even with our label, is not listed.
    fleet["cluster-c"].create({"apiVersion": "batch/v1", "kind": "Job",
                               "metadata": {"name": "other", "labels": {keys.JOB_LABEL: "other"}},
                               "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}})

    found, unreachable = jobs(fleet.kubeconfig)

    assert unreachable == []
    rows = {(j.cluster, j.name): (j.zones, j.state, j.kind) for j in found}
    assert rows[("cluster-b", "train")] == (("europe-west4-b",), "Running", "Job")
    assert len(rows) == 2 and all(name != "other" for _, name in rows)
    small = next(j for j in found if j.name == "small")
    assert small.state == "Pending" and len(small.zones) == 1 and small.policy == "zone-first"


def test_a_policy_that_splits_the_gang_over_clusters_is_no_fit_not_a_crash(fleet: MultiCluster,
                                                                             tmp_path: Path) -> None:
    # karmada divides the 4 workers over the three clusters by their available replicas.
    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=replace(FAST, policy="karmada"))
    assert outcome.status == "no-fit" and outcome.nofit is not None
    assert "splits the gang over clusters cluster-a, cluster-b, cluster-c" in outcome.nofit.message
    assert writes(fleet) == {"cluster-a": 0, "cluster-b": 0, "cluster-c": 0}


def test_a_new_job_never_takes_the_nodes_of_a_placed_job_that_has_not_started(fleet: MultiCluster,
                                                                              tmp_path: Path) -> None:
    """Issue 11: `train` is placed on europe-west4-b's four nodes and waits (Kueue holds it, or its pods are not
    bound yet), so the nodes still look free. Placed from scratch, `second` took the same four nodes; now the live
    objects' geosched.io/assignments keep them for `train`."""
    first = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, options=FAST)
    assert (first.cluster, first.zones) == ("cluster-b", ("europe-west4-b",))
    held = {a.node for a in first.placement.assignments}  # type: ignore[union-attr]
    second = submit(job_file(tmp_path, name="second"), kubeconfig=fleet.kubeconfig, options=FAST)
    assert second.status == "applied" and second.placement is not None
    assert not held & {a.node for a in second.placement.assignments}
    assert second.zones != ("europe-west4-b",)
    assert "1 job(s) geosched placed that have not started keep their nodes: cluster-b/default/train" \
        in second.assumptions
    # Once `train` runs, its bound pods hold the GPUs (the annotation no longer counts): still not free.
    for i, node in enumerate(sorted(held)):
        fleet["cluster-b"].add_pod(f"train-{i}", node_name=node, phase="Running", gpus=8)
    fleet["cluster-b"].set_status("batch/v1/jobs", "train", {"active": 4}, "default")
    third = submit(job_file(tmp_path, name="third", workers=2), kubeconfig=fleet.kubeconfig,
                   options=replace(FAST, dry_run=True))
    assert third.status == "dry-run" and third.placement is not None
    assert not held & {a.node for a in third.placement.assignments}


def test_submit_places_at_the_carbon_of_the_hour_it_starts(fleet: MultiCluster, tmp_path: Path) -> None:
    """One 8-GPU worker (no network step), carbon weight only: the yearly means pick one region; an hour in which
    Singapore's grid is the cleanest picks cluster-c. (The emulated nodes carry no providerID: provider kubeemu.)"""
    path = tmp_path / "one.yaml"
    path.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: one\nimage: ghcr.io/example/t:1\n"
                    "workers: 1\ngpus_per_worker: 8\ngpu: H100\n", encoding="utf-8")
    green = replace(FAST, dry_run=True, weights=Weights(network=1.0, cost=0.0, carbon=5.0))
    yearly = submit(path, kubeconfig=fleet.kubeconfig, options=green)
    assert yearly.cluster != "cluster-c"
    series = parse_carbon_csv("region,datetime,gco2e_per_kwh\nkubeemu:us-east1,2025-03-01T12:00:00Z,900\n"
                              "kubeemu:europe-west4,2025-03-01T12:00:00Z,900\n"
                              "kubeemu:asia-southeast1,2025-03-01T12:00:00Z,10\n", "c.csv")
    noon = datetime(2025, 3, 1, 12, 30, tzinfo=UTC)
    hourly = submit(path, kubeconfig=fleet.kubeconfig, options=replace(green, carbon=series), now=noon)
    assert hourly.cluster == "cluster-c"
    later = submit(path, kubeconfig=fleet.kubeconfig, options=replace(green, carbon=series),
                   now=datetime(2025, 3, 2, 12, tzinfo=UTC))
    assert later.cluster == yearly.cluster
    assert any(n.startswith("carbon kubeemu:asia-southeast1: yearly mean ") and "2025-03-02T12:00Z is outside its "
               "hourly series" in n for n in later.assumptions)
