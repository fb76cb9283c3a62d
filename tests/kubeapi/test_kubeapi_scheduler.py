"""Scheduler mode against an emulated API server: whole gangs, one zone, faults, watches, two replicas."""

from __future__ import annotations

import time
from typing import Any

import pytest

from geosched.kube import keys
from geosched.kube.scheduler.pods import GANG_NOTE
from tests.kubeapi.kubeapi_support import (
    FAST_LEASE,
    REGIONS,
    Running,
    add_gang,
    add_nodes,
    gang_pod,
    nodes_of,
    pod_group,
    scheduler,
    settings,
    used_gpus,
    wait_until,
    zone_of_node,
)
from tests.kubeemu import EmulatedCluster, MultiCluster, pod_manifest

pytestmark = pytest.mark.integration
REGION = REGIONS["cluster-a"]


@pytest.fixture
def cluster(clusters: MultiCluster) -> EmulatedCluster:
    """cluster-a: zones a, b, c of 4 nodes x 8 GPUs."""
    add_nodes(clusters["cluster-a"], REGION, "abc", 4)
    return clusters["cluster-a"]


def all_bound(cluster: EmulatedCluster, pods: list[str]) -> bool:
    return all(nodes_of(cluster, pods).values())


def zones_of(cluster: EmulatedCluster, pods: list[str]) -> set[str]:
    return {zone_of_node(cluster, node) for node in nodes_of(cluster, pods).values() if node}


def owned_pod(name: str, owner: dict[str, Any], index: int, gpus: int = 8) -> dict[str, Any]:
    pod = pod_manifest(name, scheduler_name="geosched", gpus=gpus,
                       annotations={"batch.kubernetes.io/job-completion-index": str(index)})
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner["metadata"]["name"],
                                           "uid": owner["metadata"]["uid"], "controller": True}]
    return pod


def batch_job(cluster: EmulatedCluster, name: str, parallelism: int) -> dict[str, Any]:
    return cluster.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
                           "spec": {"parallelism": parallelism, "completions": parallelism,
                                    "completionMode": "Indexed",
                                    "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}})


def test_whole_gangs_bind_into_one_zone(clusters: MultiCluster, cluster: EmulatedCluster) -> None:
    # Another scheduler's pod already holds 6 GPUs of a node in zone a.
    cluster.add_pod("theirs", node_name=f"{cluster.name}-a0", phase="Running", gpus=6)
    big = add_gang(cluster, "big", 4)                                   # coscheduling PodGroup: 4 x 8
    owner = batch_job(cluster, "indexed", 3)                            # a Job's pods: 3 x 8
    indexed = [f"indexed-{i}" for i in range(3)]
    for i, name in enumerate(indexed):
        cluster.create(owned_pod(name, owner, i))
    cluster.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",   # Volcano: 2 x 4
                    "metadata": {"name": "vc", "namespace": "default"}, "spec": {"minMember": 2}})
    volcano = ["vc-0", "vc-1"]
    for name in volcano:
        cluster.add_pod(name, scheduler_name="geosched", gpus=4,
                        annotations={keys.VOLCANO_GROUP_NAME: "vc"})
    helper = add_gang(cluster, "withlauncher", 3, pods=2)                # 2 x 8 and a GPU-less launcher
    cluster.create(gang_pod("withlauncher-launcher", "withlauncher", gpus=0))
    helper.append("withlauncher-launcher")
    cluster.add_pod("alone", scheduler_name="geosched", gpus=2)
    cluster.add_pod("not-ours", gpus=8)                                 # default-scheduler's: left alone

    with scheduler(clusters) as running:
        gangs = {"big": big, "indexed": indexed, "vc": volcano, "withlauncher": helper, "alone": ["alone"]}
        wait_until(lambda: all(all_bound(cluster, pods) for pods in gangs.values()), what="every gang bound")
        stats = running.stats

    for name, pods in gangs.items():
        assert len(zones_of(cluster, pods)) == 1, f"gang {name} spans {zones_of(cluster, pods)}"
    assert all(used <= 8 for used in used_gpus(cluster).values()), used_gpus(cluster)
    assert nodes_of(cluster, ["not-ours"]) == {"not-ours": None}
    # Rank order: index 0 of the Job on the first placed node, and every bound pod says who placed it.
    pod = cluster.get("v1/pods", "indexed-0", "default")
    assert pod is not None and pod["metadata"]["annotations"][GANG_NOTE] == "default/job/indexed"
    assert stats.gangs_bound == 5 and stats.single_zone_gangs == 5 and stats.rollbacks == 0
    assert cluster.count("POST", r"/binding$", faulted=False) == 13
    events = [e for e in cluster.list("v1/events") if e["reason"] == "Scheduled"]
    assert len(events) == 13


def test_a_gang_waits_until_all_its_pods_exist(clusters: MultiCluster, cluster: EmulatedCluster) -> None:
    first = add_gang(cluster, "late", 4, pods=3)
    owner = batch_job(cluster, "slow", 3)
    cluster.create(owned_pod("slow-0", owner, 0))
    with scheduler(clusters) as running:
        wait_until(lambda: running.stats.cycles >= 3, what="a few cycles")
        time.sleep(0.5)  # real sleep: a negative check needs the real scheduler to run a while
        assert not any(nodes_of(cluster, [*first, "slow-0"]).values())  # nothing of an incomplete gang binds
        cluster.create(gang_pod("late-3", "late"))
        for i in (1, 2):
            cluster.create(owned_pod(f"slow-{i}", owner, i))
        wait_until(lambda: all_bound(cluster, [*first, "late-3", "slow-0", "slow-1", "slow-2"]), what="gangs whole")
    assert len(zones_of(cluster, [*first, "late-3"])) == 1


def test_node_affinity_and_taints_are_respected(clusters: MultiCluster, cluster: EmulatedCluster) -> None:
    add_nodes(cluster, REGION, "d", 2, prefix="tainted",
              taints=[{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}])
    pod_group(cluster, "pinned", 2)
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": keys.ZONE, "operator": "In", "values": [f"{REGION}-c"]}]}]}}}
    for i in range(2):
        pod = gang_pod(f"pinned-{i}", "pinned")
        pod["spec"]["affinity"] = affinity
        cluster.create(pod)
    pod_group(cluster, "tolerant", 2)
    for i in range(2):
        pod = gang_pod(f"tolerant-{i}", "tolerant")
        pod["spec"]["nodeSelector"] = {keys.ZONE: f"{REGION}-d"}
        pod["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
        cluster.create(pod)
    plain = add_gang(cluster, "plain", 4)
    with scheduler(clusters):
        wait_until(lambda: all_bound(cluster, ["pinned-0", "pinned-1", "tolerant-0", "tolerant-1", *plain]))
    assert zones_of(cluster, ["pinned-0", "pinned-1"]) == {f"{REGION}-c"}
    assert zones_of(cluster, ["tolerant-0", "tolerant-1"]) == {f"{REGION}-d"}
    assert not any(n.startswith("tainted") for n in nodes_of(cluster, plain).values() if n)


def test_a_transient_bind_failure_is_retried_in_place(clusters: MultiCluster, cluster: EmulatedCluster) -> None:
    pods = add_gang(cluster, "g", 4)
    cluster.inject(500, method="POST", path=r"/pods/g-2/binding$")  # the gang's third binding
    with scheduler(clusters) as running:
        wait_until(lambda: all_bound(cluster, pods))
    assert cluster.count("POST", r"/binding$", faulted=True) == 1
    assert running.stats.rollbacks == 0 and len(zones_of(cluster, pods)) == 1


def test_a_bind_that_keeps_failing_rolls_the_whole_gang_back(clusters: MultiCluster,
                                                             cluster: EmulatedCluster) -> None:
    pods = add_gang(cluster, "g", 4)
    originals = {name: cluster.get("v1/pods", name, "default") for name in pods}
    cluster.inject(500, method="POST", path=r"/pods/g-2/binding$", times=None)
    with scheduler(clusters) as running:
        wait_until(lambda: running.stats.rollbacks >= 1, what="a rollback")
        # The two pods bound before the failure were released (deleted for their controller to recreate) and
        # marked as a controller-visible disruption first; the others were never bound.
        wait_until(lambda: cluster.get("v1/pods", "g-0", "default") is None
                   and cluster.get("v1/pods", "g-1", "default") is None, what="released pods gone")
        history = cluster.emulator.objects["v1/pods", "default", "g-0"].history
        assert any(c["type"] == "DisruptionTarget" for v in history if v
                   for c in (v.get("status") or {}).get("conditions") or [])
        assert nodes_of(cluster, ["g-2", "g-3"]) == {"g-2": None, "g-3": None}
        time.sleep(0.5)  # real sleep: a negative check needs the real scheduler to run a while
        assert running.stats.rollbacks == 1  # incomplete now: it waits, it does not thrash

        # The fault clears and the Job controller (played by the test) recreates the deleted pods.
        cluster.clear_faults()
        for name in ("g-0", "g-1"):
            pod = originals[name]
            assert pod is not None
            cluster.create(gang_pod(name, "g"))
        wait_until(lambda: all_bound(cluster, pods), what="the gang bound whole, later")
    assert len(zones_of(cluster, pods)) == 1
    assert running.stats.gangs_bound == 1 and running.stats.pods_released == 2


def test_a_half_bound_gang_left_by_a_crash_is_completed_in_its_zone(clusters: MultiCluster,
                                                                   cluster: EmulatedCluster) -> None:
    pod_group(cluster, "g", 4)
    for i, node in enumerate([f"{cluster.name}-b0", f"{cluster.name}-b1"]):
        pod = gang_pod(f"g-{i}", "g")
        pod["spec"]["nodeName"] = node
        pod["metadata"]["annotations"] = {GANG_NOTE: "default/g"}
        cluster.create(pod)
    for i in (2, 3):
        cluster.create(gang_pod(f"g-{i}", "g"))
    with scheduler(clusters):
        wait_until(lambda: all_bound(cluster, ["g-2", "g-3"]))
    assert zones_of(cluster, [f"g-{i}" for i in range(4)]) == {f"{REGION}-b"}


def test_a_half_bound_gang_that_cannot_be_completed_is_released(clusters: MultiCluster,
                                                               cluster: EmulatedCluster) -> None:
    # Zone b is full apart from the two stranded pods' nodes, so the gang cannot be completed there.
    pod_group(cluster, "g", 4)
    for i in range(2):
        pod = gang_pod(f"g-{i}", "g")
        pod["spec"]["nodeName"] = f"{cluster.name}-b{i}"
        pod["metadata"]["annotations"] = {GANG_NOTE: "default/g"}
        cluster.create(pod)
    for i in (2, 3):
        cluster.add_pod(f"busy-{i}", node_name=f"{cluster.name}-b{i}", phase="Running", gpus=8)
        cluster.create(gang_pod(f"g-{i}", "g"))
    with scheduler(clusters) as running:
        wait_until(lambda: running.stats.pods_released == 2, what="the stranded pods released")
    assert cluster.get("v1/pods", "g-0", "default") is None and cluster.get("v1/pods", "g-1", "default") is None
    assert nodes_of(cluster, ["g-2", "g-3"]) == {"g-2": None, "g-3": None}


def test_the_scheduler_relists_after_a_dropped_watch_and_a_410(clusters: MultiCluster,
                                                             cluster: EmulatedCluster) -> None:
    with scheduler(clusters) as running:
        pending = next(r for r in running.scheduler.reflectors if r.kind == "pending")
        wait_until(pending.synced.is_set)
        cluster.wait_for_watches(2, "pods")
        lists = pending.lists
        assert cluster.drop_watches("pods") == 2
        wait_until(lambda: pending.lists > lists, what="a fresh list after the drop")
        first = add_gang(cluster, "after-drop", 2)
        wait_until(lambda: all_bound(cluster, first))

        # History compacted past the watch's resourceVersion: the watch gets 410 and the reflector lists again.
        cluster.wait_for_watches(2, "pods")
        lists = pending.lists
        cluster.add_pod("noise")
        cluster.compact()
        cluster.drop_watches("pods")
        wait_until(lambda: pending.lists > lists, what="a fresh list after 410")
        second = add_gang(cluster, "after-410", 2)
        wait_until(lambda: all_bound(cluster, second))
    assert len(zones_of(cluster, first)) == 1 and len(zones_of(cluster, second)) == 1


def lease_holder(cluster: EmulatedCluster) -> str | None:
    lease = cluster.get("coordination.k8s.io/v1/leases", FAST_LEASE.name, FAST_LEASE.namespace)
    return (lease or {}).get("spec", {}).get("holderIdentity") or None


def test_two_replicas_only_the_leader_binds_and_the_other_takes_over(clusters: MultiCluster,
                                                                    cluster: EmulatedCluster) -> None:
    one = Running(clusters, "cluster-a", settings(), "replica-1", release_on_stop=False).start()
    wait_until(lambda: lease_holder(cluster) == "replica-1", what="replica-1 leads")
    two = Running(clusters, "cluster-a", settings(), "replica-2").start()
    try:
        wait_until(lambda: two.scheduler.cache.nodes_version > 0, what="replica-2 synced")
        first = add_gang(cluster, "first", 4) + add_gang(cluster, "second", 3)
        wait_until(lambda: all_bound(cluster, first))
        time.sleep(0.5)  # real sleep: a negative check needs both real replicas to run a while
        assert (one.stats.pods_bound, two.stats.pods_bound) == (7, 0)
        assert not two.scheduler.leading()

        # replica-1 dies without releasing the lease: replica-2 waits out the lease, then takes over.
        stopped = time.monotonic()
        one.stop()
        wait_until(lambda: lease_holder(cluster) == "replica-2", timeout=10, what="replica-2 leads")
        assert time.monotonic() - stopped >= FAST_LEASE.lease_duration_s - FAST_LEASE.retry_period_s
        later = add_gang(cluster, "later", 2)
        wait_until(lambda: all_bound(cluster, later))
    finally:
        if one.thread.is_alive():
            one.stop()
        two.stop()
    assert two.stats.pods_bound == 2 and one.stats.pods_bound == 7
    # Never bound twice: one binding request per pod, and the server refused none as already assigned.
    bindings = [r for r in cluster.requests if r.method == "POST" and r.path.endswith("/binding")]
    assert len(bindings) == 9 and all(r.status == 201 for r in bindings)


def test_a_clean_stop_hands_the_lease_over_at_once(clusters: MultiCluster, cluster: EmulatedCluster) -> None:
    slow = settings(leader_election=FAST_LEASE.__class__(namespace="geosched-system", lease_duration_s=30,
                                                         renew_deadline_s=20, retry_period_s=0.25))
    one = Running(clusters, "cluster-a", slow, "replica-1").start()
    wait_until(lambda: lease_holder(cluster) == "replica-1")
    two = Running(clusters, "cluster-a", slow, "replica-2").start()
    try:
        time.sleep(0.5)  # real sleep: replica-2 must be waiting on the lease (real time) first
        one.stop()  # releases the lease
        wait_until(lambda: lease_holder(cluster) == "replica-2", timeout=5, what="a takeover well before 30 s")
        pods = add_gang(cluster, "g", 2)
        wait_until(lambda: all_bound(cluster, pods))
    finally:
        two.stop()


def test_a_lease_in_a_missing_namespace_says_so(clusters: MultiCluster, cluster: EmulatedCluster,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """Issue 21 item 12: the cause (the namespace does not exist), once, not a replica that silently never leads."""
    from dataclasses import replace

    from geosched.kube.client import Kube
    from geosched.kube.scheduler.lease import LeaderElector, LeaseError

    election = replace(FAST_LEASE, namespace="nowhere")
    with Kube.open("cluster-a", clusters.kubeconfig) as kube:
        elector = LeaderElector(kube, election, "replica-1")
        with pytest.raises(LeaseError, match="namespace nowhere does not exist"):
            elector.try_acquire_or_renew()
    one = Running(clusters, "cluster-a", settings(leader_election=election), "replica-1").start()
    try:
        wait_until(lambda: any("namespace nowhere does not exist" in r.getMessage() for r in caplog.records))
        time.sleep(3 * election.retry_period_s)  # real sleep: a few of the elector's real retry periods
    finally:
        one.stop()
    said = [r for r in caplog.records if "namespace nowhere does not exist" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "ERROR"


def test_a_gang_past_its_deadline_is_bound_and_told_so(clusters: MultiCluster, cluster: EmulatedCluster) -> None:
    """Pods that declare a 6 h run due in 2000 (geosched.io/runtime, geosched.io/deadline): bound at once, as any
    gang, with a Warning Event on each pod saying the deadline cannot be kept (before: bound without a word)."""
    pod_group(cluster, "overdue", 2)
    notes = {"annotations": {"geosched.io/runtime": "6h", "geosched.io/deadline": "2000-01-01T00:00:00Z"}}
    pods = ["overdue-0", "overdue-1"]
    for name in pods:
        cluster.create(gang_pod(name, "overdue", extra=notes))
    with scheduler(clusters):
        wait_until(lambda: all_bound(cluster, pods) and len([e for e in cluster.list("v1/events")
                                                             if e["reason"] == "DeadlineMissed"]) == 2,
                   what="the gang bound and told")
    missed = [e for e in cluster.list("v1/events") if e["reason"] == "DeadlineMissed"]
    assert {e["involvedObject"]["name"] for e in missed} == set(pods)
    assert all(e["type"] == "Warning" and "cannot finish by its deadline 2000-01-01T00:00Z: it starts now"
               in e["message"] for e in missed)


def test_a_refused_gang_that_is_deleted_leaves_the_loop_idle(clusters: MultiCluster,
                                                            cluster: EmulatedCluster) -> None:
    """A gang refused once and then deleted (the job cancelled: the commonest end of a gang that does not fit) kept
    its requeue wait, whose end was soon in the past: the loop slept until the "soonest" wait, at least 10 ms, so it
    ran ~30 cycles a second for as long as the scheduler lived (attack5), against one a second idle. Compared with
    the idle rate measured in the same run, not a fixed number."""

    def rate() -> float:
        before, at = running.stats.cycles, time.monotonic()
        time.sleep(2.0)  # real sleep: the cycle rate is what is measured, over real time
        return (running.stats.cycles - before) / (time.monotonic() - at)

    with scheduler(clusters) as running:
        wait_until(lambda: running.stats.cycles >= 2, what="a few cycles")
        idle = rate()
        big = add_gang(cluster, "toobig", 20)  # 160 GPUs on a cluster of 96
        wait_until(lambda: running.stats.refusals >= 1, what="the gang refused")
        for name in big:
            cluster.delete("v1/pods", name, "default")
        cluster.delete("scheduling.x-k8s.io/v1alpha1/podgroups", "toobig", "default")
        time.sleep(1.5)  # real sleep: past the refused gang's wait (backoff_max_s 1 s), when the spinning began
        after = rate()
    assert after <= 3 * idle + 1.0, (idle, after)


def test_a_watch_that_keeps_answering_an_error_is_listed_again_on_the_backoff(clusters: MultiCluster,
                                                                              cluster: EmulatedCluster) -> None:
    """Every watch answered with an in-stream ERROR event: an API server whose watch cache is behind the list's
    resourceVersion does this (kubernetes/kubernetes#91073, "Too large resource version", an HA control plane
    behind a load balancer), as does one whose history is always compacted past it. The reflector listed again at
    once, with no wait, each time: a whole-cluster pod LIST in a tight loop, against a server already in trouble
    (attack5; client-go's reflector waits on its backoff manager between lists, 800 ms doubling to 30 s). Here the
    emulator's history is held past every list's resourceVersion, and the lists in two seconds are counted: the
    RECONNECT backoff (0.5 s doubling) allows each of the five reflectors a few, not hundreds."""
    with scheduler(clusters) as running:
        wait_until(lambda: all(r.synced.is_set() for r in running.scheduler.reflectors), what="synced")
        # Every watch from a list's resourceVersion is now older than the floor: 410 in the stream, then closed.
        cluster.call(lambda: setattr(cluster.store, "compacted_rv", cluster.store.rv + 10_000))
        cluster.drop_watches()
        before = sum(r.lists for r in running.scheduler.reflectors)
        time.sleep(2.0)  # real sleep: how often the reflectors list again is what is counted, over real time
        relists = sum(r.lists for r in running.scheduler.reflectors) - before
        cluster.call(lambda: setattr(cluster.store, "compacted_rv", cluster.store.rv))
        bound = add_gang(cluster, "after-errors", 2)
        wait_until(lambda: all_bound(cluster, bound), what="the gang bound once the watches work again")
    assert relists <= 5 * 4, relists


def test_what_the_scheduler_keeps_of_a_deleted_jobs_gang_is_forgotten(clusters: MultiCluster,
                                                                      cluster: EmulatedCluster,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The size of each pending pod's owning Job is cached for OWNER_TTL_S, by the owner's UID; the entries were never
    dropped, so a scheduler that ran for months held one for every Job it ever saw pending (attack5). The cache's
    lifetime is shortened here so the test need not wait 30 s; the rule under test is the dropping."""
    from geosched.kube.scheduler import loop

    monkeypatch.setattr(loop, "OWNER_TTL_S", 0.3)
    owner = batch_job(cluster, "toolarge", 20)  # 20 x 8 GPUs on a cluster of 96: refused, its pods stay pending
    for i in range(20):
        cluster.create(owned_pod(f"toolarge-{i}", owner, i))
    with scheduler(clusters) as running:
        wait_until(lambda: running.stats.refusals >= 1, what="the gang refused")
        assert owner["metadata"]["uid"] in running.scheduler._owners
        for i in range(20):
            cluster.delete("v1/pods", f"toolarge-{i}", "default")
        cluster.delete("batch/v1/jobs", "toolarge", "default")
        cluster.add_pod("wake", scheduler_name="geosched", gpus=1)  # a change: the loop runs a cycle at once
        wait_until(lambda: not running.scheduler._owners and not running.scheduler.requeue._waits,
                   what="the deleted Job's entries dropped")
