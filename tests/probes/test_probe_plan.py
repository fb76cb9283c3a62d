"""Probe plans: full mesh, the O(N + Z^2) sampled plan, its rotation, and throughput pairs."""

from __future__ import annotations

from itertools import combinations

from hypothesis import given, settings
from hypothesis import strategies as st

from geosched.core.models import pair_key
from geosched.probes.plan import FULL_MESH_MAX_NODES, PlanNode, by_zone, full_mesh, make_plan, sampled
from geosched.probes.settings import PlanKind


def fleet(sizes: dict[str, int]) -> list[PlanNode]:
    return [PlanNode(f"{z}-{i}", z) for z, n in sizes.items() for i in range(n)]


def zone_pair(nodes: list[PlanNode], a: str, b: str) -> tuple[str, str]:
    zone = {n.name: n.zone for n in nodes}
    return pair_key(zone[a], zone[b])


def test_full_mesh_is_every_pair_once() -> None:
    nodes = fleet({"a": 3, "b": 2})
    pairs = full_mesh(nodes, run=3)
    assert len(pairs) == 10
    assert {pair_key(*p) for p in pairs} == {pair_key(a.name, b.name) for a, b in combinations(nodes, 2)}


def test_auto_is_full_for_small_fleets_and_sampled_for_large() -> None:
    assert make_plan(fleet({"a": FULL_MESH_MAX_NODES})).kind is PlanKind.FULL
    assert make_plan(fleet({"a": FULL_MESH_MAX_NODES, "b": 1})).kind is PlanKind.SAMPLED


def test_sampled_24_hosts_6_zones_is_a_quarter_of_full_mesh() -> None:
    nodes = fleet({f"z{i}": 4 for i in range(6)})
    pairs = sampled(nodes, run=0, per_zone_pair=2)
    # Rings of 4 in 6 zones + 2 per zone pair.
    assert len(pairs) == 6 * 4 + 2 * 15
    assert len(pairs) <= len(full_mesh(nodes)) / 4
    assert len({pair_key(*p) for p in pairs}) == len(pairs)
    per_zone_pair: dict[tuple[str, str], int] = {}
    for a, b in pairs:
        key = zone_pair(nodes, a, b)
        per_zone_pair[key] = per_zone_pair.get(key, 0) + 1
    assert all(count == (4 if key[0] == key[1] else 2) for key, count in per_zone_pair.items())
    assert len(per_zone_pair) == 6 + 15


def test_rotation_covers_every_node_as_a_representative() -> None:
    nodes = fleet({"a": 5, "b": 3, "c": 4})
    seen: set[str] = set()
    rings = set()
    for run in range(3):  # ceil(5 / 2) runs with 2 representatives per zone pair
        pairs = sampled(nodes, run=run, per_zone_pair=2)
        seen |= {n for p in pairs if zone_pair(nodes, *p)[0] != zone_pair(nodes, *p)[1] for n in p}
        rings.add(frozenset(pair_key(*p) for p in pairs if zone_pair(nodes, *p) == ("a", "a")))
    assert seen == {n.name for n in nodes}
    assert len(rings) > 1  # ring neighbours change between runs


def test_throughput_pairs_one_per_zone_pair_from_the_echo_pairs() -> None:
    nodes = fleet({"a": 3, "b": 2, "c": 1})
    plan = make_plan(nodes, PlanKind.SAMPLED, run=1)
    assert set(plan.throughput_pairs) <= set(plan.echo_pairs)
    keys = [zone_pair(nodes, *p) for p in plan.throughput_pairs]
    assert sorted(keys) == sorted(set(keys))
    assert set(keys) == {("a", "a"), ("b", "b"), ("a", "b"), ("a", "c"), ("b", "c")}
    window = make_plan(nodes, PlanKind.SAMPLED, run=0, throughput_zone_pairs_per_run=2)
    assert len(window.throughput_pairs) == 2
    covered = set()
    for run in range(3):
        plan = make_plan(nodes, PlanKind.SAMPLED, run=run, throughput_zone_pairs_per_run=2)
        covered |= {zone_pair(nodes, *p) for p in plan.throughput_pairs}
    assert len(covered) == 5
    assert make_plan(nodes, throughput_per_zone_pair=0).throughput_pairs == ()


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=8),
       run=st.integers(min_value=0, max_value=50), k=st.integers(min_value=1, max_value=3))
def test_sampled_plan_properties(sizes: list[int], run: int, k: int) -> None:
    nodes = fleet({f"z{i}": n for i, n in enumerate(sizes)})
    pairs = sampled(nodes, run=run, per_zone_pair=k)
    keys = [pair_key(*p) for p in pairs]
    assert len(set(keys)) == len(keys)
    assert all(a != b for a, b in pairs)
    n, z = len(nodes), len(sizes)
    assert len(pairs) <= n + k * z * (z - 1) // 2
    # Every node is measured whenever it has anyone to be measured against.
    if n > 1:
        assert {x for p in pairs for x in p} == {x.name for x in nodes}
    zones = by_zone(nodes)
    for za, zb in combinations(sorted(zones), 2):
        expected = min(k, len(zones[za]) * len(zones[zb]))
        assert sum(1 for p in pairs if zone_pair(nodes, *p) == pair_key(za, zb)) == expected
    assert sampled(nodes, run=run, per_zone_pair=k) == pairs  # pure and deterministic
