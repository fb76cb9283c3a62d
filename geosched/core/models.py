"""The one model every path shares: fleet, network view, carbon signal, job, placement.

Plain frozen dataclasses: the core passes them around and never mutates them; the edges
(files, store, providers, probes, kube) build them and read them back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from statistics import median


class NodeState(StrEnum):
    READY = "ready"
    PROVISIONING = "provisioning"
    NOT_READY = "not-ready"
    TERMINATED = "terminated"


class Pricing(StrEnum):
    ON_DEMAND = "on-demand"
    SPOT = "spot"


@dataclass(frozen=True, slots=True)
class Region:
    provider: str
    name: str
    grid_gco2e_per_kwh: float
    pue: float
    cfe_fraction: float | None = None

    @property
    def key(self) -> str:
        return region_key(self.provider, self.name)


def region_key(provider: str, region: str) -> str:
    """Region names only become unique with their provider (an on-prem `eu-west` may exist too)."""
    return f"{provider}:{region}"


@dataclass(frozen=True, slots=True)
class Zone:
    """A failure and network domain. `name` is unique in a fleet and keys the catalog and the network: AWS zone
    IDs (`use1-az1`, the same place in every account), GCP zone names. The value nodes carry in
    `topology.kubernetes.io/zone` (on AWS the zone's name, which differs per account) is in the nodes' labels,
    read from the clusters, never derived from the ID."""

    name: str
    provider: str
    region: str

    @property
    def region_key(self) -> str:
        return region_key(self.provider, self.region)


@dataclass(frozen=True, slots=True)
class GpuPower:
    """Per-GPU power draw; energy = idle + utilisation x (max - idle)."""

    gpu: str
    idle_watts: float
    max_watts: float

    def watts(self, utilisation: float) -> float:
        return self.idle_watts + utilisation * (self.max_watts - self.idle_watts)


@dataclass(frozen=True, slots=True)
class Offering:
    """What a provider sells in one zone: an instance type with its GPUs and prices."""

    provider: str
    instance_type: str
    gpu: str
    gpus: int
    vcpus: float
    memory_gib: float
    region: str
    zone: str
    price_ondemand: float | None
    price_spot: float | None
    gpu_idle_watts: float | None = None
    gpu_max_watts: float | None = None
    # A finite pool (inventory machines): the on-demand price of each node free now, cheapest first. None for a
    # cloud, whose capacity is only known by trying.
    free_node_prices: tuple[float, ...] | None = None
    # What the shipped catalog says about a price it flagged (`pricecheck`: its flags, why, and the source).
    note: str | None = None

    def price(self, pricing: Pricing) -> float | None:
        return self.price_ondemand if pricing is Pricing.ON_DEMAND else self.price_spot


@dataclass(frozen=True, slots=True)
class Node:
    """One machine, one identity: the same record whether a provider launched it, a probe measured it,
    or a cluster runs it. Prices are for the whole node, USD per hour."""

    name: str
    provider: str
    region: str
    zone: str
    instance_type: str
    gpu: str
    gpus: int
    gpus_free: int
    price_ondemand: float | None = None
    price_spot: float | None = None
    cluster: str | None = None
    addresses: tuple[str, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    state: NodeState = NodeState.READY
    provider_id: str | None = None
    # What the node's cluster says it has left besides GPUs (allocatable minus bound pods' requests, in
    # geosched.kube.resources units); None: not read from a cluster (geosched.core.room resolves it from the catalog).
    room: Mapping[str, int] | None = field(default=None, hash=False, compare=False)

    @property
    def region_key(self) -> str:
        return region_key(self.provider, self.region)

    def price(self, pricing: Pricing) -> float | None:
        return self.price_ondemand if pricing is Pricing.ON_DEMAND else self.price_spot


@dataclass(frozen=True)
class Fleet:
    """Regions > zones > nodes, plus the GPU power table needed to turn GPU-hours into energy."""

    regions: Mapping[str, Region]
    zones: Mapping[str, Zone]
    nodes: tuple[Node, ...]
    gpu_power: Mapping[str, GpuPower]
    # Per cluster, the labels of the GPU nodes left out because their nvidia.com/gpu are shared replicas or MIG
    # slices (geosched.kube.inventory.NotWhole): no capacity, but a gang's rendered pods must be kept off them too,
    # and a snapshot a GitOps tree renders from carries them for that (geosched.kube.render.RenderOptions.not_whole).
    not_whole: Mapping[str, tuple[Mapping[str, str], ...]] = field(default_factory=dict)

    @cached_property
    def by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    def region_of(self, node: Node) -> Region:
        return self.regions[node.region_key]


@dataclass(frozen=True, slots=True)
class LinkStats:
    """What we know of one link (node pair or zone pair), undirected."""

    rtt_p50_ms: float
    rtt_p95_ms: float
    loss: float
    throughput_gbps: float
    age_s: float = 0.0
    samples: int = 1

    def worst(self, other: LinkStats) -> LinkStats:
        return LinkStats(
            rtt_p50_ms=max(self.rtt_p50_ms, other.rtt_p50_ms),
            rtt_p95_ms=max(self.rtt_p95_ms, other.rtt_p95_ms),
            loss=max(self.loss, other.loss),
            throughput_gbps=min(self.throughput_gbps, other.throughput_gbps),
            age_s=max(self.age_s, other.age_s),
            samples=min(self.samples, other.samples),
        )


def pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True)
class NetworkView:
    """Measured (or modelled) links per zone pair and per node pair.

    A pair not measured directly is estimated as the worst of its zone-pair link and the two nodes'
    summaries (the median of each node's measured intra-zone links), so a slow NIC stays slow on every path.
    """

    zone_links: Mapping[tuple[str, str], LinkStats]
    node_links: Mapping[tuple[str, str], LinkStats] = field(default_factory=dict)
    stale_after_s: float = 3600.0

    def zone_link(self, a: str, b: str) -> LinkStats | None:
        return self.zone_links.get(pair_key(a, b))

    def node_link(self, a: str, b: str) -> LinkStats | None:
        return self.node_links.get(pair_key(a, b))

    def node_summaries(self, zone_of: Mapping[str, str]) -> dict[str, LinkStats]:
        """Each node's own quality: the median of its measured links to peers in its own zone (links to
        other zones measure the distance between zones, not the node)."""
        per_node: dict[str, list[LinkStats]] = {}
        for (a, b), link in self.node_links.items():
            zone = zone_of.get(a)
            if zone is not None and zone == zone_of.get(b):
                per_node.setdefault(a, []).append(link)
                per_node.setdefault(b, []).append(link)
        return {name: summarize(links) for name, links in per_node.items()}

    def link(self, a: Node, b: Node, summaries: Mapping[str, LinkStats]) -> LinkStats | None:
        """The link between two nodes, measured if we have it, otherwise estimated from their zones' link
        and the two nodes' `summaries` (from `node_summaries`)."""
        measured = self.node_link(a.name, b.name)
        if measured is not None:
            return measured
        estimate = self.zone_link(a.zone, b.zone)
        for summary in (summaries.get(a.name), summaries.get(b.name)):
            if summary is not None:
                estimate = summary if estimate is None else estimate.worst(summary)
        return estimate

    def is_stale(self, link: LinkStats) -> bool:
        return link.age_s > self.stale_after_s


def summarize(links: Iterable[LinkStats]) -> LinkStats:
    """Median of each measure, so one bad peer does not make a good node look bad."""
    items = list(links)
    return LinkStats(
        rtt_p50_ms=median(x.rtt_p50_ms for x in items),
        rtt_p95_ms=median(x.rtt_p95_ms for x in items),
        loss=median(x.loss for x in items),
        throughput_gbps=median(x.throughput_gbps for x in items),
        age_s=max(x.age_s for x in items),
        samples=sum(x.samples for x in items),
    )


HOUR_S = 3600


@dataclass(frozen=True)
class CarbonSignal:
    """Grid intensity per region key (gCO2e/kWh): `intensity`, the mean; `hourly`, measured hours keyed by UTC
    hour (whole hours since the Unix epoch); `profile`, a cyclic profile read at (epoch hour mod N).
    `at` / `lookup` resolve one instant: the measured hour, else the profile, else the mean."""

    intensity: Mapping[str, float]
    hourly: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    profile: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def lookup(self, region: str, when: float | None = None) -> tuple[float, str] | None:
        """(value, "hour" | "profile" | "mean") at Unix time `when` (None: the mean), or None if unknown."""
        if when is not None:
            hour = int(when // HOUR_S)
            measured = self.hourly.get(region, {}).get(hour)
            if measured is not None:
                return measured, "hour"
            cycle = self.profile.get(region)
            if cycle:
                return cycle[hour % len(cycle)], "profile"
        mean = self.intensity.get(region)
        return (mean, "mean") if mean is not None else None

    def at(self, region: str, when: float | None = None) -> float:
        found = self.lookup(region, when)
        if found is None:
            raise KeyError(region)
        return found[0]

    def varies(self, region: str) -> bool:
        """Whether the value changes from hour to hour (a series or a profile)."""
        return bool(self.hourly.get(region) or self.profile.get(region))

    @staticmethod
    def from_fleet(fleet: Fleet) -> CarbonSignal:
        return CarbonSignal({key: r.grid_gco2e_per_kwh for key, r in fleet.regions.items()})


@dataclass(frozen=True, slots=True)
class CommProfile:
    """How a job talks: ring all-reduce of `message_mb` per step after `compute_ms` of compute.
    `latency_sensitive`: judge links by their RTT p95 instead of p50 (small, frequent messages wait on the tail).
    `checkpoint_minutes`, `restart_minutes`: what a spot interruption costs it (policies/spotrisk.py, `Rework`)."""

    message_mb: float = 1000.0
    compute_ms: float = 1000.0
    utilisation: float = 0.9
    latency_sensitive: bool = False
    checkpoint_minutes: float = 60.0
    restart_minutes: float = 15.0


@dataclass(frozen=True, slots=True)
class Schedule:
    """When a job may run (policies/README.md, "Time shifting"). `runtime_s`: its predicted run, over which its carbon
    is counted. A job with slack may start later than it could: up to `start_within_s` after it is submitted, and
    late enough to finish by `deadline` (Unix seconds); the earlier of the two binds. Neither: not flexible."""

    runtime_s: float
    start_within_s: float | None = None
    deadline: float | None = None

    @property
    def flexible(self) -> bool:
        return self.start_within_s is not None or self.deadline is not None

    def latest_start(self, submitted: float) -> float:
        """The latest start that keeps both promises (the submit time itself when the job is not flexible)."""
        latest = submitted + self.start_within_s if self.start_within_s is not None else math.inf
        if self.deadline is not None:
            latest = min(latest, self.deadline - self.runtime_s)
        return latest if math.isfinite(latest) else submitted

    def misses_deadline(self, now: float) -> bool:
        """Even a start at `now` ends after the deadline: the job starts now anyway (its slack is gone), and the
        user is told (`geosched.policies.timeshift.deadline_note`)."""
        return self.deadline is not None and now + self.runtime_s > self.deadline


@dataclass(frozen=True, slots=True)
class Job:
    """A gang: `workers` x `gpus_per_worker`, all or nothing. `schedule`: its predicted run and slack, if it has
    any (a job without one starts as soon as it fits, as always)."""

    name: str
    workers: int
    gpus_per_worker: int
    gpu: str | None = None
    max_zones: int | None = None
    max_regions: int | None = None
    providers: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    pricing: Pricing = Pricing.ON_DEMAND
    profile: CommProfile = CommProfile()
    namespace: str = "default"
    image: str | None = None
    schedule: Schedule | None = None
    # What each worker asks of its node besides GPUs, as sorted (resource, amount) pairs in geosched.core.room's units
    # (cpu millicores, memory bytes): a node without room for one holds no worker.
    worker_requests: tuple[tuple[str, int], ...] = ()

    @property
    def flexible(self) -> bool:
        return self.schedule is not None and self.schedule.flexible

    @property
    def gpus(self) -> int:
        return self.workers * self.gpus_per_worker


@dataclass(frozen=True, slots=True)
class Weights:
    """Default: network first, with cost breaking near-ties (a 10% faster step is worth as much as
    the gang's median price); carbon only when asked for.

    `zone_tolerance`: a placement in fewer zones (regions) wins while its total is within this fraction of
    the best placement considered (policies/README.md says why 5%). `spot_risk`: how much a spot job's
    interruption risk weighs on its spot prices in the cost term (0: price alone; policies/spotrisk.py)."""

    network: float = 1.0
    cost: float = 0.1
    carbon: float = 0.0
    zone_tolerance: float = 0.05
    spot_risk: float = 1.0


@dataclass(frozen=True, slots=True)
class Score:
    """Every term of a candidate, normalised and raw, so `--explain` can show why it won.

    network: step time / step time on the best link in the fleet (1.0 = ideal)
    cost:    gang $/h / (GPUs x median $/GPU-h of eligible nodes)
    carbon:  gang gCO2e/h / (GPUs x median gCO2e/GPU-h of eligible nodes)
    worst_rtt_ms, worst_loss, min_throughput_gbps: the link of `hop`, the ring hop (node a -> node b) that
    bounds the step, all three from that one pair; `hop` is None for a gang on one node.
    """

    total: float
    network: float
    cost: float
    carbon: float
    step_ms: float
    comm_ms: float
    usd_per_hour: float
    gco2e_per_hour: float
    worst_rtt_ms: float
    worst_loss: float
    min_throughput_gbps: float
    hop: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    node: str
    zone: str
    workers: int


@dataclass(frozen=True, slots=True)
class Rejection:
    subject: str
    reason: str


@dataclass(frozen=True, slots=True)
class Candidate:
    zones: tuple[str, ...]
    cluster: str | None
    score: Score


@dataclass(frozen=True, slots=True)
class Placement:
    job: Job
    policy: str
    cluster: str | None
    zones: tuple[str, ...]
    regions: tuple[str, ...]
    assignments: tuple[Assignment, ...]
    score: Score
    weights: Weights
    rejected: tuple[Rejection, ...] = ()
    alternatives: tuple[Candidate, ...] = ()


@dataclass(frozen=True, slots=True)
class NoFit:
    """No placement exists under the job's constraints; `reasons` says why, zone by zone."""

    job: Job
    policy: str
    reasons: tuple[Rejection, ...]
    # Not "no fit" but "not yet": the gang waits for a healthy ring (policies/patience.py) and is to be decided
    # again within this many seconds at the latest, when it starts on what is free then.
    retry_after_s: float | None = None

    @property
    def waiting(self) -> bool:
        return self.retry_after_s is not None

    @property
    def message(self) -> str:
        head = f"no fit for job {self.job.name!r} ({self.job.gpus} GPUs) under policy {self.policy!r}"
        if self.waiting:
            head = f"job {self.job.name!r} ({self.job.gpus} GPUs) is waiting under policy {self.policy!r}"
        if not self.reasons:
            return head
        return head + ": " + "; ".join(f"{r.subject}: {r.reason}" for r in self.reasons[:5])
