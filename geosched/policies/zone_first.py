"""`zone-first`: one objective, with the gang kept in as few zones as the objective allows.

Every placement considered is scored by the shared objective (`scoring`: the weighted step time over the
ring's real hops, $ and carbon). The winner is chosen in the band of placements whose total is within
`Weights.zone_tolerance` of the best total considered: there, fewer regions, then fewer zones, then the
tightest (cluster, GPU) pool (fewest free workers left in it: the larger pools stay whole for the larger gangs),
then the best fit (fewest whole free nodes left in the zones it uses), both as Kueue TAS's BestFit, then the
lower total. Then the capacity-aware choice (`capacity.keep_room`): an option of as many regions and zones whose
total is within `capacity.CAPACITY_TOLERANCE` (12%) of the winner's and whose pool is tighter wins instead.
`max_zones` and `max_regions` are hard limits.

What is considered:

1. Every (cluster, GPU model, zone) cell that holds the gang, with its best nodes by node score (below), and
   the best node of the cell that holds the gang alone (no network step).
2. Multi-zone options of each region, whenever they could win: when no cell holds the gang, or when a lower
   bound of any multi-zone placement there (the cheapest and cleanest nodes on the region's best zone-pair
   link) beats the best single zone by more than the tolerance, which is the case whenever every single zone
   needs a degraded node, or carbon or cost weights favour another zone's nodes. Per region, the fewest
   zones that hold the gang and one more, at most `MAX_COMBOS` zone sets of each size; in each set the gang
   takes the best nodes by node score.
3. Zones across regions, grown from each region outwards by zone-pair RTT, under the same rule one level up.

Node score, lower is better: the score the gang would get on copies of that node (its own measured delay,
loss and throughput through `geosched.core.comm`, plus its normalised $ and carbon), so degraded nodes come last.

Limits: node choice inside a zone set is greedy by node score (the benchmark measures the gap to the exact
optimum); the multi-zone search is bounded as stated; the lower bound uses zone-pair links, so a measured
node pair across zones that is better than its zones' link is not foreseen.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from geosched.core.comm import comm_ms
from geosched.core.models import Candidate, NoFit, Placement, Rejection
from geosched.policies.base import fill, group_ids, no_capacity, placed, register
from geosched.policies.capacity import CAPACITY_TOLERANCE, keep_room
from geosched.policies.context import BoolArray, FloatArray, IntArray, JobView
from geosched.policies.scoring import Scored, run_ids, run_sizes, run_starts

NAME = "zone-first"
MAX_COMBOS = 32
MAX_LEVELS = 4
_NO_NODE = np.iinfo(np.int64).max  # a segment minimum's key where the cell has no node to offer


def node_scores(view: JobView, nodes: IntArray) -> tuple[FloatArray, FloatArray]:
    """Scores of `nodes`, in their order, and the network term alone (the node's own link)."""
    ctx, job, w = view.ctx, view.job, view.weights
    comm = comm_ms(job.workers, job.profile.message_mb, view.node_rtt[nodes], ctx.node_loss[nodes],
                   ctx.node_tput[nodes])
    network = (job.profile.compute_ms + comm) / view.ideal_step_ms
    return (w.network * network + w.cost * view.cost_gpu[nodes] / view.price_ref
            + w.carbon * view.carbon_gpu[nodes] / view.carbon_ref), network


@dataclass
class _Batch:
    """Placements considered, flattened: chunks of options, option k of a chunk being `sizes[k]` nodes."""

    nodes: list[IntArray] = field(default_factory=list)
    workers: list[IntArray] = field(default_factory=list)
    sizes: list[IntArray] = field(default_factory=list)
    seen: set[bytes] = field(default_factory=set)
    _scored: Scored | None = None

    def add_runs(self, nodes: IntArray, workers: IntArray, sizes: IntArray) -> None:
        if sizes.size:
            self.nodes.append(nodes)
            self.workers.append(workers)
            self.sizes.append(sizes)
            self._scored = None

    def scored(self, view: JobView) -> Scored:
        """Every option scored at once (kept until the next option is added)."""
        if self._scored is None:
            sizes = np.concatenate(self.sizes)
            self._scored = Scored.of(view, np.concatenate(self.nodes), np.concatenate(self.workers),
                                     np.cumsum(sizes) - sizes)
        return self._scored

    def best(self, view: JobView) -> float | None:
        return self.scored(view).best if self else None

    def add(self, nodes: IntArray, workers: IntArray) -> None:
        """One more option, unless an equal one was added this way before."""
        key = np.sort(nodes).tobytes()
        if key not in self.seen:
            self.seen.add(key)
            self.add_runs(nodes, workers, np.array([nodes.size]))

    def __len__(self) -> int:
        return sum(s.size for s in self.sizes)


@dataclass(frozen=True)
class _Cells:
    """The eligible nodes grouped into (cluster, GPU, zone) cells, each cell's nodes best first."""

    order: IntArray
    cell: IntArray
    starts: IntArray
    capacity: IntArray
    score: FloatArray
    own: FloatArray


@register(NAME, "the default: best network, $ and carbon score, in as few zones as the score allows")
def zone_first(view: JobView) -> Placement | NoFit:
    if not view.eligible.any():
        return no_capacity(view, NAME)
    if view.job.workers == 1 and not view.explain:
        # One worker sits on one node, in one zone: no multi-zone option exists (the search would add only the
        # notes on limits an explanation shows), and each cell's options are two minima, found without sorting
        # its nodes by score: most of a replay's decisions (every gang of up to 8 GPUs) take this path.
        return _choose(view, _one_worker(view), [], None)
    ctx = view.ctx
    cand = view.candidates
    score = np.full(len(ctx.names), np.inf)
    own = np.full(len(ctx.names), np.inf)
    score[cand], own[cand] = node_scores(view, cand)
    cell = ctx.cell_of
    batch = _Batch()
    limits: list[Rejection] = []
    # Ties go to the tighter fit (fewer free GPUs), which keeps whole nodes free for larger gangs.
    order = cand[np.lexsort((cand, ctx.gpus_free[cand], score[cand], cell[cand]))]
    cells = _cells(view, order, score, own)
    _single_zone(view, cells, batch)
    _multi_zone(view, cells, batch, limits)
    if not batch:
        return no_capacity(view, NAME, limits + _short_cells(view, cells))
    return _choose(view, batch.scored(view), limits, cells)


def _cells(view: JobView, order: IntArray, score: FloatArray, own: FloatArray) -> _Cells:
    """`order`: the candidates grouped by cell, in cell order."""
    cell = view.ctx.cell_of[order]
    starts = run_starts(cell)
    return _Cells(order, cell[starts], starts, np.add.reduceat(view.capacity[order], starts), score, own)


@dataclass(frozen=True)
class _ByCell:
    """Nodes grouped by cell (`order`, cell k's run starting at `starts[k]`, `sizes[k]` long) and the tie-break of
    a choice among them: fewer free GPUs, then the lower index, as one integer (`tie`) whose remainder modulo the
    node count is the node."""

    order: IntArray
    starts: IntArray
    sizes: IntArray
    tie: IntArray
    nodes: int

    @staticmethod
    def of(view: JobView, order: IntArray, starts: IntArray, sizes: IntArray | None = None) -> _ByCell:
        n = len(view.ctx.names)
        if sizes is None:
            sizes = run_sizes(starts, order.size)
        return _ByCell(order, starts, sizes, view.ctx.gpus_free[order] * n + order, n)

    def lowest(self, values: FloatArray, among: BoolArray | None = None) -> IntArray:
        """Per cell, in cell order, the node of `among` (default: all; both indexed like `order`) of the lowest
        `values`, then the fewest free GPUs, then the lowest index: two segment minima, the same answer as a
        lexsort on those keys without sorting a float key, which was the costliest call of a one-worker
        decision. A NaN value (0 x an infinite price) keeps the sort, which orders NaN last where a minimum
        would not. `values` may hold several rows (keys), each answered on its own in one pass: a row of
        answers each."""
        starts, sizes = self.starts, self.sizes
        lowest = values if among is None else np.where(among, values, np.inf)
        least = np.minimum.reduceat(lowest, starts, axis=-1)
        if np.isnan(least).any():  # a minimum is NaN wherever its cell holds one
            if values.ndim > 1:
                return np.stack([self.lowest(row, among) for row in values])
            return self._sorted(values, among)
        tied = lowest == np.repeat(least, sizes, axis=-1)
        if among is not None:
            tied &= among
        best = np.minimum.reduceat(np.where(tied, self.tie, _NO_NODE), starts, axis=-1)
        out: IntArray = best % self.nodes if among is None else best[best != _NO_NODE] % self.nodes
        return out  # without `among` every cell has a node: its minimum is one of them, nothing to leave out

    def _sorted(self, values: FloatArray, among: BoolArray | None) -> IntArray:
        """`lowest` of one row by sorting."""
        order = self.order
        elem_cell = np.repeat(np.arange(self.starts.size), self.sizes)
        free = self.tie // self.nodes
        solo = np.flatnonzero(among) if among is not None else np.arange(order.size)
        solo = solo[np.lexsort((order[solo], free[solo], values[solo], elem_cell[solo]))]
        out: IntArray = order[solo[run_starts(elem_cell[solo])]]
        return out


def _one_worker(view: JobView) -> Scored:
    """`_single_zone` for a gang of one worker, whatever the order of each cell's nodes: every eligible node holds
    the worker, so each cell's best fill is its node of the lowest (score, free GPUs, index), and its best node
    alone is that of the lowest (additive terms, free GPUs, index), unless it is the same node. Scored at once:
    one node per option."""
    ctx, job, w = view.ctx, view.job, view.weights
    # The candidates grouped by cell, each cell's by index: what a stable argsort by cell gives, without sorting;
    # each cell's run counted on the fleet's cell runs, not found again among the candidates.
    eligible = view.eligible[ctx.by_cell]
    order = ctx.by_cell[eligible]
    sizes = np.add.reduceat(eligible, ctx.cell_runs, dtype=np.int64)
    sizes = sizes[sizes > 0]
    by_cell = _ByCell.of(view, order, np.cumsum(sizes) - sizes, sizes)
    # `node_scores` for one worker: no ring (comm_ms is 0 ms), so the network term is the same on every node and
    # no link is looked up. A one-element array keeps numpy's arithmetic (a 0 ms compute gives NaN, not an error).
    network = (job.profile.compute_ms + np.zeros(1)) / view.ideal_step_ms
    cost = w.cost * view.cost_gpu[order]
    carbon = w.carbon * view.carbon_gpu[order]
    # Both keys as the rows of one array, so both cells' minima take one pass: the score, the additive terms.
    keys = np.empty((2, order.size))
    np.add(w.network * network + cost / view.price_ref, carbon / view.carbon_ref, out=keys[0])
    np.add(cost, carbon, out=keys[1])
    fills, solo = by_cell.lowest(keys)
    nodes = np.concatenate((fills, solo[solo != fills]))
    ones = np.ones(nodes.size, dtype=np.int64)  # one worker on one node per option; never written to
    return Scored.of(view, nodes, ones, np.arange(nodes.size))


def _single_zone(view: JobView, cells: _Cells, batch: _Batch) -> None:
    """Each fitting cell's best fill, and its best node that holds the whole gang alone."""
    job = view.job
    order = cells.order
    cap = view.capacity[order]
    elem_cell = run_ids(cells.starts, order.size)
    fits = cells.capacity >= job.workers
    cum = np.cumsum(cap)
    before = cum - cap - (cum - cap)[cells.starts][elem_cell]
    take = np.minimum(np.maximum(job.workers - before, 0), cap)  # np.clip's wrapper costs more than both
    sel = (take > 0) & fits[elem_cell]
    nodes, taken, grp = order[sel], take[sel], elem_cell[sel]
    batch.add_runs(nodes, taken, run_sizes(run_starts(grp), nodes.size))
    # A node that holds the whole gang alone has no network step, whatever its link: it may beat its cell's
    # best fill even when its link ranks it last.
    alone = (cap >= job.workers) & fits[elem_cell]
    if alone.any():
        additive = view.weights.cost * view.cost_gpu + view.weights.carbon * view.carbon_gpu
        solo = _ByCell.of(view, order, cells.starts).lowest(additive[order], alone)
        # Leave out a node already taken alone as its cell's best fill (a mask: np.isin cost more than all this).
        filled_alone = np.zeros(len(view.ctx.names), dtype=bool)
        filled_alone[nodes[np.bincount(grp, minlength=fits.size)[grp] == 1]] = True
        solo = solo[~filled_alone[solo]]
        batch.add_runs(solo, np.full(solo.size, job.workers), np.ones(solo.size, dtype=np.int64))


def _multi_zone(view: JobView, cells: _Cells, batch: _Batch, limits: list[Rejection]) -> None:
    """Zone sets of one region, then across regions, wherever they could win (module docstring)."""
    ctx, job, w = view.ctx, view.job, view.weights
    n_zones = len(ctx.zone_names)
    group, zone = np.divmod(cells.cell, n_zones)
    region = ctx.region_of_zone[zone]
    ends = np.append(cells.starts[1:], cells.order.size)
    max_zones = job.max_zones or n_zones
    max_regions = job.max_regions or len(ctx.region_keys)
    best_single = batch.best(view)
    tol = 1 + w.zone_tolerance
    # Lower bounds: the cheapest and cleanest node of the pool on the best link between two of its zones.
    additive = (w.cost * np.minimum.reduceat(view.cost_gpu[cells.order], cells.starts) / view.price_ref
                + w.carbon * np.minimum.reduceat(view.carbon_gpu[cells.order], cells.starts) / view.carbon_ref)
    best = ctx.region_best
    rtt = best["rtt95"] if view.p95 else best["rtt"]
    inside = w.network * (job.profile.compute_ms + comm_ms(job.workers, job.profile.message_mb, rtt, best["loss"],
                                                           best["tput"])) / view.ideal_step_ms
    cross = ctx.cross_best
    across = w.network * (job.profile.compute_ms + comm_ms(
        job.workers, job.profile.message_mb, cross["rtt95"] if view.p95 else cross["rtt"], cross["loss"],
        cross["tput"])) / view.ideal_step_ms

    def members(chosen: tuple[int, ...]) -> IntArray:
        return np.concatenate([cells.order[cells.starts[c]:ends[c]] for c in chosen])

    # Link bands: the nodes whose own link is within the tolerance of the best, then the next band, and so
    # on. A zone set is tried with the nodes of the lowest bands only, so the gang can leave out degraded
    # nodes by spreading over more zones: at the first level (bands up to MAX_LEVELS - 1) that holds the
    # gang, and with every node.
    @cache
    def bands() -> tuple[IntArray, list[float], list[IntArray]]:
        """Each node's link band (geometric, of width the tolerance, from the best own link), the levels
        tried (band numbers, then every node) and each cell's capacity at each level. Only computed when a
        multi-zone search runs."""
        own = cells.own[cells.order]
        if w.zone_tolerance > 0:
            of_order = np.floor(np.log(own / own.min()) / np.log1p(w.zone_tolerance)).astype(np.int64)
        else:
            of_order = np.unique(own, return_inverse=True)[1].astype(np.int64)
        band = np.zeros(len(ctx.names), dtype=np.int64)
        band[cells.order] = of_order
        levels = [*np.unique(of_order)[: MAX_LEVELS - 1].tolist(), np.inf]
        capacity = [np.add.reduceat(view.capacity[cells.order] * (of_order <= level), cells.starts)
                    for level in levels]
        return band, levels, capacity

    def consider(chosen: IntArray, label: str) -> bool:
        """At the lowest link level that holds the gang and with every node, the fewest cells of `chosen`
        that hold it and one more: each zone set's best fill."""
        band, levels, level_capacity = bands()
        found = False
        for level, capacity in zip(levels, level_capacity, strict=True):
            if found and level != np.inf:
                continue
            ranked = chosen[np.argsort(-capacity[chosen], kind="stable")]
            reach = np.cumsum(capacity[ranked])
            if reach.size == 0 or reach[-1] < job.workers:
                continue
            fewest = max(int(np.searchsorted(reach, job.workers)) + 1, 2)
            if fewest > max_zones:
                if level == np.inf and not found:
                    limits.append(Rejection(label, f"the job's max_zones {max_zones} binds: the gang needs "
                                            f"{fewest} zones here"))
                continue
            for k in range(fewest, min(fewest + 1, max_zones, ranked.size) + 1):
                combos = (c for c in itertools.combinations(ranked.tolist(), k)
                          if capacity[list(c)].sum() >= job.workers)
                for combo in itertools.islice(combos, MAX_COMBOS):
                    pool = members(combo)
                    pool = pool[band[pool] <= level]
                    found |= fill_around(pool[np.lexsort((pool, ctx.gpus_free[pool], cells.score[pool]))])
        return found

    def fill_around(pool: IntArray) -> bool:
        """The best fill of `pool` by node score, and the fills that leave out one of the two worst link bands
        it took: two degraded nodes side by side in the ring cost more than their own scores say (a hop takes
        the worse delay of one and the worse loss of the other)."""
        band = bands()[0]
        nodes, workers = fill(view, pool)
        fills = [(nodes, workers)]
        for worse in np.unique(band[nodes]).tolist()[1:][-2:]:
            fills.append(fill(view, pool[band[pool] != worse]))
        found = False
        for nodes, workers in fills:
            if workers.sum() == job.workers and np.unique(ctx.zone_of[nodes]).size > 1:
                batch.add(nodes, workers)
                found = True
        return found

    key = group * len(ctx.region_keys) + region
    lowest = np.full(int(key.max()) + 1, np.inf)
    np.minimum.at(lowest, key, additive)
    # The pools of a region with several cells whose lower bound could win, tested all at once: most fail,
    # and a test per pool in Python cost more than the rest of the decision (issue 22, replay speed).
    several = np.flatnonzero(np.bincount(key) > 1)
    if best_single is not None:
        several = several[(inside[several % len(ctx.region_keys)] + lowest[several]) * tol < best_single]
    for k in several.tolist():
        g, r = divmod(k, len(ctx.region_keys))
        consider(np.flatnonzero(key == k), f"{ctx.group_labels[g]} in {ctx.region_keys[r]}")
    # Only pools with cells in two regions or more can cross regions: found in one pass, not pool by pool.
    spans = np.bincount(np.unique(key) // len(ctx.region_keys))
    for g in np.flatnonzero(spans > 1).tolist():
        in_group = np.flatnonzero(group == g)
        regions = np.unique(region[in_group]).tolist()
        if len(regions) < 2:
            continue
        so_far = batch.best(view)
        if so_far is not None and (across + additive[in_group].min()) * tol >= so_far:
            continue
        if max_regions < 2:
            if so_far is None and cells.capacity[in_group].sum() >= job.workers:
                limits.append(Rejection(ctx.group_labels[g], "the job's max_regions 1 binds: only zones of "
                                        "several regions hold the gang"))
            continue
        found = False
        for seed in regions:
            for grown in _nearest_regions(view, cells, in_group, region, seed, max_regions):
                if consider(in_group[np.isin(region[in_group], grown)],
                            f"{ctx.group_labels[g]} in {', '.join(ctx.region_keys[x] for x in grown)}"):
                    found = True
                    break
        if not found and cells.capacity[in_group].sum() >= job.workers and max_regions < len(regions):
            limits.append(Rejection(ctx.group_labels[g], f"the job's max_regions {max_regions} binds: the "
                                    f"nearest {max_regions} regions do not hold the gang"))


@dataclass(frozen=True)
class Ranking:
    """Options ranked by the rule in the module docstring: `order[0]` wins."""

    order: IntArray
    total: FloatArray
    zones: IntArray
    regions: IntArray
    left: FloatArray
    best: float
    pool_left: FloatArray
    room: bool = False  # the capacity-aware choice (`capacity.keep_room`) moved a tighter pool's option first


def rank(view: JobView, nodes: IntArray, starts: IntArray, total: FloatArray, usd: FloatArray) -> Ranking:
    """Rank options (option k: nodes[starts[k]:starts[k+1]]) scored `total`: in the tolerance band of the best
    total, fewer regions, fewer zones, the tightest pool, best fit, lower total, cheaper, then first given; then
    the capacity-aware choice (`capacity.keep_room`): a tighter pool's option of as many regions and zones within
    `capacity.CAPACITY_TOLERANCE` of the winner's total goes first."""
    ctx = view.ctx
    # Best fit: whole free nodes left in the zones (of its cluster and GPU) the placement uses.
    cell = ctx.cell_of
    whole = (ctx.gpus_free == ctx.gpus_total) & view.eligible
    cell_whole = np.bincount(cell[whole], minlength=ctx.cell_count)
    elem_cell = cell[nodes]
    left: FloatArray
    if nodes.size == starts.size:
        # Every option one node (every gang of up to 8 GPUs): one zone, one region, its cell counted once; the
        # same figures as below without the sorting.
        zones = regions = np.ones(starts.size, dtype=np.int64)
        left = (cell_whole[elem_cell] - whole[nodes]).astype(np.float64)
    else:
        rid = run_ids(starts, nodes.size)
        zones = _distinct(rid, ctx.zone_of[nodes], starts.size)
        regions = _distinct(rid, ctx.region_of[nodes], starts.size)
        by_cell = np.lexsort((elem_cell, rid))
        first = np.ones(nodes.size, dtype=bool)
        first[by_cell[1:]] = ((rid[by_cell[1:]] != rid[by_cell[:-1]])
                              | (elem_cell[by_cell[1:]] != elem_cell[by_cell[:-1]]))
        left = np.bincount(rid, weights=cell_whole[elem_cell] * first - whole[nodes],
                           minlength=starts.size).astype(np.float64)
    # Pool fit: free workers the placement's (cluster, GPU) pool keeps, as Kueue TAS's BestFit one level up.
    groups = group_ids(view)
    pool_room = np.bincount(groups, weights=view.capacity, minlength=ctx.group_count)
    pool_left: FloatArray = (pool_room[groups[nodes[starts]]] - view.job.workers).astype(np.float64)
    best = float(total.min())
    band = total <= best * (1 + view.weights.zone_tolerance) + 1e-12
    # Outside the band only the total counts (it orders the alternatives shown). With one node per option every
    # option spans one zone and one region: those two keys are equal wherever ~band is, and are left out.
    keys = (np.arange(total.size), usd, total, left * band, pool_left * band)
    if nodes.size == starts.size:
        order = np.lexsort((*keys, ~band))
    else:
        order = np.lexsort((*keys, zones * band, regions * band, ~band))
    by_objective = int(order[0])
    order = keep_room(order, total, zones, regions, pool_left, usd)
    return Ranking(order, total, zones, regions, left, best, pool_left, int(order[0]) != by_objective)


def _choose(view: JobView, s: Scored, limits: list[Rejection], cells: _Cells | None) -> Placement:
    """The winner of the options `s`; with an explanation, every other option and why it lost (`cells`: the
    search's cells, for the ones too small; None only when nothing is explained)."""
    r = rank(view, s.nodes, s.starts, s.total, s.usd)
    chosen = int(r.order[0])
    if not view.explain:
        return placed(view, NAME, *s.members(chosen), score=s.scores(view, [chosen])[0])
    order = r.order.tolist()
    every = s.scores(view, order)
    # A gang never leaves its (cluster, GPU) group: its first node names the group and the cluster.
    ctx = view.ctx
    zone_lists = np.split(ctx.zone_of[s.nodes], s.starts[1:])
    heads = s.nodes[s.starts]
    groups = group_ids(view)[heads].tolist()
    clusters = ctx.cluster_of[heads].tolist()
    alternatives, rejected = [], []
    for k, score in zip(order[1:], every[1:], strict=True):
        zones = tuple(sorted({ctx.zone_names[z] for z in zone_lists[k].tolist()}))
        alternatives.append(Candidate(zones, ctx.cluster_names[clusters[k]], score))
        rejected.append(Rejection(f"{'+'.join(zones)} ({ctx.group_labels[groups[k]]})", _why_not(view, r, k, chosen)))
    rejected += limits + (_short_cells(view, cells) if cells is not None else [])
    rejected += [Rejection(z, r) for z, r in sorted(view.filtered.items())]
    return placed(view, NAME, *s.members(chosen), rejected, alternatives, every[0])


def _why_not(view: JobView, r: Ranking, k: int, chosen: int) -> str:
    """The rule that ranked option k below the chosen one, in words."""
    tol, total, best = view.weights.zone_tolerance, r.total, r.best
    if r.room and r.pool_left[k] > r.pool_left[chosen] and (r.zones[k], r.regions[k]) == (r.zones[chosen],
                                                                                           r.regions[chosen]):
        return (f"total {total[k]:.3f}, but its pool keeps {r.pool_left[k]:.0f} free workers (chosen: "
                f"{r.pool_left[chosen]:.0f}, total {total[chosen]:.3f}, within {CAPACITY_TOLERANCE:.0%}: "
                "the tightest pool keeps the larger pools whole for the larger gangs)")
    if total[k] > best * (1 + tol) + 1e-12:
        return f"total {total[k]:.3f} is more than {tol:.0%} above the best, {best:.3f}"
    inside = f"total {total[k]:.3f} within {tol:.0%} of the best {best:.3f}, but"
    if r.regions[k] != r.regions[chosen]:
        return f"{inside} spans {r.regions[k]} regions (chosen: {r.regions[chosen]})"
    if r.zones[k] != r.zones[chosen]:
        return f"{inside} spans {r.zones[k]} zones (chosen: {r.zones[chosen]})"
    if r.pool_left[k] != r.pool_left[chosen]:
        return (f"{inside} its pool keeps {r.pool_left[k]:.0f} free workers (chosen: {r.pool_left[chosen]:.0f}; "
                "the tightest pool keeps the largest pools whole for the largest gangs)")
    if r.left[k] != r.left[chosen]:
        return (f"{inside} leaves {r.left[k]:.0f} whole free nodes in its zones (chosen: {r.left[chosen]:.0f}; "
                "best fit keeps larger zones whole)")
    return f"total {total[k]:.3f} >= chosen {total[chosen]:.3f}"


def _distinct(rid: IntArray, values: IntArray, runs: int) -> IntArray:
    """How many distinct values each run holds."""
    pairs = np.unique(rid * (int(values.max(initial=0)) + 1) + values)
    return np.bincount(pairs // (int(values.max(initial=0)) + 1), minlength=runs)


def _short_cells(view: JobView, cells: _Cells) -> list[Rejection]:
    """Cells too small for the gang on their own."""
    out = []
    ctx = view.ctx
    for c, cap in zip(cells.cell.tolist(), cells.capacity.tolist(), strict=True):
        if cap < view.job.workers:
            g, z = divmod(c, len(ctx.zone_names))
            out.append(Rejection(ctx.zone_names[z], f"holds {cap} of {view.job.workers} workers "
                                 f"({ctx.group_labels[g]})"))
    return out


def _nearest_regions(view: JobView, cells: _Cells, in_group: IntArray, region: IntArray, seed: int,
                     max_regions: int) -> list[list[int]]:
    """The seed region with its nearest regions (by best zone-pair RTT) added one at a time."""
    ctx = view.ctx
    zone = cells.cell % len(ctx.zone_names)
    regions = np.unique(region[in_group]).tolist()
    zones_of = {r: zone[in_group[region[in_group] == r]] for r in regions}
    distance = {r: ctx.zone_pairs.best("rtt", zones_of[seed], z) for r, z in zones_of.items()}
    distance[seed] = -1.0
    ordered = sorted(distance, key=lambda r: (distance[r], r))[:max_regions]
    return [ordered[: i + 1] for i in range(1, len(ordered))]
