"""Stable placements: a placed job stays where it is while it still fits. Pure: values in, values out.

Every path that places jobs over what already runs calls `place_all` with each job's current placement as read
by its edge: `gitops render` from the previous render's index (`placements.yaml`), `submit` from the live job
objects' `geosched.io/` annotations. (The scheduler binds pods, and a binding is final: a bound gang cannot move,
and a part-bound one is completed in its members' zones; see geosched/kube/scheduler/decide.py.)

1. **Kept first**, in order of key (jobs that now ask for more GPUs per worker than they held last, after the
   others). A job keeps its cluster, zones and nodes when that assignment is still
   feasible for the job's spec as it is now on the fleet minus the jobs kept before it: every node still in the
   fleet, ready and free enough, still allowed by the job (GPU model, providers, regions, zones, clusters,
   pricing), the gang's size unchanged, its zone and region limits kept. Only then is its capacity reserved.
   When the source knows only the cluster and zones, the policy places the job inside them.
2. **Rebalance** (opt-in, `Rebalance`): a kept job moves when the policy's placement on the fleet minus every
   other kept job beats its kept total by at least `min_gain` (both scored on the same snapshot). Default 10%:
   a move restarts the gang (progress since its last checkpoint and the restart itself are lost), so it must
   buy a clear, lasting gain; 10% is above the few-percent noise of re-measured links, so two renders on
   re-measured but unchanged networks do not trade jobs back and forth. A 10% faster step repays a
   30-minute restart after 5 hours of the run.
3. **Then the rest**, in order of key: new jobs and jobs whose current placement no longer holds, each placed by
   the policy on what the jobs before it left.

So adding, changing or deleting one job never moves another: the others keep what they hold, the edited job
is placed on what they leave, and a deletion only frees capacity. A job moves only when its own assignment no
longer fits (the fleet changed, or its own spec did in a way that matters) or when rebalancing is asked for.
Each decision says which: "kept (still fits)", or "moved: <the reason>".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from geosched import policies
from geosched.core.models import Job, NoFit, Placement, Pricing, Rejection, Weights

# The vocabulary here (Fate, Rebalance, DEFAULT_MIN_GAIN) declares the GitOps and scheduler options; the numpy-backed
# policy machinery is imported by the functions that decide, so `geosched -h` does not load numpy (issue 25).
if TYPE_CHECKING:
    from geosched.policies.context import IntArray, JobView, PlacementContext

DEFAULT_MIN_GAIN = 0.10
KEPT = "kept (still fits)"


@dataclass(frozen=True, slots=True)
class Current:
    """Where a job is now, as its edge read it. `nodes`: (node, workers) pairs when the source has them."""

    cluster: str | None
    zones: tuple[str, ...]
    nodes: tuple[tuple[str, int], ...] = ()
    gpus_per_worker: int | None = None
    """What each worker held (None: not recorded): a job that now asks for more per worker is checked after the
    jobs that do not, so growing in place cannot squeeze out a neighbour on a shared node."""

    def grows(self, job: Job) -> bool:
        return self.gpus_per_worker is not None and job.gpus_per_worker > self.gpus_per_worker


@dataclass(frozen=True, slots=True)
class Request:
    key: str
    job: Job
    current: Current | None = None


class Fate(StrEnum):
    NEW = "new"            # placed for the first time (or again after not fitting)
    KEPT = "kept"          # on its current assignment
    MOVED = "moved"        # had a placement, now has another
    UNPLACED = "unplaced"  # fits nowhere (had a placement or not)


@dataclass(frozen=True)
class Decision:
    key: str
    result: Placement | NoFit
    fate: Fate
    note: str
    """One line for people: "kept (still fits)", "moved: <reason>", "new", or why it does not fit."""


@dataclass(frozen=True, slots=True)
class Rebalance:
    """Move a kept job when the policy's placement beats its kept total by at least `min_gain` (a fraction)."""

    min_gain: float = DEFAULT_MIN_GAIN


def place_all(requests: Sequence[Request], ctx: PlacementContext, free: IntArray, *,
              policy: str = policies.DEFAULT_POLICY, weights: Weights | None = None,
              rebalance: Rebalance | None = None,
              usable: Callable[[Placement], str | None] | None = None,
              decide: Callable[[Job, PlacementContext], Placement | NoFit] | None = None) -> tuple[Decision, ...]:
    """Decide every request on `ctx` with `free` GPUs per node; decisions come back in the requests' order.

    `usable`, if given, may refuse a placement the policy made (a reason, else None), e.g. on a cluster the
    caller cannot deliver to; the job then does not fit. `decide`, if given, places a job that is not kept instead
    of the policy alone (a flexible job's start and placement, `geosched.policies.timeshift`)."""
    weights = weights or Weights()

    def fresh(job: Job, at: PlacementContext) -> Placement | NoFit:
        return decide(job, at) if decide is not None else policies.place(job, at, policy, weights)

    position = {name: i for i, name in enumerate(ctx.names)}
    order = sorted(range(len(requests)), key=lambda i: requests[i].key)
    decided: dict[int, Decision] = {}
    kept: dict[int, Placement] = {}
    why_not: dict[int, str] = {}
    holders = [i for i in order if requests[i].current is not None]
    for i in sorted(holders, key=lambda i: _grows(requests[i])):  # stable: by key within each round
        current = requests[i].current
        assert current is not None
        outcome = keep(requests[i].job, current, ctx.with_free(free), policy, weights, position)
        if isinstance(outcome, Placement) and usable is not None and (refused := usable(outcome)) is not None:
            outcome = refused
        if isinstance(outcome, Placement):
            kept[i] = outcome
            free = take(free, outcome, position)
        else:
            why_not[i] = outcome
    if rebalance is not None:
        for i in sorted(kept, key=lambda i: requests[i].key):
            free, decided_i = _rebalance(requests[i], kept[i], ctx, free, policy, weights, position, rebalance,
                                         usable)
            if decided_i.fate is Fate.MOVED:
                decided[i] = decided_i
    for i, placement in kept.items():
        decided.setdefault(i, Decision(requests[i].key, placement, Fate.KEPT, KEPT))
    for i in order:
        if i in decided:
            continue
        request = requests[i]
        result = fresh(request.job, ctx.with_free(free))
        if isinstance(result, Placement) and usable is not None and (refused := usable(result)) is not None:
            result = NoFit(request.job, policy, (Rejection("cluster", refused),))
        decided[i] = _fresh(request, result, why_not.get(i))
        if isinstance(result, Placement):
            free = take(free, result, position)
    # Why a job does not fit, said on what every placed job leaves: the same words whether it came before or
    # after them in this run, so rendering over the result changes nothing.
    for i, d in decided.items():
        if d.fate is Fate.UNPLACED:
            again = fresh(requests[i].job, ctx.with_free(free))
            if isinstance(again, NoFit):
                decided[i] = _fresh(requests[i], again, why_not.get(i))
    return tuple(decided[i] for i in range(len(requests)))


def _grows(request: Request) -> bool:
    return request.current is not None and request.current.grows(request.job)


def _fresh(request: Request, result: Placement | NoFit, lost: str | None) -> Decision:
    if isinstance(result, NoFit):
        head = f"no longer fits ({lost})" if request.current is not None else "does not fit"
        first = f"{result.reasons[0].subject}: {result.reasons[0].reason}" if result.reasons else "no fit"
        return Decision(request.key, result, Fate.UNPLACED, f"{head}; {first}")
    if request.current is None:
        return Decision(request.key, result, Fate.NEW, "new")
    return Decision(request.key, result, Fate.MOVED, f"moved: {lost}")


def _rebalance(request: Request, kept: Placement, ctx: PlacementContext, free: IntArray, policy: str,
               weights: Weights, position: Mapping[str, int], rebalance: Rebalance,
               usable: Callable[[Placement], str | None] | None) -> tuple[IntArray, Decision]:
    """The kept job against the policy's choice on the fleet minus every other kept job, scored alike."""
    from geosched.policies.base import placed
    from geosched.policies.context import job_view

    own = give_back(free, kept, position)
    here = ctx.with_free(own)
    fresh = policies.place(request.job, here, policy, weights)
    view = job_view(here, request.job, weights, explain=False)
    nodes, workers = arrays(kept, position)
    old = placed(view, kept.policy, nodes, workers).score.total
    stay = Decision(request.key, kept, Fate.KEPT, KEPT)
    if not isinstance(fresh, Placement) or (usable is not None and usable(fresh) is not None):
        return free, stay
    new = fresh.score.total
    if same_nodes(fresh, kept) or new > old * (1.0 - rebalance.min_gain):
        return free, stay
    note = (f"moved: rebalanced, total {old:.3f} -> {new:.3f} ({(new - old) / old:+.0%}; the minimum gain is "
            f"{rebalance.min_gain:.0%})")
    return take(own, fresh, position), Decision(request.key, fresh, Fate.MOVED, note)


def keep(job: Job, current: Current, ctx: PlacementContext, policy: str, weights: Weights,
         position: Mapping[str, int]) -> Placement | str:
    """The job on its current assignment if that still holds (a Placement), else why not."""
    import numpy as np

    from geosched.policies.base import limits_ok, placed
    from geosched.policies.context import job_view

    if not current.nodes:
        return _keep_zones(job, current, ctx, policy, weights)
    view = job_view(ctx, job, weights, explain=False)
    missing = [name for name, _ in current.nodes if name not in position]
    if missing:
        return f"node {missing[0]} is no longer in the fleet"
    nodes = np.array([position[name] for name, _ in current.nodes], dtype=np.int64)
    workers = np.array([count for _, count in current.nodes], dtype=np.int64)
    held = int(workers.sum())
    if held != job.workers:
        return f"the gang has {job.workers} workers now, its nodes hold {held}"
    for (name, count), i in zip(current.nodes, nodes.tolist(), strict=True):
        reason = node_refusal(view, i, count)
        if reason is not None:
            return f"node {name} {reason}"
    limit = limits_ok(view, nodes)
    if limit is not None:
        return f"its nodes {limit}"
    return placed(view, policy, nodes, workers)


def _keep_zones(job: Job, current: Current, ctx: PlacementContext, policy: str, weights: Weights) -> Placement | str:
    """Only the cluster and zones are known: the policy places the job inside them."""
    inside = replace(job, zones=current.zones, clusters=(current.cluster,) if current.cluster else job.clusters)
    for name, allowed, given in (("zone", job.zones, current.zones),
                                 ("cluster", job.clusters, (current.cluster,) if current.cluster else ())):
        if allowed and not set(given) <= set(allowed):
            return f"the job no longer allows {name} {', '.join(sorted(set(given) - set(allowed)))}"
    result = policies.place(inside, ctx, policy, weights, explain=False)
    if isinstance(result, NoFit):
        first = f": {result.reasons[0].subject}: {result.reasons[0].reason}" if result.reasons else ""
        return f"{', '.join(current.zones)} no longer hold the gang{first}"
    return replace(result, job=job)


def node_refusal(view: JobView, i: int, workers: int) -> str | None:
    """Why node `i` cannot hold `workers` of this job's workers, or None."""
    ctx, job = view.ctx, view.job
    node = ctx.fleet.nodes[i]
    if not ctx.ready[i]:
        return f"is {node.state.value}"
    if job.gpu is not None and node.gpu != job.gpu:
        return f"has {node.gpu} GPUs, the job asks for {job.gpu}"
    for what, allowed, value in (("provider", job.providers, (node.provider,)),
                                 ("region", job.regions, (node.region, node.region_key)),
                                 ("zone", job.zones, (node.zone,)),
                                 ("cluster", job.clusters, (node.cluster or "",))):
        if allowed and not set(value) & set(allowed):
            return f"is in {what} {value[0]}, which the job no longer allows"
    if node.price(job.pricing) is None:
        return f"has no {job.pricing.value} price" + (" (spot)" if job.pricing is Pricing.SPOT else "")
    need = workers * job.gpus_per_worker
    if int(ctx.gpus_free[i]) < need:
        return f"has {int(ctx.gpus_free[i])} free GPUs, its {workers} worker(s) need {need}"
    if not view.eligible[i]:  # a filter this module does not know by name
        return "is not eligible for the job"
    return None


def arrays(placement: Placement, position: Mapping[str, int]) -> tuple[IntArray, IntArray]:
    import numpy as np

    nodes = np.array([position[a.node] for a in placement.assignments], dtype=np.int64)
    workers = np.array([a.workers for a in placement.assignments], dtype=np.int64)
    return nodes, workers


def same_nodes(a: Placement, b: Placement) -> bool:
    return (a.cluster, a.zones, a.assignments) == (b.cluster, b.zones, b.assignments)


def take(free: IntArray, placement: Placement, position: Mapping[str, int]) -> IntArray:
    """The free GPUs after this gang took its nodes (a new array: earlier contexts stay as they were)."""
    return _shift(free, placement, position, -1)


def give_back(free: IntArray, placement: Placement, position: Mapping[str, int]) -> IntArray:
    return _shift(free, placement, position, +1)


def _shift(free: IntArray, placement: Placement, position: Mapping[str, int], sign: int) -> IntArray:
    after = free.copy()
    for a in placement.assignments:
        after[position[a.node]] += sign * a.workers * placement.job.gpus_per_worker
    return after


def current_of(placement: Placement) -> Current:
    return Current(placement.cluster, placement.zones, tuple((a.node, a.workers) for a in placement.assignments),
                   placement.job.gpus_per_worker)


def moved_keys(before: Mapping[str, Current], decisions: Iterable[Decision]) -> list[str]:
    """Keys of jobs that had a placement in `before` and now have another or none (for tests and benchmarks)."""
    out = []
    for d in decisions:
        was = before.get(d.key)
        if was is not None and (not isinstance(d.result, Placement) or current_of(d.result) != was):
            out.append(d.key)
    return out
