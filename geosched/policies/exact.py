"""An exact reference solver for small fleets, to measure how far `zone-first` is from optimal.

Not a registered policy: it enumerates, so it is only for instances of a few dozen nodes. It minimises
the same key as zone-first, (regions > 1, zones spanned, total score), over every assignment:

- Zone sets are tried level by level (one region before several, fewer zones first); at the first level
  where some zone set holds the gang, an optimal assignment uses every zone of its set (else a smaller
  set would have held it at an earlier level).
- Inside a zone set, the score is a network term that depends only on the worst node RTT, loss and
  throughput, plus terms that add up per worker. For every threshold triple taken from the nodes' own
  values, filling workers from the cheapest additive cost among nodes within the thresholds is optimal
  for that triple; single nodes holding the whole gang are tried too (no network step). The minimum over
  all triples is the optimum.
"""

from __future__ import annotations

import itertools

import numpy as np

from geosched.models import Score
from geosched.policies.base import fill, group_ids
from geosched.policies.context import IntArray, JobView
from geosched.policies.scoring import evaluate

MAX_NODES = 64


def solve_exact(view: JobView) -> tuple[IntArray, IntArray, Score, tuple[int, int]] | None:
    """(nodes, workers, score, (tier, zones)) of an optimal assignment, or None if nothing fits."""
    ctx, job = view.ctx, view.job
    cand = view.candidates
    if cand.size > MAX_NODES:
        raise ValueError(f"exact search is for at most {MAX_NODES} candidate nodes, got {cand.size}")
    groups = group_ids(view)
    cells: dict[tuple[int, int], IntArray] = {}
    for g in np.unique(groups[cand]).tolist():
        for z in np.unique(ctx.zone_of[cand[groups[cand] == g]]).tolist():
            cells[(g, z)] = cand[(groups[cand] == g) & (ctx.zone_of[cand] == z)]
    per_worker = job.gpus_per_worker * (view.weights.cost * view.price_gpu / (job.gpus * view.price_ref)
                                        + view.weights.carbon * view.carbon_gpu / (job.gpus * view.carbon_ref))
    limit_zones = job.max_zones or len(ctx.zone_names)
    limit_regions = job.max_regions or len(ctx.region_keys)
    for tier in (0, 1, 2):
        for size in range(1, limit_zones + 1):
            if (tier == 0) != (size == 1):
                continue
            best: tuple[IntArray, IntArray, Score] | None = None
            for g in sorted({g for g, _ in cells}):
                zones = sorted(z for gg, z in cells if gg == g)
                for combo in itertools.combinations(zones, size):
                    regions = np.unique(ctx.region_of_zone[list(combo)]).size
                    if (tier == 2) != (regions > 1) or regions > limit_regions:
                        continue
                    pool = np.concatenate([cells[(g, z)] for z in combo])
                    if view.capacity[pool].sum() < job.workers:
                        continue
                    found = _best_in(view, pool, per_worker)
                    if found and (best is None or found[2].total < best[2].total - 1e-12):
                        best = found
            if best is not None:
                return best[0], best[1], best[2], (tier, size)
    return None


def _best_in(view: JobView, pool: IntArray, per_worker: np.ndarray) -> tuple[IntArray, IntArray, Score] | None:
    ctx, job = view.ctx, view.job
    best: tuple[IntArray, IntArray, Score] | None = None

    def consider(nodes: IntArray, workers: IntArray) -> None:
        nonlocal best
        if workers.sum() < job.workers:
            return
        score = evaluate(view, nodes, workers)
        if best is None or score.total < best[2].total - 1e-12:
            best = (nodes, workers, score)

    for i in pool[view.capacity[pool] >= job.workers].tolist():
        consider(np.array([i]), np.array([job.workers]))
    by_cost = pool[np.lexsort((pool, per_worker[pool]))]
    for r in np.unique(ctx.node_rtt[pool]):
        for loss in np.unique(ctx.node_loss[pool]):
            for t in np.unique(ctx.node_tput[pool]):
                ok = by_cost[(ctx.node_rtt[by_cost] <= r) & (ctx.node_loss[by_cost] <= loss)
                             & (ctx.node_tput[by_cost] >= t)]
                if view.capacity[ok].sum() >= job.workers:
                    consider(*fill(view, ok))
    return best
