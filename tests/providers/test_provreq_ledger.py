"""The nodes an autoscaler makes for a ProvisioningRequest gang are charged in the usage ledger
(providers/provreqs.py, kube/provnodes.py): found through the gang's pods
(`autoscaling.x-k8s.io/consume-provisioning-request`, `spec.nodeName`), opened at each node's registration, closed
when `down` (providers/provreqdown.py) has deleted the job and seen the node gone;
`geosched report` prices them with their idle time and says so.

The loop runs against the project's API emulator over HTTP on a fake clock, with a stand-in for the autoscaler,
Kueue's admission and kube-scheduler together (the emulator has no controllers): on a request it answers Provisioned,
it registers the request's nodes, EKS-shaped (tests/kubeemu node_manifest: zone name, instance type, GPU capacity;
`eks.amazonaws.com/capacityType` as EKS labels a managed node group's nodes, EKS User Guide "Managed node groups"),
and binds one pod per node annotated as consuming the request (the annotation Kueue v0.17.0 puts on admitted pods,
pkg/controller/admissionchecks/provisioning/constants.go); once the request is gone it removes the nodes, as
cluster-autoscaler scales unneeded nodes away. The real flow (Kueue, kube-scheduler, kwok nodes) is
tests/realkube/test_realkube_provreq.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.cli import provfailover
from geosched.core import catalog
from geosched.core.models import Pricing
from geosched.kube import keys, provnodes, provreq, provwatch
from geosched.kube.client import KUBE_RETRY, Kube
from geosched.kube.jobinput import read_job_file
from geosched.kube.kinds.base import when
from geosched.kube.submit import apply_object
from geosched.providers import journal, provreqdown, provreqs
from geosched.providers.plan import Candidate, GangRequest, PricingMode
from geosched.report.ledger import ledger_intervals
from geosched.report.report import report
from geosched.store.db import Store
from tests.clock import FakeClock
from tests.kube.kube_support import DATA
from tests.kubeemu import MultiCluster
from tests.kubeemu.cluster import node_manifest
from tests.providers.test_prov_cli import run

NS = "ml"
PROVREQS = "autoscaling.x-k8s.io/v1/provisioningrequests"
ZONE, ZONE_ID = "us-east-1a", "use1-az6"
PROVISIONED = {"type": "Provisioned", "status": "True", "reason": "CapacityIsProvisioned",
               "message": "Capacity is found in the cluster", "lastTransitionTime": "2026-12-07T06:00:00Z",
               "observedGeneration": 1}
GANG = GangRequest("H100", 8, 2, PricingMode.ON_DEMAND, ("aws",), ("us-east-1",))
HOUR_S = 3600.0
# The catalog's p5.48xlarge on-demand offering in us-east-1.
CANDIDATE = Candidate("aws", "us-east-1", ZONE_ID, "p5.48xlarge", "H100", 8, 192.0, Pricing.ON_DEMAND, 98.32,
                      2 * 98.32, None)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MultiCluster]:
    with MultiCluster(1, directory=tmp_path) as mc:
        mc["cluster-a"].add_namespace(NS)
        yield mc


def zone(tmp_path: Path) -> provfailover.Zone:
    path = tmp_path / "train.yaml"
    path.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                    "workers: 2\ngpus_per_worker: 8\ngpu: H100\n", encoding="utf-8")
    job = read_job_file(path)
    pin = provreq.Target(zone=ZONE, gpu_label=keys.INSTANCE_TYPE, gpu_value="p5.48xlarge",
                         class_name=provreq.BEST_EFFORT_ATOMIC, tolerations=(provreq.EKS_GPU_TAINT,))
    return provfailover.Zone(CANDIDATE, f"{ZONE} ({ZONE_ID})", partial(provreq.render_request, job, pin, namespace=NS),
                             cluster="cluster-a", context="cluster-a", namespace=NS)


class Autoscaler:
    """Provisions each new request with `len(markets)` nodes (one per market given) and binds one consuming pod
    to each; removes a request's nodes once the request is gone, but those named in `keep`."""

    def __init__(self, cluster: MultiCluster, markets: tuple[str, ...] = ("ON_DEMAND", "SPOT")) -> None:
        self.api, self.markets = cluster["cluster-a"], markets
        self.made: dict[str, list[str]] = {}
        self.keep: set[str] = set()

    def __call__(self) -> None:
        requests = {r["metadata"]["name"] for r in self.api.list(PROVREQS, NS)}
        for name in sorted(requests):
            if name in self.made:
                continue
            nodes = []
            for i, capacity_type in enumerate(self.markets):
                node = node_manifest(f"ip-10-0-40-{10 + i}.ec2.internal", region="us-east-1", zone=ZONE,
                                     instance_type="p5.48xlarge", gpu_product="NVIDIA-H100-80GB-HBM3", gpus=8,
                                     labels={keys.EKS_CAPACITY_TYPE: capacity_type,
                                             keys.EKS_NODEGROUP: "ca-gpu-p5"})
                self.api.create(node)
                nodes.append(node["metadata"]["name"])
                self.api.create({"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": f"train-{i}", "namespace": NS,
                                              "annotations": {provreq.CONSUMES: name}},
                                 "spec": {"nodeName": node["metadata"]["name"],
                                          "containers": [{"name": "trainer", "image": "ghcr.io/example/train:1"}]}})
            self.made[name] = nodes
            self.api.set_status(PROVREQS, name, {"conditions": [PROVISIONED]}, NS)
        for name in [n for n in self.made if n not in requests]:
            for node in self.made.pop(name):
                if node not in self.keep:
                    self.api.delete("v1/nodes", node)


def opener(cluster: MultiCluster) -> Any:
    return lambda z: Kube.open(z.context, cluster.kubeconfig, name=z.cluster)


def queue(store: Store, cluster: MultiCluster, tmp_path: Path, autoscaler: Autoscaler, gang: str,
          said: list[str]) -> provreqdown.DownSettings:
    """Queue the gang; the settings its `down` runs with (the same fake clock, the autoscaler at each sleep)."""
    clock = FakeClock(on_sleep=autoscaler)
    provfailover.queue_across(store, [zone(tmp_path)], open_kube=opener(cluster), gang=gang, request=GANG,
                              settings=provfailover.Settings(timeout_s=600, poll_s=5, clock=clock, sleep=clock.sleep),
                              say=said.append)
    return provreqdown.DownSettings(release_s=60, poll_s=5, clock=clock, sleep=clock.sleep)


def test_the_nodes_the_autoscaler_made_are_charged_from_their_registration_until_down_sees_them_gone(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    autoscaler = Autoscaler(cluster)
    said: list[str] = []
    s = queue(store, cluster, tmp_path, autoscaler, "g1", said)
    record = journal.gang_record(store, "g1")
    assert record is not None and record.state == "ready"
    rows = sorted(ledger_intervals(store), key=lambda i: i.name)
    api = cluster["cluster-a"]
    nodes = [api.get("v1/nodes", n) for n in sorted(autoscaler.made["train-geosched-provisioning"])]
    assert [(i.name, i.ref) for i in rows] == [(n["metadata"]["name"], n["metadata"]["uid"]) for n in nodes if n]
    for i, node in zip(rows, nodes, strict=True):
        assert node is not None
        assert (i.kind, i.provider, i.region, i.zone, i.cluster, i.instance_type, i.gpu, i.gpus, i.job, i.end) == (
            "node", "aws", "us-east-1", ZONE_ID, "cluster-a", "p5.48xlarge", "H100", 8, "train", None)
        assert i.start == when(node["metadata"]["creationTimestamp"])
        assert i.nodegroup  # the report's one test of capacity geosched caused in a cluster
    # The market is each node's own: EKS's capacityType label (nodeprice.market), not the gang's.
    assert [i.pricing for i in rows] == [Pricing.ON_DEMAND, Pricing.SPOT]
    assert said[-1] == (f"#1 {ZONE} ({ZONE_ID}): 2 node(s) the autoscaler made for the gang charged from their "
                        "registration until `geosched down g1` sees them gone")
    # `status` counts them as the gang's nodes up (it said `degraded`, 0 up: it counted machines only).
    status = run(tmp_path / "home", "status", "-o", "json")
    [shown] = json.loads(status.output)["items"]
    assert (shown["gang"], shown["state"], shown["nodes_up"], shown["nodes"]) == ("g1", "ready", 2, 2)

    # A report two hours on charges both nodes for the two hours, nothing having run on them (idle is charged).
    at = min(i.start for i in rows) + 2 * HOUR_S
    doc = json.loads(report(store, "cost", "job", output="json", now=at).text or "{}")
    (row,) = [r for r in doc["rows"] if r["job"] == "train"]
    offer = catalog.offering_index()[("aws", "p5.48xlarge", ZONE_ID)]
    usd = sum((at - i.start) / HOUR_S * (offer.price(i.pricing) or 0.0) for i in rows)
    assert row["cost_usd"] == pytest.approx(usd)
    assert any("ProvisioningRequest" in n and "idle time included" in n for n in doc["notes"]), doc["notes"]

    down = provreqdown.take_down(store, "g1", opener(cluster), settings=s)
    assert (down.state, down.closed, down.errors) == ("terminated", 2, ())
    # The job, its Service, the request and its PodTemplate are gone; the autoscaler then removed the nodes.
    for resource in ("batch/v1/jobs", "v1/services", PROVREQS, "v1/podtemplates"):
        assert api.list(resource, NS) == [], resource
    closed = ledger_intervals(store)
    assert all(i.end is not None and i.end >= i.start for i in closed)
    [req] = provreqs.requests_of(store, "g1")
    assert req.state == "deleted"
    record = journal.gang_record(store, "g1")
    assert record is not None and record.state == "terminated"
    # Run again, `down` has nothing left to do and changes nothing.
    ends = [i.end for i in closed]
    again = provreqdown.take_down(store, "g1", opener(cluster), settings=s)
    assert (again.state, again.closed) == ("terminated", 0)
    assert [i.end for i in ledger_intervals(store)] == ends


class StoppedAtPods(Kube):
    """A connection on which listing the pods (the bind wait's read) is where the run stops: Ctrl-C, or the
    read failing (`error`)."""

    error: type[BaseException] = KeyboardInterrupt

    def _send(self, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        if method == "GET" and path.endswith("/pods"):
            raise self.error
        return super()._send(method, path, *args, **kwargs)


@pytest.mark.parametrize("stop", [KeyboardInterrupt, ConnectionResetError], ids=["ctrl-c", "read-error"])
def test_a_bind_wait_cut_short_leaves_the_nodes_to_down_which_charges_them_from_their_registration(
        cluster: MultiCluster, store: Store, tmp_path: Path, stop: type[BaseException]) -> None:
    """Issue 26: Ctrl-C or a read error while `up` waited for the request's pods to be bound left the nodes the
    autoscaler made uncharged for good. `down` charges them by the same rule (`provreqdown.charge_bound`) before it
    deletes the job: from each node's registration to the look that saw it gone."""
    autoscaler = Autoscaler(cluster)
    clock = FakeClock(on_sleep=autoscaler)
    said: list[str] = []
    StoppedAtPods.error = stop
    settings = provfailover.Settings(timeout_s=600, poll_s=5, clock=clock, sleep=clock.sleep)
    run_up = partial(provfailover.queue_across, store, [zone(tmp_path)],
                     open_kube=lambda z: StoppedAtPods.open(z.context, cluster.kubeconfig, name=z.cluster),
                     gang="g3", request=GANG, settings=settings, say=said.append)
    if stop is KeyboardInterrupt:
        with pytest.raises(KeyboardInterrupt):
            run_up()
        assert said[-1].startswith("interrupted while the gang's nodes were looked for")
    else:
        run_up()
        assert "the gang's nodes could not be read" in said[-1] and "`geosched down g3` charges them" in said[-1]
    assert ledger_intervals(store) == []  # nothing charged by `up`
    [row] = provreqs.requests_of(store, "g3")
    assert (row.state, row.nodes) == ("provisioned", ())
    api = cluster["cluster-a"]
    nodes = {n: api.get("v1/nodes", n) for n in autoscaler.made["train-geosched-provisioning"]}
    down = provreqdown.take_down(store, "g3", opener(cluster), settings=provreqdown.DownSettings(
        release_s=60, poll_s=5, clock=clock, sleep=clock.sleep))
    assert (down.state, down.closed, down.errors) == ("terminated", 2, ())
    assert "2 node(s) the gang's pods run on in cluster cluster-a charged from their registration" in " ".join(
        down.queue)
    rows = sorted(ledger_intervals(store), key=lambda i: i.name)
    assert [(i.name, i.ref, i.start, i.job) for i in rows] == [
        (name, node["metadata"]["uid"], when(node["metadata"]["creationTimestamp"]), "train")
        for name, node in sorted(nodes.items()) if node is not None]
    assert all(i.end is not None and i.end >= i.start for i in rows)
    # The run that did record its nodes is left as it was: `down` charges only where none were recorded.
    again = provreqdown.take_down(store, "g3", opener(cluster), settings=provreqdown.DownSettings(
        release_s=60, poll_s=5, clock=clock, sleep=clock.sleep))
    assert (again.state, again.closed) == ("terminated", 0) and len(ledger_intervals(store)) == 2


def test_a_node_the_autoscaler_keeps_stays_charged_and_a_second_down_closes_it_once_gone(
        cluster: MultiCluster, store: Store, tmp_path: Path) -> None:
    autoscaler = Autoscaler(cluster)
    s = queue(store, cluster, tmp_path, autoscaler, "g2", [])
    gone, kept = sorted(autoscaler.made["train-geosched-provisioning"])
    autoscaler.keep.add(kept)  # e.g. another workload's pods took it: cluster-autoscaler does not remove it
    down = provreqdown.take_down(store, "g2", opener(cluster), settings=s)
    assert down.state == "terminating" and down.closed == 1
    [error] = down.errors
    assert error.startswith(f"node(s) {kept} still in cluster cluster-a 60 s after the job was deleted: charged "
                            "until they are gone")
    assert [(i.name, i.end is None) for i in sorted(ledger_intervals(store), key=lambda i: i.name)] == [
        (gone, False), (kept, True)]
    record = journal.gang_record(store, "g2")
    assert record is not None and record.state == "terminating"
    cluster["cluster-a"].delete("v1/nodes", kept)
    again = provreqdown.take_down(store, "g2", opener(cluster), settings=s)
    assert (again.state, again.closed, again.errors) == ("terminated", 1, ())
    assert all(i.end is not None for i in ledger_intervals(store))


def test_a_node_that_was_there_before_the_request_is_not_charged() -> None:
    # check-capacity finds capacity that exists (it makes no node), and best-effort-atomic-scale-up makes only what
    # the cluster lacks: a pod bound to an older node is on capacity the request did not make.
    asked_at = when("2026-12-07T06:00:00Z")
    assert asked_at is not None
    old = {"metadata": {"name": "n0", "uid": "u0", "creationTimestamp": "2026-12-07T05:59:59Z"}}
    new = {"metadata": {"name": "n1", "uid": "u1", "creationTimestamp": "2026-12-07T06:00:00Z"}}
    assert not provnodes.made_for(old, asked_at) and provnodes.made_for(new, asked_at)
    assert not provnodes.made_for({"metadata": {"name": "n2"}}, asked_at)


def test_the_pods_counted_are_those_consuming_the_gangs_requests_and_bound() -> None:
    def pod(request: str | None, node: str | None) -> dict[str, Any]:
        return {"metadata": {"annotations": {provreq.CONSUMES: request} if request else {}},
                "spec": {"nodeName": node} if node else {}}

    pods = [pod("r1", "a"), pod("r1", "a"), pod("r1", None), pod("r2", "b"), pod(None, "c"), pod("other", "d")]
    bound = provnodes.bound_to(pods, ["r1", "r2"])
    assert (bound.nodes, bound.bound) == (("a", "b"), 3)
    assert provnodes.expected_pods([{"spec": {"podSets": [{"count": 3}, {"count": 2}]}}, {"spec": {}}]) == 5


def test_a_node_is_charged_at_its_own_machine_market_and_gpus() -> None:
    node = {"metadata": {"name": "gke-dws-1", "uid": "u1", "creationTimestamp": "2026-12-07T06:00:00Z",
                         "labels": {keys.INSTANCE_TYPE: "a3-highgpu-8g", "cloud.google.com/gke-spot": "true"}},
            "status": {"capacity": {keys.GPU: "8"}}}
    got = provnodes.node_usage(node, job="train", provider="gcp", region="us-central1", zone="us-central1-c",
                               cluster="gke", gpu="h100", gpus=4, instance_type="a3-megagpu-8g")
    assert got is not None
    row, start = got
    assert (row.instance_type, row.pricing, row.gpus, row.gpu, row.ref, start) == (
        "a3-highgpu-8g", Pricing.SPOT, 8, "H100", "u1", when("2026-12-07T06:00:00Z"))
    bare = {"metadata": {"name": "n", "uid": "u2", "creationTimestamp": "2026-12-07T06:00:00Z"}}
    fallback = provnodes.node_usage(bare, job="train", provider="gcp", region="us-central1", zone="us-central1-c",
                                    cluster="gke", gpu="H100", gpus=4, instance_type="a3-megagpu-8g")
    assert fallback is not None and (fallback[0].instance_type, fallback[0].gpus, fallback[0].pricing) == (
        "a3-megagpu-8g", 4, Pricing.ON_DEMAND)
    assert provnodes.node_usage({"metadata": {"name": "n"}}, job="t", provider="gcp", region="r", zone="z",
                                cluster="c", gpu="H100", gpus=8, instance_type="x") is None


# --- Kueue's queue objects at `down` (issue 26: they stayed after the last gang, and the single
# `geosched-provisioning` set from before stop 34 was never removed) ---------------------------------------------

KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE_KINDS = {"ResourceFlavor": "resourceflavors", "ProvisioningRequestConfig": "provisioningrequestconfigs",
               "AdmissionCheck": "admissionchecks", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}
PIN = provreq.Target(zone=ZONE, gpu_label=keys.INSTANCE_TYPE, gpu_value="p5.48xlarge",
                     class_name=provreq.BEST_EFFORT_ATOMIC)


def with_kueue(cluster: MultiCluster) -> Any:
    # Kueue v0.17.0's ProvisioningRequestConfig CRD (tests/kube/data/crds): the emulator's catalog has the others.
    api = cluster["cluster-a"]
    api.register_crd(yaml.safe_load((DATA / "crds" / "kueue.x-k8s.io_provisioningrequestconfigs.yaml").read_text(
        encoding="utf-8")))
    return api


def applied_queue(cluster: MultiCluster, name: str | None = None) -> list[dict[str, Any]]:
    """The gang's queue objects applied as `up` applies them (server-side apply, geosched's field manager); `name`:
    under that one name instead (the pre-stop-34 set)."""
    objects = provreq.queue_objects(PIN, provreq.queue_name(PIN, NS), NS, {"nvidia.com/gpu": 16})
    if name is not None:
        for o in objects:
            o["metadata"]["name"] = name
        objects[3]["spec"]["resourceGroups"][0]["flavors"][0]["name"] = name
        objects[3]["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["name"] = name
        objects[2]["spec"]["parameters"]["name"] = name
        objects[4]["spec"]["clusterQueue"] = name
    with Kube.open("cluster-a", cluster.kubeconfig) as kube:
        for o in objects:
            apply_object(kube, o, default_namespace=NS, retry=KUBE_RETRY)
    return objects


def queued(store: Store, gang: str, objects: list[dict[str, Any]]) -> provreqs.RequestRecord:
    """A gang's journal as `up` leaves it once its request is Provisioned (no node charged: none bound)."""
    journal.create_gang(store, gang, journal.owner(store), GANG)
    a = journal.start_attempt(store, gang, CANDIDATE)
    journal.finish_attempt(store, a.id, "launched")
    journal.set_gang(store, gang, "ready", attempt=a.id)
    return provreqs.record(store, gang, a.id, cluster="cluster-a", context="cluster-a", kubeconfig=None,
                           namespace=NS, objects=(), requests=(), queue=[provreqs.ObjectRef(
                               o["apiVersion"], o["kind"], o["metadata"]["name"],
                               NS if o["kind"] == "LocalQueue" else None) for o in objects])


def left_queue(api: Any) -> list[str]:
    return sorted(f"{kind} {o['metadata']['name']}" for kind, plural in QUEUE_KINDS.items()
                  for o in api.list(f"{KUEUE}/{plural}", NS if kind == "LocalQueue" else None))


def down(store: Store, cluster: MultiCluster, gang: str) -> provreqdown.Down:
    clock = FakeClock()
    return provreqdown.take_down(store, gang, lambda row: Kube.open(row.context, cluster.kubeconfig,
                                                                    name=row.cluster),
                                 settings=provreqdown.DownSettings(release_s=10, clock=clock, sleep=clock.sleep))


def test_down_of_the_last_gang_removes_the_queue_objects_geosched_made_and_says_so(
        cluster: MultiCluster, store: Store) -> None:
    api = with_kueue(cluster)
    objects = applied_queue(cluster)
    queued(store, "g1", objects)
    queued(store, "g2", objects)
    # g2 still uses them: kept, and said.
    first = down(store, cluster, "g1")
    assert first.state == "terminated"
    assert first.queue == ("Kueue's queue objects of cluster-a kept: gang g2 uses them",)
    assert len(left_queue(api)) == 5
    last = down(store, cluster, "g2")
    name = provreq.queue_name(PIN, NS)
    assert last.queue == (f"removed from cluster-a (geosched made them, no gang queues on them): LocalQueue {name}, "
                          f"ClusterQueue {name}, AdmissionCheck {name}, ProvisioningRequestConfig {name}, "
                          f"ResourceFlavor {name}",)
    assert left_queue(api) == []


def test_a_queue_the_owner_changed_or_a_workload_still_uses_is_kept(cluster: MultiCluster, store: Store) -> None:
    api = with_kueue(cluster)
    objects = applied_queue(cluster)
    name = provreq.queue_name(PIN, NS)
    # Another store's gang (or any Workload) queued on the LocalQueue: kept.
    api.create({"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": "job-eval-1a2b3", "namespace": NS},
                "spec": {"queueName": name, "podSets": [{"name": "main", "count": 1, "template": {
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}]}})
    queued(store, "g1", objects)
    assert down(store, cluster, "g1").queue == (
        f"cluster-a: Workload job-eval-1a2b3 in namespace {NS} queues on LocalQueue {name}, ClusterQueue {name}, "
        f"AdmissionCheck {name}, ProvisioningRequestConfig {name}, ResourceFlavor {name}: kept",)
    api.delete(f"{KUEUE}/workloads", "job-eval-1a2b3", NS)
    # The cluster owner raised the quota with kubectl: the set is the owner's queue now, never deleted.
    api.apply({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
               "spec": {"resourceGroups": objects[3]["spec"]["resourceGroups"]}}, field_manager="kubectl")
    queued(store, "g2", objects)
    [line] = down(store, cluster, "g2").queue
    assert line.startswith(f"cluster-a: ClusterQueue {name} was made or changed by kubectl: kept, with ")
    assert len(left_queue(api)) == 5


def test_the_single_queue_of_before_stop_34_is_removed_when_geosched_made_it_and_no_gang_uses_it(
        cluster: MultiCluster, store: Store) -> None:
    api = with_kueue(cluster)
    applied_queue(cluster, provreq.DEFAULT_NAME)
    queued(store, "g1", [])  # a gang without Kueue (--without-kueue) in the same namespace
    [line] = down(store, cluster, "g1").queue
    assert line.startswith("removed from cluster-a (geosched made them, no gang queues on them): LocalQueue "
                           "geosched-provisioning, ClusterQueue geosched-provisioning")
    assert left_queue(api) == []
    # One the owner made under that name is not geosched's.
    api.apply({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": provreq.DEFAULT_NAME},
               "spec": {}}, field_manager="kubectl")
    queued(store, "g2", [])
    assert down(store, cluster, "g2").queue == (
        "cluster-a: ResourceFlavor geosched-provisioning was made or changed by kubectl: kept, with ResourceFlavor "
        "geosched-provisioning, as the owner's queue",)
    assert left_queue(api) == ["ResourceFlavor geosched-provisioning"]


def test_the_old_shared_cluster_queue_stays_while_another_namespace_queues_through_it(
        cluster: MultiCluster, store: Store) -> None:
    """The pre-stop-34 set was one ClusterQueue (with its check, config and flavor) for every namespace, each with
    its own LocalQueue: the `down` of a gang in one namespace removes that namespace's LocalQueue only while
    another namespace's LocalQueue points at the ClusterQueue (its pending gangs would lose their queue)."""
    api = with_kueue(cluster)
    applied_queue(cluster, provreq.DEFAULT_NAME)
    cluster["cluster-a"].add_namespace("research")
    with Kube.open("cluster-a", cluster.kubeconfig) as kube:
        apply_object(kube, {"apiVersion": KUEUE, "kind": "LocalQueue",
                            "metadata": {"name": provreq.DEFAULT_NAME, "namespace": "research"},
                            "spec": {"clusterQueue": provreq.DEFAULT_NAME}}, default_namespace="research",
                     retry=KUBE_RETRY)
    queued(store, "g1", [])
    assert down(store, cluster, "g1").queue == (
        "removed from cluster-a (geosched made them, no gang queues on them): LocalQueue geosched-provisioning",
        "cluster-a: ClusterQueue geosched-provisioning kept, with what it names: LocalQueue geosched-provisioning "
        "in namespace research points at it")
    assert left_queue(api) == [f"{kind} geosched-provisioning" for kind in (
        "AdmissionCheck", "ClusterQueue", "ProvisioningRequestConfig", "ResourceFlavor")]
    assert [q["metadata"]["namespace"] for q in api.list(f"{KUEUE}/localqueues", "research")] == ["research"]


def entry(manager: str, fields: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
    # metav1.ManagedFieldsEntry as the API server writes it (FieldsV1: {"f:spec": {"f:replicas": {}}}).
    out = {"manager": manager, "operation": "Apply" if manager == "geosched" else "Update", "apiVersion": KUEUE,
           "time": "2026-12-07T06:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        out["subresource"] = subresource
    return out


SPEC = {"f:spec": {"f:nodeLabels": {}}}
FINALIZER = {"f:metadata": {"f:finalizers": {".": {}, 'v:"kueue.x-k8s.io/resource-in-use"': {}}}}


@pytest.mark.parametrize(("entries", "ours"), [
    ([entry("geosched", SPEC)], True),
    # Kueue's controllers: the status, and the finalizer it holds an object in use by.
    ([entry("geosched", SPEC), entry("kueue", {"f:status": {"f:conditions": {}}}, "status"),
      entry("kueue", FINALIZER)], True),
    # An owner's edit (kubectl edit, apply, patch): the object is the owner's too.
    ([entry("geosched", SPEC), entry("kubectl-edit", {"f:spec": {"f:nodeLabels": {"f:team": {}}}})], False),
    ([entry("kubectl", SPEC)], False),
    # A finalizer and a label in one write is more than a controller's hold.
    ([entry("geosched", SPEC), entry("kueue", {"f:metadata": {"f:finalizers": {}, "f:labels": {}}})], False),
    ([], False),  # a server that keeps no managedFields: not known to be geosched's
])
def test_a_queue_object_is_geosched_s_only_when_no_one_but_controllers_wrote_it_besides(
        entries: list[dict[str, Any]], ours: bool) -> None:
    assert provwatch.owned({"metadata": {"name": "q", "managedFields": entries}}) is ours


def test_a_store_from_before_intent_rows_keeps_its_requests_and_takes_intents(tmp_path: Path) -> None:
    """The migration that lets `prov_requests.state` be `intent` (issue 26) copies the table: a gang a store held
    before it reads back unchanged, and an intent can be journalled."""
    import sqlite3

    from geosched.store.db import DB_NAME, MIGRATIONS

    home = tmp_path / "old"
    with Store(home) as store:
        journal.create_gang(store, "g", journal.owner(store), GANG)
        a = journal.start_attempt(store, "g", CANDIDATE)
    db = sqlite3.connect(home / DB_NAME)
    # The table as the migration that made it left it, holding one provisioned row, at the schema version just
    # before the copy (found by content: other tables' migrations may come between them).
    made = next(i for i, m in enumerate(MIGRATIONS) if "CREATE TABLE prov_requests (" in m)
    copied = next(i for i, m in enumerate(MIGRATIONS) if "CREATE TABLE prov_requests_v2 (" in m)
    db.executescript("DROP TABLE prov_requests;" + MIGRATIONS[made] + ";"
                     "INSERT INTO prov_requests (gang, attempt, cluster, context, namespace, objects, requests, state, "
                     f"created_at, updated_at) VALUES ('g', {a.id}, 'c', 'c', 'ml', '[]', '[\"r\"]', 'provisioned', "
                     f"1.0, 1.0); PRAGMA user_version = {copied};")
    db.close()
    with Store(home) as store:
        assert store.schema_version == len(MIGRATIONS)
        [row] = provreqs.requests_of(store, "g")
        assert (row.state, row.requests, row.namespace) == ("provisioned", ("r",), "ml")
        intent = provreqs.intend(store, "g", a.id, cluster="c", context="c", kubeconfig=None, namespace="ml",
                                 objects=[provreqs.ObjectRef("batch/v1", "Job", "train", "ml")])
        assert intent.state == "intent" and [r.state for r in provreqs.open_requests(store, "g")] == [
            "provisioned", "intent"]


def test_down_of_an_intent_deletes_only_what_carries_geosched_s_mark_and_closes_the_journal(
        cluster: MultiCluster, store: Store) -> None:
    """Issue 26: a run killed between the zone's intent and its apply leaves a row naming objects that may not be
    geosched's: another team's Service of the same name (made with kubectl) is left and said; the Job geosched
    applied (server-side, its field manager) is deleted; the attempt the run left `started` is closed."""
    api = cluster["cluster-a"]
    api.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "train", "namespace": NS},
               "spec": {"selector": {"app": "search"}, "ports": [{"port": 8080}]}}, field_manager="kubectl")
    with Kube.open("cluster-a", cluster.kubeconfig) as kube:
        apply_object(kube, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": NS},
                            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                                {"name": "c", "image": "ghcr.io/example/train:1"}]}}}},
                     default_namespace=NS, retry=KUBE_RETRY)
    journal.create_gang(store, "g9", journal.owner(store), GANG, provisioning_request=True)
    a = journal.start_attempt(store, "g9", CANDIDATE)
    provreqs.intend(store, "g9", a.id, cluster="cluster-a", context="cluster-a", kubeconfig=None, namespace=NS,
                    objects=[provreqs.ObjectRef("batch/v1", "Job", "train", NS),
                             provreqs.ObjectRef("v1", "Service", "train", NS)])
    done = down(store, cluster, "g9")
    assert (done.state, done.deleted, done.errors) == ("terminated", 1, ())
    assert done.queue == ("Service train in namespace ml of cluster cluster-a left: not applied by geosched",)
    assert api.get("batch/v1/jobs", "train", NS) is None
    kept = api.get("v1/services", "train", NS)
    assert kept is not None and kept["spec"]["selector"] == {"app": "search"}
    assert [r.state for r in provreqs.requests_of(store, "g9")] == ["deleted"]
    assert [x.outcome for x in journal.attempts(store, "g9")] == ["cancelled"]


def test_a_gang_killed_before_its_first_intent_is_taken_down_without_asking_any_cloud(
        store: Store, tmp_path: Path) -> None:
    """The gang row says it is a ProvisioningRequest gang from its first write: `down` of a gang killed before its
    first prov_requests row does not take it for a machine gang (which asks the cloud's machine API)."""
    journal.create_gang(store, "g10", journal.owner(store), GANG, provisioning_request=True)
    journal.start_attempt(store, "g10", CANDIDATE)
    assert provreqs.is_request_gang(store, "g10")
    result = run(tmp_path / "home", "down", "g10", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)["items"]
    assert (row["gang"], row["state"], row["errors"]) == ("g10", "terminated", [])
    assert [x.outcome for x in journal.attempts(store, "g10")] == ["cancelled"]
