"""Fleets for replays. `sized_fleet`: a trace written for a 100-GPU cluster replayed on 4,000 GPUs queues
nothing, so placement would not matter; the replay needs a fleet of the size the trace was written for.
`geo_fleet`: where the mission lives, several clusters in several regions with measured, uneven links."""

from __future__ import annotations

import random
from dataclasses import replace

from geosched.core import catalog, netmodel
from geosched.core.default_fleet import catalog_node, degraded_nics, node_links
from geosched.core.models import Fleet, LinkStats, NetworkView, Node, Zone, pair_key

# Gavel's experiments ran on 108 GPUs; 14 nodes of 8 is the nearest whole number of 8-GPU nodes.
GAVEL_NODES = 14


def sized_fleet(fleet: Fleet, nodes: int, cluster: str, gpu: str) -> Fleet:
    """`nodes` nodes of one cluster's `gpu` model, all free, dealt round-robin over its zones (deterministic)."""
    by_zone: dict[str, list[Node]] = {}
    for n in fleet.nodes:
        if n.cluster == cluster and n.gpu == gpu:
            by_zone.setdefault(n.zone, []).append(n)
    available = sum(len(v) for v in by_zone.values())
    if available < nodes:
        raise ValueError(f"cluster {cluster} has {available} {gpu} nodes, not {nodes}")
    picked: list[Node] = []
    while len(picked) < nodes:
        for zone in sorted(by_zone):
            if by_zone[zone] and len(picked) < nodes:
                node = by_zone[zone].pop(0)
                picked.append(replace(node, gpus_free=node.gpus))
    zones = {n.zone: fleet.zones[n.zone] for n in picked}
    regions = {z.region_key: fleet.regions[z.region_key] for z in zones.values()}
    return Fleet(regions=regions, zones=zones, nodes=tuple(picked), gpu_power=fleet.gpu_power)


# The shipped geo fleet: three clusters in three regions of two clouds, eight zones of different sizes, all
# 8 x H100 nodes at the shipped catalog's prices for their zone. 300 nodes (2,400 GPUs) is the size of one
# of Acme's LLM clusters (Hu et al., NSDI'24: 4,704 A100s in two clusters), the cluster the `llm` workload's
# statistics come from. Zone sizes are weights: `geo_fleet(nodes=N)` scales them.
GEO_ZONES: tuple[tuple[str, str, str, str, int], ...] = (
    # provider, region, zone, instance type, nodes of 300
    ("aws", "us-east-1", "use1-az1", "p5.48xlarge", 60),
    ("aws", "us-east-1", "use1-az2", "p5.48xlarge", 45),
    ("aws", "us-east-1", "use1-az4", "p5.48xlarge", 25),
    ("gcp", "us-central1", "us-central1-a", "a3-highgpu-8g", 50),
    ("gcp", "us-central1", "us-central1-b", "a3-highgpu-8g", 35),
    ("gcp", "us-central1", "us-central1-c", "a3-highgpu-8g", 20),
    ("aws", "eu-north-1", "eun1-az1", "p5.48xlarge", 40),
    ("aws", "eu-north-1", "eun1-az2", "p5.48xlarge", 25),
)
# The geo fleet's shape over three US regions whose grid zones have shipped 2023 series (geosched/data/carbon):
# us-east-1 in PJM (steady), us-central1 in SPP (wind), us-west-2 in PacifiCorp West (hydro, wind and solar), by
# Electricity Maps' data-centre map. For the time-shifting benchmark (benchmarks/bench_timeshift.py).
GEO_US_ZONES: tuple[tuple[str, str, str, str, int], ...] = (
    *GEO_ZONES[:6],
    ("aws", "us-west-2", "usw2-az1", "p5.48xlarge", 40),
    ("aws", "us-west-2", "usw2-az2", "p5.48xlarge", 25),
)
# Zone pairs whose measured link is far below the region's norm (netmodel.SAME_REGION: 1 ms, 25 Gbit/s):
# a congested or long inter-AZ path, as probes find them. Everything else is the shipped network model.
GEO_SLOW_PAIRS: dict[tuple[str, str], LinkStats] = {
    pair_key("use1-az1", "use1-az4"): LinkStats(rtt_p50_ms=4.0, rtt_p95_ms=9.0, loss=0.0, throughput_gbps=5.0,
                                                samples=10),
    pair_key("us-central1-a", "us-central1-c"): LinkStats(rtt_p50_ms=3.0, rtt_p95_ms=7.0, loss=0.001,
                                                          throughput_gbps=8.0, samples=10),
}
GEO_DEGRADED = 0.03
GEO_SEED = 11


def geo_fleet(nodes: int = 300, degraded: float = GEO_DEGRADED, seed: int = GEO_SEED,
              layout: tuple[tuple[str, str, str, str, int], ...] = GEO_ZONES, slow_pairs: bool = True,
              ) -> tuple[Fleet, NetworkView]:
    """The geo fleet and its measured network: `degraded` of the nodes (rounded, at least one when > 0) have
    a bad NIC (half slow, half lossy, as in the default fleet), the zone pairs of `GEO_SLOW_PAIRS` are slow,
    every other link is the shipped model. Deterministic for a seed; all GPUs free. `layout`: another layout of the
    same shape (`GEO_US_ZONES`: three US regions whose grids geosched ships hourly series of); `slow_pairs=False`
    leaves out the slow zone pairs (every link the shipped model)."""
    total = sum(w for *_, w in layout)
    offers = {(o.zone, o.instance_type): o for o in catalog.offerings() if o.price_ondemand}
    fleet_nodes: list[Node] = []
    for provider, region, zone, instance_type, weight in layout:
        offer = offers.get((zone, instance_type))
        if offer is None or (offer.provider, offer.region) != (provider, region):
            raise ValueError(f"the catalog has no {instance_type} in {zone}")
        fleet_nodes += [catalog_node(offer, i, offer.gpus) for i in range(max(1, round(nodes * weight / total)))]
    rng = random.Random(seed)
    count = max(1, round(degraded * len(fleet_nodes))) if degraded > 0 else 0
    bad = set(rng.sample([n.name for n in fleet_nodes], count))
    nics = degraded_nics(rng, [n for n in fleet_nodes if n.name in bad], 1.0)
    zones = {n.zone: Zone(n.zone, n.provider, n.region) for n in fleet_nodes}
    all_regions = catalog.regions()
    regions = {z.region_key: all_regions[z.region_key] for z in zones.values()}
    fleet = Fleet(regions=regions, zones=zones, nodes=tuple(fleet_nodes), gpu_power=catalog.gpu_power())
    zone_links = {**netmodel.zone_links(zones.values()), **(GEO_SLOW_PAIRS if slow_pairs else {})}
    return fleet, NetworkView(zone_links=zone_links, node_links=node_links(rng, fleet_nodes, nics))
