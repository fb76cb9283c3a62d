"""Fleet, network and carbon compiled into arrays once, so each decision is a few vector operations.

`PlacementContext` is built once per snapshot; `JobView` once per (job, weights). Both are pure: the
simulator and the scheduler change free GPUs with `PlacementContext.with_free`, never in place.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from geosched.comm import comm_ms
from geosched.models import CarbonSignal, Fleet, Job, NetworkView, NodeState, Pricing, Weights, pair_key

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# A zone pair nobody measured or modelled is assumed to be a bad intercontinental link, so a gang is
# never split across it blindly; `--explain` shows the assumption through the worst-link figures.
UNKNOWN_RTT_MS = 300.0
UNKNOWN_THROUGHPUT_GBPS = 1.0


class PlacementContext:
    """Everything a policy needs about the fleet, as arrays indexed by node, zone and region."""

    def __init__(self, fleet: Fleet, network: NetworkView, carbon: CarbonSignal | None = None) -> None:
        self.fleet = fleet
        self.network = network
        self.carbon = carbon or CarbonSignal.from_fleet(fleet)
        nodes = fleet.nodes
        self.names = [n.name for n in nodes]
        self.zone_names = sorted(fleet.zones)
        zone_index = {z: i for i, z in enumerate(self.zone_names)}
        self.region_keys = sorted(fleet.regions)
        region_index = {r: i for i, r in enumerate(self.region_keys)}
        self.cluster_names: list[str | None] = sorted({n.cluster for n in nodes}, key=lambda c: c or "")
        cluster_index = {c: i for i, c in enumerate(self.cluster_names)}
        self.gpu_names = sorted({n.gpu for n in nodes})
        gpu_index = {g: i for i, g in enumerate(self.gpu_names)}

        # Label of each (cluster, GPU) group, indexed like `base.group_ids`.
        self.group_labels = [f"{gpu}, cluster {c}" if c else gpu for c in self.cluster_names for gpu in self.gpu_names]
        self.zone_of: IntArray = np.array([zone_index[n.zone] for n in nodes], dtype=np.int64)
        self.region_of_zone: IntArray = np.array(
            [region_index[fleet.zones[z].region_key] for z in self.zone_names], dtype=np.int64
        )
        self.region_of: IntArray = self.region_of_zone[self.zone_of]
        self.cluster_of: IntArray = np.array([cluster_index[n.cluster] for n in nodes], dtype=np.int64)
        self.gpu_of: IntArray = np.array([gpu_index[n.gpu] for n in nodes], dtype=np.int64)
        self.provider_of = np.array([n.provider for n in nodes], dtype=object)
        self.gpus_total: IntArray = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.gpus_free: IntArray = np.array([n.gpus_free for n in nodes], dtype=np.int64)
        self.ready: BoolArray = np.array([n.state is NodeState.READY for n in nodes], dtype=bool)
        self.price_ondemand = _per_gpu([n.price_ondemand for n in nodes], self.gpus_total)
        self.price_spot = _per_gpu([n.price_spot for n in nodes], self.gpus_total)

        power = fleet.gpu_power
        # A GPU missing from the power table is counted at the most power-hungry known part: carbon is
        # then overestimated, never hidden.
        worst = max(power.values(), key=lambda p: p.max_watts)
        self.idle_watts: FloatArray = np.array([power.get(n.gpu, worst).idle_watts for n in nodes])
        self.max_watts: FloatArray = np.array([power.get(n.gpu, worst).max_watts for n in nodes])
        self.pue: FloatArray = np.array([fleet.regions[n.region_key].pue for n in nodes])
        self.grid: FloatArray = np.array([self.carbon.at(n.region_key) for n in nodes])

        z = len(self.zone_names)
        self.zz_rtt: FloatArray = np.full((z, z), UNKNOWN_RTT_MS)
        self.zz_loss: FloatArray = np.zeros((z, z))
        self.zz_tput: FloatArray = np.full((z, z), UNKNOWN_THROUGHPUT_GBPS)
        for (a, b), link in network.zone_links.items():
            if a in zone_index and b in zone_index:
                for i, j in ((zone_index[a], zone_index[b]), (zone_index[b], zone_index[a])):
                    self.zz_rtt[i, j] = link.rtt_p50_ms
                    self.zz_loss[i, j] = link.loss
                    self.zz_tput[i, j] = link.throughput_gbps

        # Per-node link quality: the worst of the node's own summary and its zone's intra-zone link.
        diag = self.zone_of
        self.node_rtt: FloatArray = self.zz_rtt[diag, diag].copy()
        self.node_loss: FloatArray = self.zz_loss[diag, diag].copy()
        self.node_tput: FloatArray = self.zz_tput[diag, diag].copy()
        summaries = network.node_summaries({n.name: n.zone for n in nodes})
        for i, name in enumerate(self.names):
            s = summaries.get(name)
            if s is not None:
                self.node_rtt[i] = max(self.node_rtt[i], s.rtt_p50_ms)
                self.node_loss[i] = max(self.node_loss[i], s.loss)
                self.node_tput[i] = min(self.node_tput[i], s.throughput_gbps)

    def with_free(self, gpus_free: IntArray) -> PlacementContext:
        """The same snapshot with other free-GPU counts (the arrays are shared, not copied)."""
        other = copy.copy(self)
        other.gpus_free = gpus_free
        return other

    def zone_link_known(self, a: str, b: str) -> bool:
        return pair_key(a, b) in self.network.zone_links


@dataclass(frozen=True)
class JobView:
    """One job seen against one context: who is eligible, how many workers each node holds, what each
    GPU-hour costs and emits there, and the reference values the score is normalised by."""

    ctx: PlacementContext
    job: Job
    weights: Weights
    eligible: BoolArray
    capacity: IntArray
    price_gpu: FloatArray
    carbon_gpu: FloatArray
    price_ref: float
    carbon_ref: float
    ideal_step_ms: float
    filtered: dict[str, str]
    explain: bool = True

    @property
    def candidates(self) -> IntArray:
        return np.flatnonzero(self.eligible)


def job_view(ctx: PlacementContext, job: Job, weights: Weights, explain: bool = True) -> JobView:
    """`explain=False` skips what only a person reads (rejections, alternatives): the simulator's fast path."""
    g = job.gpus_per_worker
    eligible = ctx.ready & (ctx.gpus_free >= g)
    filtered: dict[str, str] = {}

    def restrict(mask: BoolArray, reason: str) -> None:
        nonlocal eligible
        dropped = np.bincount(ctx.zone_of[eligible & ~mask], minlength=len(ctx.zone_names))
        for zone in np.flatnonzero(dropped).tolist():
            filtered.setdefault(ctx.zone_names[zone], reason)
        eligible = eligible & mask

    if job.gpu is not None:
        restrict(ctx.gpu_of == _index(ctx.gpu_names, job.gpu), f"no {job.gpu} GPUs")
    if job.providers:
        restrict(np.isin(ctx.provider_of, list(job.providers)), "provider not allowed by the job")
    if job.regions:
        allowed = [i for i, key in enumerate(ctx.region_keys) if key in job.regions or key.split(":")[1]
                   in job.regions]
        restrict(np.isin(ctx.region_of, allowed), "region not allowed by the job")
    if job.zones:
        allowed = [i for i, z in enumerate(ctx.zone_names) if z in job.zones]
        restrict(np.isin(ctx.zone_of, allowed), "zone not allowed by the job")
    if job.clusters:
        allowed = [i for i, c in enumerate(ctx.cluster_names) if c in job.clusters]
        restrict(np.isin(ctx.cluster_of, allowed), "cluster not allowed by the job")
    price = ctx.price_ondemand if job.pricing is Pricing.ON_DEMAND else ctx.price_spot
    restrict(~np.isnan(price), f"no {job.pricing.value} price")

    capacity = np.where(eligible, ctx.gpus_free // g, 0)
    watts = ctx.idle_watts + job.profile.utilisation * (ctx.max_watts - ctx.idle_watts)
    carbon_gpu = watts / 1000.0 * ctx.pue * ctx.grid
    ideal = ideal_step_ms(ctx, job, eligible, capacity)
    return JobView(
        ctx=ctx,
        job=job,
        weights=weights,
        eligible=eligible,
        capacity=capacity,
        price_gpu=np.nan_to_num(price, nan=0.0),
        carbon_gpu=carbon_gpu,
        price_ref=_median_ref(price[eligible]),
        carbon_ref=_median_ref(carbon_gpu[eligible]),
        ideal_step_ms=ideal,
        filtered=filtered,
        explain=explain,
    )


def ideal_step_ms(ctx: PlacementContext, job: Job, eligible: BoolArray, capacity: IntArray) -> float:
    """Step time on the best link any eligible node has (or none at all when one node holds the gang)."""
    if not eligible.any() or capacity.max() >= job.workers:
        return job.profile.compute_ms
    best = comm_ms(
        job.workers,
        job.profile.message_mb,
        rtt_ms=float(ctx.node_rtt[eligible].min()),
        loss=float(ctx.node_loss[eligible].min()),
        throughput_gbps=float(ctx.node_tput[eligible].max()),
    )
    return job.profile.compute_ms + best


def _index(names: list[str], name: str) -> int:
    return names.index(name) if name in names else -1


def _per_gpu(prices: list[float | None], gpus: IntArray) -> FloatArray:
    raw = np.array([np.nan if p is None else p for p in prices], dtype=np.float64)
    return raw / np.maximum(gpus, 1)


def _median_ref(values: FloatArray) -> float:
    finite = values[np.isfinite(values)]
    n = finite.size
    if n == 0:
        return 1.0
    # np.median's generic machinery costs more than the partition itself on every decision.
    part = np.partition(finite, [(n - 1) // 2, n // 2])
    return max(float(part[(n - 1) // 2] + part[n // 2]) / 2, 1e-9)
