"""The pure parts: pods to gangs, one gang's decision, lease records, settings, job state, fleet building."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from geosched.core.errors import InputError
from geosched.core.models import Node
from geosched.kube import keys
from geosched.kube.cluster_inventory import DEFAULT_GRID_GCO2E_PER_KWH, fleet_from_nodes, network_for
from geosched.kube.objpath import At
from geosched.kube.scheduler.decide import Decision, Refusal, View, consume, decide
from geosched.kube.scheduler.gangs import PRESENT, group
from geosched.kube.scheduler.lease import LeaseRecord, next_record
from geosched.kube.scheduler.pods import fits, node_labels, pod_info, requirements
from geosched.kube.scheduler.settings import parse_settings
from geosched.kube.submit import job_state, placed_job
from geosched.kube.tolerations import Taint
from geosched.policies import PlacementContext
from tests.handmade import node


def pod(name: str, *, gpus: int = 8, labels: dict[str, str] | None = None, notes: dict[str, str] | None = None,
        owner: str | None = None, node_name: str | None = None, spec: dict[str, Any] | None = None,
        phase: str = "Pending", priority: int = 0, created: str = "2025-01-01T00:00:00Z") -> Any:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}", "labels": labels or {},
                            "annotations": notes or {}, "creationTimestamp": created}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": f"uid-{owner}",
                                    "controller": True}]
    body: dict[str, Any] = {"containers": [{"name": "c", "resources": {"limits": {keys.GPU: str(gpus)}}}],
                            "priority": priority, **(spec or {})}
    if node_name:
        body["nodeName"] = node_name
    return pod_info({"metadata": meta, "spec": body, "status": {"phase": phase}})


def test_gang_membership_precedence() -> None:
    both = pod("a", labels={keys.COSCHED_POD_GROUP: "g"}, notes={keys.VOLCANO_GROUP_NAME: "v"}, owner="j")
    assert (both.gang.source, str(both.gang)) == ("pod-group", "ml/g")
    assert pod("b", notes={keys.VOLCANO_GROUP_NAME: "v"}, owner="j").gang.source == "volcano"
    assert str(pod("c", owner="j").gang) == "ml/job/j"
    assert pod("d").gang.source == "pod"


def test_node_affinity_operators_and_taints() -> None:
    spec = At({"nodeSelector": {"team": "a"},
               "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                   {"matchExpressions": [{"key": keys.ZONE, "operator": "In", "values": ["z1"]},
                                         {"key": "gpus", "operator": "Gt", "values": ["4"]}]},
                   {"matchExpressions": [{"key": "spare", "operator": "Exists"}]}]}}},
               "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]},
              "pod")
    req = requirements(spec)
    assert fits(req, {"team": "a", keys.ZONE: "z1", "gpus": "8"}, ())
    assert not fits(req, {"team": "a", keys.ZONE: "z1", "gpus": "4"}, ())        # Gt is strict
    assert fits(req, {"team": "a", "spare": ""}, ())                             # second term
    assert not fits(req, {"team": "b", "spare": ""}, ())                         # nodeSelector ANDs with terms
    assert fits(req, {"team": "a", "spare": ""}, (Taint("dedicated", "ml", "NoSchedule"),))
    assert not fits(req, {"team": "a", "spare": ""}, (Taint("dedicated", "web", "NoSchedule"),))
    assert fits(req, {"team": "a", "spare": ""}, (Taint("x", "", "PreferNoSchedule"),))
    by_name = requirements(At({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}},
        "pod"))
    assert fits(by_name, node_labels({"metadata": {"name": "n1"}}), ())
    assert not fits(by_name, node_labels({"metadata": {"name": "n2", "labels": {"metadata.name": "n1"}}}), ())


def test_gangs_wait_for_their_size_and_serve_priority_then_age() -> None:
    pending = [pod(f"g-{i}", labels={keys.COSCHED_POD_GROUP: "g"}, created="2025-01-01T00:00:02Z") for i in range(3)]
    pending += [pod("old-0", owner="old", created="2025-01-01T00:00:01Z"), pod("urgent", priority=100,
                                                                              created="2025-01-01T00:00:09Z")]
    bound = [pod("g-3", labels={keys.COSCHED_POD_GROUP: "g"}, node_name="n1")]
    gangs = group(pending, bound, {("pod-group", "ml", "g"): 4}, {"uid-old": PRESENT})
    assert [str(g.key) for g in gangs] == ["ml/urgent", "ml/job/old", "ml/g"]
    assert all(g.ready for g in gangs)
    assert len(gangs[2].bound) == 1
    waiting = group(pending[:3], [], {("pod-group", "ml", "g"): 4}, {})
    assert not waiting[0].ready and waiting[0].waiting_for == "1 more pod(s) of 4"
    assert not group(pending[:3], [], {}, {})[0].ready  # PodGroup not seen yet: size unknown


def view(nodes: list[Node], taints: dict[str, tuple[Taint, ...]] | None = None) -> View:
    fleet, _, _ = fleet_from_nodes(nodes)
    ctx = PlacementContext(fleet, network_for(fleet))
    labels = [{keys.ZONE: n.zone, keys.HOSTNAME: n.name} for n in fleet.nodes]
    return View(ctx, ctx.gpus_free.copy(), labels, [(taints or {}).get(n.name, ()) for n in fleet.nodes])


def test_decide_places_the_whole_gang_in_one_zone_in_rank_order() -> None:
    v = view([node("a1", "za", gpus=8, cluster="c"), node("b1", "zb", cluster="c"), node("b2", "zb", cluster="c")])
    pods = [pod(f"w-{i}", labels={keys.COSCHED_POD_GROUP: "w"},
                notes={"batch.kubernetes.io/job-completion-index": str(i)}) for i in (1, 0)]
    launcher = pod("launcher", gpus=0, labels={keys.COSCHED_POD_GROUP: "w"})
    (gang,) = group([*pods, launcher], [], {("pod-group", "ml", "w"): 3}, {})
    decision = decide(gang, v)
    assert isinstance(decision, Decision) and decision.zones == ("zb",)
    assert [b.pod.name for b in decision.binds[:2]] == ["w-0", "w-1"]  # rank 0 on the first placed node
    assert decision.placement is not None and decision.binds[0].node == decision.placement.assignments[0].node
    assert {b.node for b in decision.binds[:2]} == {"b1", "b2"}
    assert decision.binds[2].pod.name == "launcher" and decision.binds[2].node in ("b1", "b2")
    after = consume(v, decision)
    assert int(after.free.sum()) == int(v.free.sum()) - 16
    # The same gang again does not fit on what is left in one zone plus a tainted node it does not tolerate.
    tainted = view([node("a1", "za", cluster="c"), node("a2", "za", cluster="c")],
                   {"a2": (Taint("k", "v", "NoSchedule"),)})
    refused = decide(gang, tainted)
    assert isinstance(refused, Refusal) and "no fit" in refused.reason


def test_decide_refuses_mixed_gpu_counts_and_releases_only_pending_members_it_bound() -> None:
    v = view([node("a1", "za", cluster="c")])
    mixed = group([pod("m-0", gpus=8, owner="m"), pod("m-1", gpus=4, owner="m")], [], {}, {"uid-m": 2})
    refusal = decide(mixed[0], v)
    assert isinstance(refusal, Refusal) and "different GPU counts" in refusal.reason
    stranded = [pod("s-1", owner="s", node_name="a1", notes={"geosched.io/gang": "ml/job/s"}),
                pod("s-2", owner="s", node_name="a1", phase="Running", notes={"geosched.io/gang": "ml/job/s"})]
    (gang,) = group([pod("s-0", owner="s")], stranded, {}, {"uid-s": 3})
    refusal = decide(gang, View(v.ctx, np.zeros(1, dtype=np.int64), v.labels, v.taints))
    assert isinstance(refusal, Refusal) and [p.name for p in refusal.release] == ["s-1"]  # never a running pod


def test_lease_records_keep_acquire_time_and_count_transitions() -> None:
    first = next_record(None, "r1", "t0", 15)
    assert (first.holder, first.acquire_time, first.transitions) == ("r1", "t0", 0)
    renewed = next_record(first, "r1", "t1", 15)
    assert (renewed.acquire_time, renewed.renew_time, renewed.transitions) == ("t0", "t1", 0)
    taken = next_record(LeaseRecord("r1", 15, "t0", "t1", 0), "r2", "t9", 15)
    assert (taken.holder, taken.acquire_time, taken.transitions) == ("r2", "t9", 1)


def test_settings_are_strict() -> None:
    parsed = parse_settings({"namespaces": ["ml"], "weights": {"carbon": 1.0},
                             "leader_election": {"lease_duration_s": 30, "renew_deadline_s": 20}}, "s.yaml")
    assert parsed.namespaces == ("ml",) and parsed.weights.carbon == 1.0
    assert parsed.leader_election.lease_duration_s == 30
    with pytest.raises(InputError, match="unknown field"):
        parse_settings({"schedulerName": "x"}, "s.yaml")
    with pytest.raises(InputError, match="lease_duration_s"):
        parse_settings({"leader_election": {"lease_duration_s": 5, "renew_deadline_s": 10}}, "s.yaml")
    with pytest.raises(InputError, match="unknown policy"):
        parse_settings({"policy": "best"}, "s.yaml")


@pytest.mark.parametrize(("status", "spec", "state"), [
    ({"conditions": [{"type": "Complete", "status": "True"}]}, {}, "Succeeded"),
    ({"conditions": [{"type": "Failed", "status": "True"}, {"type": "Running", "status": "True"}]}, {}, "Failed"),
    ({"conditions": [{"type": "Running", "status": "True"}]}, {}, "Running"),
    ({"conditions": [{"type": "Suspended", "status": "False"}]}, {"suspend": True}, "Suspended"),
    ({"active": 2}, {}, "Running"),
    ({}, {}, "Pending"),
])
def test_job_state(status: dict[str, Any], spec: dict[str, Any], state: str) -> None:
    assert job_state({"status": status, "spec": spec}) == state


def test_only_objects_with_provenance_are_placed_jobs() -> None:
    assert placed_job("c", "Job", {"metadata": {"name": "x", "labels": {keys.JOB_LABEL: "x"}}}) is None
    row = placed_job("c", "Job", {"metadata": {"name": "x", "namespace": "ml", "annotations": {
        "geosched.io/cluster": "c", "geosched.io/zones": "z1,z2", "geosched.io/policy": "zone-first"}}})
    assert row is not None and row.zones == ("z1", "z2") and row.state == "Pending"


def test_fleet_building_declares_regions_and_skips_contradicting_zones() -> None:
    nodes = [node("n1", "z1", "mars-1", provider="onprem", cluster="c", price=None),  # unpriced
             node("n2", "z1", "mars-2", provider="onprem", cluster="c")]
    fleet, skipped, notes = fleet_from_nodes(nodes)
    assert [n.name for n in fleet.nodes] == ["n1"] and skipped[0].subject == "n2"
    assert fleet.regions["onprem:mars-1"].grid_gco2e_per_kwh == DEFAULT_GRID_GCO2E_PER_KWH
    assert fleet.by_name["n1"].price_ondemand is not None and fleet.by_name["n1"].price_ondemand > 0
    assert any("world-average" in n for n in notes) and any("without a catalog price" in n for n in notes)
