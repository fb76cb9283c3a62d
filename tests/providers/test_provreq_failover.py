"""`up --provisioning-class`, applied, when the autoscaler refuses: the request's conditions read (kube/provwatch.py,
pure), and the zone-by-zone loop (cli/provfailover.py) against the project's API emulator over HTTP on a fake
clock, with a stand-in autoscaler that answers each request at the loop's next poll from the zone its PodTemplate
selects: Failed in one zone, Provisioned (or nothing, or CapacityRevoked) in another.

Condition shapes: kubernetes/autoscaler cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1
types.go (the types Accepted, Provisioned, Failed, CapacityRevoked, BookingExpired) and
cluster-autoscaler/provisioningrequest/conditions/conditions.go (reasons and messages: CapacityIsNotFound,
CapacityIsProvisioned "Capacity is found in the cluster", CapacityReservationTimeExpired)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.cli import provfailover
from geosched.core.models import Pricing
from geosched.kube import keys, provreq, provwatch
from geosched.kube.client import Kube
from geosched.kube.jobinput import JobInput, read_job_file
from geosched.providers import journal, provreqdown, provreqs
from geosched.providers.plan import Candidate, GangRequest, PricingMode
from geosched.store.db import Store
from tests.clock import FakeClock
from tests.kube.kube_support import DATA
from tests.kubeemu import MultiCluster

NS = "ml"
PROVREQS = "autoscaling.x-k8s.io/v1/provisioningrequests"
# EKS zones of us-east-1 that offer p5.48xlarge, by name and ID as one account maps them (tests/providers/
# eks_support.py shapes).
ZONES = (("us-east-1a", "use1-az6"), ("us-east-1b", "use1-az1"), ("us-east-1c", "use1-az2"))


def cond(kind: str, reason: str, message: str, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-12-07T06:00:00Z", "observedGeneration": 1}


ACCEPTED = cond("Accepted", "Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler")
PROVISIONED = cond("Provisioned", "CapacityIsProvisioned", "Capacity is found in the cluster")
FAILED = cond("Failed", "CapacityIsNotFound", "Capacity is not found, CA will not retry")
REVOKED = cond("CapacityRevoked", "CapacityRevoked", "capacity of the reservation was reclaimed")
EXPIRED = cond("BookingExpired", "CapacityReservationTimeExpired", "Capacity reservation time is expired")


def request(*conditions: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "train-p"}, "status": {"conditions": list(conditions)}}


@pytest.mark.parametrize(("obj", "condition", "reason"), [
    (request(), "", ""),
    (request(ACCEPTED), "", ""),
    (request(ACCEPTED, cond("Provisioned", "CapacityIsNotFound", "not yet", "False")), "", ""),
    (request(ACCEPTED, PROVISIONED), "Provisioned", "CapacityIsProvisioned"),
    (request(ACCEPTED, FAILED), "Failed", "CapacityIsNotFound"),
    # Revoked or expired after it was Provisioned: Provisioned still reads True, and is not the outcome.
    (request(ACCEPTED, PROVISIONED, REVOKED), "CapacityRevoked", "CapacityRevoked"),
    (request(ACCEPTED, PROVISIONED, EXPIRED), "BookingExpired", "CapacityReservationTimeExpired"),
    # attack3 O1: check-capacity with partialCapacityCheck bookPartial books what fits (cluster-autoscaler
    # provisioningrequest/checkcapacity: Provisioned True, PartialCapacityIsFound, "Partial capacity is found in the
    # cluster."); it read as the whole gang provisioned.
    (request(ACCEPTED, cond("Provisioned", "PartialCapacityIsFound", "Partial capacity is found in the cluster.")),
     "PartialCapacityIsFound", "PartialCapacityIsFound"),
])
def test_a_request_is_read_by_its_terminal_conditions_first(obj: dict[str, Any], condition: str,
                                                           reason: str) -> None:
    state = provwatch.request_state(obj)
    assert (state.name, state.condition, state.reason) == ("train-p", condition, reason)
    assert state.failed == (condition in ("Failed", "CapacityRevoked", "BookingExpired", "PartialCapacityIsFound"))


@pytest.mark.parametrize(("obj", "condition"), [
    # attack3 A5: a repeated type was read by its last entry (the autoscaler and Kueue read the first), and a
    # status or conditions of another JSON type (a server that does not keep the CRD's schema) was a traceback.
    (request(ACCEPTED, FAILED, cond("Failed", "CapacityIsNotFound", "retrying", "False")), "Failed"),
    (request(ACCEPTED, cond("Provisioned", "CapacityIsNotFound", "not yet", "False"), PROVISIONED), ""),
    ({"metadata": {"name": "train-p"}, "status": [FAILED]}, ""),
    ({"metadata": {"name": "train-p"}, "status": {"conditions": {"type": "Failed", "status": "True"}}}, ""),
    ({"metadata": "train-p", "status": "Failed"}, ""),
    # Status is case-sensitive in metav1.Condition ("True", "False", "Unknown"): "true" is no True.
    (request(cond("Failed", "CapacityIsNotFound", "no", "true")), ""),
    (request(cond("Failed", "CapacityIsNotFound", "no", "Unknown"), PROVISIONED), "Provisioned"),
])
def test_a_request_of_an_odd_shape_reads_as_the_autoscaler_reads_it(obj: dict[str, Any], condition: str) -> None:
    assert provwatch.request_state(obj).condition == condition


def test_the_gang_is_provisioned_only_when_every_request_is_and_fails_with_any() -> None:
    ok, pending, failed = (provwatch.RequestState("a", "Provisioned"), provwatch.RequestState("b", ""),
                           provwatch.RequestState("c", "Failed", "CapacityIsNotFound", "no"))
    assert provwatch.outcome([]) is None
    assert provwatch.outcome([ok, pending]) is None
    assert provwatch.outcome([ok, ok]) == ok
    assert provwatch.outcome([ok, pending, failed]) == failed
    assert failed.line() == "ProvisioningRequest c Failed (CapacityIsNotFound: no)"


def candidate(zone_id: str) -> Candidate:
    # The catalog's p5.48xlarge on-demand price in us-east-1 (geosched/data offerings).
    return Candidate("aws", "us-east-1", zone_id, "p5.48xlarge", "H100", 8, 192.0, Pricing.ON_DEMAND, 98.32,
                     2 * 98.32, None)


GANG = GangRequest("H100", 8, 2, PricingMode.ON_DEMAND, ("aws",), ("us-east-1",))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MultiCluster]:
    with MultiCluster(2, directory=tmp_path) as mc:
        mc["cluster-a"].add_namespace(NS)
        mc["cluster-b"].add_namespace(NS)
        yield mc


def zones(tmp_path: Path, cluster: str = "cluster-a") -> list[provfailover.Zone]:
    path = tmp_path / "train.yaml"
    path.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                    "workers: 2\ngpus_per_worker: 8\ngpu: H100\n", encoding="utf-8")
    return _failover_zones(read_job_file(path), ZONES, cluster, kept=False)


def _failover_zones(job: JobInput, autoscaler_zones: tuple[tuple[str, str], ...], cluster: str, *,
                    kept: bool) -> list[provfailover.Zone]:
    """One failover step per (zone, zone ID): the job's ProvisioningRequest pinned there on p5.48xlarge (EKS's GPU
    taint tolerated); `kept`: the job file's other documents ride along, as `up` does."""
    out = []
    for name, zone_id in autoscaler_zones:
        pin = provreq.Target(zone=name, gpu_label=keys.INSTANCE_TYPE, gpu_value="p5.48xlarge",
                             class_name=provreq.BEST_EFFORT_ATOMIC, tolerations=(provreq.EKS_GPU_TAINT,))
        out.append(provfailover.Zone(candidate(zone_id), f"{name} ({zone_id})",
                                     partial(provreq.render_request, job, pin, namespace=NS), cluster=cluster,
                                     context=cluster, namespace=NS,
                                     kept=provreq.kept(job) if kept else frozenset()))
    return out


class Autoscaler:
    """Answers every unanswered request at the loop's next sleep, by the zone its PodTemplate selects:
    `answers[zone]` is the condition to set (None: leave it pending). Records what it saw."""

    def __init__(self, cluster: MultiCluster, answers: dict[str, dict[str, Any] | None],
                 name: str = "cluster-a") -> None:
        self.api, self.answers = cluster[name], answers
        self.seen: list[tuple[str, str]] = []  # (request, zone)

    def __call__(self) -> None:
        for req in self.api.list(PROVREQS, NS):
            if (req.get("status") or {}).get("conditions"):
                continue
            template = self.api.get("v1/podtemplates", req["spec"]["podSets"][0]["podTemplateRef"]["name"], NS)
            assert template is not None
            zone = template["template"]["spec"]["nodeSelector"][keys.ZONE]
            self.seen.append((req["metadata"]["name"], zone))
            answer = self.answers[zone]
            if answer is not None:
                self.api.set_status(PROVREQS, req["metadata"]["name"], {"conditions": [ACCEPTED, answer]}, NS)


def opener(cluster: MultiCluster) -> Any:
    return lambda zone: Kube.open(zone.context, cluster.kubeconfig, name=zone.cluster)


def left(cluster: MultiCluster, name: str = "cluster-a") -> dict[str, list[str]]:
    api = cluster[name]
    return {r: sorted(o["metadata"]["name"] for o in api.list(r, NS))
            for r in (PROVREQS, "v1/podtemplates", "batch/v1/jobs", "v1/services")}


def test_a_failed_zone_is_withdrawn_and_the_next_zone_provisions_the_gang(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    autoscaler = Autoscaler(cluster, {"us-east-1a": FAILED, "us-east-1b": PROVISIONED, "us-east-1c": PROVISIONED})
    clock = FakeClock(on_sleep=autoscaler)
    said: list[str] = []
    queued = provfailover.queue_across(store, zones(tmp_path), open_kube=opener(cluster), gang="g1", request=GANG,
                                       settings=provfailover.Settings(timeout_s=600, poll_s=5, clock=clock,
                                                                      sleep=clock.sleep), say=said.append)
    assert queued.zone.candidate.zone == "use1-az1" and queued.state.condition == "Provisioned"
    # The first zone's request was answered Failed and withdrawn; the second's is the one in the cluster now.
    assert autoscaler.seen == [("train-geosched-provisioning", "us-east-1a"),
                               ("train-geosched-provisioning", "us-east-1b")]
    assert left(cluster) == {PROVREQS: ["train-geosched-provisioning"], "v1/podtemplates":
                             ["train-geosched-provisioning-0"], "batch/v1/jobs": ["train"], "v1/services": ["train"]}
    job = cluster["cluster-a"].get("batch/v1/jobs", "train", NS)
    assert job is not None and job["spec"]["template"]["spec"]["nodeSelector"][keys.ZONE] == "us-east-1b"
    # Journalled as the node-group path journals: the failed zone rolled back as a capacity refusal, remembered.
    attempts = journal.attempts(store, "g1")
    assert [(a.zone, a.outcome, a.error_kind) for a in attempts] == [
        ("use1-az6", "rolled-back", "capacity"), ("use1-az1", "launched", None)]
    assert attempts[0].message == ("ProvisioningRequest train-geosched-provisioning Failed "
                                   "(CapacityIsNotFound: Capacity is not found, CA will not retry); withdrawn from "
                                   "the cluster")
    [block] = journal.active_blocks(store)
    assert (block.zone, block.kind, block.instance_type) == ("use1-az6", "capacity", "p5.48xlarge")
    # Provisioned, the gang holds the nodes the autoscaler made (none here: this stand-in binds no pod) until `down`.
    record = journal.gang_record(store, "g1")
    assert record is not None and record.state == "ready"
    assert any("us-east-1a (use1-az6): ProvisioningRequest" in line and "trying the next zone" in line
               for line in said)


def multi_doc_zones(tmp_path: Path, autoscaler_zones: tuple[tuple[str, str], ...] = ZONES) -> list[provfailover.Zone]:
    # tests/kube/data/multi-doc.yaml's shape: the ConfigMap the pods read (envFrom) before the Job, in one file.
    path = tmp_path / "multi.yaml"
    path.write_text((DATA / "multi-doc.yaml").read_text(encoding="utf-8").replace("namespace: research",
                                                                                 f"namespace: {NS}"),
                    encoding="utf-8")
    return _failover_zones(read_job_file(path), autoscaler_zones, "cluster-a", kept=True)


def configmaps(cluster: MultiCluster) -> list[str]:
    return [o["metadata"]["name"] for o in cluster["cluster-a"].list("v1/configmaps", NS)]


def test_what_was_applied_is_journalled_before_the_gang_is_marked_ready(
        cluster: MultiCluster, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that dies between the journal's writes once a zone is Provisioned (here: the attempt's close
    fails) has already recorded what it applied, so `down` takes the gang for a ProvisioningRequest gang and reaches
    into its cluster, instead of finding a gang with nothing to delete."""
    autoscaler = Autoscaler(cluster, {"us-east-1a": PROVISIONED, "us-east-1b": PROVISIONED, "us-east-1c": PROVISIONED})
    clock = FakeClock(on_sleep=autoscaler)
    real = journal.finish_attempt

    def dies_at_launched(store: Store, attempt: int, outcome: str, *args: Any, **kwargs: Any) -> Any:
        if outcome == "launched":
            raise SystemExit("killed")
        return real(store, attempt, outcome, *args, **kwargs)

    monkeypatch.setattr(journal, "finish_attempt", dies_at_launched)
    with pytest.raises(SystemExit):
        provfailover.queue_across(store, zones(tmp_path), open_kube=opener(cluster), gang="g1", request=GANG,
                                  settings=provfailover.Settings(timeout_s=600, poll_s=5, clock=clock,
                                                                 sleep=clock.sleep))
    assert provreqs.is_request_gang(store, "g1")
    [row] = provreqs.requests_of(store, "g1")
    assert {o.kind for o in row.objects} >= {"Job"} and row.requests


def test_a_job_files_configmap_is_applied_with_the_job_and_never_withdrawn(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    # It was left out: the pods would have waited for a ConfigMap nobody applied. It is the user's document, not
    # the zone's: it stays when a zone refuses (the next zone applies it again, unchanged), and one that exists
    # already (an earlier run's, or shared) is applied over, as `submit` does, not refused as the job would be.
    cluster["cluster-a"].create({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "llm-config", "namespace": NS}, "data": {"lr": "0.1"}})
    autoscaler = Autoscaler(cluster, {"us-east-1a": FAILED, "us-east-1b": PROVISIONED, "us-east-1c": PROVISIONED})
    clock = FakeClock(on_sleep=autoscaler)
    said: list[str] = []
    queued = provfailover.queue_across(store, multi_doc_zones(tmp_path), open_kube=opener(cluster), gang="g9",
                                       request=GANG, settings=provfailover.Settings(
                                           timeout_s=600, poll_s=5, clock=clock, sleep=clock.sleep), say=said.append)
    assert queued.zone.candidate.zone == "use1-az1"
    assert configmaps(cluster) == ["llm-config"]
    got = cluster["cluster-a"].get("v1/configmaps", "llm-config", NS)
    assert got is not None and got["data"] == {"lr": "0.0003"}
    assert [o["metadata"]["name"] for o in cluster["cluster-a"].list("batch/v1/jobs", NS)] == ["llm-small"]


def test_every_zone_refusing_leaves_the_job_files_other_documents_and_says_so(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    autoscaler = Autoscaler(cluster, {"us-east-1a": FAILED, "us-east-1b": FAILED, "us-east-1c": FAILED})
    clock = FakeClock(on_sleep=autoscaler)
    with pytest.raises(provfailover.NoZoneProvisioned) as caught:
        provfailover.queue_across(store, multi_doc_zones(tmp_path), open_kube=opener(cluster), gang="g10",
                                  request=GANG, settings=provfailover.Settings(timeout_s=60, poll_s=20, clock=clock,
                                                                               sleep=clock.sleep))
    assert str(caught.value).endswith("nothing of the job or its requests is left in the cluster (the job file's "
                                      "other documents stay applied: ConfigMap llm-config)")
    assert configmaps(cluster) == ["llm-config"]
    assert left(cluster) == {PROVREQS: [], "v1/podtemplates": [], "batch/v1/jobs": [], "v1/services": []}


def test_an_interrupted_watch_names_the_job_not_the_file_s_first_document(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    def stop() -> None:
        raise KeyboardInterrupt

    clock = FakeClock(on_sleep=stop)
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        provfailover.queue_across(store, multi_doc_zones(tmp_path), open_kube=opener(cluster), gang="g11",
                                  request=GANG, settings=provfailover.Settings(clock=clock, sleep=clock.sleep),
                                  say=said.append)
    assert said[-1].startswith("interrupted: Job llm-small in namespace ml of cluster cluster-a stays queued")


def test_every_zone_failing_leaves_nothing_and_names_each(cluster: MultiCluster, store: Store,
                                                          tmp_path: Path) -> None:
    # A refusal, a request revoked after it was provisioned, and one the autoscaler never answers (the deadline).
    autoscaler = Autoscaler(cluster, {"us-east-1a": FAILED, "us-east-1b": None, "us-east-1c": REVOKED})
    clock = FakeClock(on_sleep=autoscaler)
    with pytest.raises(provfailover.NoZoneProvisioned) as caught:
        provfailover.queue_across(store, zones(tmp_path), open_kube=opener(cluster), gang="g2", request=GANG,
                                  settings=provfailover.Settings(timeout_s=60, poll_s=20, clock=clock,
                                                                 sleep=clock.sleep))
    message = str(caught.value)
    assert "\n" not in message and message.startswith("no zone of cluster cluster-a provisioned 2 x H100:8: ")
    for part in ("us-east-1a (use1-az6): ProvisioningRequest train-geosched-provisioning Failed (CapacityIsNotFound",
                 "us-east-1b (use1-az1): no outcome of the ProvisioningRequest after 60 s",
                 "us-east-1c (use1-az2): ProvisioningRequest train-geosched-provisioning CapacityRevoked"):
        assert part in message
    assert caught.value.exit_code == 1
    assert left(cluster) == {PROVREQS: [], "v1/podtemplates": [], "batch/v1/jobs": [], "v1/services": []}
    assert [(a.zone, a.outcome, a.error_kind) for a in journal.attempts(store, "g2")] == [
        ("use1-az6", "rolled-back", "capacity"), ("use1-az1", "rolled-back", "stall"),
        ("use1-az2", "rolled-back", "capacity")]
    # The deadline is the clock's: three polls of 20 s for the zone that never answers, one for each other zone.
    assert clock.slept.count(20) == 5


def test_when_every_zone_of_one_cluster_refuses_the_next_cluster_is_asked(cluster: MultiCluster, store: Store,
                                                                         tmp_path: Path) -> None:
    # cluster-a's autoscaler refuses its two zones; cluster-b's provisions the first of its own.
    in_a = Autoscaler(cluster, {"us-east-1a": FAILED, "us-east-1b": FAILED})
    in_b = Autoscaler(cluster, {"us-east-1c": PROVISIONED}, "cluster-b")
    clock = FakeClock(on_sleep=lambda: (in_a(), in_b()))
    both = [*zones(tmp_path, "cluster-a")[:2], zones(tmp_path, "cluster-b")[2]]
    queued = provfailover.queue_across(store, both, open_kube=opener(cluster), gang="g3", request=GANG,
                                       settings=provfailover.Settings(timeout_s=600, poll_s=5, clock=clock,
                                                                      sleep=clock.sleep))
    assert (queued.zone.cluster, queued.zone.candidate.zone) == ("cluster-b", "use1-az2")
    assert [z for _, z in in_a.seen] == ["us-east-1a", "us-east-1b"] and [z for _, z in in_b.seen] == ["us-east-1c"]
    assert left(cluster, "cluster-a") == {PROVREQS: [], "v1/podtemplates": [], "batch/v1/jobs": [],
                                          "v1/services": []}
    assert left(cluster, "cluster-b")["batch/v1/jobs"] == ["train"]
    assert [(a.zone, a.outcome) for a in journal.attempts(store, "g3")] == [
        ("use1-az6", "rolled-back"), ("use1-az1", "rolled-back"), ("use1-az2", "launched")]


def test_an_interrupted_watch_leaves_the_gang_queued_and_says_so(cluster: MultiCluster, store: Store,
                                                               tmp_path: Path) -> None:
    def interrupt() -> None:
        raise KeyboardInterrupt

    clock = FakeClock(on_sleep=interrupt)
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        provfailover.queue_across(store, zones(tmp_path), open_kube=opener(cluster), gang="g4", request=GANG,
                                  settings=provfailover.Settings(clock=clock, sleep=clock.sleep), say=said.append)
    # The request keeps its place in the queue: nothing withdrawn, the next zone not asked.
    assert left(cluster)[PROVREQS] == ["train-geosched-provisioning"]
    assert [(a.zone, a.outcome) for a in journal.attempts(store, "g4")] == [("use1-az6", "cancelled")]
    assert said[-1] == ("interrupted: Job train in namespace ml of cluster cluster-a stays queued in us-east-1a "
                        "(use1-az6); `geosched down g4` withdraws it")
    # Journalled before it was applied (issue 26): the zone's row is an intent naming what is there, the gang
    # `failed` (live, so `down --all` takes it too), and `down` deletes exactly that and closes the row.
    [row] = provreqs.requests_of(store, "g4")
    assert row.state == "intent" and row.requests == ("train-geosched-provisioning",)
    assert sorted((o.kind, o.name) for o in row.objects) == [
        ("Job", "train"), ("PodTemplate", "train-geosched-provisioning-0"),
        ("ProvisioningRequest", "train-geosched-provisioning"), ("Service", "train")]
    record = journal.gang_record(store, "g4")
    assert record is not None and record.state == "failed"
    down = provreqdown.take_down(store, "g4", lambda r: Kube.open(r.context, cluster.kubeconfig, name=r.cluster),
                                 settings=provreqdown.DownSettings(clock=clock, sleep=FakeClock().sleep))
    assert (down.state, down.errors) == ("terminated", ())
    assert left(cluster) == {PROVREQS: [], "v1/podtemplates": [], "batch/v1/jobs": [], "v1/services": []}
    assert [r.state for r in provreqs.requests_of(store, "g4")] == ["deleted"]


def test_a_rerun_over_a_provisioned_gang_applies_nothing_and_leaves_it_running(cluster: MultiCluster, store: Store,
                                                                              tmp_path: Path) -> None:
    # attack3 A1: the second run applied over the first one's objects. The request's spec is immutable and the
    # same in every zone, so it kept its status: the old zone's Provisioned was read as us-east-1a's answer, the run
    # said "launched" there and re-pinned the job (on a real API server the running Job's template is immutable:
    # the 422 made the run withdraw, deleting the running job).
    autoscaler = Autoscaler(cluster, {"us-east-1a": FAILED, "us-east-1b": PROVISIONED, "us-east-1c": PROVISIONED})
    clock = FakeClock(on_sleep=autoscaler)
    settings = provfailover.Settings(timeout_s=600, poll_s=5, clock=clock, sleep=clock.sleep)
    provfailover.queue_across(store, zones(tmp_path), open_kube=opener(cluster), gang="g5", request=GANG,
                              settings=settings)
    before = left(cluster)
    with pytest.raises(provwatch.AlreadyThere) as caught:
        provfailover.queue_across(store, zones(tmp_path), open_kube=opener(cluster), gang="g6", request=GANG,
                                  settings=settings)
    assert str(caught.value).startswith("cluster-a: podtemplates/train-geosched-provisioning-0, provisioningrequests/"
                                        "train-geosched-provisioning, jobs/train, services/train already in "
                                        "namespace ml")
    assert "\n" not in str(caught.value) and caught.value.exit_code == 1
    assert left(cluster) == before
    job = cluster["cluster-a"].get("batch/v1/jobs", "train", NS)
    assert job is not None and job["spec"]["template"]["spec"]["nodeSelector"][keys.ZONE] == "us-east-1b"
    assert [(a.zone, a.outcome) for a in journal.attempts(store, "g6")] == [("use1-az6", "failed")]
    record = journal.gang_record(store, "g6")
    assert record is not None and record.state == "terminated" and "nothing applied" in (record.message or "")


def test_someone_elses_object_of_the_same_name_is_neither_applied_over_nor_deleted(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    # attack3 A1: a Service "train" of another team's; the zone refused, and the withdrawal deleted it.
    api = cluster["cluster-a"]
    theirs = api.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "train", "namespace": NS,
                                                                             "labels": {"team": "search"}},
                         "spec": {"selector": {"app": "search"}, "ports": [{"port": 8080}]}})
    clock = FakeClock(on_sleep=Autoscaler(cluster, dict.fromkeys(("us-east-1a", "us-east-1b", "us-east-1c"), FAILED)))
    with pytest.raises(provwatch.AlreadyThere, match=r"^cluster-a: services/train already in namespace ml "):
        provfailover.queue_across(store, zones(tmp_path), open_kube=opener(cluster), gang="g7", request=GANG,
                                  settings=provfailover.Settings(timeout_s=600, poll_s=5, clock=clock,
                                                                 sleep=clock.sleep))
    still = api.get("v1/services", "train", NS)
    assert still is not None and still["metadata"]["uid"] == theirs["metadata"]["uid"]
    assert still["spec"]["selector"] == {"app": "search"}
    assert left(cluster) == {PROVREQS: [], "v1/podtemplates": [], "batch/v1/jobs": [], "v1/services": ["train"]}


def test_a_request_deleted_by_someone_else_ends_the_watch_at_the_next_poll(cluster: MultiCluster, store: Store,
                                                                           tmp_path: Path) -> None:
    # attack3 A2: the watch read the missing request as "not answered yet", waited out the zone's deadline (3,600
    # polls of a second here) and then asked the next zone for what had been withdrawn on purpose.
    api = cluster["cluster-a"]

    def someone_else() -> None:
        for r in api.list(PROVREQS, NS):
            api.delete(PROVREQS, r["metadata"]["name"], NS)

    clock = FakeClock(on_sleep=someone_else)
    with pytest.raises(provwatch.RequestGone) as caught:
        provfailover.queue_across(store, zones(tmp_path), open_kube=opener(cluster), gang="g8", request=GANG,
                                  settings=provfailover.Settings(timeout_s=3600, poll_s=1, clock=clock,
                                                                 sleep=clock.sleep))
    assert str(caught.value) == ("cluster-a: ProvisioningRequest train-geosched-provisioning in namespace ml was "
                                 "deleted while it was watched")
    assert clock.slept == [1]
    # What geosched applied beside it is withdrawn; the next zone is not asked.
    assert left(cluster) == {PROVREQS: [], "v1/podtemplates": [], "batch/v1/jobs": [], "v1/services": []}
    [attempt] = journal.attempts(store, "g8")
    assert (attempt.zone, attempt.outcome) == ("use1-az6", "rolled-back")
    assert attempt.message == f"{caught.value}; withdrawn"


class Interrupting(Kube):
    """A connection whose `at`-th request to the API server is where Ctrl-C lands (KeyboardInterrupt raised in
    place of sending it), counted across every connection of one run."""

    calls = 0
    at = 0

    def _send(self, *args: Any, **kwargs: Any) -> Any:
        Interrupting.calls += 1
        if Interrupting.calls == Interrupting.at:
            raise KeyboardInterrupt
        return super()._send(*args, **kwargs)


def test_ctrl_c_at_any_request_leaves_the_journal_closed_and_says_what_may_be_left(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    # attack3 A3: Ctrl-C while a refused zone was being withdrawn (or before its objects were applied) left the
    # attempt `started` and the gang `provisioning`, said nothing, and the zone's objects partly deleted.
    # Since issue 26 the zone is journalled before its first apply, and `down` then leaves nothing of the gang.
    two = zones(tmp_path)[:2]
    whole = None
    step = 0
    while whole is None:
        step += 1
        Interrupting.calls, Interrupting.at = 0, step
        clock = FakeClock(on_sleep=Autoscaler(cluster, {"us-east-1a": FAILED, "us-east-1b": PROVISIONED}))
        said: list[str] = []
        gang = f"c{step}"
        try:
            provfailover.queue_across(
                store, two, open_kube=lambda z: Interrupting.open(z.context, cluster.kubeconfig, name=z.cluster),
                gang=gang, request=GANG, settings=provfailover.Settings(timeout_s=600, poll_s=5, bind_s=10,
                                                                        clock=clock, sleep=clock.sleep),
                say=said.append)
            whole = step - 1  # no request was interrupted: the run's every request has been tried
        except KeyboardInterrupt:
            record = journal.gang_record(store, gang)
            outcomes = [a.outcome for a in journal.attempts(store, gang)]
            assert record is not None and "started" not in outcomes, (step, record, outcomes)
            if outcomes[-1] == "launched":
                # Provisioned, then stopped while its nodes were looked for: the gang is up, and `down` deletes it.
                assert record.state == "ready" and provreqs.is_request_gang(store, gang), (step, record)
                assert said[-1].startswith("interrupted while the gang's nodes were looked for"), (step, said)
            else:
                # `failed` where the zone's objects may be left (its row an intent `down` deletes by), else
                # `terminated`.
                open_rows = provreqs.open_requests(store, gang)
                assert record.state == ("failed" if open_rows else "terminated"), (step, record, open_rows)
                assert outcomes[-1] == "cancelled", (step, record, outcomes)
            objects = left(cluster)
            if any(objects.values()) and outcomes[-1] != "launched":  # the last line says how to withdraw it
                assert said and " Job train in namespace ml of cluster cluster-a " in said[-1], (step, said)
                assert f"`geosched down {gang}` withdraws it" in said[-1], (step, said)
            # What a user runs then: nothing of the gang is left, and its journal is closed.
            down = provreqdown.take_down(store, gang, opener(cluster), settings=provreqdown.DownSettings(
                release_s=10, clock=clock, sleep=clock.sleep))
            assert (down.state, down.errors) == ("terminated", ()), (step, down)
            assert provreqs.open_requests(store, gang) == [], step
            assert not any(left(cluster).values()), (step, left(cluster))
    # Applying, watching and withdrawing the first zone, then applying and watching the second: dozens of steps.
    assert whole > 20


def test_a_transient_error_of_the_api_server_during_the_watch_is_retried(cluster: MultiCluster, store: Store,
                                                                        tmp_path: Path) -> None:
    # attack3 A4: one 500 (or a 429) while polling the request ended the run and withdrew the zone, its place in
    # the autoscaler's queue lost, with the client's exception raw (a traceback at the command line).
    api = cluster["cluster-a"]
    autoscaler = Autoscaler(cluster, {"us-east-1a": PROVISIONED})
    armed: list[bool] = []

    def answer_after_a_500() -> None:
        if not armed:  # the first poll found it pending; the next read of it fails once, then it is answered
            armed.append(True)
            api.inject(500, method="GET", path=r"/provisioningrequests/train-geosched-provisioning$")
            return
        autoscaler()

    clock = FakeClock(on_sleep=answer_after_a_500)
    queued = provfailover.queue_across(store, zones(tmp_path)[:1], open_kube=opener(cluster), gang="t1",
                                       request=GANG, settings=provfailover.Settings(timeout_s=600, poll_s=5,
                                                                                    clock=clock, sleep=clock.sleep))
    assert queued.state.condition == "Provisioned"
    assert api.count("GET", r"/provisioningrequests/train-geosched-provisioning$", faulted=True) == 1


def test_a_refusal_of_the_api_server_during_the_watch_is_one_line_and_the_zone_withdrawn(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    # attack3 A4: a 403 (RBAC changed under the watch) propagated as the client's ApiException: no one line.
    api = cluster["cluster-a"]
    forbidden = ('provisioningrequests.autoscaling.x-k8s.io "train-geosched-provisioning" is forbidden: User "ci" '
                 'cannot get resource')
    # Once: not retried (it is no transient error), and the withdrawal after it may read the request again.
    clock = FakeClock(on_sleep=lambda: None if api.count(faulted=True) else api.inject(
        403, method="GET", path=r"/provisioningrequests/", message=forbidden))
    with pytest.raises(provwatch.WatchFailed) as caught:
        provfailover.queue_across(store, zones(tmp_path), open_kube=opener(cluster), gang="t2", request=GANG,
                                  settings=provfailover.Settings(timeout_s=600, poll_s=5, clock=clock,
                                                                 sleep=clock.sleep))
    assert str(caught.value) == ("cluster-a: reading ProvisioningRequest train-geosched-provisioning in namespace "
                                 'ml: 403 provisioningrequests.autoscaling.x-k8s.io "train-geosched-provisioning" '
                                 'is forbidden: User "ci" cannot get resource')
    assert caught.value.exit_code == 1
    # The job and its companions were withdrawn, the request with them.
    assert left(cluster) == {PROVREQS: [], "v1/podtemplates": [], "batch/v1/jobs": [], "v1/services": []}
    [attempt] = journal.attempts(store, "t2")
    assert attempt.outcome == "rolled-back" and attempt.message == f"{caught.value}; withdrawn"


def test_a_gang_name_taken_already_is_one_line_and_leaves_that_gang_as_it_was(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    # `up --provisioning-class --name G` with G a gang of this store (a node group's, still running): the insert's
    # IntegrityError was a traceback. The node-group and machine paths said it in one line already.
    from geosched.core.errors import EXIT_BAD_INPUT, InputError

    before = journal.create_gang(store, "g12", journal.owner(store), GANG)
    with pytest.raises(InputError) as caught:
        provfailover.queue_across(store, zones(tmp_path), open_kube=opener(cluster), gang="g12", request=GANG)
    assert str(caught.value) == f"--name: gang 'g12' exists already in {store.path}"
    assert caught.value.exit_code == EXIT_BAD_INPUT
    assert journal.gang_record(store, "g12") == before and journal.attempts(store, "g12") == []
    assert left(cluster) == {PROVREQS: [], "v1/podtemplates": [], "batch/v1/jobs": [], "v1/services": []}


# Two gangs through Kueue on one cluster (issue 26). The emulator runs no Kueue, so no request is ever made and each
# run ends at its deadline, its job withdrawn: what is asserted is what each run left of Kueue's queue objects,
# which no refusal withdraws. p4d.24xlarge (A100) in us-east-1's use1-az1: geosched/data/aws_gpu_vms.csv.
A100_GANG = GangRequest("A100", 8, 1, PricingMode.ON_DEMAND, ("aws",), ("us-east-1",))
CQS, FLAVORS, LQS = "kueue.x-k8s.io/v1beta2/clusterqueues", "kueue.x-k8s.io/v1beta2/resourceflavors", \
    "kueue.x-k8s.io/v1beta2/localqueues"
CONFIG_CRD = "kueue.x-k8s.io_provisioningrequestconfigs"


def kueue_zone(tmp_path: Path, job: str, *, instance_type: str = "p5.48xlarge", gpu: str = "H100",
               workers: int = 2, namespace: str = NS) -> provfailover.Zone:
    path = tmp_path / f"{job}.yaml"
    path.write_text(f"apiVersion: geosched.io/v1alpha1\nkind: Job\nname: {job}\nimage: ghcr.io/example/train:1\n"
                    f"workers: {workers}\ngpus_per_worker: 8\ngpu: {gpu}\n", encoding="utf-8")
    pin = provreq.Target(zone="us-east-1b", gpu_label=keys.INSTANCE_TYPE, gpu_value=instance_type,
                         class_name=provreq.BEST_EFFORT_ATOMIC, tolerations=(provreq.EKS_GPU_TAINT,))
    c = candidate("use1-az1") if gpu == "H100" else Candidate(
        "aws", "us-east-1", "use1-az1", instance_type, gpu, 8, 96.0, Pricing.ON_DEMAND, 32.7726, 32.7726, None)
    return provfailover.Zone(c, "us-east-1b (use1-az1)",
                             partial(provreq.render, read_job_file(path), pin, queue=None, namespace=namespace),
                             cluster="cluster-a", context="cluster-a", namespace=namespace)


def run_kueue(cluster: MultiCluster, store: Store, zone: provfailover.Zone, gang: str,
              request: GangRequest = GANG) -> None:
    clock = FakeClock()
    with pytest.raises(provfailover.NoZoneProvisioned):
        provfailover.queue_across(store, [zone], open_kube=opener(cluster), gang=gang, request=request,
                                  settings=provfailover.Settings(timeout_s=30, poll_s=10, clock=clock,
                                                                 sleep=clock.sleep))


def with_kueue(cluster: MultiCluster) -> Any:
    # Kueue v0.17.0's own CRD (tests/kube/data/crds): the emulator's catalog has Kueue's other kinds.
    api = cluster["cluster-a"]
    api.register_crd(yaml.safe_load((DATA / "crds" / f"{CONFIG_CRD}.yaml").read_text(encoding="utf-8")))
    return api


def quotas(queue: dict[str, Any]) -> dict[str, Any]:
    [group] = queue["spec"]["resourceGroups"]
    [flavor] = group["flavors"]
    return {r["name"]: r["nominalQuota"] for r in flavor["resources"]}


def test_two_gangs_of_other_gpus_or_namespaces_on_one_cluster_never_share_a_queue(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    # One set of queue objects for every gang: the second `up` rewrote the first's flavor (its GPU), its queue's
    # namespace and quota, and the first gang, not admitted yet, waited for ever.
    api = with_kueue(cluster)
    api.add_namespace("research")
    h100 = kueue_zone(tmp_path, "train")
    a100 = kueue_zone(tmp_path, "finetune", instance_type="p4d.24xlarge", gpu="A100", workers=1)
    other_ns = kueue_zone(tmp_path, "eval", namespace="research")
    for zone, gang in ((h100, "g1"), (a100, "g2"), (other_ns, "g3")):
        run_kueue(cluster, store, zone, gang, A100_GANG if zone is a100 else GANG)
    flavors = {f["metadata"]["name"]: f["spec"]["nodeLabels"] for f in api.list(FLAVORS)}
    queues = {q["metadata"]["name"]: q for q in api.list(CQS)}
    assert len(flavors) == len(queues) == 3
    seen = set()
    for zone in (h100, a100, other_ns):
        rendered = {m["kind"]: m for m in zone.render()}
        local = rendered["LocalQueue"]
        live_local = api.get(LQS, local["metadata"]["name"], zone.namespace)
        assert live_local is not None
        name = live_local["spec"]["clusterQueue"]
        seen.add(name)
        queue = queues[name]
        assert queue["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": zone.namespace}}
        [group] = queue["spec"]["resourceGroups"]
        [flavor] = group["flavors"]
        instance_type = zone.candidate.instance_type
        assert flavors[flavor["name"]] == {keys.INSTANCE_TYPE: instance_type}
        assert quotas(queue)["nvidia.com/gpu"] == (8 if instance_type == "p4d.24xlarge" else 16)
        assert rendered["Job"]["metadata"]["labels"][keys.KUEUE_QUEUE] == local["metadata"]["name"]
    assert len(seen) == 3


def test_a_quota_another_gang_or_the_owner_set_is_never_lowered_and_raised_only_for_a_larger_gang(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    api = with_kueue(cluster)
    run_kueue(cluster, store, kueue_zone(tmp_path, "train"), "g1")
    [queue] = api.list(CQS)
    assert quotas(queue)["nvidia.com/gpu"] == 16
    # The cluster owner raises the GPU quota to queue more gangs, with `kubectl apply --server-side` (field manager
    # "kubectl"): the ClusterQueue's resourceGroups is an atomic list (Kueue v0.17.0's CRD), now the owner's.
    # The owner also caps the CPU the queue's gangs take (a resource the compact job's pods do not request).
    owned = copy.deepcopy(queue)
    [group] = owned["spec"]["resourceGroups"]
    group["coveredResources"] = ["cpu", "nvidia.com/gpu"]
    group["flavors"][0]["resources"] = [{"name": "cpu", "nominalQuota": "1k"}, {"name": "nvidia.com/gpu",
                                                                               "nominalQuota": 64}]
    api.apply({"apiVersion": owned["apiVersion"], "kind": "ClusterQueue", "metadata": {"name": queue["metadata"]
               ["name"]}, "spec": {"resourceGroups": owned["spec"]["resourceGroups"]}}, field_manager="kubectl")
    # A smaller gang of the same shape: applied over, the quota fell to 8 (or the apply failed on the owner's field).
    run_kueue(cluster, store, kueue_zone(tmp_path, "small", workers=1), "g2", A100_GANG)
    [queue] = api.list(CQS)
    assert quotas(queue)["nvidia.com/gpu"] == 64
    # A gang larger than the quota would never be admitted: the quota is raised to it, the owner's cpu cap kept.
    run_kueue(cluster, store, kueue_zone(tmp_path, "large", workers=10), "g3")
    [queue] = api.list(CQS)
    assert quotas(queue) == {"cpu": "1k", "nvidia.com/gpu": 80}
    assert queue["spec"]["resourceGroups"][0]["coveredResources"] == ["cpu", "nvidia.com/gpu"]
    assert queue["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": NS}}
