"""The embedded default: a realistic multi-cloud fleet and its network view, built from the shipped data.

Deterministic (fixed seed) so that a placement on it is reproducible. Twelve regions over AWS and GCP with
their real GPU offerings and prices per zone; each region is one Kubernetes cluster (EKS or GKE); some nodes
are busy; a few have a slow or lossy NIC, which shows in their intra-zone measurements.

Each node carries the labels and providerID a node of that cloud really has (`geosched.core.nodelabels`): on
EKS the zone name in `topology.kubernetes.io/zone` and the zone ID in `topology.k8s.aws/zone-id`, GPU feature
discovery's product names, GKE's accelerator label. The fleet names AWS zones by ID (the catalog's and the
network's key); which name an ID has differs per AWS account, so the names here are one example account's
mapping (`EXAMPLE_AWS_ZONE_NAMES`), not a fact about yours: `snapshot export --from-clusters` reads yours from
your nodes, and the AWS provider from DescribeAvailabilityZones.
"""

from __future__ import annotations

import random
from functools import cache

from geosched import clouds
from geosched.clouds import CloudSpec
from geosched.core import catalog, netmodel
from geosched.core.models import Fleet, LinkStats, NetworkView, Node, Offering, Zone, pair_key
from geosched.core.nodelabels import cloud_labels, provider_id

REGIONS: tuple[tuple[str, str], ...] = (
    ("aws", "us-east-1"),
    ("aws", "us-east-2"),
    ("aws", "us-west-2"),
    ("aws", "eu-central-1"),
    ("aws", "eu-north-1"),
    ("aws", "ap-northeast-1"),
    ("gcp", "us-central1"),
    ("gcp", "us-east4"),
    ("gcp", "us-west1"),
    ("gcp", "europe-west4"),
    ("gcp", "asia-northeast1"),
    ("gcp", "asia-southeast1"),
)
INSTANCE_TYPES = frozenset(
    {"p4d.24xlarge", "p5.48xlarge", "g5.48xlarge", "g6.48xlarge", "a2-highgpu-8g", "a3-highgpu-8g",
     "g2-standard-96"}
)
# The two largest regions hold enough H100s across their zones for a 512-GPU gang.
LARGE_REGIONS = frozenset({("aws", "us-east-1"), ("gcp", "us-central1")})
MAX_ZONES_PER_REGION = 4
SEED = 7
BUSY_FRACTION = 0.3
DEGRADED_FRACTION = 0.04
PEERS_MEASURED = 2
# Zone ID -> zone name as DescribeAvailabilityZones answers it in one example account (the shape of a real
# answer: us-east-1 has six zones and ap-northeast-1 no `b` in newer accounts; the pairing is per account).
EXAMPLE_AWS_ZONE_NAMES = {
    "use1-az6": "us-east-1a", "use1-az2": "us-east-1b", "use1-az4": "us-east-1c", "use1-az1": "us-east-1d",
    "use2-az1": "us-east-2a", "use2-az2": "us-east-2b", "use2-az3": "us-east-2c",
    "usw1-az3": "us-west-1a", "usw1-az1": "us-west-1c",
    "usw2-az2": "us-west-2a", "usw2-az1": "us-west-2b", "usw2-az3": "us-west-2c", "usw2-az4": "us-west-2d",
    "euc1-az2": "eu-central-1a", "euc1-az3": "eu-central-1b", "euc1-az1": "eu-central-1c",
    "eun1-az1": "eu-north-1a", "eun1-az2": "eu-north-1b", "eun1-az3": "eu-north-1c",
    "apne1-az4": "ap-northeast-1a", "apne1-az1": "ap-northeast-1c", "apne1-az2": "ap-northeast-1d",
}
# The GCP project the example GKE clusters run in (it names their nodes' providerIDs).
EXAMPLE_GCP_PROJECT = "geosched-example"


def _short(instance_type: str) -> str:
    return instance_type.split(".")[0] if "." in instance_type else instance_type.split("-")[0]


def cluster_name(provider: str, region: str) -> str:
    return f"{_spec(provider).kube_service}-{region}"


def _spec(provider: str) -> CloudSpec:
    spec = clouds.get(provider)
    if spec is None:
        raise ValueError(f"the default fleet has no cloud {provider!r}")
    return spec


def catalog_node(offer: Offering, index: int, gpus_free: int) -> Node:
    """Node `index` of an offering, named, labelled and priced as its cloud's nodes are (the geo fleet too)."""
    provider, region, zone = offer.provider, offer.region, offer.zone
    # A cloud that names zones by ID (AWS) labels nodes with the zone's name in the account: the example's.
    zone_label = EXAMPLE_AWS_ZONE_NAMES[zone] if _spec(provider).zone_id_label else zone
    name = f"{provider}-{zone}-{_short(offer.instance_type)}-{index:02d}"
    return Node(
        name=name,
        provider=provider,
        region=region,
        zone=zone,
        instance_type=offer.instance_type,
        gpu=offer.gpu,
        gpus=offer.gpus,
        gpus_free=gpus_free,
        price_ondemand=offer.price_ondemand,
        price_spot=offer.price_spot,
        cluster=cluster_name(provider, region),
        labels=cloud_labels(
            provider=provider, region=region, zone=zone, zone_label=zone_label,
            instance_type=offer.instance_type, gpu=offer.gpu, gpus=offer.gpus, hostname=name,
            pool=f"gpu-{offer.instance_type.replace('.', '-')}"),
        provider_id=provider_id(provider, zone_label, name, EXAMPLE_GCP_PROJECT),
    )


def _nodes(rng: random.Random) -> list[Node]:
    by_zone: dict[str, list[Offering]] = {}
    for o in catalog.offerings():
        if (o.provider, o.region) in REGIONS and o.instance_type in INSTANCE_TYPES and o.price_ondemand:
            by_zone.setdefault(o.zone, []).append(o)
    nodes: list[Node] = []
    for provider, region in REGIONS:
        zones = sorted(z for z, offers in by_zone.items() if offers[0].region == region)
        zones = sorted(zones, key=lambda z: -len(by_zone[z]))[:MAX_ZONES_PER_REGION]
        for zone in sorted(zones):
            for offer in sorted(by_zone[zone], key=lambda o: o.instance_type):
                big = (provider, region) in LARGE_REGIONS and offer.gpu == "H100"
                count = rng.randint(24, 30) if big else rng.randint(2, 8)
                for i in range(count):
                    busy = rng.random() < BUSY_FRACTION
                    free = rng.choice([0, 2, 4, 6]) if busy else offer.gpus
                    nodes.append(catalog_node(offer, i, free))
    return nodes


def degraded_nics(rng: random.Random, nodes: list[Node], fraction: float) -> dict[str, LinkStats]:
    """Which nodes have a bad NIC and how it shows: half slow (2.5 ms, 4 Gbit/s), half lossy (1% loss)."""
    degraded: dict[str, LinkStats] = {}
    for node in nodes:
        if rng.random() < fraction:
            slow = rng.random() < 0.5
            degraded[node.name] = LinkStats(
                rtt_p50_ms=2.5 if slow else 0.6,
                rtt_p95_ms=6.0 if slow else 1.5,
                loss=0.0 if slow else 0.01,
                throughput_gbps=4.0 if slow else 20.0,
            )
    return degraded


def node_links(rng: random.Random, nodes: list[Node],
               degraded: dict[str, LinkStats]) -> dict[tuple[str, str], LinkStats]:
    """Each node measured against its next peers in its zone, as a sampled probe plan would; a link to or
    from a degraded node shows that node's bad NIC."""
    by_zone: dict[str, list[Node]] = {}
    for node in nodes:
        by_zone.setdefault(node.zone, []).append(node)
    links: dict[tuple[str, str], LinkStats] = {}
    for members in by_zone.values():
        for i, a in enumerate(members):
            for step in range(1, PEERS_MEASURED + 1):
                if len(members) <= step:
                    break
                b = members[(i + step) % len(members)]
                jitter = rng.uniform(0.9, 1.15)
                link = LinkStats(
                    rtt_p50_ms=round(netmodel.SAME_ZONE.rtt_p50_ms * jitter, 3),
                    rtt_p95_ms=round(netmodel.SAME_ZONE.rtt_p95_ms * jitter, 3),
                    loss=0.0,
                    throughput_gbps=round(netmodel.SAME_ZONE.throughput_gbps / jitter, 2),
                    age_s=round(rng.uniform(0, 900), 1),
                    samples=10,
                )
                for end in (a.name, b.name):
                    if end in degraded:
                        link = link.worst(degraded[end])
                links[pair_key(a.name, b.name)] = link
    return links


@cache
def default_fleet() -> Fleet:
    rng = random.Random(SEED)
    nodes = _nodes(rng)
    zones = {n.zone: Zone(n.zone, n.provider, n.region) for n in nodes}
    all_regions = catalog.regions()
    regions = {z.region_key: all_regions[z.region_key] for z in zones.values()}
    return Fleet(regions=regions, zones=zones, nodes=tuple(nodes), gpu_power=catalog.gpu_power())


@cache
def default_network() -> NetworkView:
    fleet = default_fleet()
    rng = random.Random(SEED + 1)
    return NetworkView(
        zone_links=netmodel.zone_links(fleet.zones.values()),
        node_links=node_links(rng, list(fleet.nodes), degraded_nics(rng, list(fleet.nodes), DEGRADED_FRACTION)),
    )
