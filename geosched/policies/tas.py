"""`tas`: Kueue Topology-Aware Scheduling with a "preferred" topology request, as platform teams run it.

Follows kubernetes-sigs/kueue `pkg/cache/scheduler/tas_flavor_snapshot.go` (commit ff69552e, Aug 2026),
`findTopologyAssignment` with the default feature gates (TASBalancedPlacement off, so the BestFit path;
no leader pod set, one pod per slice). Our levels, top to bottom: region > zone > hostname; a worker is a pod
and a domain's count is how many workers its nodes' free GPUs hold. The request is
`kueue.x-k8s.io/podset-preferred-topology: kubernetes.io/hostname`, so:

1. `findLevelWithFitDomains`, from the lowest level up: sort the level's domains by count descending, then
   by their level values (region, zone, node names) ascending (`sortedDomainsWithLeader`). If the first
   holds the gang, take the BestFit domain instead (`findBestFitDomain`: the first with the smallest count
   that still holds it). If none holds it, go one level up. At the top level with no single domain holding
   it, take domains in that order, the one that completes the gang again by BestFit.
2. Descend level by level (`updateCountsToMinimumGeneric`): the children of the chosen domains, sorted by
   count descending then level values, are taken greedily, largest first; the child that completes the gang
   is the BestFit among the rest. So the fewest domains at every level, the last one the tightest fit.
3. Measurement-blind: no link, loss, price or carbon enters the choice.

A gang stays in one (cluster, GPU) pool like every policy here. Kueue itself never chooses between clusters
(a ClusterQueue tries its flavors in order; MultiKueue dispatches to every worker cluster and the first to
admit wins), so we give TAS its own rule one level up, the strongest reading: the pool that holds the gang
at the lowest level, ties to the pool whose fitting domain has the fewest free workers (BestFit), then by
name. The job's zone and region limits are honoured: a pool whose assignment breaks them is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geosched.core.models import NoFit, Placement, Rejection
from geosched.policies.base import fitting_pools, limits_ok, no_capacity, placed, pool_label, register
from geosched.policies.context import IntArray, JobView

NAME = "tas"
LEVELS = ("region", "zone", "hostname")
HOSTNAME = len(LEVELS) - 1


@dataclass(frozen=True)
class _Domain:
    values: tuple[str, ...]  # level values from the top, Kueue's tie-break (`compareDomainLevelValues`)
    members: IntArray        # fleet node indices
    count: int               # workers its free GPUs hold


@dataclass(frozen=True)
class _Assignment:
    level: int               # the level at which the gang was found to fit
    fit_count: int           # that fitting domain's count (the BestFit measure), summed when several
    nodes: IntArray
    workers: IntArray


def _domains(view: JobView, nodes: IntArray, level: int) -> list[_Domain]:
    """The domains of `level` that contain `nodes`, in Kueue's sort order: count descending, then values."""
    ctx = view.ctx
    keys = (ctx.region_of, ctx.zone_of, np.arange(len(ctx.names)))[level][nodes]
    order = np.argsort(keys, kind="stable")
    nodes, keys = nodes[order], keys[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    counts = np.add.reduceat(view.capacity[nodes], starts).tolist() if nodes.size else []
    out = [_Domain(_path(view, head)[: level + 1], members, int(count))
           for head, members, count in zip(nodes[starts].tolist(), np.split(nodes, starts[1:]), counts, strict=True)]
    return sorted(out, key=lambda d: (-d.count, d.values))


def _path(view: JobView, node: int) -> tuple[str, str, str]:
    ctx = view.ctx
    return ctx.region_keys[int(ctx.region_of[node])], ctx.zone_names[int(ctx.zone_of[node])], ctx.names[node]


def _best_fit(domains: list[_Domain], needed: int) -> _Domain:
    """`findBestFitDomainBy`: the first domain with the smallest count >= needed, else the first."""
    best: _Domain | None = None
    for d in domains:
        if d.count >= needed and (best is None or d.count < best.count):
            best = d
    return best or domains[0]


def _to_minimum(domains: list[_Domain], needed: int) -> list[tuple[_Domain, int]]:
    """`updateCountsToMinimumGeneric` without leaders: largest first, the completing one by BestFit."""
    out: list[tuple[_Domain, int]] = []
    remaining = needed
    for i, d in enumerate(domains):
        if d.count >= remaining:
            last = _best_fit(domains[i:], remaining)
            out.append((last, remaining))
            return out
        out.append((d, d.count))
        remaining -= d.count
    raise ValueError("not enough capacity: the caller checks the pool holds the gang")


def _find_level(view: JobView, pool: IntArray, level: int) -> tuple[int, list[_Domain]]:
    """`findLevelWithFitDomains` for a preferred request: one domain at the lowest level that holds the gang,
    else one level up; at the top, as few domains as hold it."""
    needed = view.job.workers
    if level == HOSTNAME:  # the same rule without a domain per node: most gangs fit on no single node
        caps = view.capacity[pool]
        if caps.max() < needed:
            return _find_level(view, pool, level - 1)
        fit = pool[caps >= needed]
        tight = fit[view.capacity[fit] == view.capacity[fit].min()]
        node = min(tight.tolist(), key=lambda i: _path(view, i))
        return level, [_Domain(_path(view, node), np.array([node], dtype=np.int64), int(view.capacity[node]))]
    domains = _domains(view, pool, level)
    if domains[0].count >= needed:
        return level, [_best_fit(domains, needed)]
    if level > 0:
        return _find_level(view, pool, level - 1)
    return level, [d for d, _ in _to_minimum(domains, needed)]


def assign(view: JobView, pool: IntArray) -> _Assignment:
    """TAS inside one pool whose capacity holds the gang."""
    needed = view.job.workers
    level, chosen = _find_level(view, pool, HOSTNAME)
    fit_count = sum(d.count for d in chosen)
    taken = _to_minimum(chosen, needed)
    for lower in range(level + 1, HOSTNAME + 1):
        children = _domains(view, np.concatenate([d.members for d, _ in taken]), lower)
        taken = _to_minimum(children, needed)
    nodes = np.array([int(d.members[0]) for d, _ in taken], dtype=np.int64)
    workers = np.array([k for _, k in taken], dtype=np.int64)
    return _Assignment(level, fit_count, nodes, workers)


@register(NAME, "Kueue Topology-Aware Scheduling, preferred hostname level (BestFit)")
def tas(view: JobView) -> Placement | NoFit:
    cand = view.candidates
    if cand.size == 0:
        return no_capacity(view, NAME)
    options: list[tuple[tuple[int, int, int], _Assignment]] = []
    skipped: list[Rejection] = []
    for g, pool in fitting_pools(view):
        found = assign(view, pool)
        problem = limits_ok(view, found.nodes)
        if problem:
            skipped.append(Rejection(pool_label(view, pool), problem))
            continue
        options.append(((-found.level, found.fit_count, g), found))
    if not options:
        return no_capacity(view, NAME, skipped)
    best = min(options, key=lambda o: o[0])[1]
    return placed(view, NAME, best.nodes, best.workers, skipped)
