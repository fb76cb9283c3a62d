"""geosched as MultiKueue's external dispatcher, end to end on emulated clusters over HTTP.

A manager cluster (Kueue's CRDs from their published schemas, a MultiKueue ClusterQueue, AdmissionCheck,
MultiKueueConfig, MultiKueueClusters with kubeconfig Secrets) and three worker clusters:

| worker | nodes (8 x H100 each) | where | $/h per node | grid gCO2e/kWh | measured intra-zone link |
|---|---|---|---|---|---|
| worker1 | 3, 1 busy | GKE us-central1-a, a3-highgpu-8g | 43.07 | 413 | healthy |
| worker2 | 8 | GKE europe-north1-c, a3-highgpu-8g | 96.71 | 39 | 2% loss, 5 Gbit/s |
| worker3 | 8, 2 busy | EKS us-east-1a (use1-az1), p5.48xlarge | 98.32 | 379 | healthy |

Prices and grids are the shipped catalog's; the links are the measured network view handed to the dispatcher.
"""

from __future__ import annotations

import copy
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from geosched.cli.main import app as cli_app
from geosched.core.models import LinkStats, NetworkView
from geosched.kube.client import Kube
from geosched.kube.multikueue.dispatcher import Dispatcher
from geosched.kube.multikueue.metrics import Metrics
from geosched.kube.multikueue.settings import DispatcherSettings
from geosched.kube.scheduler import fixed
from geosched.kube.scheduler.events import EventSink
from geosched.kube.scheduler.settings import LeaderElection
from geosched.store.db import Store
from tests.clock import FakeClock
from tests.kube.kube_support import validate_manifest
from tests.kubeapi.kubeapi_support import FAST_LEASE, wait_until
from tests.kubeapi.multikueue_support import (
    SITES,
    V1B1,
    admit,
    copies,
    kueue_status,
    kueue_world,
    multikueue_sync,
    reserve_quota,
    seeded,
    validatable,
    workload,
)
from tests.kubeemu import MultiCluster, pod_manifest

WORKERS = tuple(SITES)
NETWORK = NetworkView(zone_links={
    ("us-central1-a", "us-central1-a"): LinkStats(0.3, 0.5, 0.0, 100.0, samples=40),
    ("europe-north1-c", "europe-north1-c"): LinkStats(0.4, 0.9, 0.02, 5.0, samples=40),
    ("use1-az1", "use1-az1"): LinkStats(0.3, 0.5, 0.0, 100.0, samples=40),
})
SETTINGS = DispatcherSettings(renominate_after_s=60.0, refresh_s=10.0, stale_after_s=30.0,
                              leader_election=LeaderElection(enabled=False))
STATUS = r"/workloads/[^/]+/status$"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[MultiCluster]:
    with kueue_world(tmp_path, SITES) as mc:
        yield mc


@pytest.fixture
def kube(world: MultiCluster) -> Iterator[Kube]:
    with Kube.open("manager", world.kubeconfig) as k:
        yield k


def dispatcher(world: MultiCluster, clock: FakeClock, settings: DispatcherSettings = SETTINGS,
               **kw: Any) -> Dispatcher:
    return Dispatcher(Kube.open("manager", world.kubeconfig), settings, network=fixed(NETWORK), clock=clock, **kw)


def pending(world: MultiCluster, kube: Kube, name: str, pods: int, gpus: int = 8, **kw: Any) -> dict[str, Any]:
    wl = seeded(world["manager"], workload(name, pods, gpus, **kw))
    return reserve_quota(kube, wl)


def status(world: MultiCluster, name: str) -> dict[str, Any]:
    found = world["manager"].get("kueue.x-k8s.io/v1beta2/workloads", f"job-{name}-3f9a2", "default")
    assert found is not None
    return found


def events_of(world: MultiCluster, name: str) -> list[dict[str, Any]]:
    return [e for e in world["manager"].list("v1/events", "default")
            if e["involvedObject"]["name"] == f"job-{name}-3f9a2"]


def test_nominates_the_cluster_geosched_chose_and_says_why(world: MultiCluster, kube: Kube, tmp_path: Path) -> None:
    pending(world, kube, "big", 4)     # 32 GPUs: worker1 has 2 free nodes; worker2's link loses 2%
    pending(world, kube, "small", 1)   # one node: the cheapest cluster
    with Store(tmp_path / "home") as store, dispatcher(world, FakeClock(), recorder=store.record_placements) as d:
        written = d.pass_once()
        placements = store.placements()
    assert sorted(written) == ["default/job-big-3f9a2", "default/job-small-3f9a2"]
    big, small = status(world, "big"), status(world, "small")
    assert big["status"]["nominatedClusterNames"] == ["worker3"]
    assert small["status"]["nominatedClusterNames"] == ["worker1"]
    # Kueue's quota reservation survives our write (the whole admission status re-applied, as Kueue does) ...
    assert [c["type"] for c in big["status"]["conditions"]] == ["QuotaReserved"]
    assert big["status"]["admission"]["clusterQueue"] == "cluster-queue"
    # ... under the field manager Kueue's docs require, on the status subresource.
    owners = {(m["manager"], m["operation"], m.get("subresource")) for m in big["metadata"]["managedFields"]}
    assert owners == {("kueue-admission", "Apply", "status")}
    validate_manifest(validatable(big))
    # kubectl describe workload: the choice, every score term, the others and why worker1 could not.
    (event,) = events_of(world, "big")
    assert event["reason"] == "Nominated" and event["type"] == "Normal"
    assert "nominated worker3" in event["message"]
    assert "x network" in event["message"] and "x cost" in event["message"] and "x carbon" in event["message"]
    assert "others: worker2" in event["message"]
    assert "worker1: the largest pool holds 2 of 4 workers" in event["message"]
    assert {(p["job"], p["cluster"]) for p in placements} == {("job-big-3f9a2", "worker3"),
                                                              ("job-small-3f9a2", "worker1")}


def test_nominates_the_k_best_that_hold_it(world: MultiCluster, kube: Kube) -> None:
    pending(world, kube, "big", 4)
    with dispatcher(world, FakeClock(), replace(SETTINGS, nominate=3)) as d:
        d.pass_once()
    assert status(world, "big")["status"]["nominatedClusterNames"] == ["worker3", "worker2"]


def test_capacity_nominated_is_held_for_the_next_workload(world: MultiCluster, kube: Kube) -> None:
    pending(world, kube, "first", 4)
    pending(world, kube, "second", 4)   # worker3 has 6 free nodes: after the first, only worker2 holds it
    with dispatcher(world, FakeClock()) as d:
        d.pass_once()
    assert status(world, "first")["status"]["nominatedClusterNames"] == ["worker3"]
    # worker3's free nodes are held for the first: the best the second finds is worker2, whose lossy link runs it
    # far slower than worker3 would, so it waits for a healthy ring (zone-first's patience) instead of going there.
    assert not status(world, "second").get("status", {}).get("nominatedClusterNames")
    (event,) = events_of(world, "second")
    assert event["reason"] == "Waiting" and event["message"].startswith("worker2: waiting for a healthy ring")


def test_renominates_after_timeout_and_stops_after_admission(world: MultiCluster, kube: Kube) -> None:
    pending(world, kube, "big", 4)
    clock = FakeClock()
    with dispatcher(world, clock) as d:
        d.pass_once()
        assert status(world, "big")["status"]["nominatedClusterNames"] == ["worker3"]
        clock.advance(59)
        assert d.pass_once() == ()
        clock.advance(2)
        assert d.pass_once() == ("default/job-big-3f9a2",)
        assert status(world, "big")["status"]["nominatedClusterNames"] == ["worker3", "worker2"]
        wait_until(lambda: len(events_of(world, "big")) == 2, what="the Renominated event")  # sent on its own thread
        assert sorted(e["reason"] for e in events_of(world, "big")) == ["Nominated", "Renominated"]
        admitted = admit(kube, status(world, "big"), "worker2")
        assert admitted["status"]["clusterName"] == "worker2"
        world["manager"].clear_requests()
        for _ in range(3):
            clock.advance(120)
            assert d.pass_once() == ()
    assert world["manager"].count("PATCH", STATUS) == 0
    assert "nominatedClusterNames" not in status(world, "big")["status"]


def test_worker_cluster_that_disappears_is_left_out(world: MultiCluster, kube: Kube) -> None:
    clock = FakeClock()
    with dispatcher(world, clock) as d:
        d.pass_once()
        world["worker3"].stop()
        clock.advance(15)  # a read is due, fails; the last good one is 15 s old: still usable
        pending(world, kube, "early", 1)
        d.pass_once()
        clock.advance(20)  # 35 s since the last good read, limit 30 s
        pending(world, kube, "big", 4)
        d.pass_once()
    assert status(world, "big")["status"]["nominatedClusterNames"] == ["worker2"]
    (event,) = events_of(world, "big")
    assert "worker3: left out, unreachable for 35s, longer than its staleness limit of 30s" in event["message"]


def test_leaves_alone_what_is_not_its_own(world: MultiCluster, kube: Kube) -> None:
    m = world["manager"]
    local = seeded(m, workload("local", 1, 8))
    reserve_quota(kube, local, queue="local-only", checks=())          # not a MultiKueue queue
    seeded(m, workload("queued", 1, 8))                                # no quota reservation yet
    admitted = pending(world, kube, "done", 1)
    admit(kube, admitted, "worker1")                                  # already admitted
    m.clear_requests()
    with dispatcher(world, FakeClock()) as d:
        assert d.pass_once() == ()
    assert m.count("PATCH", STATUS) == 0


def test_does_nothing_while_kueue_names_another_dispatcher(world: MultiCluster, kube: Kube) -> None:
    m = world["manager"]
    config = m.get("v1/configmaps", "kueue-manager-config", "kueue-system")
    assert config is not None
    config["data"]["controller_manager_config.yaml"] = (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "multiKueue:\n  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental\n")
    m.apply(config)
    pending(world, kube, "big", 4)
    m.clear_requests()
    with dispatcher(world, FakeClock()) as d:
        assert d.pass_once() == ()
    assert m.count("PATCH", STATUS) == 0


def test_two_replicas_only_the_leader_writes(world: MultiCluster, kube: Kube) -> None:
    settings = replace(SETTINGS, leader_election=FAST_LEASE)
    replicas = [Dispatcher(Kube.open("manager", world.kubeconfig), settings, network=fixed(NETWORK),
                           identity=f"replica-{i}") for i in range(2)]
    stops = [threading.Event() for _ in replicas]
    threads = []
    for d, stop in zip(replicas, stops, strict=True):
        d.__enter__()
        t = threading.Thread(target=d.run, args=(stop,), daemon=True)
        t.start()
        threads.append(t)
    try:
        for name in ("a", "b", "c"):
            pending(world, kube, name, 1)
        wait_until(lambda: all(status(world, n)["status"].get("nominatedClusterNames") for n in "abc"),
                   timeout=20, what="three nominations")
        # The status lands on the server before the writer's thread counts it (its metrics follow the answer):
        # wait for the count too, or a loaded machine reads it in between.
        wait_until(lambda: sum(d.metrics.stats.outcomes["nominated"] for d in replicas) >= 3, timeout=20,
                   what="three nominations counted")
        decided = [d.metrics.stats.outcomes["nominated"] for d in replicas]
        assert sorted(decided) == [0, 3], decided
        leader = decided.index(3)
        # The leader stops; the other takes over and nominates the next Workload.
        stops[leader].set()
        # Wait for the old leader to be gone before the next Workload exists: on a loaded machine a pass can take
        # seconds, and a leader still finishing one may nominate "d" itself (then the successor has nothing to do).
        threads[leader].join(60)
        assert not threads[leader].is_alive(), "the stopped leader did not stop"
        pending(world, kube, "d", 1)
        wait_until(lambda: status(world, "d")["status"].get("nominatedClusterNames"), timeout=20,
                   what="the successor's nomination")
        wait_until(lambda: replicas[1 - leader].metrics.stats.outcomes["nominated"] >= 1, timeout=20,
                   what="the successor's nomination counted")
        assert replicas[1 - leader].metrics.stats.outcomes["nominated"] == 1
    finally:
        for d, stop, t in zip(replicas, stops, threads, strict=True):
            stop.set()
            t.join(10)
            d.__exit__(None, None, None)


def test_a_new_leader_keeps_the_round_the_old_one_began(world: MultiCluster, kube: Kube) -> None:
    # Leader A nominates and re-nominates, then gives up the Lease; B takes it 40 s after A's last write. B's round
    # is the one A began (the API server's managedFields time of the status apply), so B adds the next cluster
    # 60 s after A's write, not 60 s after B first saw it, and one not tried yet (the Workload's own list).
    # A hands the Lease over by releasing it, so its duration is not under test: a long one keeps A the leader
    # between its two passes on a machine so loaded that a renewal takes longer than FAST_LEASE's 1.4 s deadline
    # (seen once, in a CI run at load 12 on 2 cores: A's second pass nominated nothing).
    settings = replace(SETTINGS, leader_election=replace(FAST_LEASE, lease_duration_s=30.0, renew_deadline_s=20.0))
    pending(world, kube, "pair", 2)   # 16 GPUs: every worker holds it
    clock = FakeClock()
    with dispatcher(world, clock, settings, identity="replica-a") as a:
        a.run_once()
        clock.advance(61)
        a.run_once()
    tried = status(world, "pair")["status"]["nominatedClusterNames"]
    assert len(tried) == 2
    written = datetime.now(UTC)   # A's last apply landed before this (the server records whole seconds)
    b_clock = FakeClock()
    # B's wall clock runs 40 s after A's write, and on with B's own clock.
    with dispatcher(world, b_clock, settings, identity="replica-b",
                    wall=lambda: written + timedelta(seconds=40 + b_clock.now - 1000.0)) as b:
        assert b.run_once() == ()
        b_clock.advance(15)               # 55 s since A's write
        assert b.run_once() == ()
        b_clock.advance(7)                # 62 s: the round A began is over (a full new round would wait to 100 s)
        assert b.run_once() == ("default/job-pair-3f9a2",)
    after = status(world, "pair")["status"]["nominatedClusterNames"]
    assert after[:2] == tried and sorted(after) == sorted(WORKERS)
    assert b.metrics.stats.outcomes["renominated"] == 1


def test_a_later_kueue_write_under_the_same_manager_makes_a_new_leader_late_never_early(world: MultiCluster,
                                                                                     kube: Kube) -> None:
    # Kueue applies the admission status as kueue-admission too (an admission check's message here, the names
    # carried as its prepareWorkloadPatch carries them): the managedFields time is then Kueue's, so B's round
    # counts from that write, later than A's nomination.
    pending(world, kube, "pair", 2)
    with dispatcher(world, FakeClock(), replace(SETTINGS, leader_election=FAST_LEASE), identity="replica-a") as a:
        a.run_once()
    time.sleep(2.1)  # the server records whole seconds: A's time is at least a second before Kueue's
    wl = status(world, "pair")
    checks = [{**c, "message": "The workload got reservation on worker1"} for c in wl["status"]["admissionChecks"]]
    kueue_status(kube, wl, {**wl["status"], "admissionChecks": checks})
    kueue_wrote = datetime.now(UTC)
    clock = FakeClock()
    with dispatcher(world, clock, identity="replica-b",
                    wall=lambda: kueue_wrote + timedelta(seconds=40 + clock.now - 1000.0)) as b:
        assert b.pass_once() == ()
        clock.advance(19.5)   # 59.5 s after Kueue's write, over 60 s after A's: not yet
        assert b.pass_once() == ()
        clock.advance(2)
        assert b.pass_once() == ("default/job-pair-3f9a2",)


def test_metrics_endpoint_counts_decisions(world: MultiCluster, kube: Kube) -> None:
    pending(world, kube, "big", 4)
    metrics = Metrics()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    metrics.serve(port)

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            return str(answer.read().decode())

    # The manager refuses the Event (a role without events/create): dropped, counted, and exported.
    world["manager"].inject(403, method="POST", path=r"/events$")
    try:
        with dispatcher(world, FakeClock(), metrics=metrics) as d:
            assert "geosched_multikueue_events_dropped_total 0.0" in scrape()
            d.pass_once()
            assert d.events is not None
            wait_until(lambda: d.events is not None and d.events.dropped == 1, what="the refused Event")
            text = scrape()
    finally:
        metrics.close()
    assert 'geosched_multikueue_decisions_total{outcome="nominated"} 1.0' in text
    assert "geosched_multikueue_decision_seconds_count 1.0" in text
    assert 'geosched_multikueue_worker_clusters{state="usable"} 3.0' in text
    assert "geosched_multikueue_events_dropped_total 1.0" in text


def test_cli_once_records_in_the_store(world: MultiCluster, kube: Kube, tmp_path: Path) -> None:
    pending(world, kube, "big", 4)
    result = CliRunner().invoke(cli_app, ["--home", str(tmp_path / "home"), "multikueue", "dispatch", "--once",
                                          "--context", "manager", "--kubeconfig", str(world.kubeconfig)])
    assert result.exit_code == 0, result.output
    assert "nominated 1 Workload(s)" in result.stderr
    # Without measurements the shipped network model: worker2's and worker3's links are both healthy and worker2 is
    # 1.6% cheaper; worker3 is the tighter fit (6 free nodes against 8), which the capacity-aware choice keeps
    # among near-equal options (policies/capacity.py), leaving worker2 whole for a larger gang.
    assert status(world, "big")["status"]["nominatedClusterNames"] == ["worker3"]
    with Store(tmp_path / "home") as store:
        assert [(p["job"], p["cluster"]) for p in store.placements()] == [("job-big-3f9a2", "worker3")]
    lease = world["manager"].get("coordination.k8s.io/v1/leases", "geosched-multikueue", "geosched-system")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""  # held for the pass, then released


def test_cli_once_refuses_beside_a_leader(world: MultiCluster, kube: Kube) -> None:
    world["manager"].create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                             "metadata": {"name": "geosched-multikueue", "namespace": "geosched-system"},
                             "spec": {"holderIdentity": "replica-0", "leaseDurationSeconds": 15}})
    pending(world, kube, "big", 4)
    result = CliRunner().invoke(cli_app, ["multikueue", "dispatch", "--once", "--no-record", "--context", "manager",
                                          "--kubeconfig", str(world.kubeconfig)])
    assert result.exit_code == 1, result.output
    assert "another dispatcher holds the Lease geosched-system/geosched-multikueue" in result.stderr
    assert "nominatedClusterNames" not in status(world, "big")["status"]


def test_cli_once_names_a_missing_lease_namespace(world: MultiCluster, kube: Kube) -> None:
    """Issue 21 item 12: a Lease in a namespace that does not exist was reported as another dispatcher holding it."""
    pending(world, kube, "big", 4)
    result = CliRunner().invoke(cli_app, ["multikueue", "dispatch", "--once", "--no-record", "--context", "manager",
                                          "--kubeconfig", str(world.kubeconfig), "--lease-namespace", "nowhere"])
    assert result.exit_code == 1, result.output
    assert "another dispatcher" not in result.stderr
    assert "namespace nowhere does not exist" in result.stderr and result.stderr.strip().count("\n") == 0
    assert 'namespaces "nowhere" not found' in result.stderr  # the API server's own words
    assert "nominatedClusterNames" not in status(world, "big")["status"]


def test_cli_once_names_a_lease_rbac_denial(world: MultiCluster, kube: Kube) -> None:
    pending(world, kube, "big", 4)
    world["manager"].inject(403, method="POST", path=r"/leases$", times=None,
                            message='leases.coordination.k8s.io is forbidden: User "system:serviceaccount:geosched-'
                                    'system:geosched-multikueue" cannot create resource "leases" in API group '
                                    '"coordination.k8s.io" in the namespace "geosched-system"')
    result = CliRunner().invoke(cli_app, ["multikueue", "dispatch", "--once", "--no-record", "--context", "manager",
                                          "--kubeconfig", str(world.kubeconfig)])
    assert result.exit_code == 1, result.output
    assert "another dispatcher" not in result.stderr
    assert "forbidden" in result.stderr and 'cannot create resource "leases"' in result.stderr


def test_cli_bad_config_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "dispatcher.yaml"
    config.write_text("dispatcher_name: kueue.x-k8s.io/multikueue-dispatcher-incremental\n", encoding="utf-8")
    result = CliRunner().invoke(cli_app, ["multikueue", "dispatch", "--once", "--context", "x", "--config",
                                          str(config)])
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0
    assert str(config) in result.stderr and "dispatcher_name" in result.stderr


def test_a_manager_that_serves_only_v1beta1(tmp_path: Path) -> None:
    """Kueue before v1beta2: MultiKueueCluster spec.kubeConfig, ClusterQueue spec.admissionChecks, v1beta1 paths."""
    with kueue_world(tmp_path, SITES, api=V1B1) as mc, Kube.open("manager", mc.kubeconfig) as kube:
        reserve_quota(kube, seeded(mc["manager"], workload("big", 4, 8, api=V1B1)))
        assert mc["manager"].count("GET", r"/apis/kueue.x-k8s.io/v1beta2/workloads") == 0
        with dispatcher(mc, FakeClock()) as d:
            assert d.api_version == V1B1
            assert d.pass_once() == ("default/job-big-3f9a2",)
        found = mc["manager"].get("kueue.x-k8s.io/v1beta1/workloads", "job-big-3f9a2", "default")
        assert found is not None
        assert found["status"]["nominatedClusterNames"] == ["worker3"]
        assert [c["type"] for c in found["status"]["conditions"]] == ["QuotaReserved"]
        assert found["metadata"]["managedFields"][0]["apiVersion"] == V1B1
        validate_manifest(validatable(found))


def test_what_it_cannot_place_it_says_once(world: MultiCluster, kube: Kube) -> None:
    odd = workload("odd", 2, 8)
    odd["spec"]["podSets"].append(copy.deepcopy(odd["spec"]["podSets"][0]) | {"name": "aux", "count": 1})
    odd["spec"]["podSets"][1]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "4"}, "requests": {"nvidia.com/gpu": "4"}}
    reserve_quota(kube, seeded(world["manager"], odd))
    pending(world, kube, "huge", 64)  # 512 GPUs: more than any worker has free
    clock = FakeClock()
    with dispatcher(world, clock) as d:
        for _ in range(3):
            assert d.pass_once() == ()
            clock.advance(61)
    (said,) = events_of(world, "odd")
    assert (said["reason"], said["type"]) == ("NotNominated", "Warning")
    assert "not a gang geosched can place" in said["message"] and "same number of GPUs" in said["message"]
    (said,) = events_of(world, "huge")
    assert said["message"].startswith("no worker cluster holds the gang; worker1: the largest pool holds 2 of 64")
    assert "worker2: the largest pool holds 8 of 64" in said["message"]
    assert "nominatedClusterNames" not in status(world, "huge")["status"]


def test_a_worker_that_forbids_reading_its_nodes_is_left_out_saying_what_to_grant(world: MultiCluster,
                                                                                   kube: Kube) -> None:
    world["worker3"].inject(403, method="GET", path=r"/api/v1/nodes$", times=None,
                            message='nodes is forbidden: User "system:serviceaccount:kueue-system:multikueue-sa" '
                                    'cannot list resource "nodes" in API group "" at the cluster scope')
    pending(world, kube, "big", 4)
    with dispatcher(world, FakeClock()) as d:
        d.pass_once()
    assert status(world, "big")["status"]["nominatedClusterNames"] == ["worker2"]
    (event,) = events_of(world, "big")
    assert "worker3: left out, not read yet (403 nodes is forbidden" in event["message"]
    assert "must list nodes and pods: deploy/multikueue/worker" in event["message"]


def test_the_context_is_rebuilt_only_when_a_worker_changed(world: MultiCluster) -> None:
    clock = FakeClock()
    with dispatcher(world, clock) as d:
        d.pass_once()
        first = d.workers.version
        clock.advance(11)  # every worker read again, nothing changed
        d.pass_once()
        assert d.workers.version == first
        world["worker1"].add_pod("tenant-0", node_name="worker1-gpu-2", phase="Running", gpus=8)
        clock.advance(11)
        d.pass_once()
        assert d.workers.version == first + 1


def test_multikueue_sends_the_workload_only_where_geosched_chose(world: MultiCluster, kube: Kube) -> None:
    """End to end with a stand-in for MultiKueue's copying (multikueue_sync, after Kueue's workload.go)."""
    pending(world, kube, "big", 4)
    clock = FakeClock()
    with dispatcher(world, clock) as d:
        d.pass_once()
        multikueue_sync(world, kube, WORKERS)
        assert copies(world, "big", WORKERS) == ["worker3"]
        clock.advance(61)  # worker3 has not admitted it: the next best is added, and MultiKueue copies it there
        d.pass_once()
        multikueue_sync(world, kube, WORKERS)
        assert copies(world, "big", WORKERS) == ["worker2", "worker3"]
        world["worker2"].set_status("kueue.x-k8s.io/v1beta2/workloads", "job-big-3f9a2", {"conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
             "lastTransitionTime": "2026-12-03T08:05:00Z"}]}, "default")
        multikueue_sync(world, kube, WORKERS)
        assert status(world, "big")["status"]["clusterName"] == "worker2"
        assert copies(world, "big", WORKERS) == ["worker2"]
        world["manager"].clear_requests()
        clock.advance(1000)
        assert d.pass_once() == ()
    assert world["manager"].count("PATCH", STATUS) == 0


def test_events_never_wait_for_the_server_and_are_dropped_counted_when_it_lags(clusters: MultiCluster) -> None:
    # The server hangs on the first Event: its sender waits on it, the bounded queue (3) fills, and the rest are
    # dropped and counted; every emit returned while that request was still open (nothing sent yet).
    cluster = clusters["cluster-a"]
    cluster.inject(hang=2.0, method="POST", path=r"/events$")
    involved = {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "default", "uid": "u"}
    with Kube.open("cluster-a", clusters.kubeconfig) as kube:
        sink = EventSink(kube, "tester", capacity=3)
        sink.start()
        sink.emit_about(involved, "Tested", "event 0")
        wait_until(sink._queue.empty, what="the sender took the first Event")
        for i in range(1, 10):
            sink.emit_about(involved, "Tested", f"event {i}")
        assert (sink.sent, sink.dropped) == (0, 6)
        sink.close(timeout=10.0)
    assert (sink.sent, sink.dropped) == (4, 6)
    events = cluster.list("v1/events", "default")
    assert sorted(e["message"] for e in events) == ["event 0", "event 1", "event 2", "event 3"]
    # Named as client-go's recorder names them: the object's name, a dot, the time in nanoseconds in hex.
    assert all(re.fullmatch(r"p\.[0-9a-f]{15,16}", e["metadata"]["name"]) for e in events)


# GKE taints the nodes of GPU node pools so, and its ExtendedResourceToleration admission gives pods that request
# GPUs the toleration (cloud.google.com/kubernetes-engine/docs/how-to/gpus).
GKE_GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
DEDICATED = {"key": "dedicated", "value": "team-b", "effect": "NoSchedule"}


def taint(world: MultiCluster, cluster: str, *taints: dict[str, str]) -> None:
    for node in world[cluster].list("v1/nodes"):
        world[cluster].apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node["metadata"]["name"]},
                              "spec": {"taints": list(taints)}}, field_manager="test")


def test_gkes_own_gpu_taint_does_not_keep_a_gpu_gang_out(world: MultiCluster, kube: Kube) -> None:
    taint(world, "worker1", GKE_GPU_TAINT)
    pending(world, kube, "small", 1)
    with dispatcher(world, FakeClock()) as d:
        d.pass_once()
    assert status(world, "small")["status"]["nominatedClusterNames"] == ["worker1"]  # the cheapest, as untainted
    (event,) = events_of(world, "small")
    assert "cannot use" not in event["message"]


def test_nodes_with_a_taint_the_pods_do_not_tolerate_hold_nothing_for_them(world: MultiCluster, kube: Kube) -> None:
    taint(world, "worker1", GKE_GPU_TAINT, DEDICATED)
    pending(world, kube, "small", 1)
    tolerant = workload("tolerant", 1, 8)
    tolerant["spec"]["podSets"][0]["template"]["spec"]["tolerations"] = [
        {"key": "dedicated", "operator": "Equal", "value": "team-b", "effect": "NoSchedule"}]
    reserve_quota(kube, seeded(world["manager"], tolerant))
    with dispatcher(world, FakeClock()) as d:
        d.pass_once()
    assert status(world, "small")["status"]["nominatedClusterNames"] != ["worker1"]
    (event,) = events_of(world, "small")
    assert "worker1: 3 of its nodes not counted: the pods cannot use them (taints" in event["message"]
    assert status(world, "tolerant")["status"]["nominatedClusterNames"] == ["worker1"]


def cpu_workload(name: str, gpus: int, cpu: str) -> dict[str, Any]:
    wl = workload(name, 1, gpus)
    for part in ("requests", "limits"):
        wl["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"][part]["cpu"] = cpu
    return wl


def test_a_node_without_cpu_left_for_a_worker_holds_nothing_for_it(world: MultiCluster, kube: Kube) -> None:
    # worker1's two free nodes (96 cores allocatable each) run tenants' CPU pods asking 80 cores: 16 left, not
    # the 32 a worker asks; its GPUs are free all the same.
    for i in (1, 2):
        tenant = pod_manifest(f"etl-{i}", node_name=f"worker1-gpu-{i}", phase="Running")
        tenant["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "80"}}
        world["worker1"].create(tenant)
    reserve_quota(kube, seeded(world["manager"], cpu_workload("small", 8, "32")))
    with dispatcher(world, FakeClock()) as d:
        d.pass_once()
    assert status(world, "small")["status"]["nominatedClusterNames"] != ["worker1"]
    (event,) = events_of(world, "small")
    assert "worker1: 2 of its nodes not counted: no room left for a worker's CPU or memory" in event["message"]


def test_the_cpu_of_a_held_gang_is_held_too(world: MultiCluster, kube: Kube) -> None:
    # Workers of 2 GPUs and 60 of 96 cores: one per node fits, whatever the GPUs say (8 per node). The gangs
    # decided first hold worker1's two free nodes' cores; the third goes elsewhere.
    for name in ("a", "b", "c"):
        reserve_quota(kube, seeded(world["manager"], cpu_workload(name, 2, "60")))
    with dispatcher(world, FakeClock()) as d:
        d.pass_once()
    first = {n: status(world, n)["status"]["nominatedClusterNames"][0] for n in ("a", "b", "c")}
    assert sorted(first.values()).count("worker1") == 2, first


def test_a_flexible_workload_is_nominated_in_its_window_never_after_its_deadline(world: MultiCluster,
                                                                                 kube: Kube) -> None:
    """Issue 24: a Workload whose pod template declares slack waits, unnominated, for the start hour the time-shift
    decision chooses on the real 2023 grids of its workers' regions (worker1 in SPP, worker3 in PJM), and is
    nominated then; one at its latest start is nominated at once."""
    from geosched.core.models import CarbonSignal
    from geosched.grid.carbon import GridInput
    from geosched.grid.formats import Basis
    from geosched.grid.shipped import shipped_series

    hourly = {"gcp:us-central1": dict(shipped_series("US-CENT-SWPP").hours),
              "aws:us-east-1": dict(shipped_series("US-MIDA-PJM").hours)}
    grid = GridInput(CarbonSignal({}, hourly), None, Basis.LIFECYCLE)
    wl = workload("flex", 2, 8)  # a deadline, not start-within: the emulator stamps its own creationTimestamp
    wl["spec"]["podSets"][0]["template"]["metadata"] = {"annotations": {
        "geosched.io/runtime": "3h", "geosched.io/deadline": "2023-06-24T09:00:00Z"}}
    reserve_quota(kube, seeded(world["manager"], wl))
    # A morning the forecaster (the same hour's 7-day mean and the last hour's departure) sees a greener hour ahead;
    # on the 24th, which the seasonal-naive forecaster held, it starts at once: a test of the path, not of a forecast.
    now = [datetime(2023, 6, 23, 6, tzinfo=UTC)]
    settings = replace(SETTINGS, weights=replace(SETTINGS.weights, carbon=1.0))
    with dispatcher(world, FakeClock(), settings, grid=grid, wall=lambda: now[0]) as d:
        assert d.pass_once() == ()
        assert "nominatedClusterNames" not in status(world, "flex").get("status", {})
        wait_until(lambda: any(e["reason"] == "Held" for e in events_of(world, "flex")), 10)
        (held,) = [e for e in events_of(world, "flex") if e["reason"] == "Held"]
        assert held["type"] == "Normal" and "held for a greener grid: starts at 2023-06-2" in held["message"]
        start = re.search(r"starts at (\S+) in", held["message"])
        assert start is not None
        assert d.pass_once() == ()  # a pass before its hour: still held, said once
        assert len([e for e in events_of(world, "flex") if e["reason"] == "Held"]) == 1
        # At each chosen hour it is decided again (a fresher forecast; a later start must now save 10%): it may
        # wait once more, but it is nominated at the latest by its latest start, 06:00 on the 24th (3 h before the
        # deadline).
        written: tuple[str, ...] = ()
        for _ in range(5):
            now[0] = datetime.strptime(start.group(1), "%Y-%m-%dT%H:%MZ").replace(tzinfo=UTC)
            written = d.pass_once()
            if written:
                break
            start = re.search(r"starts at (\S+) in", d._said[status(world, "flex")["metadata"]["uid"]])
            assert start is not None
        assert written == ("default/job-flex-3f9a2",)
        assert datetime(2023, 6, 23, 7, tzinfo=UTC) <= now[0] <= datetime(2023, 6, 24, 6, tzinfo=UTC)
    assert status(world, "flex")["status"]["nominatedClusterNames"] == ["worker1"]
    assert d.metrics.stats.outcomes["held"] >= 2

    late = workload("late", 2, 8)  # its latest start, 05:00, has passed
    late["spec"]["podSets"][0]["template"]["metadata"] = {"annotations": {
        "geosched.io/runtime": "3h", "geosched.io/deadline": "2023-06-24T08:00:00Z"}}
    reserve_quota(kube, seeded(world["manager"], late))
    now[0] = datetime(2023, 6, 24, 6, 30, tzinfo=UTC)
    with dispatcher(world, FakeClock(), settings, grid=grid, wall=lambda: now[0]) as d:
        assert "default/job-late-3f9a2" in d.pass_once()
        # Nominated at once, and told that its 3 h run cannot end by 08:00 (before: not a word).
        wait_until(lambda: any(e["reason"] == "DeadlineMissed" for e in events_of(world, "late")), 10)
    (missed,) = [e for e in events_of(world, "late") if e["reason"] == "DeadlineMissed"]
    assert missed["type"] == "Warning" and "cannot finish by its deadline 2023-06-24T08:00Z: it starts now" in \
        missed["message"]


def test_a_gang_only_a_lossy_worker_holds_now_waits_for_a_healthy_ring_then_goes(world: MultiCluster,
                                                                                 kube: Kube) -> None:
    # 7 nodes: only worker2 (2% loss, 5 Gbit/s inside its zone) holds them now; worker3 would, were its 2 busy
    # nodes free. Zone-first's patience (policies/patience.py): not nominated, a Waiting Event saying why; its run
    # time undeclared, it waits an hour from the Workload's creationTimestamp, then goes where it fits.
    pending(world, kube, "seven", 7)
    created = datetime.fromisoformat(status(world, "seven")["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    with dispatcher(world, FakeClock(), wall=lambda: created + timedelta(minutes=10)) as d:
        assert d.pass_once() == ()
    assert not status(world, "seven").get("status", {}).get("nominatedClusterNames")
    (event,) = events_of(world, "seven")
    assert (event["reason"], event["type"]) == ("Waiting", "Normal")
    assert event["message"].startswith("worker2: waiting for a healthy ring: best now is ")
    assert "its run time unknown" in event["message"]
    with dispatcher(world, FakeClock(), wall=lambda: created + timedelta(minutes=61)) as d:
        d.pass_once()
    assert status(world, "seven")["status"]["nominatedClusterNames"] == ["worker2"]
