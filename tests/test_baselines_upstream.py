"""`tas` and `karmada` follow the upstream rules they stand for, one test per rule (sources in their modules)."""

from __future__ import annotations

import pytest

from geosched.core.models import Job, NoFit, Placement
from geosched.policies import PlacementContext, place
from geosched.policies.karmada import fnv1a_32, webster
from tests.handmade import SLOW, degrade, fleet, network, node


def ctx_of(nodes, bad=None):
    f = fleet(nodes)
    return PlacementContext(f, network(f, degrade(f, bad or {})))


def run(policy, nodes, job, bad=None) -> Placement:
    result = place(job, ctx_of(nodes, bad), policy)
    assert isinstance(result, Placement), result
    return result


def taken(p: Placement) -> dict[str, int]:
    return {a.node: a.workers for a in p.assignments}


# --- tas: Kueue TAS, preferred topology, BestFit ------------------------------------------------------------

def test_tas_one_node_when_one_holds_the_gang_and_the_tightest_of_them():
    # workers of 2 GPUs: a0 holds 4, a1 holds 2, a2 holds 3; the gang of 2 fits on each, BestFit takes a1.
    nodes = [node("a0", "za", free=8), node("a1", "za", free=4), node("a2", "za", free=6)]
    assert taken(run("tas", nodes, Job("j", 2, 2))) == {"a1": 2}


def test_tas_one_zone_when_no_node_holds_it_and_the_fitting_zone_with_the_fewest_free_workers():
    nodes = ([node(f"a{i}", "za") for i in range(4)] + [node(f"b{i}", "zb") for i in range(2)]
             + [node(f"c{i}", "zc") for i in range(3)])
    assert run("tas", nodes, Job("j", 2, 8)).zones == ("zb",)


def test_tas_inside_a_domain_takes_the_roomiest_children_first_and_the_last_by_best_fit():
    # In workers of 2 GPUs: n0 4, n1 3, n3 2, n2 1. n0 first (4), then 2 more: n1 and n3 both hold them,
    # BestFit takes n3; fewest nodes, the tightest last.
    nodes = [node("n0", "za", free=8), node("n1", "za", free=6), node("n2", "za", free=2), node("n3", "za", free=4)]
    assert taken(run("tas", nodes, Job("j", 6, 2))) == {"n0": 4, "n3": 2}


def test_tas_goes_up_to_the_region_when_no_zone_holds_it_then_fewest_zones():
    nodes = ([node(f"a{i}", "za") for i in range(2)] + [node(f"b{i}", "zb") for i in range(3)]
             + [node("c0", "zc")])
    p = run("tas", nodes, Job("j", 4, 8))
    assert p.zones == ("zb", "zc")  # zb (3) first, the last worker by BestFit in zc (1), not za (2)


def test_tas_across_regions_only_when_no_region_holds_it():
    nodes = [node("a0", "za", "r1"), node("a1", "za", "r1"), node("b0", "zb", "r2"), node("c0", "zc", "r3")]
    assert run("tas", nodes, Job("j", 2, 8)).regions == ("lab:r1",)
    spanning = run("tas", nodes, Job("j", 3, 8))
    assert spanning.regions == ("lab:r1", "lab:r2")  # r1 (2) first, then the first of the equal BestFits


def test_tas_is_blind_to_measured_links():
    # za holds exactly the gang, one node with a slow NIC; zb has room to spare on clean nodes.
    nodes = [node(f"a{i}", "za") for i in range(3)] + [node(f"b{i}", "zb") for i in range(4)]
    p = run("tas", nodes, Job("j", 3, 8), bad={"a0": SLOW})
    assert "a0" in taken(p)
    assert "a0" not in taken(run("zone-first", nodes, Job("j", 3, 8), bad={"a0": SLOW}))


def test_tas_picks_the_cluster_that_holds_the_gang_at_the_lowest_level():
    nodes = ([node(f"x{i}", "zx", cluster="c-first", free=4) for i in range(4)]
             + [node("y0", "zy", cluster="c-second", free=8)])
    assert run("tas", nodes, Job("j", 2, 4)).cluster == "c-second"  # one node there, two nodes in c-first


# --- karmada: Divided, dynamic weight by available replicas -----------------------------------------------

def test_fnv1a_matches_go_hash_fnv():
    assert fnv1a_32(b"") == 0x811C9DC5
    assert fnv1a_32(b"a") == 0xE40C292C


@pytest.mark.parametrize(("seats", "expected"), [
    # Karmada's own table (pkg/util/helper/webstermethod_test.go, "classic example, round N").
    (1, {"PartyA": 1}),
    (3, {"PartyA": 2, "PartyB": 1}),
    (5, {"PartyA": 2, "PartyB": 2, "PartyC": 1}),
    (8, {"PartyA": 3, "PartyB": 3, "PartyC": 1, "PartyD": 1}),
])
def test_webster_seats_match_karmadas_table(seats, expected):
    votes = {"PartyA": 100000, "PartyB": 80000, "PartyC": 30000, "PartyD": 20000}
    assert webster(seats, votes, "") == expected


def test_webster_ties_follow_the_uid_hash_parity():
    odd = next(f"job-{k}" for k in range(100) if fnv1a_32(f"job-{k}".encode()) & 1)
    even = next(f"job-{k}" for k in range(100) if not fnv1a_32(f"job-{k}".encode()) & 1)
    assert webster(1, {"a": 2, "b": 2}, even) == {"a": 1}
    assert webster(1, {"a": 2, "b": 2}, odd) == {"b": 1}


def test_karmada_divides_the_gang_across_clusters_by_available_replicas():
    nodes = ([node(f"a{i}", "za", "r1", cluster="c1") for i in range(6)]
             + [node(f"b{i}", "zb", "r2", cluster="c2") for i in range(3)])
    p = run("karmada", nodes, Job("j", 3, 8))
    per_cluster = {"c1": 0, "c2": 0}
    for a in p.assignments:
        per_cluster["c1" if a.node.startswith("a") else "c2"] += a.workers
    assert per_cluster == {"c1": 2, "c2": 1}
    assert p.cluster is None and len(p.regions) == 2


def test_karmada_spreads_each_share_over_zones_like_the_default_scheduler():
    nodes = [node(f"{z}{i}", z, cluster="c1") for z in ("za", "zb", "zc") for i in range(2)]
    assert run("karmada", nodes, Job("j", 3, 8)).zones == ("za", "zb", "zc")


def test_karmada_is_unschedulable_when_available_replicas_fall_short():
    nodes = [node("a0", "za", cluster="c1"), node("b0", "zb", "r2", cluster="c2")]
    result = place(Job("j", 3, 8), ctx_of(nodes), "karmada")
    assert isinstance(result, NoFit)
    assert "not enough" in result.message
