"""A gang at the head of a strict queue, weighed against the gang it blocks (issue 22, StrictFIFO).

Under Kueue's StrictFIFO (`queueingStrategy: StrictFIFO`, kubernetes-sigs/kueue `apis/kueue/v1beta1/
clusterqueue_types.go`: "older workloads that can't be admitted will block admitting newer workloads even if they
fit") a gang that cannot start holds every job behind it. So the head's placement decides more than its own run: if
it takes the only domain that holds the next gang, the next gang and everything queued behind it wait for the head
to end. Measured (policies/README.md, "Under Kueue's two queues"): on the geo replay's seed 6, zone-first put a
256-GPU gang on one us-east-1 zone (1.35x, 39 h), and the 1,024-GPU gang behind it, which only us-east-1 holds, and
the whole queue waited 39 h; `tas` put it on a slow us-central1 ring and the queue flowed.

**Rule** (`check`; zone-first only, and only when the caller says what waits behind the gang, `Behind`): the winner
`P`, once patience has let it start now (`patience.py`: a head patience holds is not weighed, as the walk below
assumes it starts now), is weighed against the gang placed by the same policy outside `P`'s (cluster, GPU) pool (`B`;
none: keep `P`). For each, the sum of completion times it leads to, counted from now: the head's own run there, plus
each queued job's start and run when the strict queue serves them in order as the running jobs and the head end at
their expected ends, each starting as soon as some pool holds its workers by free GPU count (`_queue_cost`). `B` wins
when its sum is lower by at least `MIN_GAIN`. That is the average JCT the decision changes (the head's and the
queue's), counted for the jobs the caller knows to wait; a queue's delay is what a head-of-line gang costs the others
(Tiresias, Gu et al., NSDI'19; EASY backfill's reservation, Lifka 1995, is the same walk of expected ends). `B` is
not then refused by patience: the comparison has weighed its slowness already.

**Bounds** (issue 22: the unbounded rule made the 100,000-job replay 23.5x the engine alone and zone-first worse
there; policies/README.md, "A strict queue's head, bounded"). It weighs only when all hold:
1. the head spans two or more nodes: a one-node head holds one node's GPUs, and one-node heads are 98% of the
   synthetic replay's decisions, where the unbounded rule's walk over thousands of running jobs cost 1.2 ms each;
2. `B` saves at least `MIN_GAIN` = 20% of the summed completion times: the walk counts GPUs, not links, zones or the
   jobs beyond its depth, and the moves it proposed below that on the geo replay (mostly 0-3%, at most 9%) were
   within its own error (most moved a gang from us-central1 to us-east-1, the one pool of the 1,024-GPU gangs it
   does not see coming), where the moves that fixed the strict queue's losses saved 19-93%;
3. the head holds `P` for at least `MIN_HOLD_S` = 2 h (its run times its ring's slow-down): a head that ends sooner
   delays each job behind it by at most that, and on the geo replay the walk credited such heads with savings their
   run cannot explain (a 42 s head with 38,379 s, a 31 s one with 15,673 s: the walk's own BestFit packing of the
   queued jobs, not the head), and those moves are the ones that made seeds worse (healthy seeds 1 and 2, degraded
   seeds 5 and 8). Measured at 0.5, 1, 1.5, 2 and 3 h (policies/README.md): from 1.5 h up no seed is worse than
   without the rule.

Only a caller that knows the queue *and* run-time estimates can say what waits behind and when running jobs end: the
replay under a strict queue (`SimOptions(backfill=False)`). With a backfill the gangs behind are not held (the
reservations protect them), and the other paths (place, submit, GitOps, scheduler mode, the dispatcher) know no run
times of what runs: they pass no `Behind` and decide as before.

Cost: nothing when the caller passes no `Behind`; for a head on one node or ending within 2 h, two comparisons; else a
count walk of the queued jobs (up to the caller's depth; the replay's is `SimOptions.backfill_depth`, 32) on the free
GPUs, per-pool counts kept node by node (`_Counts`). Only when some queued job waits are the running jobs' ends read,
in order of end and only as far as the walk needs them (`Behind.running`), and then one more placement of the head
and a second walk are made.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from geosched.core.models import Job, NoFit, Placement

if TYPE_CHECKING:
    from geosched.policies.context import IntArray, PlacementContext

QUEUE_AWARE = frozenset({"zone-first"})
MIN_GAIN = 0.2  # bound 2 (docstring)
MIN_HOLD_S = 2 * 3600.0  # bound 3


Release = tuple[float, Sequence[int], Sequence[int]]


@dataclass(frozen=True, slots=True)
class Behind:
    """What a strict queue holds behind the gang being placed: `queue` the jobs queued behind it in order (up to a
    depth), each with its run time (s); `running` gives the running jobs' (expected end in seconds from now, node
    indices, GPUs on each) *in order of end*, lazily: a walk reads only the ends it needs before the queue's jobs fit,
    and none when every one of them fits now (the common case; a list of thousands of running jobs built for every
    decision was the cost of the first version of this rule)."""

    queue: Sequence[tuple[Job, float]]
    running: Callable[[], Iterable[Release]]


PlaceOn = Callable[[Job, "PlacementContext"], Placement | NoFit]


def check(placement: Placement, ctx: PlacementContext, policy: str, runtime_s: float | None, behind: Behind,
          place_on: PlaceOn) -> Placement | None:
    """The placement to take instead of `placement` by the rule above, or None (keep it). `place_on` places a gang
    on a context by the same policy, without patience or this rule."""
    if policy not in QUEUE_AWARE or not behind.queue or runtime_s is None or not np.isfinite(runtime_s) \
            or runtime_s <= 0:
        return None
    if len(placement.assignments) < 2:
        return None  # bound 1
    if runtime_s * _slowdown(placement) < MIN_HOLD_S:
        return None  # bound 3
    fleet = _Fleet.of(ctx)
    kept, held_up = _cost(placement, ctx, fleet, runtime_s, behind)
    if not held_up:
        return None  # every job behind starts now beside it (no running job's end was read): nothing to weigh
    pool = int(ctx.group_of[fleet.index[placement.assignments[0].node]])
    elsewhere = ctx.gpus_free.copy()
    elsewhere[fleet.members[pool]] = 0
    other = place_on(placement.job, ctx.with_free(elsewhere))
    if not isinstance(other, Placement):
        return None  # no other pool holds the head now
    moved, _ = _cost(other, ctx, fleet, runtime_s, behind)
    return other if moved < kept * (1.0 - MIN_GAIN) else None


def _cost(option: Placement, ctx: PlacementContext, fleet: _Fleet, runtime_s: float,
          behind: Behind) -> tuple[float, bool]:
    """The head's run on `option` plus the queue's sum of completion times after it (`_queue_cost`), from now, and
    whether some job behind waits."""
    gpw = option.job.gpus_per_worker
    nodes = [fleet.index[a.node] for a in option.assignments]
    gpus = [a.workers * gpw for a in option.assignments]
    run = runtime_s * _slowdown(option)
    free = ctx.gpus_free.copy()
    free[nodes] -= gpus
    total, waits = _queue_cost(ctx, fleet, free, (run, nodes, gpus), behind)
    return run + total, waits


def _queue_cost(ctx: PlacementContext, fleet: _Fleet, free: IntArray, head: Release,
                behind: Behind) -> tuple[float, bool]:
    """The sum of the queued jobs' completion times (s from now), and whether any of them waits, when a strict queue
    serves them in order on `free` GPUs as the running jobs and the `head` end: each starts as soon as some pool holds
    its workers by count (every policy needs that, the replay's `_may_fit`), in the tightest such pool (BestFit) on
    its roomiest nodes, for its run time. A count, not a placement: what the head's choice does to the queue, not
    where each job will go. The queued jobs' GPU models, places and node selectors are not looked at (the geo replay
    pins every gang to one GPU model, where that costs nothing). The running jobs' ends are read only when a job
    waits, and only as far as it waits (`Behind.running`)."""
    counts = _Counts(fleet, free)
    ends: list[tuple[float, int, Sequence[int], Sequence[int]]] = [(head[0], 0, head[1], head[2])]
    running: Iterator[Release] | None = None
    upcoming: Release | None = None
    now, total, serial = 0.0, 0.0, 1
    for job, run in behind.queue:
        gpw, need = job.gpus_per_worker, job.workers
        while True:
            workers, per_pool = counts.of(gpw)
            fits = [p for p, n in enumerate(per_pool) if n >= need]
            if fits:
                break
            if running is None:
                running = iter(behind.running())
                upcoming = next(running, None)
            if upcoming is not None and (not ends or upcoming[0] <= ends[0][0]):
                end, nodes, gpus = upcoming
                upcoming = next(running, None)
            elif ends:
                end, _, nodes, gpus = heapq.heappop(ends)
            else:
                return float("inf"), True
            now = max(now, end)
            counts.add(nodes, gpus)
        chosen = min(fits, key=per_pool.__getitem__)  # BestFit: the tightest pool that holds it (first on a tie)
        members = fleet.members[chosen]
        by_room = np.argsort(-workers[members], kind="stable")  # its roomiest nodes first
        taken: list[int] = []
        took: list[int] = []
        for n, w in zip(members[by_room].tolist(), workers[members][by_room].tolist(), strict=True):
            take = min(w, need)
            taken.append(n)
            took.append(-take * gpw)
            need -= take
            if need == 0:
                break
        counts.add(taken, took)
        heapq.heappush(ends, (now + run, serial, taken, [-g for g in took]))
        serial += 1
        total += now + run
    return total, now > 0.0


class _Fleet:
    """What the walk needs of a fleet, once per fleet (shared by its `with_free` copies, as their arrays are): each
    node's index by name, and each pool's nodes in index order."""

    _cache: ClassVar[dict[int, tuple[IntArray, _Fleet]]] = {}

    def __init__(self, ctx: PlacementContext) -> None:
        self.index = {name: i for i, name in enumerate(ctx.names)}
        self.group: list[int] = ctx.group_of.tolist()
        self.pools = int(ctx.group_of.max(initial=-1)) + 1
        self.members = [np.flatnonzero(ctx.group_of == p) for p in range(self.pools)]

    @classmethod
    def of(cls, ctx: PlacementContext) -> _Fleet:
        found = cls._cache.get(id(ctx.group_of))
        if found is None or found[0] is not ctx.group_of:  # (the array is kept, so its id is not reused meanwhile)
            if len(cls._cache) > 8:
                cls._cache.clear()
            found = cls._cache[id(ctx.group_of)] = (ctx.group_of, cls(ctx))
        return found[1]


class _Counts:
    """Free GPUs and, per worker size, each node's and each pool's workers, updated node by node as GPUs are taken and
    given back: a gang touches a handful of nodes, where recounting the fleet for each queued job cost a pass over
    every node."""

    def __init__(self, fleet: _Fleet, free: IntArray) -> None:
        self.fleet = fleet
        self.free = free
        self.sizes: dict[int, tuple[IntArray, list[int]]] = {}

    def of(self, gpw: int) -> tuple[IntArray, list[int]]:
        found = self.sizes.get(gpw)
        if found is None:
            workers = self.free // gpw
            per_pool = np.bincount(self.fleet.group, weights=workers, minlength=self.fleet.pools)
            found = self.sizes[gpw] = (workers, [int(v) for v in per_pool])
        return found

    def add(self, nodes: Sequence[int], gpus: Sequence[int]) -> None:
        for n, g in zip(nodes, gpus, strict=True):
            self.free[n] += g
            now_free = int(self.free[n])
            pool = self.fleet.group[n]
            for gpw, (workers, per_pool) in self.sizes.items():
                w = now_free // gpw
                per_pool[pool] += w - int(workers[n])
                workers[n] = w


def _slowdown(placement: Placement) -> float:
    compute = placement.job.profile.compute_ms
    return placement.score.step_ms / compute if compute > 0 else 1.0
