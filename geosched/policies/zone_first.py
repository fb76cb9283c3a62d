"""`zone-first`: the whole gang in one zone if at all possible, then the best nodes there.

1. Candidates are (cluster, GPU model, zone) cells whose eligible free capacity holds every worker.
2. In each cell the gang takes the best nodes by node score (below); each cell's assignment is scored
   with the shared `evaluate` terms and the lowest total wins (ties: cheaper, then by name).
3. If no single cell holds the gang: the fewest zones of one region (every combination of that size
   whose capacity suffices), and only then zones across regions, grown from each region outwards by
   zone-pair RTT. Candidates are ranked by (regions > 1, zones spanned, total score).

Node score, lower is better, each measure min-max normalised over the eligible nodes:

    w_network * (0.5 * delay + 0.2 * loss + 0.3 * (1 - throughput)) + w_cost * price + w_carbon * carbon

Limits: the multi-zone search tries at most `MAX_COMBOS` zone sets per region and one growth per seed
region across regions; it is exact for single-zone placements up to the node ranking.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from geosched.comm import comm_ms
from geosched.models import Candidate, NoFit, Placement, Rejection, Score
from geosched.policies.base import fill, group_ids, no_capacity, placed, register
from geosched.policies.context import FloatArray, IntArray, JobView
from geosched.policies.scoring import evaluate

NAME = "zone-first"
DELAY, LOSS, THROUGHPUT = 0.5, 0.2, 0.3
MAX_ALTERNATIVES = 5
MAX_COMBOS = 32


def node_scores(view: JobView) -> FloatArray:
    ctx, w, e = view.ctx, view.weights, view.eligible

    def norm(x: FloatArray) -> FloatArray:
        lo, hi = float(x[e].min()), float(x[e].max())
        return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)

    network = DELAY * norm(ctx.node_rtt) + LOSS * norm(ctx.node_loss) + THROUGHPUT * (1 - norm(ctx.node_tput))
    return w.network * network + w.cost * norm(view.price_gpu) + w.carbon * norm(view.carbon_gpu)


@dataclass(frozen=True)
class _Option:
    nodes: IntArray
    workers: IntArray
    score: Score
    tier: int
    zones: int

    @property
    def key(self) -> tuple[int, int, float, float]:
        return (self.tier, self.zones, self.score.total, self.score.usd_per_hour)


@register(NAME)
def zone_first(view: JobView) -> Placement | NoFit:
    cand = view.candidates
    if cand.size == 0:
        return no_capacity(view, NAME)
    ctx, job = view.ctx, view.job
    score = node_scores(view)
    cell = group_ids(view) * len(ctx.zone_names) + ctx.zone_of
    order = cand[np.lexsort((cand, score[cand], cell[cand]))]
    cells = cell[order]
    starts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]])
    totals = np.add.reduceat(view.capacity[order], starts)
    fits = totals >= job.workers
    if fits.any():
        return _single_zone(view, order, cells, starts, totals, fits)
    return _multi_zone(view, score, order, cells, starts, totals)


def _single_zone(view: JobView, order: IntArray, cells: IntArray, starts: IntArray, totals: IntArray,
                 fits: np.ndarray) -> Placement:
    """Score every fitting cell at once: the gang takes each cell's best nodes."""
    ctx, job, w = view.ctx, view.job, view.weights
    cap = view.capacity[order]
    group_of_elem = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, order.size]))
    cum = np.cumsum(cap)
    before = cum - cap - (cum - cap)[starts][group_of_elem]
    take = np.clip(job.workers - before, 0, cap)
    sel = (take > 0) & fits[group_of_elem]
    idx, taken, grp = order[sel], take[sel], group_of_elem[sel]
    gstarts = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]])
    fit_groups = grp[gstarts]
    nodes_used = np.diff(np.r_[gstarts, idx.size])
    rtt = np.maximum.reduceat(ctx.node_rtt[idx], gstarts)
    loss = np.maximum.reduceat(ctx.node_loss[idx], gstarts)
    tput = np.minimum.reduceat(ctx.node_tput[idx], gstarts)
    comm = np.where(nodes_used > 1, comm_ms(job.workers, job.profile.message_mb, rtt, loss, tput), 0.0)
    gpus = taken * job.gpus_per_worker
    usd = np.add.reduceat(gpus * view.price_gpu[idx], gstarts)
    gco2e = np.add.reduceat(gpus * view.carbon_gpu[idx], gstarts)
    total = (w.network * (job.profile.compute_ms + comm) / view.ideal_step_ms
             + w.cost * usd / (job.gpus * view.price_ref)
             + w.carbon * gco2e / (job.gpus * view.carbon_ref))
    ranking = np.lexsort((fit_groups, usd, total))
    members = np.split(idx, gstarts[1:])
    workers = np.split(taken, gstarts[1:])

    best = int(ranking[0])
    best_score = evaluate(view, members[best], workers[best])
    alternatives = [
        _candidate(view, members[k], evaluate(view, members[k], workers[k]))
        for k in ranking[1 : 1 + MAX_ALTERNATIVES].tolist()
    ]
    rejected = []
    for g in np.flatnonzero(~fits).tolist():
        rejected.append(Rejection(_zone(view, order[starts[g]]),
                                  f"holds {int(totals[g])} of {job.workers} workers"
                                  f" ({_group_label(view, order[starts[g]])})"))
    for k in ranking[1:].tolist():
        rejected.append(Rejection(_zone(view, members[k][0]),
                                  f"total {total[k]:.3f} > {total[best]:.3f}"
                                  f" ({_group_label(view, members[k][0])})"))
    rejected.reverse()  # ranked-out cells first, then those too small
    rejected += [Rejection(z, r) for z, r in sorted(view.filtered.items())]
    return placed(view, NAME, members[best], workers[best], rejected, alternatives, best_score)


def _multi_zone(view: JobView, score: FloatArray, order: IntArray, cells: IntArray, starts: IntArray,
                totals: IntArray) -> Placement | NoFit:
    """No zone holds the gang: fewest zones in one region, then across regions."""
    ctx, job = view.ctx, view.job
    head = order[starts]
    n_zones = len(ctx.zone_names)
    cell_group = cells[starts] // n_zones
    cell_region = ctx.region_of[head]
    members = np.split(order, starts[1:])
    options: list[_Option] = []
    max_zones = job.max_zones or n_zones
    max_regions = job.max_regions or len(ctx.region_keys)

    def consider(chosen: list[int], tier: int) -> None:
        pool = np.concatenate([members[c] for c in chosen])
        pool = pool[np.lexsort((pool, score[pool]))]
        nodes, workers = fill(view, pool)
        zones = int(np.unique(ctx.zone_of[nodes]).size)
        regions = int(np.unique(ctx.region_of[nodes]).size)
        if zones <= max_zones and regions <= max_regions:
            options.append(_Option(nodes, workers, evaluate(view, nodes, workers), tier, zones))

    for group in np.unique(cell_group).tolist():
        in_group = np.flatnonzero(cell_group == group)
        for region in np.unique(cell_region[in_group]).tolist():
            local = in_group[cell_region[in_group] == region]
            local = local[np.argsort(-totals[local], kind="stable")]
            k = _fewest(totals[local], job.workers)
            if k is None or k > max_zones:
                continue
            combos = (c for c in itertools.combinations(local.tolist(), k)
                      if totals[list(c)].sum() >= job.workers)
            for combo in itertools.islice(combos, MAX_COMBOS):
                consider(list(combo), tier=1)
    if not options and max_regions > 1:
        for group in np.unique(cell_group).tolist():
            in_group = np.flatnonzero(cell_group == group)
            for seed in np.unique(cell_region[in_group]).tolist():
                chosen = _grow_across_regions(view, in_group, cell_region, totals, head, seed, max_regions)
                if chosen is not None:
                    consider(chosen, tier=2)
    extra = [Rejection(_zone(view, head[c]), f"holds {int(totals[c])} of {job.workers} workers"
                       f" ({_group_label(view, head[c])})") for c in range(starts.size)]
    if not options:
        return no_capacity(view, NAME, extra)
    options.sort(key=lambda o: o.key)
    best = options[0]
    alternatives = [_candidate(view, o.nodes, o.score) for o in options[1 : 1 + MAX_ALTERNATIVES]]
    rejected = extra + [Rejection(z, r) for z, r in sorted(view.filtered.items())]
    return placed(view, NAME, best.nodes, best.workers, rejected, alternatives, best.score)


def _fewest(capacities: IntArray, workers: int) -> int | None:
    """The fewest cells (largest first) whose capacity holds the gang."""
    reach = np.cumsum(capacities)
    if reach.size == 0 or reach[-1] < workers:
        return None
    return int(np.searchsorted(reach, workers) + 1)


def _grow_across_regions(view: JobView, in_group: IntArray, cell_region: IntArray, totals: IntArray,
                         head: IntArray, seed: int, max_regions: int) -> list[int] | None:
    """Add regions nearest to `seed` (by best zone-pair RTT) until the gang fits, then the fewest zones."""
    ctx = view.ctx
    seed_zones = ctx.zone_of[head[in_group[cell_region[in_group] == seed]]]
    regions = np.unique(cell_region[in_group])
    distance = {int(r): float(ctx.zz_rtt[np.ix_(seed_zones, ctx.zone_of[head[in_group[cell_region[in_group] == r]]])]
                              .min()) for r in regions}
    distance[seed] = -1.0
    chosen_regions: list[int] = []
    for region in sorted(distance, key=lambda r: (distance[r], r))[:max_regions]:
        chosen_regions.append(region)
        pool = in_group[np.isin(cell_region[in_group], chosen_regions)]
        pool = pool[np.argsort(-totals[pool], kind="stable")]
        k = _fewest(totals[pool], view.job.workers)
        if k is not None:
            return [int(c) for c in pool[:k]]
    return None


def _zone(view: JobView, node: int) -> str:
    return view.ctx.zone_names[int(view.ctx.zone_of[node])]


def _group_label(view: JobView, node: int) -> str:
    ctx = view.ctx
    cluster = ctx.cluster_names[ctx.cluster_of[node]]
    gpu = ctx.gpu_names[ctx.gpu_of[node]]
    return f"{gpu}, cluster {cluster}" if cluster else gpu


def _candidate(view: JobView, nodes: IntArray, score: Score) -> Candidate:
    ctx = view.ctx
    zones = tuple(sorted({ctx.zone_names[z] for z in ctx.zone_of[nodes]}))
    clusters = {ctx.cluster_names[c] for c in ctx.cluster_of[nodes]}
    return Candidate(zones=zones, cluster=clusters.pop() if len(clusters) == 1 else None, score=score)
