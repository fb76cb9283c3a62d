"""The MultiKueue dispatcher's pure parts: what Kueue's objects say, the status write, the cluster ranking.
Shapes are Kueue's (validated against the published CRD schemas, kubernetes-sigs/kueue ff69552e79ad)."""

from __future__ import annotations

import base64
import copy
import random
from dataclasses import replace
from typing import Any

import pytest
import yaml
from kube_support import validate_manifest

from geosched.core import catalog
from geosched.core.errors import InputError
from geosched.core.models import Node, Weights
from geosched.kube import keys
from geosched.kube.cluster_inventory import fleet_from_nodes, network_for
from geosched.kube.multikueue import kueue
from geosched.kube.multikueue.rank import rank, taken
from geosched.kube.multikueue.settings import parse_settings
from geosched.kube.multikueue.workers import parse_kubeconfig
from geosched.policies import PlacementContext
from geosched.policies.capacity import CAPACITY_TOLERANCE

V1B2 = "kueue.x-k8s.io/v1beta2"


def pod_set(name: str, count: int, gpus: int, *, topology: dict[str, Any] | None = None,
            selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "ghcr.io/example/t:1", "resources": {
        "limits": {keys.GPU: str(gpus)}, "requests": {keys.GPU: str(gpus)}} if gpus else {}}]}
    if selector:
        spec["nodeSelector"] = selector
    out: dict[str, Any] = {"name": name, "count": count, "template": {"spec": spec}}
    if topology:
        out["topologyRequest"] = topology
    return out


def workload(*sets: dict[str, Any]) -> dict[str, Any]:
    wl = {"apiVersion": V1B2, "kind": "Workload", "metadata": {"name": "job-train-5x7k2", "namespace": "team-a"},
          "spec": {"podSets": list(sets), "queueName": "user-queue"}}
    validate_manifest(wl)
    return wl


def test_podsets_become_one_gang_with_their_gpu_model() -> None:
    job = kueue.workload_gang(workload(pod_set("launcher", 1, 0),
                                       pod_set("workers", 8, 8, selector={keys.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"})))
    assert (job.name, job.namespace, job.workers, job.gpus_per_worker, job.gpu) == \
        ("job-train-5x7k2", "team-a", 8, 8, "H100")
    assert (job.max_zones, job.max_regions) == (None, None)


@pytest.mark.parametrize(("required", "zones", "regions"), [
    (keys.ZONE, 1, None),
    ("cloud.google.com/gce-topology-block", 1, None),   # finer than a zone: inside one zone
    (keys.REGION, None, 1),
])
def test_required_topology_limits_the_gang(required: str, zones: int | None, regions: int | None) -> None:
    job = kueue.workload_gang(workload(pod_set("main", 4, 8, topology={"required": required})))
    assert (job.max_zones, job.max_regions) == (zones, regions)


def test_required_hostname_puts_the_podset_on_one_node() -> None:
    job = kueue.workload_gang(workload(pod_set("main", 4, 2, topology={"required": keys.HOSTNAME})))
    assert (job.workers, job.gpus_per_worker, job.max_zones) == (1, 8, 1)


def test_a_workload_that_is_no_gang_names_the_field() -> None:
    with pytest.raises(InputError, match=r"Workload team-a/job-train-5x7k2.*same number of GPUs"):
        kueue.workload_gang(workload(pod_set("a", 2, 8), pod_set("b", 2, 4)))
    with pytest.raises(InputError, match=r"spec.*no pod asks for GPUs"):
        kueue.workload_gang(workload(pod_set("cpu", 2, 0)))


STATUS = {
    "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 2,
                                                              "flavors": {keys.GPU: "default-flavor"},
                                                              "resourceUsage": {keys.GPU: "16"}}]},
    "conditions": [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
         "lastTransitionTime": "2026-12-03T08:00:00Z"},
        {"type": "example.com/Audited", "status": "True", "reason": "Audited", "message": "",
         "lastTransitionTime": "2026-12-03T08:00:00Z"},
    ],
    "admissionChecks": [{"name": "mk", "state": "Pending", "message": "",
                         "lastTransitionTime": "2026-12-03T08:00:00Z"}],
    "schedulingStats": {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]},
}


def admitted_workload() -> dict[str, Any]:
    wl = workload(pod_set("main", 2, 8))
    wl["metadata"].update({"uid": "0b1c", "resourceVersion": "41"})
    wl["status"] = copy.deepcopy(STATUS)
    return wl


def test_the_apply_as_kueue_admission_carries_the_admission_status() -> None:
    body = kueue.nomination_apply(admitted_workload(), ["w2", "w1"], kueue.ADMISSION_FIELD_MANAGER)
    assert body["metadata"] == {"name": "job-train-5x7k2", "namespace": "team-a", "uid": "0b1c",
                                "resourceVersion": "41"}
    status = body["status"]
    assert status["nominatedClusterNames"] == ["w2", "w1"]
    assert [c["type"] for c in status["conditions"]] == ["QuotaReserved"]  # another controller's stays its own
    assert status["admission"] == STATUS["admission"] and status["admissionChecks"] == STATUS["admissionChecks"]
    assert status["schedulingStats"] == STATUS["schedulingStats"]
    assert "resourceRequests" not in status
    validate_manifest({**body, "metadata": {"name": "job-train-5x7k2", "namespace": "team-a"},
                       "spec": admitted_workload()["spec"]})


def test_the_apply_under_another_manager_sends_only_the_nomination() -> None:
    body = kueue.nomination_apply(admitted_workload(), ["w1"], "geosched")
    assert body["status"] == {"nominatedClusterNames": ["w1"]}


def test_when_the_nomination_was_applied_is_read_from_managed_fields() -> None:
    # A ManagedFieldsEntry as the API server writes it (kubernetes.io/docs/reference/using-api/server-side-apply,
    # "Field management"; ObjectMeta.managedFields in the API reference): per manager, operation and subresource.
    def entry(manager: str, owned: dict[str, Any], time: str = "2026-12-03T09:00:07Z") -> dict[str, Any]:
        return {"manager": manager, "operation": "Apply", "apiVersion": "kueue.x-k8s.io/v1beta2", "time": time,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:status": owned}, "subresource": "status"}

    wl = admitted_workload()
    names = {"f:nominatedClusterNames": {}, "f:admission": {}}
    wl["metadata"]["managedFields"] = [entry("kubectl", names, "2026-12-03T10:00:00Z"),
                                       entry(kueue.ADMISSION_FIELD_MANAGER, names)]
    at = kueue.nominated_at(wl, kueue.ADMISSION_FIELD_MANAGER)
    assert at is not None and at.isoformat() == "2026-12-03T09:00:07+00:00"
    # The manager's status apply does not own the names (only Kueue's quota reservation so far): no round yet.
    wl["metadata"]["managedFields"] = [entry(kueue.ADMISSION_FIELD_MANAGER, {"f:admission": {}})]
    assert kueue.nominated_at(wl, kueue.ADMISSION_FIELD_MANAGER) is None
    # An unreadable time is no time (the round starts when this replica sees it).
    wl["metadata"]["managedFields"] = [entry(kueue.ADMISSION_FIELD_MANAGER, names, "yesterday")]
    assert kueue.nominated_at(wl, kueue.ADMISSION_FIELD_MANAGER) is None
    del wl["metadata"]["managedFields"]
    assert kueue.nominated_at(wl, kueue.ADMISSION_FIELD_MANAGER) is None


def test_which_workloads_are_up_for_nomination() -> None:
    checks = {"mk": "config"}
    queues = {"cq": {"mk"}}
    wl = admitted_workload()
    assert kueue.skip_reason(wl, checks, queues) is None
    assert kueue.pending_of(wl, checks).config == "config"
    cases = {
        "no quota reservation": lambda w: w["status"]["conditions"].pop(0),
        "admitted by w1": lambda w: w["status"].update(clusterName="w1"),
        "MultiKueue check Ready": lambda w: w["status"]["admissionChecks"][0].update(state="Ready"),
        "finished": lambda w: w["status"]["conditions"].append({"type": "Finished", "status": "True"}),
        "being deleted": lambda w: w["metadata"].update(deletionTimestamp="2026-12-03T09:00:00Z"),
    }
    for reason, change in cases.items():
        other = admitted_workload()
        change(other)
        assert kueue.skip_reason(other, checks, queues) == reason
    assert kueue.skip_reason(wl, {}, queues) == "no MultiKueue admission check"
    assert kueue.skip_reason(wl, checks, {"cq": set()}).startswith("ClusterQueue cq does not apply")


def test_kueue_objects_in_both_versions() -> None:
    assert kueue.dispatcher_of(None) == kueue.ALL_AT_ONCE
    assert kueue.dispatcher_of({"multiKueue": {"dispatcherName": "geosched.io/dispatcher"}}) == "geosched.io/dispatcher"
    assert kueue.queue_checks({"spec": {"admissionChecks": ["a"]}}) == {"a"}  # v1beta1
    assert kueue.queue_checks({"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "b"}]}}}) == {"b"}
    ref = {"location": "w1-secret", "locationType": "Secret"}
    assert kueue.kubeconfig_ref({"spec": {"kubeConfig": ref}}) == ("w1-secret", "Secret")  # v1beta1
    assert kueue.kubeconfig_ref({"spec": {"clusterSource": {"kubeConfig": ref}}}) == ("w1-secret", "Secret")
    assert kueue.kubeconfig_ref({"spec": {"clusterSource": {"clusterProfileRef": {"name": "p"}}}}) is None
    checks = [{"metadata": {"name": "mk"}, "spec": {"controllerName": kueue.MULTIKUEUE_CONTROLLER, "parameters": {
        "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "cfg"}}},
        {"metadata": {"name": "prov"}, "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}}]
    assert kueue.multikueue_checks(checks) == {"mk": "cfg"}


def secret(config: dict[str, Any]) -> dict[str, Any]:
    return {"data": {"kubeconfig": base64.b64encode(yaml.safe_dump(config).encode()).decode()}}


KUBECONFIG = {"apiVersion": "v1", "kind": "Config", "current-context": "w",
              "clusters": [{"name": "w", "cluster": {"server": "https://10.0.0.1:6443",
                                                     "certificate-authority-data": "Y2E="}}],
              "users": [{"name": "mk", "user": {"token": "t"}}],
              "contexts": [{"name": "w", "context": {"cluster": "w", "user": "mk"}}]}


@pytest.mark.parametrize(("where", "key", "value", "reason"), [
    ("users", "tokenFile", "/var/run/token", "tokenFile is not allowed"),
    ("users", "exec", {"command": "aws"}, "exec is not allowed"),
    ("clusters", "insecure-skip-tls-verify", True, "insecure-skip-tls-verify is not allowed"),
    ("clusters", "certificate-authority", "/etc/ca.crt", "certificate-authority file paths"),
])
def test_kubeconfig_secrets_may_not_read_files_or_run_programs(where: str, key: str, value: Any,
                                                               reason: str) -> None:
    assert parse_kubeconfig(secret(KUBECONFIG), "s") == KUBECONFIG
    bad = copy.deepcopy(KUBECONFIG)
    bad[where][0]["user" if where == "users" else "cluster"][key] = value
    with pytest.raises(InputError, match=reason):
        parse_kubeconfig(secret(bad), "Secret kueue-system/w1-secret")


@pytest.mark.parametrize(("doc", "field"), [
    ({"dispatcher_name": kueue.INCREMENTAL}, "dispatcher_name"),
    ({"nominate": 21}, "nominate"),
    ({"refresh_s": 60, "stale_after_s": 30}, "stale_after_s"),
    ({"nominate_k": 2}, "nominate_k"),
])
def test_bad_settings_name_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError, match=field):
        parse_settings(doc, "dispatcher.yaml")


# --- ranking ----------------------------------------------------------------------------------------

def gke_nodes(cluster: str, zone: str, count: int, free: int = 8) -> list[Node]:
    region = zone.rsplit("-", 1)[0]
    offer = next(o for o in catalog.offerings() if o.zone == zone and o.instance_type == "a3-highgpu-8g")
    return [Node(f"{cluster}-{zone}-{i}", "gcp", region, zone, "a3-highgpu-8g", "H100", 8, free,
                 offer.price_ondemand, offer.price_spot, cluster=cluster) for i in range(count)]


def context(nodes: list[Node]) -> PlacementContext:
    fleet, _, _ = fleet_from_nodes(nodes)
    return PlacementContext(fleet, network_for(fleet))


def test_rank_keeps_a_zone_first_gang_whole_and_honours_required_zone() -> None:
    # c1 (cheap us-central1) has 4 free nodes, 2 per zone; c2 (europe-west4) 4 in one zone.
    ctx = context(gke_nodes("c1", "us-central1-a", 2) + gke_nodes("c1", "us-central1-b", 2)
                  + gke_nodes("c2", "europe-west4-b", 4))
    gang = kueue.workload_gang(workload(pod_set("main", 4, 8)))
    free = rank(gang, ctx, ["c1", "c2"])
    assert free.cluster_names() == ["c2", "c1"]  # one zone before two, whatever the price
    assert free.fits[1].zones == ("us-central1-a", "us-central1-b")
    strict = rank(kueue.workload_gang(workload(pod_set("main", 4, 8, topology={"required": keys.ZONE}))), ctx,
                  ["c1", "c2"])
    assert strict.cluster_names() == ["c2"]
    assert [c for c, _ in strict.refused] == ["c1"]


def test_rank_refuses_a_cluster_without_room_and_one_never_read() -> None:
    ctx = context(gke_nodes("c1", "us-central1-a", 3, free=4) + gke_nodes("c2", "europe-west4-b", 1))
    ranking = rank(kueue.workload_gang(workload(pod_set("main", 2, 8))), ctx, ["c1", "c2", "c3"])
    assert ranking.fits == ()
    assert dict(ranking.refused) == {"c1": "the largest pool holds 0 of 2 workers",
                                     "c2": "the largest pool holds 1 of 2 workers",
                                     "c3": "no GPU node read from it"}


CLUSTER_ZONES = {"c1": ("us-central1-a", "us-central1-b", "us-central1-c"), "c2": ("europe-west4-b", "europe-west4-c"),
                 "c3": ("asia-southeast1-b", "asia-southeast1-c"), "c4": ("us-east4-a", "us-east4-b"),
                 "c5": ("europe-north1-c",), "c6": ("us-west1-a", "us-west1-b", "asia-east1-c")}


@pytest.mark.parametrize("policy", ["zone-first", "cheapest", "tas"])
@pytest.mark.parametrize("seed", range(3))
def test_bounded_ranking_chooses_exactly_what_the_full_ranking_chooses(policy: str, seed: int) -> None:
    # Six clusters (one spanning two regions), fragmented free GPUs, gangs of every shape, the capacity of each
    # decision held for the next as the dispatcher does: the first `need` clusters and their placements are the
    # exhaustive ranking's, and the bounds do skip clusters.
    rng = random.Random(seed)
    nodes = [replace(n, gpus_free=rng.choice((0, 2, 4, 6, 8, 8, 8)))
             for c, zones in CLUSTER_ZONES.items() for z in zones for n in gke_nodes(c, z, rng.randint(2, 12))]
    ctx = context(nodes)
    index = {n: i for i, n in enumerate(ctx.names)}
    weights = Weights(network=1.0, cost=rng.choice((0.0, 0.5, 2.0)), carbon=rng.choice((0.0, 0.5, 2.0)))
    skipped = 0
    for _ in range(40):
        workers, gpus = rng.choice(((1, 8), (2, 4), (4, 8), (8, 2), (12, 8), (3, 1), (24, 8)))
        topology = rng.choice((None, {"required": keys.ZONE}, {"preferred": keys.ZONE}))
        gang = kueue.workload_gang(workload(pod_set("main", workers, gpus, topology=topology)))
        full = rank(gang, ctx, list(CLUSTER_ZONES), policy=policy, weights=weights)
        for need in (1, 2):
            bounded = rank(gang, ctx, list(CLUSTER_ZONES), policy=policy, weights=weights, need=need)
            assert bounded.fits[:need] == full.fits[:need]
            assert {c for c, _ in bounded.unranked} | set(bounded.cluster_names()) | {c for c, _ in bounded.refused} \
                == set(CLUSTER_ZONES)
            skipped += len(bounded.unranked)
        if full.fits:
            ctx = ctx.with_free(taken(ctx, full.fits[0], index))
    assert skipped > 0


def test_rank_prefers_the_worker_that_keeps_the_larger_gangs_placeable() -> None:
    # Issue 22: two workers hold a 2-node gang equally well (one zone each, same price band); the one left with
    # fewer free nodes wins, so the roomier one still holds an 8-node gang afterwards. Without the rule the tie
    # went by price and name to c1.
    ctx = context(gke_nodes("c1", "us-central1-a", 8) + gke_nodes("c2", "us-central1-b", 3))
    gang = kueue.workload_gang(workload(pod_set("main", 2, 8)))
    assert rank(gang, ctx, ["c1", "c2"]).cluster_names() == ["c2", "c1"]
    assert rank(gang, ctx, ["c1", "c2"], need=1).cluster_names()[0] == "c2"
    # A tighter worker whose placement's total is more than the band above the best does not win on room alone.
    dear = Weights(cost=1.0)
    ctx = context(gke_nodes("c1", "us-central1-a", 8) + gke_nodes("c2", "europe-west4-b", 3))
    totals = {c: rank(gang, ctx, [c], weights=dear).fits[0].score.total for c in ("c1", "c2")}
    assert totals["c2"] > totals["c1"] * (1 + CAPACITY_TOLERANCE)
    assert rank(gang, ctx, ["c1", "c2"], weights=dear).cluster_names() == ["c1", "c2"]
