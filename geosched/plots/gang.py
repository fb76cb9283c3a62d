"""Where a placed gang sits, zone by zone, and the ring's hops between its zones. Pure: models in, values out.

The ring runs zone by zone, region by region, in the order the scorer lays it out (`policies.scoring.ring`:
regions by key, zones by name), so a gang in n > 2 zones crosses n zone boundaries, each once each way, and a
gang in two zones crosses the one boundary both ways. A hop's RTT is the zone pair's p50 from the network view
(None when the view has no such link). The bounding hop is the node pair `Score.hop` names: the zone hop between
its two zones, or a hop inside one zone (then `bounding_zone`); its figures are that node pair's, from the score.
"""

from __future__ import annotations

from dataclasses import dataclass

from geosched.core.models import Fleet, NetworkView, Placement


@dataclass(frozen=True, slots=True)
class GangZone:
    zone: str
    region: str
    provider: str
    workers: int
    nodes: int


@dataclass(frozen=True, slots=True)
class ZoneHop:
    a: str
    b: str
    rtt_ms: float | None
    bounding: bool


@dataclass(frozen=True, slots=True)
class GangMap:
    zones: tuple[GangZone, ...]  # in ring order
    hops: tuple[ZoneHop, ...]
    bounding_zone: str | None  # the bounding hop runs inside this zone
    bound: str  # the bounding hop in words: nodes and their link, from the score


def gang_map(placement: Placement, fleet: Fleet, network: NetworkView) -> GangMap:
    workers: dict[str, int] = {}
    nodes: dict[str, int] = {}
    for assignment in placement.assignments:
        workers[assignment.zone] = workers.get(assignment.zone, 0) + assignment.workers
        nodes[assignment.zone] = nodes.get(assignment.zone, 0) + 1
    order = sorted(workers, key=lambda z: (fleet.zones[z].region_key, z))
    zones = tuple(GangZone(z, fleet.zones[z].region, fleet.zones[z].provider, workers[z], nodes[z]) for z in order)
    score = placement.score
    hop_zones: tuple[str, str] | None = None
    if score.hop is not None:
        ends = [fleet.by_name[n].zone for n in score.hop if n in fleet.by_name]
        if len(ends) == 2:
            hop_zones = (ends[0], ends[1])
    pairs = list(zip(order, order[1:] + order[:1], strict=True)) if len(order) > 2 else (
        [(order[0], order[1])] if len(order) == 2 else [])
    hops = []
    for a, b in pairs:
        link = network.zone_link(a, b)
        bounding = hop_zones is not None and {a, b} == set(hop_zones) and a != b
        hops.append(ZoneHop(a, b, None if link is None else link.rtt_p50_ms, bounding))
    inside = hop_zones[0] if hop_zones is not None and hop_zones[0] == hop_zones[1] else None
    if score.hop is None:
        bound = "one node: no network hop"
    else:
        bound = (f"bounding hop {score.hop[0]} -> {score.hop[1]}:\nRTT {score.worst_rtt_ms:.3g} ms, "
                 f"loss {score.worst_loss:.2%}, {score.min_throughput_gbps:.3g} Gbit/s")
    return GangMap(zones, tuple(hops), inside, bound)
