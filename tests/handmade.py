"""Small hand-made fleets and network views whose right answers can be worked out by hand (tests, benchmarks).
Here, not in geosched: test fixtures stay out of the product wheel (issue 25 item 4)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from geosched.core.catalog import gpu_power
from geosched.core.models import Fleet, LinkStats, NetworkView, Node, Region, Zone, pair_key, region_key

GOOD = LinkStats(rtt_p50_ms=0.2, rtt_p95_ms=0.3, loss=0.0, throughput_gbps=50.0)
SLOW = LinkStats(rtt_p50_ms=3.0, rtt_p95_ms=5.0, loss=0.0, throughput_gbps=4.0)
LOSSY = LinkStats(rtt_p50_ms=0.3, rtt_p95_ms=0.6, loss=0.01, throughput_gbps=40.0)
INTER_ZONE = LinkStats(rtt_p50_ms=1.0, rtt_p95_ms=1.5, loss=0.0, throughput_gbps=25.0)
INTER_REGION = LinkStats(rtt_p50_ms=60.0, rtt_p95_ms=70.0, loss=0.0, throughput_gbps=5.0)


def node(
    name: str,
    zone: str,
    region: str = "r1",
    *,
    provider: str = "lab",
    gpus: int = 8,
    free: int | None = None,
    gpu: str = "A100",
    price: float = 16.0,
    spot: float | None = None,
    cluster: str | None = None,
) -> Node:
    return Node(
        name=name,
        provider=provider,
        region=region,
        zone=zone,
        instance_type="custom",
        gpu=gpu,
        gpus=gpus,
        gpus_free=gpus if free is None else free,
        price_ondemand=price,
        price_spot=spot,
        cluster=cluster,
    )


def fleet(nodes: Iterable[Node], carbon: Mapping[str, float] | None = None) -> Fleet:
    items = tuple(nodes)
    regions = {}
    for n in items:
        key = region_key(n.provider, n.region)
        regions[key] = Region(n.provider, n.region, (carbon or {}).get(n.region, 400.0), 1.1)
    zones = {n.zone: Zone(n.zone, n.provider, n.region) for n in items}
    return Fleet(regions=regions, zones=zones, nodes=items, gpu_power=gpu_power())


def network(f: Fleet, node_links: Mapping[tuple[str, str], LinkStats] | None = None) -> NetworkView:
    """Same zone GOOD, same region INTER_ZONE, otherwise INTER_REGION; plus any node links given."""
    zones = sorted(f.zones.values(), key=lambda z: z.name)
    links = {}
    for i, a in enumerate(zones):
        for b in zones[i:]:
            if a.name == b.name:
                link = GOOD
            elif a.region_key == b.region_key:
                link = INTER_ZONE
            else:
                link = INTER_REGION
            links[pair_key(a.name, b.name)] = link
    return NetworkView(zone_links=links, node_links={pair_key(*k): v for k, v in (node_links or {}).items()})


def degrade(f: Fleet, bad: Mapping[str, LinkStats]) -> dict[tuple[str, str], LinkStats]:
    """Node links in which each node in `bad` shows its bad link to every zone peer, others are GOOD."""
    links: dict[tuple[str, str], LinkStats] = {}
    by_zone: dict[str, list[Node]] = {}
    for n in f.nodes:
        by_zone.setdefault(n.zone, []).append(n)
    for members in by_zone.values():
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                link = GOOD
                for end in (a.name, b.name):
                    if end in bad:
                        link = link.worst(bad[end])
                links[pair_key(a.name, b.name)] = link
    return links
