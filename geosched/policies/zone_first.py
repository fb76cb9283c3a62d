"""`zone-first`: the whole gang in one zone if at all possible, then the best nodes there.

1. Candidates are (cluster, GPU model, zone) cells whose eligible free capacity holds every worker.
2. In each cell the gang takes the best nodes by node score (below); each cell's assignment is scored
   with the shared `evaluate` terms and the lowest total wins (ties: cheaper, then by name).
3. If no single cell holds the gang: the fewest zones of one region (every combination of that size
   whose capacity suffices), and only then zones across regions, grown from each region outwards by
   zone-pair RTT. Candidates are ranked by (regions > 1, zones spanned, total score).

Node score, lower is better: the score the gang would get on copies of that node, i.e. the step-time
ratio its own measured delay, loss and throughput give (the physics of `geosched.comm`, so a 1% loss
counts as much as it really costs) plus its normalised $ and carbon:

    w_network * (t_compute + t_comm(rtt_i, loss_i, tput_i)) / t_ideal
      + w_cost * usd_gpu_h_i / median usd_gpu_h + w_carbon * gco2e_gpu_h_i / median gco2e_gpu_h

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
MAX_ALTERNATIVES = 5
MAX_COMBOS = 32


def node_scores(view: JobView, nodes: IntArray) -> FloatArray:
    """Scores of `nodes`, in their order."""
    ctx, job, w = view.ctx, view.job, view.weights
    comm = comm_ms(job.workers, job.profile.message_mb, ctx.node_rtt[nodes], ctx.node_loss[nodes],
                   ctx.node_tput[nodes])
    network = (job.profile.compute_ms + comm) / view.ideal_step_ms
    return (w.network * network + w.cost * view.price_gpu[nodes] / view.price_ref
            + w.carbon * view.carbon_gpu[nodes] / view.carbon_ref)


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
    score = np.full(len(ctx.names), np.inf)
    score[cand] = node_scores(view, cand)
    cell = group_ids(view) * len(ctx.zone_names) + ctx.zone_of
    # Ties go to the tighter fit (fewer free GPUs), which keeps whole nodes free for larger gangs.
    free = ctx.gpus_free
    order = cand[np.lexsort((cand, free[cand], score[cand], cell[cand]))]
    cells = cell[order]
    starts = _run_starts(cells)
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
    group_of_elem = _run_ids(starts, order.size)
    cum = np.cumsum(cap)
    before = cum - cap - (cum - cap)[starts][group_of_elem]
    take = np.clip(job.workers - before, 0, cap)
    sel = (take > 0) & fits[group_of_elem]
    idx, taken, grp = order[sel], take[sel], group_of_elem[sel]
    gstarts = _run_starts(grp)
    gends = np.append(gstarts[1:], idx.size)
    single = (gends - gstarts) == 1
    rtt = np.where(single, 0.0, np.maximum.reduceat(ctx.node_rtt[idx], gstarts))
    loss = np.where(single, 0.0, np.maximum.reduceat(ctx.node_loss[idx], gstarts))
    tput = np.where(single, np.inf, np.minimum.reduceat(ctx.node_tput[idx], gstarts))
    comm = np.where(single, 0.0, comm_ms(job.workers, job.profile.message_mb, rtt, loss, tput))
    gpus = taken * job.gpus_per_worker
    usd = np.add.reduceat(gpus * view.price_gpu[idx], gstarts)
    gco2e = np.add.reduceat(gpus * view.carbon_gpu[idx], gstarts)
    step = job.profile.compute_ms + comm
    network, cost = step / view.ideal_step_ms, usd / (job.gpus * view.price_ref)
    carbon = gco2e / (job.gpus * view.carbon_ref)
    total = w.network * network + w.cost * cost + w.carbon * carbon
    # A node that holds the whole gang alone has no network step, whatever its link: it may beat its
    # cell's best fill even when its link ranks it last.
    solo_node, solo_total = _solo_nodes(view, order, starts, fits)
    cell_of_fit = grp[gstarts]
    better = solo_total[cell_of_fit] < total
    total = np.where(better, solo_total[cell_of_fit], total)
    solo = {int(cell_of_fit[k]): int(solo_node[cell_of_fit[k]]) for k in np.flatnonzero(better).tolist()}
    alone = solo_node[cell_of_fit]
    usd = np.where(better, job.gpus * view.price_gpu[alone], usd)
    # Ties go to the placement that strands the fewest GPUs on the nodes it uses, then to the zone with the
    # least room left: both keep whole nodes and zones free for the gangs that need them.
    stranded = np.where(better, ctx.gpus_free[alone] - job.gpus,
                        np.add.reduceat(ctx.gpus_free[idx] - gpus, gstarts))
    ranking = np.lexsort((grp[gstarts], totals[grp[gstarts]], stranded, usd, total)).tolist()

    def score(k: int) -> Score:
        node = solo.get(int(cell_of_fit[k]))
        if node is not None:
            return evaluate(view, np.array([node]), np.array([job.workers]))
        return Score(float(total[k]), float(network[k]), float(cost[k]), float(carbon[k]), float(step[k]),
                     float(comm[k]), float(usd[k]), float(gco2e[k]), float(rtt[k]), float(loss[k]), float(tput[k]))

    def members(k: int) -> IntArray:
        node = solo.get(int(cell_of_fit[k]))
        out: IntArray = np.array([node]) if node is not None else idx[gstarts[k]:gends[k]]
        return out

    def workers_of(k: int) -> IntArray:
        node = solo.get(int(cell_of_fit[k]))
        out: IntArray = np.array([job.workers]) if node is not None else taken[gstarts[k]:gends[k]]
        return out

    best = ranking[0]
    if not view.explain:
        return placed(view, NAME, members(best), workers_of(best), score=score(best))
    alternatives = [_candidate(view, members(k), score(k)) for k in ranking[1 : 1 + MAX_ALTERNATIVES]]
    labels = _cell_labels(view, cells[starts])
    heads = cells[starts[grp[gstarts]]]
    ranked_out = _cell_labels(view, heads[ranking[1:]])
    rejected = [Rejection(zone, f"total {total[k]:.3f} > {total[best]:.3f} ({label})")
                for k, (zone, label) in zip(ranking[1:], ranked_out, strict=True)]
    rejected += [Rejection(labels[g][0], f"holds {int(totals[g])} of {job.workers} workers ({labels[g][1]})")
                 for g in np.flatnonzero(~fits).tolist()]
    rejected += [Rejection(z, r) for z, r in sorted(view.filtered.items())]
    return placed(view, NAME, members(best), workers_of(best), rejected, alternatives, score(best))


def _solo_nodes(view: JobView, order: IntArray, starts: IntArray, fits: np.ndarray) -> tuple[IntArray, FloatArray]:
    """Per cell, its best node that holds the whole gang alone, and the total it scores (inf if none):
    no network step, so only the compute time and that node's $ and carbon count."""
    w, job = view.weights, view.job
    cap = view.capacity[order]
    additive = w.cost * view.price_gpu[order] / view.price_ref + w.carbon * view.carbon_gpu[order] / view.carbon_ref
    cell = _run_ids(starts, order.size)
    totals = np.where((cap >= job.workers) & fits[cell], w.network * job.profile.compute_ms / view.ideal_step_ms
                      + additive, np.inf)
    pick = np.lexsort((order, view.ctx.gpus_free[order], totals, cell))
    first = pick[_run_starts(cell[pick])]
    node: IntArray = order[first]
    best: FloatArray = totals[first]
    return node, best


def _run_starts(values: IntArray) -> IntArray:
    """Where each run of equal values starts in a sorted array."""
    if values.size == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(values[1:] != values[:-1]) + 1
    return np.concatenate(([0], change))


def _run_ids(starts: IntArray, size: int) -> IntArray:
    """The run number of every element, from the runs' starts."""
    return np.repeat(np.arange(starts.size), np.diff(np.append(starts, size)))


def _cell_labels(view: JobView, cells: IntArray) -> list[tuple[str, str]]:
    """(zone name, "GPU, cluster") of each cell id."""
    ctx = view.ctx
    groups, zones = np.divmod(cells, len(ctx.zone_names))
    return [(ctx.zone_names[z], ctx.group_labels[g]) for z, g in zip(zones.tolist(), groups.tolist(), strict=True)]


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
        pool = pool[np.lexsort((pool, ctx.gpus_free[pool], score[pool]))]
        nodes, workers = fill(view, pool)
        zones = int(np.unique(ctx.zone_of[nodes]).size)
        regions = int(np.unique(ctx.region_of[nodes]).size)
        if zones <= max_zones and regions <= max_regions:
            options.append(_Option(nodes, workers, evaluate(view, nodes, workers), tier, zones))

    def consider_fewest(pool: IntArray, tier: int) -> bool:
        """Every combination (up to MAX_COMBOS) of the fewest cells of `pool` that holds the gang."""
        pool = pool[np.argsort(-totals[pool], kind="stable")]
        k = _fewest(totals[pool], job.workers)
        if k is None or k > max_zones:
            return False
        combos = (c for c in itertools.combinations(pool.tolist(), k) if totals[list(c)].sum() >= job.workers)
        for combo in itertools.islice(combos, MAX_COMBOS):
            consider(list(combo), tier)
        return True

    for group in np.unique(cell_group).tolist():
        in_group = np.flatnonzero(cell_group == group)
        for region in np.unique(cell_region[in_group]).tolist():
            consider_fewest(in_group[cell_region[in_group] == region], tier=1)
    if not options and max_regions > 1:
        for group in np.unique(cell_group).tolist():
            in_group = np.flatnonzero(cell_group == group)
            for seed in np.unique(cell_region[in_group]).tolist():
                for regions in _nearest_regions(view, in_group, cell_region, head, seed, max_regions):
                    if consider_fewest(in_group[np.isin(cell_region[in_group], regions)], tier=2):
                        break
    extra = [Rejection(zone, f"holds {int(totals[c])} of {job.workers} workers ({label})")
             for c, (zone, label) in enumerate(_cell_labels(view, cells[starts]))]
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


def _nearest_regions(view: JobView, in_group: IntArray, cell_region: IntArray, head: IntArray, seed: int,
                     max_regions: int) -> list[list[int]]:
    """The seed region, then it with its nearest regions (by best zone-pair RTT) added one at a time."""
    ctx = view.ctx
    regions = np.unique(cell_region[in_group]).tolist()
    zones_of = {r: ctx.zone_of[head[in_group[cell_region[in_group] == r]]] for r in regions}
    distance = {r: float(ctx.zz_rtt[np.ix_(zones_of[seed], z)].min()) for r, z in zones_of.items()}
    distance[seed] = -1.0
    ordered = sorted(distance, key=lambda r: (distance[r], r))[:max_regions]
    return [ordered[: i + 1] for i in range(1, len(ordered))]


def _candidate(view: JobView, nodes: IntArray, score: Score) -> Candidate:
    ctx = view.ctx
    zones = tuple(sorted({ctx.zone_names[z] for z in ctx.zone_of[nodes]}))
    clusters = {ctx.cluster_names[c] for c in ctx.cluster_of[nodes]}
    return Candidate(zones=zones, cluster=clusters.pop() if len(clusters) == 1 else None, score=score)
