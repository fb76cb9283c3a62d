"""A gang at the head of a strict queue, weighed against the gang it blocks (issue 22, StrictFIFO).

Under Kueue's StrictFIFO (`queueingStrategy: StrictFIFO`, kubernetes-sigs/kueue `apis/kueue/v1beta1/
clusterqueue_types.go`: "older workloads that can't be admitted will block admitting newer workloads even if they
fit") a gang that cannot start holds every job behind it. So the head's placement decides more than its own run: if
it takes the only domain that holds the next gang, the next gang and everything queued behind it wait for the head
to end. Measured (policies/README.md, "Under Kueue's two queues"): on the geo replay's seed 6, zone-first put a
256-GPU gang on one us-east-1 zone (1.35x, 39 h), and the 1,024-GPU gang behind it, which only us-east-1 holds, and
the whole queue waited 39 h; `tas` put it on a slow us-central1 ring and the queue flowed.

**Rule** (`check`; zone-first only, and only when the caller says what waits behind the gang, `Behind`): the winner
`P` is weighed against the gang placed by the same policy outside `P`'s (cluster, GPU) pool (`B`; none: keep `P`).
For each, the sum of completion times it leads to, counted from now: the head's own run there, plus each queued
job's start and run when the strict queue serves them in order as the running jobs and the head end at their
expected ends, each starting as soon as some pool holds its workers by free GPU count (`_queue_cost`). `B` wins when
its sum is lower. That is the average JCT the decision changes (the head's and the queue's), counted for the jobs the
caller knows to wait; a queue's delay is what a head-of-line gang costs the others (Tiresias, Gu et al., NSDI'19;
EASY backfill's reservation, Lifka 1995, is the same walk of expected ends). `B` is not then refused by patience:
the comparison has weighed its slowness already.

Only a caller that knows the queue *and* run-time estimates can say what waits behind and when running jobs end: the
replay under a strict queue (`SimOptions(backfill=False)`). With a backfill the gangs behind are not held (the
reservations protect them), and the other paths (place, submit, GitOps, scheduler mode, the dispatcher) know no run
times of what runs: they pass no `Behind` and decide as before.

Cost: nothing when the caller passes no `Behind`; otherwise one more placement of the head and two walks of the
queued jobs (up to the caller's depth; the replay's is `SimOptions.backfill_depth`, 32) over the running jobs' ends.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from geosched.core.models import Job, NoFit, Placement

if TYPE_CHECKING:
    from geosched.policies.context import IntArray, PlacementContext

QUEUE_AWARE = frozenset({"zone-first"})


@dataclass(frozen=True, slots=True)
class Behind:
    """What a strict queue holds behind the gang being placed: `queue` the jobs queued behind it in order (up to a
    depth), each with its run time (s); `releases` the running jobs' (expected end in seconds from now, node
    indices, GPUs on each)."""

    queue: Sequence[tuple[Job, float]]
    releases: Sequence[tuple[float, Sequence[int], Sequence[int]]]


PlaceOn = Callable[[Job, "PlacementContext"], Placement | NoFit]


def check(placement: Placement, ctx: PlacementContext, policy: str, runtime_s: float | None, behind: Behind,
          place_on: PlaceOn) -> Placement | None:
    """The placement to take instead of `placement` by the rule above, or None (keep it). `place_on` places a gang
    on a context by the same policy, without patience or this rule."""
    if policy not in QUEUE_AWARE or not behind.queue or runtime_s is None or not np.isfinite(runtime_s) \
            or runtime_s <= 0:
        return None
    head = placement.job
    index = _index(ctx)
    kept, held_up = _cost(placement, ctx, index, runtime_s, behind)
    if not held_up:
        return None  # every job behind starts now beside it: nothing to weigh but the objective's own choice
    pool = int(ctx.group_of[index[placement.assignments[0].node]])
    elsewhere = ctx.gpus_free.copy()
    elsewhere[ctx.group_of == pool] = 0
    other = place_on(head, ctx.with_free(elsewhere))
    if not isinstance(other, Placement):
        return None  # no other pool holds the head now
    moved, _ = _cost(other, ctx, index, runtime_s, behind)
    return other if moved < kept else None


def _cost(option: Placement, ctx: PlacementContext, index: dict[str, int], runtime_s: float,
          behind: Behind) -> tuple[float, bool]:
    """The head's run on `option` plus the queue's sum of completion times after it (`_queue_cost`), from now, and
    whether some job behind waits."""
    nodes, gpus = _holds(option, index, option.job.gpus_per_worker)
    run = runtime_s * _slowdown(option)
    free = ctx.gpus_free.copy()
    free[nodes] -= gpus
    total, waits = _queue_cost(ctx, free, [*behind.releases, (run, nodes, gpus)], behind.queue)
    return run + total, waits


def _queue_cost(ctx: PlacementContext, free: IntArray, releases: list[tuple[float, Sequence[int], Sequence[int]]],
                queue: Sequence[tuple[Job, float]]) -> tuple[float, bool]:
    """The sum of the queued jobs' completion times (s from now), and whether any of them waits, when a strict queue
    serves them in order on `free` GPUs as `releases` end: each starts as soon as some pool holds its workers by count
    (every policy needs that, the replay's `_may_fit`), in the tightest such pool (BestFit) on its roomiest nodes, for
    its run time. A count, not a placement: what the head's choice does to the queue, not where each job will go.
    The queued jobs' GPU models, places and node selectors are not looked at (the geo replay pins every gang to one
    GPU model, where that costs nothing)."""
    free = free.copy()
    held = {i: (list(nodes), list(gpus)) for i, (_, nodes, gpus) in enumerate(releases)}
    events = [(end, i) for i, (end, _, _) in enumerate(releases)]
    heapq.heapify(events)
    pools = int(ctx.group_of.max()) + 1
    now, total, serial = 0.0, 0.0, len(releases)
    for job, run in queue:
        gpw = job.gpus_per_worker
        while True:
            workers = free // gpw
            per_pool = np.bincount(ctx.group_of, weights=workers, minlength=pools)
            fits = np.flatnonzero(per_pool >= job.workers)
            if fits.size:
                break
            if not events:
                return float("inf"), True
            end, i = heapq.heappop(events)
            now = max(now, end)
            nodes, gpus = held.pop(i)
            free[nodes] += gpus
        chosen = int(fits[np.argmin(per_pool[fits])])  # BestFit: the tightest pool that holds it
        candidates = np.flatnonzero((ctx.group_of == chosen) & (workers > 0))
        order = candidates[np.argsort(-workers[candidates], kind="stable")]
        need, nodes, gpus = job.workers, [], []
        for n in order.tolist():
            take = min(int(workers[n]), need)
            nodes.append(n)
            gpus.append(take * gpw)
            need -= take
            if need == 0:
                break
        free[nodes] -= gpus
        held[serial] = (nodes, gpus)
        heapq.heappush(events, (now + run, serial))
        serial += 1
        total += now + run
    return total, now > 0.0


def _index(ctx: PlacementContext) -> dict[str, int]:
    return {name: i for i, name in enumerate(ctx.names)}


def _holds(placement: Placement, index: dict[str, int], gpw: int) -> tuple[list[int], list[int]]:
    return [index[a.node] for a in placement.assignments], [a.workers * gpw for a in placement.assignments]


def _slowdown(placement: Placement) -> float:
    compute = placement.job.profile.compute_ms
    return placement.score.step_ms / compute if compute > 0 else 1.0
