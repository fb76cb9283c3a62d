"""The policy protocol, the registry, and the pieces every policy shares.

A policy is a pure function `JobView -> Placement | NoFit`, registered under a name with a one-line description
(`geosched policies` prints it). A new policy is one new module in this package that calls `register`;
`registry()` and `descriptions()` import every module here first.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from geosched.core.models import Assignment, Candidate, NoFit, Placement, Rejection, Score
from geosched.policies.context import IntArray, JobView
from geosched.policies.scoring import evaluate

PolicyFn = Callable[[JobView], Placement | NoFit]

_REGISTRY: dict[str, PolicyFn] = {}
_DESCRIPTIONS: dict[str, str] = {}


def register(name: str, description: str) -> Callable[[PolicyFn], PolicyFn]:
    """`description`: one line saying what the policy does, for `geosched policies` and shell completion."""
    if not description or "\n" in description:
        raise ValueError(f"policy {name!r}: the description is one non-empty line")

    def decorate(fn: PolicyFn) -> PolicyFn:
        if name in _REGISTRY:
            raise ValueError(f"policy {name!r} registered twice")
        _REGISTRY[name] = fn
        _DESCRIPTIONS[name] = description
        return fn

    return decorate


@functools.cache  # once: `place` asks for the registry on every call (a simulation places thousands of times)
def load_all() -> None:
    """Import every module of this package, each registering its policies (`geosched.policies.load_all`). Here, by
    the registry, which so lists its own folder instead of importing the package back."""
    package = __name__.rpartition(".")[0]
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{package}.{module.name}")


def registry() -> dict[str, PolicyFn]:
    """Every policy by name (the package's modules are imported first, each registering its own)."""
    load_all()
    return dict(_REGISTRY)


def descriptions() -> dict[str, str]:
    load_all()
    return dict(_DESCRIPTIONS)


def fill(view: JobView, order: IntArray) -> tuple[IntArray, IntArray]:
    """Take workers from nodes in `order` until the gang is complete: (nodes, workers per node)."""
    cap = view.capacity[order]
    before = np.cumsum(cap) - cap
    take = np.minimum(np.maximum(view.job.workers - before, 0), cap)  # np.clip: same, with more call overhead
    keep = take > 0
    return order[keep], take[keep]


def placed(view: JobView, policy: str, nodes: IntArray, workers: IntArray,
           rejected: Sequence[Rejection] = (), alternatives: Sequence[Candidate] = (),
           score: Score | None = None) -> Placement:
    ctx = view.ctx
    # Plain ints before indexing lists: a replay builds a placement per job.
    zone_ids = ctx.zone_of[nodes].tolist()
    zones = tuple(sorted({ctx.zone_names[z] for z in zone_ids}))
    regions = tuple(sorted({ctx.region_keys[r] for r in ctx.region_of[nodes].tolist()}))
    clusters = {ctx.cluster_names[c] for c in ctx.cluster_of[nodes].tolist()}
    assignments = tuple(
        Assignment(node=ctx.names[i], zone=ctx.zone_names[z], workers=int(k))
        for i, z, k in sorted(zip(nodes.tolist(), zone_ids, workers.tolist(), strict=True),
                              key=lambda p: ctx.names[p[0]])
    )
    return Placement(
        job=view.job,
        policy=policy,
        cluster=clusters.pop() if len(clusters) == 1 else None,
        zones=zones,
        regions=regions,
        assignments=assignments,
        score=score or evaluate(view, nodes, workers),
        weights=view.weights,
        rejected=tuple(rejected),
        alternatives=tuple(alternatives),
    )


def no_capacity(view: JobView, policy: str, extra: Sequence[Rejection] = ()) -> NoFit:
    """Why nothing fits: what the largest group could hold, the policy's own reasons (limits that bound
    first), then the nodes each zone lost to the filters."""
    ctx, job = view.ctx, view.job
    reasons = list(extra)
    reasons.extend(Rejection(zone, reason) for zone, reason in sorted(view.filtered.items()))
    if not view.eligible.any():
        reasons.insert(0, Rejection("fleet", f"no ready node has {job.gpus_per_worker} free "
                                    f"{job.gpu or 'GPUs'} under the job's constraints"))
    else:
        groups = group_ids(view)
        totals = np.bincount(groups, weights=view.capacity, minlength=int(groups.max()) + 1)
        best = int(totals.argmax())
        reasons.insert(0, Rejection("fleet", f"the largest pool holds {int(totals[best])} of {job.workers} "
                                    f"workers ({ctx.group_labels[best]})"))
    return NoFit(job=job, policy=policy, reasons=tuple(reasons))


def group_ids(view: JobView) -> IntArray:
    """A gang stays inside one cluster and on one GPU model: the (cluster, GPU) group of each node."""
    return view.ctx.group_of


def fitting_pools(view: JobView) -> list[tuple[int, IntArray]]:
    """The (cluster, GPU) pools of eligible nodes whose free capacity holds the whole gang: (group id, nodes)."""
    cand = view.candidates
    groups = group_ids(view)[cand]
    pools = ((g, cand[groups == g]) for g in np.unique(groups).tolist())
    return [(g, pool) for g, pool in pools if int(view.capacity[pool].sum()) >= view.job.workers]


def pool_label(view: JobView, pool: IntArray) -> str:
    return f"pool of {view.ctx.names[int(pool[0])]}"


def limits_ok(view: JobView, nodes: IntArray) -> str | None:
    """The job's zone and region limits, checked on a finished assignment."""
    job, ctx = view.job, view.ctx
    zones = np.unique(ctx.zone_of[nodes]).size
    regions = np.unique(ctx.region_of[nodes]).size
    if job.max_zones is not None and zones > job.max_zones:
        return f"spans {zones} zones, the job allows {job.max_zones}"
    if job.max_regions is not None and regions > job.max_regions:
        return f"spans {regions} regions, the job allows {job.max_regions}"
    return None
