"""Which node pairs to measure in one run. Pure: nodes and a run number in, pairs out.

* full mesh: every unordered pair, N(N-1)/2 of them; for small fleets.
* sampled: O(N + Z^2). Inside each zone the nodes form a ring (each node measured against two peers,
  so a slow node shows against two different peers), and each zone pair gets `per_zone_pair`
  representative node pairs. The ring order and the representatives rotate with the run number, so
  over consecutive runs every node meets different peers and represents its zone in turn.
* throughput: iperf3 tests are seconds long and must not share a node or a zone-pair link, so they
  are always representative: `throughput_per_zone_pair` pairs per zone pair (intra-zone included),
  chosen among the echo pairs, optionally only a rotating window of zone pairs per run.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

from geosched.core.models import pair_key
from geosched.probes.settings import PlanKind

# Up to this many nodes a full mesh costs at most ~1.5x the sampled plan's pairs; past it, sampled wins.
FULL_MESH_MAX_NODES = 12

Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class PlanNode:
    name: str
    zone: str


@dataclass(frozen=True, slots=True)
class Plan:
    kind: PlanKind
    run: int
    echo_pairs: tuple[Pair, ...]
    throughput_pairs: tuple[Pair, ...]

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(n for pair in self.echo_pairs + self.throughput_pairs for n in pair)


def make_plan(nodes: Sequence[PlanNode], kind: PlanKind = PlanKind.AUTO, run: int = 0, *,
              per_zone_pair: int = 2, throughput_per_zone_pair: int = 1,
              throughput_zone_pairs_per_run: int | None = None) -> Plan:
    """Pairs are (source, destination): the echo runs on the source against the destination's address."""
    if per_zone_pair < 1 or throughput_per_zone_pair < 0:
        raise ValueError("per_zone_pair must be >= 1 and throughput_per_zone_pair >= 0")
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ValueError("duplicate node names in the plan")
    if kind is PlanKind.AUTO:
        kind = PlanKind.FULL if len(nodes) <= FULL_MESH_MAX_NODES else PlanKind.SAMPLED
    echo = full_mesh(nodes, run) if kind is PlanKind.FULL else sampled(nodes, run, per_zone_pair)
    tput = throughput_pairs(nodes, echo, run, throughput_per_zone_pair, throughput_zone_pairs_per_run)
    return Plan(kind=kind, run=run, echo_pairs=echo, throughput_pairs=tput)


def full_mesh(nodes: Sequence[PlanNode], run: int = 0) -> tuple[Pair, ...]:
    # Alternate the direction with the run so no node is always the one doing the sending.
    pairs = []
    for a, b in combinations(sorted(n.name for n in nodes), 2):
        pairs.append((a, b) if (run + zlib.crc32(f"{a}|{b}".encode())) % 2 == 0 else (b, a))
    return tuple(pairs)


def sampled(nodes: Sequence[PlanNode], run: int = 0, per_zone_pair: int = 2) -> tuple[Pair, ...]:
    zones = by_zone(nodes)
    order = sorted(zones)
    pairs: list[Pair] = []
    for zone in order:
        members = _rotated(zones[zone], run, zone)
        if len(members) == 2:
            pairs.append((members[0], members[1]))
        elif len(members) > 2:
            pairs += [(members[i], members[(i + 1) % len(members)]) for i in range(len(members))]
    index = {z: i for i, z in enumerate(order)}
    for za, zb in combinations(order, 2):
        a_nodes, b_nodes = zones[za], zones[zb]
        # Offsetting by the other zone's index spreads one zone's representatives over its nodes, so no
        # node carries all of its zone's inter-zone probes in one run.
        picks = _representatives(a_nodes, b_nodes, per_zone_pair, (run + index[zb]) * per_zone_pair,
                                 (run + index[za]) * per_zone_pair)
        pairs += [(a, b) if (run + j) % 2 == 0 else (b, a) for j, (a, b) in enumerate(picks)]
    return tuple(pairs)


def throughput_pairs(nodes: Sequence[PlanNode], echo: Iterable[Pair], run: int, per_zone_pair: int,
                     zone_pairs_per_run: int | None = None) -> tuple[Pair, ...]:
    if per_zone_pair == 0:
        return ()
    zone_of = {n.name: n.zone for n in nodes}
    candidates: dict[Pair, list[Pair]] = {}
    for a, b in echo:
        candidates.setdefault(pair_key(zone_of[a], zone_of[b]), []).append((a, b))
    keys = sorted(candidates)
    if zone_pairs_per_run is not None and 0 < zone_pairs_per_run < len(keys):
        start = (run * zone_pairs_per_run) % len(keys)
        keys = [keys[(start + i) % len(keys)] for i in range(zone_pairs_per_run)]
    chosen: list[Pair] = []
    load: dict[str, int] = {}
    for key in keys:
        options = candidates[key]
        # Rotated by run, then the least-loaded nodes first: tests on disjoint nodes can run side by side.
        rotated = [options[(run + i) % len(options)] for i in range(len(options))]
        for _ in range(min(per_zone_pair, len(options))):
            pick = min((p for p in rotated if p not in chosen), key=lambda p: load.get(p[0], 0) + load.get(p[1], 0))
            chosen.append(pick)
            for node in pick:
                load[node] = load.get(node, 0) + 1
    return tuple(chosen)


def _representatives(a_nodes: Sequence[str], b_nodes: Sequence[str], k: int, a_start: int,
                     b_start: int) -> list[Pair]:
    """k distinct (a, b) pairs: a diagonal walk from the rotated starts (distinct nodes on both sides while
    the zones have enough of them), then the rest of the product in rotated order."""
    a_order = [a_nodes[(a_start + i) % len(a_nodes)] for i in range(len(a_nodes))]
    b_order = [b_nodes[(b_start + i) % len(b_nodes)] for i in range(len(b_nodes))]
    picks: list[Pair] = []
    for j in range(max(len(a_order), len(b_order))):
        pair = (a_order[j % len(a_order)], b_order[j % len(b_order)])
        if len(picks) < k and pair not in picks:
            picks.append(pair)
    for a in a_order:
        for b in b_order:
            if len(picks) < k and (a, b) not in picks:
                picks.append((a, b))
    return picks


def by_zone(nodes: Iterable[PlanNode]) -> dict[str, list[str]]:
    zones: dict[str, list[str]] = {}
    for n in nodes:
        zones.setdefault(n.zone, []).append(n.name)
    return {z: sorted(members) for z, members in zones.items()}


def _rotated(members: Sequence[str], run: int, zone: str) -> list[str]:
    """The zone's ring for this run: a seeded shuffle, so ring neighbours change from run to run."""
    order = list(members)
    random.Random(run * 1_000_003 + zlib.crc32(zone.encode())).shuffle(order)
    return order
