"""Network-blind baselines, so every claim that zone-first is better is a side-by-side run.

Each picks one (cluster, GPU model) pool that holds the gang and fills workers in its own node order:

- `spread`:   like the default Kubernetes scheduler (LeastAllocated plus the default zone topology
              spread): one worker per node per round, zones in turn, emptiest nodes first; the pool with
              the most free GPUs.
- `pack`:     GPU bin-packing (MostAllocated): fullest nodes that still fit a worker first; the
              smallest pool that holds the gang.
- `random`:   a random order, seeded by the job name so runs are reproducible; a random pool.
- `cheapest`: lowest $ per GPU-hour first; the pool whose gang costs least.
- `greenest`: lowest gCO2e per GPU-hour first; the pool whose gang emits least.

The job's zone and region limits are still honoured: a pool whose fill breaks them is skipped.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np

from geosched.core.models import NoFit, Placement, Rejection
from geosched.policies.base import fill, fitting_pools, limits_ok, no_capacity, placed, pool_label, register
from geosched.policies.context import IntArray, JobView
from geosched.policies.scoring import evaluate

Order = Callable[[JobView, IntArray], IntArray]
Choose = Callable[[JobView, list[tuple[IntArray, IntArray, IntArray]]], int]


def _rng(view: JobView) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(view.job.name.encode()))


def _spread_order(view: JobView, pool: IntArray) -> IntArray:
    """Round-robin over zones, emptiest node first, one worker per node per round."""
    ctx = view.ctx
    free = ctx.gpus_free[pool]
    pool = pool[np.lexsort((pool, -free / ctx.gpus_total[pool]))]
    zone = ctx.zone_of[pool]
    rank = np.zeros(pool.size, dtype=np.int64)
    for z in np.unique(zone):
        members = np.flatnonzero(zone == z)
        rank[members] = np.arange(members.size)
    return pool[np.lexsort((zone, rank))]


def spread_fill(view: JobView, pool: IntArray, need: int | None = None) -> tuple[IntArray, IntArray]:
    """`need` workers (default: the gang) the default scheduler's way over `pool` (karmada uses it per cluster)."""
    order = _spread_order(view, pool)
    cap = view.capacity[order].copy()
    taken = np.zeros_like(cap)
    need = view.job.workers if need is None else need
    while need > 0 and (cap > 0).any():
        live = np.flatnonzero(cap > 0)[:need]
        taken[live] += 1
        cap[live] -= 1
        need -= live.size
    keep = taken > 0
    return order[keep], taken[keep]


def _baseline(name: str, description: str, order: Order, choose: Choose,
              fill_pool: Callable[[JobView, IntArray], tuple[IntArray, IntArray]] | None = None) -> None:
    @register(name, description)
    def policy(view: JobView) -> Placement | NoFit:
        cand = view.candidates
        if cand.size == 0:
            return no_capacity(view, name)
        options: list[tuple[IntArray, IntArray, IntArray]] = []
        skipped: list[Rejection] = []
        for _, pool in fitting_pools(view):
            nodes, workers = fill_pool(view, pool) if fill_pool else fill(view, order(view, pool))
            problem = limits_ok(view, nodes)
            if problem:
                skipped.append(Rejection(pool_label(view, pool), problem))
                continue
            options.append((pool, nodes, workers))
        if not options:
            return no_capacity(view, name, skipped)
        _, nodes, workers = options[choose(view, options)]
        return placed(view, name, nodes, workers, skipped)


def _most_free(view: JobView, options: list[tuple[IntArray, IntArray, IntArray]]) -> int:
    return int(np.argmax([view.ctx.gpus_free[pool].sum() for pool, _, _ in options]))


def _least_free(view: JobView, options: list[tuple[IntArray, IntArray, IntArray]]) -> int:
    return int(np.argmin([view.ctx.gpus_free[pool].sum() for pool, _, _ in options]))


def _by_score(attr: str) -> Choose:
    def choose(view: JobView, options: list[tuple[IntArray, IntArray, IntArray]]) -> int:
        return int(np.argmin([getattr(evaluate(view, n, w), attr) for _, n, w in options]))

    return choose


# The descriptions say in one line what the module docstring says of each (network-blind baselines).
_baseline("spread", "baseline: the default Kubernetes scheduler, workers spread over zones, emptiest nodes first",
          _spread_order, _most_free, spread_fill)
_baseline("pack", "baseline: GPU bin-packing, fullest nodes that fit first, smallest pool",
          lambda v, p: p[np.lexsort((p, v.ctx.gpus_free[p]))], _least_free)
_baseline("random", "baseline: nodes in a random order seeded by the job name, in a random pool",
          lambda v, p: _rng(v).permutation(p), lambda v, o: int(_rng(v).integers(len(o))))
_baseline("cheapest", "baseline: lowest $ per GPU-hour first, network-blind",
          lambda v, p: p[np.lexsort((p, v.cost_gpu[p]))], _by_score("usd_per_hour"))
_baseline("greenest", "baseline: lowest gCO2e per GPU-hour first, network-blind",
          lambda v, p: p[np.lexsort((p, v.carbon_gpu[p]))], _by_score("gco2e_per_hour"))
