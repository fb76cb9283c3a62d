"""An exact reference solver for small fleets, to measure how far `zone-first` is from optimal.

Not a registered policy: it enumerates, so it is only for instances of at most `MAX_NODES` candidate nodes
and gangs of at most `MAX_WORKERS` workers. It optimises zone-first's own objective and rule over every
assignment, not over the options zone-first happens to consider:

- every set of nodes of one (cluster, GPU) group that can hold the gang with at least one worker on each
  node (a node given none is not in the ring, so that assignment belongs to a smaller set); the remaining
  workers go to the set's cheapest nodes by $ and carbon per worker, which is optimal for that set since the
  ring, and so the step, depends only on the set;
- each set scored by the shared `scoring.ring` objective, all at once;
- the winner chosen by `zone_first.rank`: the tolerance band of the best total, then fewer regions, fewer
  zones, the tightest pool, best fit, lower total, then the capacity-aware choice (`capacity.keep_room`).
  `max_zones` and `max_regions` are hard limits.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from geosched.core.models import Score
from geosched.policies.base import group_ids
from geosched.policies.context import IntArray, JobView
from geosched.policies.scoring import Scored
from geosched.policies.zone_first import rank

MAX_NODES = 24
MAX_WORKERS = 8


@dataclass(frozen=True)
class Exact:
    """The optimal assignment under zone-first's rule, and the lowest total of any assignment."""

    nodes: IntArray
    workers: IntArray
    score: Score
    zones: int
    regions: int
    lowest_total: float


def solve_exact(view: JobView) -> Exact | None:
    """The optimum, or None if nothing fits."""
    job = view.job
    cand = view.candidates
    if cand.size > MAX_NODES or job.workers > MAX_WORKERS:
        raise ValueError(f"exact search is for at most {MAX_NODES} candidate nodes and {MAX_WORKERS} workers, "
                         f"got {cand.size} and {job.workers}")
    per_worker = job.gpus_per_worker * (view.weights.cost * view.cost_gpu / view.price_ref
                                        + view.weights.carbon * view.carbon_gpu / view.carbon_ref)
    nodes: list[IntArray] = []
    workers: list[IntArray] = []
    groups = group_ids(view)[cand]
    for g in np.unique(groups).tolist():
        pool = cand[groups == g]
        pool = pool[np.lexsort((pool, per_worker[pool]))]  # cheapest first: extra workers fill left to right
        for k in range(1, min(job.workers, pool.size) + 1):
            sets = np.array(list(itertools.combinations(range(pool.size), k)), dtype=np.int64).reshape(-1, k)
            members = pool[sets]
            cap = view.capacity[members]
            sets_ok = cap.sum(axis=1) >= job.workers
            members, cap = members[sets_ok], cap[sets_ok]
            extra = cap - 1
            take = np.clip(job.workers - k - (np.cumsum(extra, axis=1) - extra), 0, extra)
            ok = _within_limits(view, members)
            nodes.extend(members[ok])
            workers.extend(1 + take[ok])
    if not nodes:
        return None
    sizes = np.array([n.size for n in nodes], dtype=np.int64)
    scored = Scored.of(view, np.concatenate(nodes), np.concatenate(workers), np.cumsum(sizes) - sizes)
    ranked = rank(view, scored.nodes, scored.starts, scored.total, scored.usd)
    k = int(ranked.order[0])
    return Exact(nodes[k], workers[k], scored.scores(view, [k])[0], int(ranked.zones[k]), int(ranked.regions[k]),
                 ranked.best)


def _within_limits(view: JobView, members: IntArray) -> np.ndarray:
    """Rows of `members` (one node set each) within the job's zone and region limits."""
    job, ctx = view.job, view.ctx
    ok = np.ones(members.shape[0], dtype=bool)
    for limit, of in ((job.max_zones, ctx.zone_of), (job.max_regions, ctx.region_of)):
        if limit is not None:
            values = np.sort(of[members], axis=1)
            distinct = 1 + (np.diff(values, axis=1) != 0).sum(axis=1)
            ok &= distinct <= limit
    return ok
