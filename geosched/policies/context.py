"""Fleet, network and carbon compiled into arrays once, so each decision is a few vector operations.

`PlacementContext` is built once per snapshot; `JobView` once per (job, weights). Both are pure: the
simulator and the scheduler change free GPUs with `PlacementContext.with_free`, never in place.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from geosched.core import room
from geosched.core.comm import comm_ms
from geosched.core.models import CarbonSignal, Fleet, Job, NetworkView, NodeState, Pricing, Weights, pair_key
from geosched.policies import places, spotrisk
from geosched.policies.energy import kwh_per_gpu_hour, node_kwh_per_gpu_hour, shipped_specs
from geosched.policies.spotrisk import Rework, SpotRisk
from geosched.policies.zonepairs import MEASURES, ZonePairs

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]



class PlacementContext:
    """Everything a policy needs about the fleet, as arrays indexed by node, zone and region."""

    def __init__(self, fleet: Fleet, network: NetworkView, carbon: CarbonSignal | None = None,
                 spot_risks: Mapping[tuple[str, str, str], SpotRisk] | None = None) -> None:
        """`spot_risks`: (provider, instance type, zone) -> the interruption risk of its spot market (the
        store's signals); a node without one is priced by `spotrisk.resolve` (provider default, else unknown)."""
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
        # Each node's (cluster, GPU) group (`base.group_ids`) and (cluster, GPU, zone) cell, once per snapshot
        # rather than once per decision.
        self.group_of: IntArray = self.cluster_of * len(self.gpu_names) + self.gpu_of
        self.cell_of: IntArray = self.group_of * len(self.zone_names) + self.zone_of
        # The nodes grouped by cell, each cell's in index order: zone-first's one-worker decision takes the
        # eligible ones from it rather than sorting them by cell on every decision.
        self.by_cell: IntArray = np.argsort(self.cell_of, kind="stable")
        self.cell_runs: IntArray = np.flatnonzero(np.diff(self.cell_of[self.by_cell], prepend=-1))  # where each starts
        self.group_count = int(self.group_of.max(initial=-1)) + 1
        self.cell_count = int(self.cell_of.max(initial=-1)) + 1
        self.provider_of = np.array([n.provider for n in nodes], dtype=object)
        self.gpus_total: IntArray = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.gpus_free: IntArray = np.array([n.gpus_free for n in nodes], dtype=np.int64)
        self.ready: BoolArray = np.array([n.state is NodeState.READY for n in nodes], dtype=bool)
        self.price_ondemand = _per_gpu([n.price_ondemand for n in nodes], self.gpus_total)
        self.price_spot = _per_gpu([n.price_spot for n in nodes], self.gpus_total)
        # Per pricing: which nodes have a price, the price with 0 where there is none, and which prices count in
        # the median a score is normalised by (`_counted`): once per snapshot, not once per decision.
        self.priced: dict[Pricing, tuple[BoolArray, FloatArray, BoolArray]] = {
            pricing: (~np.isnan(price), np.nan_to_num(price, nan=0.0), _counted(price))
            for pricing, price in ((Pricing.ON_DEMAND, self.price_ondemand), (Pricing.SPOT, self.price_spot))
        }
        self._spot_risks = spot_risks or {}
        # Each node's gCO2e per GPU-hour by job utilisation, filled as jobs ask: shared by the contexts
        # `with_free` makes (same grid), a new one for each `with_grid`.
        self._carbon_gpu: dict[float, tuple[FloatArray, BoolArray]] = {}
        self._carbon_ref: dict[float, tuple[FloatArray, IntArray, FloatArray]] = {}

        # kWh per GPU-hour at GPU utilisation 0 and 1, from the one energy model the report charges with
        # (policies/energy.py interpolates a job's utilisation between them).
        self.kwh_idle: FloatArray = node_kwh_per_gpu_hour(fleet, 0.0)
        self.kwh_full: FloatArray = node_kwh_per_gpu_hour(fleet, 1.0)
        self.grid: FloatArray = np.array([self.carbon.at(n.region_key) for n in nodes])

        # Zone-pair links, sparse (policies/zonepairs.py): a zones x zones matrix grew with the square of the
        # zone count, 3.2 GB for 10,000 one-node zones.
        self.zone_pairs = ZonePairs(self.zone_names, self.region_of_zone, network.zone_links)
        # Each job shape's filters that free GPUs do not change (`_Shape`): shared by every copy `with_free` and
        # `with_grid` make (none of it reads free GPUs or the grid), so a replay computes them once per shape.
        self.shapes: dict[tuple[object, ...], _Shape] = {}
        # Patience's reference steps (policies/patience.py), per gang shape: shared with the copies `with_free`
        # makes (the idle fleet is the same whatever is free now), not with `with_grid`'s (carbon may move it).
        self.reference_steps: dict[tuple[object, ...], float | None] = {}

        # Each node's own summary (NetworkView.node_summaries); neutral where the node has none.
        n = len(nodes)
        self.sum_rtt: FloatArray = np.zeros(n)
        self.sum_rtt95: FloatArray = np.zeros(n)
        self.sum_loss: FloatArray = np.zeros(n)
        self.sum_tput: FloatArray = np.full(n, np.inf)
        summaries = network.node_summaries({node.name: node.zone for node in nodes})
        for i, name in enumerate(self.names):
            s = summaries.get(name)
            if s is not None:
                self.sum_rtt[i], self.sum_rtt95[i] = s.rtt_p50_ms, s.rtt_p95_ms
                self.sum_loss[i], self.sum_tput[i] = s.loss, s.throughput_gbps
        # Per-node link quality: the worst of the node's own summary and its zone's intra-zone link.
        links = self.zone_pairs
        self.node_rtt: FloatArray = np.maximum(links.diagonal("rtt")[self.zone_of], self.sum_rtt)
        self.node_rtt95: FloatArray = np.maximum(links.diagonal("rtt95")[self.zone_of], self.sum_rtt95)
        self.node_loss: FloatArray = np.maximum(links.diagonal("loss")[self.zone_of], self.sum_loss)
        self.node_tput: FloatArray = np.minimum(links.diagonal("tput")[self.zone_of], self.sum_tput)

        # The best link between two zones of each region, and between two regions, measure by measure: the
        # link no multi-zone (multi-region) placement can beat, for zone-first's lower bounds.
        regions = len(self.region_keys)
        self.region_best: dict[str, FloatArray] = {m: links.region_best(m, regions) for m in MEASURES}
        self.cross_best: dict[str, float] = {m: links.cross_best(m) for m in MEASURES}

        # Measured node pairs, keyed lo * n + hi and sorted, so a batch of hops is one searchsorted.
        index = {name: i for i, name in enumerate(self.names)}
        pairs = sorted((min(index[a], index[b]) * n + max(index[a], index[b]), link)
                       for (a, b), link in network.node_links.items() if a in index and b in index and a != b)
        self.pair_key: IntArray = np.array([k for k, _ in pairs], dtype=np.int64)
        self.pair_rtt: FloatArray = np.array([x.rtt_p50_ms for _, x in pairs], dtype=np.float64)
        self.pair_rtt95: FloatArray = np.array([x.rtt_p95_ms for _, x in pairs], dtype=np.float64)
        self.pair_loss: FloatArray = np.array([x.loss for _, x in pairs], dtype=np.float64)
        self.pair_tput: FloatArray = np.array([x.throughput_gbps for _, x in pairs], dtype=np.float64)

    @cached_property
    def spot_risk(self) -> list[SpotRisk]:
        """Each node's spot interruption risk (built on first use: only spot jobs need it)."""
        keys = [(n.provider, n.instance_type, n.zone) for n in self.fleet.nodes]
        resolved = {k: self._spot_risks.get(k) or spotrisk.resolve(k[0]) for k in set(keys)}
        return [resolved[k] for k in keys]

    @cached_property
    def rooms(self) -> list[room.Room]:
        """Each node's room besides GPUs (`geosched.core.room.resolve`), built on first use: only a job that states
        requests reads it."""
        specs = shipped_specs()
        return [room.resolve(n, specs) for n in self.fleet.nodes]

    def room_of(self, resource: str) -> IntArray:
        """Each node's room for one resource (`room.UNLIMITED` where nothing limits it), once per snapshot."""
        cached = self.__dict__.setdefault("_room_arrays", {})
        found: IntArray | None = cached.get(resource)
        if found is None:
            found = cached[resource] = np.fromiter((r.has(resource) for r in self.rooms), dtype=np.int64,
                                                   count=len(self.names))
        return found

    @cached_property
    def spot_hazard(self) -> FloatArray:
        return np.array([r.hazard_per_hour for r in self.spot_risk], dtype=np.float64)

    def hop_links(self, a: IntArray, b: IntArray, p95: bool = False) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(RTT, loss, throughput) of the links between nodes a[k] and b[k], all three from one pair: the
        measured node pair when there is one, else the zone pair combined with the two nodes' own summaries
        (as `NetworkView.link` estimates it)."""
        za, zb = self.zone_of[a], self.zone_of[b]
        sum_rtt = self.sum_rtt95 if p95 else self.sum_rtt
        zone_rtt, zone_loss, zone_tput = self.zone_pairs.get_many(("rtt95" if p95 else "rtt", "loss", "tput"), za, zb)
        rtt = np.maximum(zone_rtt, np.maximum(sum_rtt[a], sum_rtt[b]))
        loss = np.maximum(zone_loss, np.maximum(self.sum_loss[a], self.sum_loss[b]))
        tput = np.minimum(zone_tput, np.minimum(self.sum_tput[a], self.sum_tput[b]))
        if self.pair_key.size:
            key = np.minimum(a, b) * len(self.names) + np.maximum(a, b)
            at = np.minimum(np.searchsorted(self.pair_key, key), self.pair_key.size - 1)
            found = self.pair_key[at] == key
            if found.any():
                hit = at[found]
                rtt[found] = (self.pair_rtt95 if p95 else self.pair_rtt)[hit]
                loss[found] = self.pair_loss[hit]
                tput[found] = self.pair_tput[hit]
        return rtt, loss, tput

    def with_free(self, gpus_free: IntArray) -> PlacementContext:
        """The same snapshot with other free-GPU counts (the arrays are shared, not copied)."""
        other = copy.copy(self)
        other.gpus_free = gpus_free
        return other

    def with_grid(self, per_region: FloatArray) -> PlacementContext:
        """The same snapshot at other grid intensities, one per region in `region_keys` order (gCO2e/kWh): the
        time-shift decision's view of an hour, or of a run's mean (policies/timeshift.py)."""
        other = copy.copy(self)
        other.grid = np.asarray(per_region, dtype=np.float64)[self.region_of]
        other._carbon_gpu = {}
        other._carbon_ref = {}
        other.reference_steps = {}
        return other

    def carbon_gpu(self, utilisation: float) -> tuple[FloatArray, BoolArray]:
        """Each node's gCO2e per GPU-hour at this GPU utilisation (energy per GPU-hour times the grid), and which
        values count in the median (`_counted`). Do not change the arrays: every decision on this snapshot's
        grid shares them."""
        out = self._carbon_gpu.get(utilisation)
        if out is None:
            carbon = kwh_per_gpu_hour(self, utilisation) * self.grid
            out = self._carbon_gpu[utilisation] = (carbon, _counted(carbon))
        return out

    def carbon_ref_order(self, utilisation: float) -> tuple[FloatArray, IntArray, FloatArray]:
        """`carbon_gpu`, and the nodes whose value counts in the median (`_counted`) by value with those
        values in that order: a decision's reference is read off the middle of its eligible ones."""
        out = self._carbon_ref.get(utilisation)
        if out is None:
            carbon, counted = self.carbon_gpu(utilisation)
            out = self._carbon_ref[utilisation] = (carbon, *_by_value(carbon, counted))
        return out

    def zone_link_known(self, a: str, b: str) -> bool:
        return pair_key(a, b) in self.network.zone_links


@dataclass(frozen=True)
class JobView:
    """One job seen against one context: who is eligible, how many workers each node holds, what each
    GPU-hour costs and emits there, and the reference values the score is normalised by.

    `removed[f, z]` counts the nodes of zone z that filter f (named `filters[f]`) took out, each node under
    the first filter that removed it."""

    ctx: PlacementContext
    job: Job
    weights: Weights
    eligible: BoolArray
    capacity: IntArray
    price_gpu: FloatArray
    # What the cost term charges per GPU-hour: the price, risk-adjusted for a spot job (policies/spotrisk.py).
    cost_gpu: FloatArray
    carbon_gpu: FloatArray
    price_ref: float
    carbon_ref: float
    ideal_step_ms: float
    # Each filter's reason and the nodes it keeps, in the order applied (`removed` is counted from them when read).
    restrictions: tuple[tuple[str, BoolArray], ...]
    explain: bool = True

    @property
    def filters(self) -> tuple[str, ...]:
        return tuple(reason for reason, _ in self.restrictions)

    @cached_property
    def removed(self) -> IntArray:
        """Counted on first read, not in `job_view`: only an explanation or a NoFit reads it, and counting it on
        every decision cost a replay several bincounts per job."""
        ctx = self.ctx
        left = np.ones(len(ctx.names), dtype=bool)
        out = []
        for _, mask in self.restrictions:
            out.append(np.bincount(ctx.zone_of[left & ~mask], minlength=len(ctx.zone_names)))
            left = left & mask
        return np.array(out, dtype=np.int64)

    @property
    def candidates(self) -> IntArray:
        return np.flatnonzero(self.eligible)

    @property
    def p95(self) -> bool:
        return self.job.profile.latency_sensitive

    @property
    def node_rtt(self) -> FloatArray:
        """Each node's own RTT at the percentile the job is judged on."""
        return self.ctx.node_rtt95 if self.p95 else self.ctx.node_rtt

    @property
    def filtered(self) -> dict[str, str]:
        """Zone -> how many of its nodes the filters took out, and which filter took how many."""
        ctx = self.ctx
        total = np.bincount(ctx.zone_of, minlength=len(ctx.zone_names)).tolist()
        hit = np.flatnonzero(self.removed.sum(axis=0))
        out: dict[str, str] = {}
        for z, counts in zip(hit.tolist(), self.removed[:, hit].T.tolist(), strict=True):
            gone = sum(counts)
            head = ("its one node" if gone == 1 else f"all {gone} nodes") if gone == total[z] else \
                f"{gone} of {total[z]} nodes"
            parts = ", ".join(f"{c} {name}" for c, name in zip(counts, self.filters, strict=True) if c)
            out[ctx.zone_names[z]] = f"{head} filtered out ({parts})"
        return out


@dataclass(frozen=True)
class _Shape:
    """What `job_view` computes for a job shape whatever GPUs are free: the filters other than free GPUs, in their
    order, and the prices. Built once per shape and context family (`PlacementContext.shapes`): a replay asks
    again for the same few shapes on every snapshot, and these filters were most of `job_view`'s time."""

    after: tuple[tuple[str, BoolArray], ...]  # the filters after "free GPUs", in the order applied
    static: BoolArray  # every filter but free GPUs: ready, then `after`
    held: IntArray | None
    price: FloatArray
    price_gpu: FloatArray
    cost: FloatArray  # `price`, or for a spot job its risk-adjusted price (`price` itself when not spot)
    cost_gpu: FloatArray
    # The nodes whose price counts in the reference (`_counted`: of `price`, or `cost` for a spot job) and pass
    # `static`, by that price, and those prices in that order: a decision's reference is the median of the ones
    # with room, read off the middle instead of partitioning them again.
    ref_nodes: IntArray
    ref_values: FloatArray


def _shape(ctx: PlacementContext, job: Job, weights: Weights) -> _Shape:
    spot = job.pricing is Pricing.SPOT
    # Everything below reads: the filters' fields and, for a spot job, what its risk factor reads.
    key = (job.gpu, job.providers, job.regions, job.zones, job.clusters, job.worker_requests, job.pricing,
           (job.gpus, Rework.of(job.profile).hours, weights.spot_risk) if spot else None)
    found = ctx.shapes.get(key)
    if found is not None:
        return found
    restrictions: list[tuple[str, BoolArray]] = []

    def restrict(mask: BoolArray, reason: str) -> None:
        restrictions.append((reason, mask))

    if job.gpu is not None:
        restrict(ctx.gpu_of == _index(ctx.gpu_names, job.gpu), f"not {job.gpu}")
    if job.providers:
        restrict(np.isin(ctx.provider_of, list(job.providers)), "of a provider the job does not allow")
    if job.regions:
        allowed = [i for i, key in enumerate(ctx.region_keys) if key in job.regions or key.split(":")[1]
                   in job.regions]
        restrict(np.isin(ctx.region_of, allowed), "in a region the job does not allow")
    if job.zones:
        wanted = places.zone_keys(ctx.fleet, job.zones)  # an EKS zone name as the zone ID its nodes say it is
        allowed = [i for i, z in enumerate(ctx.zone_names) if z in wanted]
        restrict(np.isin(ctx.zone_of, allowed), "in a zone the job does not allow")
    if job.clusters:
        allowed = [i for i, c in enumerate(ctx.cluster_names) if c in job.clusters]
        restrict(np.isin(ctx.cluster_of, allowed), "in a cluster the job does not allow")
    held = workers_held(ctx, job, restrict)
    price = ctx.price_ondemand if job.pricing is Pricing.ON_DEMAND else ctx.price_spot
    has_price, price_gpu, price_counted = ctx.priced[job.pricing]
    restrict(has_price, f"without a {job.pricing.value} price")
    cost = price
    if spot:
        # The cost term charges the expected $ per useful hour (spotrisk.factor); a gang on nodes like this one
        # has ceil(GPUs / node GPUs) members, any of which stops it (exact for the usual one-zone, one-type gang).
        members = np.ceil(job.gpus / np.maximum(ctx.gpus_total, 1))
        cost = price * spotrisk.factor(ctx.spot_hazard, members, Rework.of(job.profile).hours, weights.spot_risk)
    static = ctx.ready
    for _, mask in restrictions:
        static = static & mask
    ref_nodes, ref_values = _by_value(cost, static & (price_counted if cost is price else _counted(cost)))
    out = ctx.shapes[key] = _Shape(
        after=tuple(restrictions), static=static, held=held, price=price, price_gpu=price_gpu, cost=cost,
        cost_gpu=price_gpu if cost is price else np.nan_to_num(cost, nan=0.0), ref_nodes=ref_nodes,
        ref_values=ref_values)
    return out


def job_view(ctx: PlacementContext, job: Job, weights: Weights, explain: bool = True) -> JobView:
    """`explain=False` skips what only a person reads (rejections, alternatives): the simulator's fast path."""
    g = job.gpus_per_worker
    shape = _shape(ctx, job, weights)
    has_room = ctx.gpus_free >= g
    # The filters in the order `removed` counts them: ready, free GPUs, then the shape's.
    restrictions = (("not ready", ctx.ready), (f"with fewer than {g} free GPUs", has_room), *shape.after)
    eligible = shape.static & has_room
    capacity = np.where(eligible, ctx.gpus_free // g, 0)
    if shape.held is not None:
        capacity = np.minimum(capacity, shape.held)
    carbon_gpu, carbon_nodes, carbon_values = ctx.carbon_ref_order(job.profile.utilisation)
    ideal = ideal_step_ms(ctx, job, eligible, capacity)
    return JobView(
        ctx=ctx,
        job=job,
        weights=weights,
        eligible=eligible,
        capacity=capacity,
        price_gpu=shape.price_gpu,
        cost_gpu=shape.cost_gpu,
        carbon_gpu=carbon_gpu,
        price_ref=_median(shape.ref_values[has_room[shape.ref_nodes]]),
        carbon_ref=_median(carbon_values[eligible[carbon_nodes]]),
        ideal_step_ms=ideal,
        restrictions=restrictions,
        explain=explain,
    )


def workers_held(ctx: PlacementContext, job: Job, restrict: Callable[[BoolArray, str], None]) -> IntArray | None:
    """How many of the job's workers each node has room for besides GPUs (`geosched.core.room`), each resource a
    worker asks for one filter (`restrict`), so --explain names the one a node lacks; None when the job states no
    requests."""
    held: IntArray | None = None
    for resource, want in job.worker_requests:
        have = ctx.room_of(resource)
        restrict(have >= want, f"without room for a worker's {resource} ({room.show(resource, want)})")
        count = np.maximum(have, 0) // want
        held = count if held is None else np.minimum(held, count)
    return held


def ideal_step_ms(ctx: PlacementContext, job: Job, eligible: BoolArray, capacity: IntArray) -> float:
    """Step time on the best link any eligible node or measured pair has (or none at all when one node holds
    the gang)."""
    # One worker needs no network whatever the nodes (and fits on any eligible one): said before any array is read.
    if job.workers <= 1 or not eligible.any() or capacity.max() >= job.workers:
        return job.profile.compute_ms
    p95 = job.profile.latency_sensitive
    rtt = ctx.node_rtt95 if p95 else ctx.node_rtt
    # A measured pair may beat both its nodes' summaries (the median of their links): count it too, so the
    # ideal stays a lower bound and the network term >= 1.
    pair_rtt = ctx.pair_rtt95 if p95 else ctx.pair_rtt
    measured = ctx.pair_key.size > 0
    best = comm_ms(
        job.workers,
        job.profile.message_mb,
        rtt_ms=min(float(rtt[eligible].min()), float(pair_rtt.min()) if measured else np.inf),
        loss=min(float(ctx.node_loss[eligible].min()), float(ctx.pair_loss.min()) if measured else np.inf),
        throughput_gbps=max(float(ctx.node_tput[eligible].max()), float(ctx.pair_tput.max()) if measured else 0.0),
    )
    return job.profile.compute_ms + best


def _index(names: list[str], name: str) -> int:
    return names.index(name) if name in names else -1


def _per_gpu(prices: list[float | None], gpus: IntArray) -> FloatArray:
    raw = np.array([np.nan if p is None else p for p in prices], dtype=np.float64)
    return raw / np.maximum(gpus, 1)


def _counted(values: FloatArray) -> BoolArray:
    """The values a term's reference (`_median` of the eligible nodes' ones) counts: finite and positive. A free
    pool (on-prem machines priced $0, a region declared at 0 gCO2e/kWh) is left out of the reference, not made its
    median: with it in, the reference went to 0 and any priced candidate's term to billions, swamping every other
    term (issue 23). A free candidate still scores 0 on the term; when every eligible node is free, the term is 0
    for all."""
    out: BoolArray = np.isfinite(values) & (values > 0)
    return out


def _by_value(values: FloatArray, among: BoolArray) -> tuple[IntArray, FloatArray]:
    """The nodes of `among` by value (lowest first) and their values in that order."""
    nodes = np.flatnonzero(among)
    nodes = nodes[np.argsort(values[nodes], kind="stable")]
    return nodes, values[nodes]


def _median(counted: FloatArray) -> float:
    """What a term is normalised by: the median of values screened by `_counted`, given in ascending order (the
    middle read off, not partitioned on every decision)."""
    n = counted.size
    if n == 0:
        return 1.0
    return max(float(counted[(n - 1) // 2] + counted[n // 2]) / 2, 1e-9)
