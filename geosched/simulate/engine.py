"""Discrete-event replay of a trace under each placement policy.

Events are arrivals (in submit order, ties in trace order) and completions. At each event time all
completions are applied first (their GPUs are free again), then arrivals join the queue, then the queue
is served:

- FIFO: the head job is offered to the policy through `geosched.policies.place` on the snapshot with the
  current free GPUs (`ctx.with_free`, a new array each time: the context is never changed). If it is placed
  it starts now; if not, nothing behind it starts (strict FIFO), until a completion frees GPUs.
- backfill (optional, EASY backfill with zone-aware reservations, policies/reservation.py): when the head is
  blocked it gets a reservation: the earliest expected end of running jobs after which some domain (a pool's zone,
  region, or the pool) holds its workers whole, and that domain. A later job among the next `backfill_depth` may
  start now only if it ends by the reserved start or leaves the domain enough to hold the head then. Each blocked
  multi-node gang among them gets a reservation too, in a domain no earlier reservation holds, that the jobs behind
  it may not delay either (so a 512-GPU gang behind a 1,024-GPU head is not starved by smaller jobs in the
  other pools that hold it). Run times are the trace's durations times the placement's slow-down; reservations are
  computed afresh at every pass, so an estimate that proves wrong only moves them.
- hard promises (with a time hook that shifts, `Timing.promise`): a job shifted to a later start holds an EASY
  reservation at its latest start in the region it was decided for, from the decision until it starts; the head and
  the backfill candidates it binds (`_binding`) start only past it as past any reservation (`_promises`).

Strict FIFO (no backfill): the head's decision is also told what waits behind it (`Behind`: the next
`backfill_depth` queued jobs with their trace durations, the running jobs' expected ends in order of end, read only as
far as the rule needs them), so zone-first may place a multi-node head that holds its GPUs >= 2 h outside the pool the
jobs behind need when that costs the head less than it would cost them (policies/strictqueue.py).

Patience (policies/patience.py): each decision is told how long the job has waited for a healthy ring (since the
first "waiting" answer it got) and its trace duration as its run time, as the backfill is. A "waiting" NoFit is
not final: the gang is asked again when its patience runs out (a wake-up event), or sooner when GPUs are freed;
meanwhile the backfill runs the jobs behind it as for any blocked head.

A job starts with its whole gang or not at all. Its run time is its trace duration times the network
slow-down of its placement, `score.step_ms / profile.compute_ms`: step time with geosched.core.comm's ring
all-reduce over the placement's worst link, over compute alone (1.0 for a gang on one node). A job that
no pool could hold even on the idle fleet, or that the policy refuses on the idle fleet, is reported as
unplaced, not queued forever.

Consolidation, as modelled. A gang on one node has no network step (Gavel's "consolidated" throughput);
a gang on two or more nodes pays the ring all-reduce among its workers over the worst link it spans
(Gavel's "unconsolidated" one, see gavel.py). A worker is one process holding all its GPUs on one node,
so a job of up to 8 GPUs is never split over nodes (gangs.py). The ring's cost does not grow with the
number of nodes beyond two: every link of a ring carries 2(n-1)/n of the message whatever the layout, so a
4 x 2 gang on two nodes or on four pays the same. Same zone vs other zone of a region is the only
network difference a single-region fleet has.

Before each policy call a necessary condition is checked in a few vector operations (some pool of ready
nodes has enough workers' worth of free GPUs, as every policy requires); a call that could only return
NoFit is not made. Results are identical with or without this check; it only saves time.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

from geosched import policies
from geosched.core.models import CarbonSignal, Fleet, Job, NetworkView, NoFit, Placement, Weights
from geosched.grid.carbon import decision_signal
from geosched.policies.context import IntArray, PlacementContext
from geosched.policies.patience import Waiting
from geosched.policies.reservation import Domains, Reservation, reserve
from geosched.policies.strictqueue import QUEUE_AWARE, Behind
from geosched.simulate.gangs import MAX_GPUS_PER_WORKER, ProfileFor, gavel_profiles, to_job
from geosched.simulate.gavel import shipped_throughputs
from geosched.simulate.metrics import JobRecord, PolicyResult, Unplaced, summarise
from geosched.simulate.traces.model import TraceJob

# The last argument: how long the job has waited, and its run time (policies/patience.py).
PlaceFn = Callable[[Job, PlacementContext, str, Weights | None, Waiting | None], Placement | NoFit]


class Timing(Protocol):
    """When jobs may start and what they emit (`geosched.simulate.shifting`): the replay's one hook for time shifting.

    `release_at`: the trace time a job arriving (or released) at `now` joins the queue (`now` or earlier: at once);
    `running` holds each running job's finish, nodes and GPUs.
    `urgent`: a released job at its latest start goes to the queue's front. `rank`: a queued flexible job's place
    in the queue (0 before everything, 1 as a job without slack, 2 after those), asked again at every event;
    `earliest()` is the soonest it could start as the running jobs end (the backfill's shadow time, optimistic).
    `context`: the snapshot the job is placed on at `now` (None: the hour's, as for any job). `in_time`: the placement
    a flexible job starts on, given the policy's (`again` places it anew with other weights): one that ends by its
    deadline. `kgco2e`: what a placement emits over [start, finish). `promise`: a job shifted to a later start and
    not started yet holds a hard promise: its latest start (trace seconds) and the region (index in the context's
    `region_keys`) it was decided for; any other flexible job of a run that shifts: its latest start and None (the
    order among promises, `_binding`); None for the rest (see `_promises`). `started`: job `j` has started (what it
    was promised is now what it holds)."""

    def release_at(self, j: int, job: Job, now: float, ctx: PlacementContext,
                   running: Sequence[tuple[float, Sequence[int], Sequence[int]]]) -> float: ...

    def urgent(self, j: int, job: Job, now: float) -> bool: ...

    def rank(self, j: int, job: Job, now: float, earliest: Callable[[], float]) -> int: ...

    def context(self, j: int, job: Job, now: float, ctx: PlacementContext) -> PlacementContext | None: ...

    def in_time(self, j: int, job: Job, now: float, placement: Placement, run_s: float,
                again: Callable[[Weights], Placement | NoFit]) -> Placement: ...

    def kgco2e(self, job: Job, placement: Placement, ctx: PlacementContext, start: float, finish: float) -> float: ...

    def promise(self, j: int, job: Job) -> tuple[float, int | None] | None: ...

    def started(self, j: int) -> None: ...


@dataclass(frozen=True, slots=True)
class SimOptions:
    """`gpu`: pin every gang to this GPU model (see gangs.py: durations do not depend on the GPU). `reservations`:
    the backfill keeps zone-aware EASY reservations (policies/reservation.py); False is Kueue's BestEffortFIFO, where a
    blocked workload reserves nothing and any later one that fits is admitted past it (kubernetes-sigs/kueue
    `apis/kueue/v1beta1/clusterqueue_types.go`, QueueingStrategy): the `tas` baseline as Kueue itself queues."""

    backfill: bool = False
    reservations: bool = True
    backfill_depth: int = 32
    max_gpus_per_worker: int = MAX_GPUS_PER_WORKER
    gpu: str | None = None


def contexts_by_hour(fleet: Fleet, network: NetworkView, signal: CarbonSignal | None, start: datetime,
                     ) -> Callable[[float], PlacementContext]:
    """For a replay: the placement context of the hour `start + t` seconds falls in. Contexts are built once per
    distinct set of intensities (every hour outside the series shares the yearly one). Here rather than beside
    `decision_signal` in geosched.grid.carbon: the grid sits below the policies whose context it builds."""
    built: dict[tuple[float, ...], PlacementContext] = {}
    origin = start.timestamp()

    def at(t: float) -> PlacementContext:
        resolved = decision_signal(fleet, signal, datetime.fromtimestamp(origin + t, UTC)).signal
        key = tuple(resolved.intensity[k] for k in sorted(resolved.intensity))
        ctx = built.get(key)
        if ctx is None:
            ctx = built[key] = PlacementContext(fleet, network, resolved)
        return ctx

    return at


def simulate(trace_jobs: Sequence[TraceJob], ctx: PlacementContext, policy_names: Sequence[str],
             weights: Weights | None = None, *, options: SimOptions = SimOptions(),
             profile_for: ProfileFor | None = None, place_fn: PlaceFn | None = None,
             context_at: Callable[[float], PlacementContext] | None = None,
             jobs: Callable[[Sequence[Job]], Sequence[Job]] | None = None,
             timing: Callable[[str], Timing | None] | None = None) -> list[PolicyResult]:
    """Replay `trace_jobs` once per policy, each from the snapshot's free GPUs. Pure: same inputs, same results.

    `context_at(t)`, if given, is the snapshot a decision at trace time `t` is made on (the same fleet and network;
    the grid intensity of that hour: `contexts_by_hour`), so each job is placed, and its emissions
    counted, at the carbon of the hour it starts.

    `jobs` may rewrite the gangs (give some a `schedule`: geosched.simulate.shifting); `timing(name)` is the time
    hook of the run named `name` (None: every job as soon as it fits, as always)."""
    profile_for = profile_for or gavel_profiles(shipped_throughputs())
    gangs = [to_job(t, profile_for(t), options.max_gpus_per_worker, options.gpu) for t in trace_jobs]
    gangs = list(jobs(gangs)) if jobs is not None else gangs
    order = sorted(range(len(trace_jobs)), key=lambda i: (trace_jobs[i].submit_time_s, i))
    decide = place_fn or _decide
    return [_Replay(trace_jobs, gangs, ctx, name, weights, options, decide, context_at,
                    timing(name) if timing is not None else None).run(order)
            for name in policy_names]


def _decide(job: Job, ctx: PlacementContext, policy: str, weights: Weights | None,
            waiting: Waiting | None) -> Placement | NoFit:
    """The policy's decision without the explanation nobody reads during a replay."""
    return policies.place(job, ctx, policy, weights, explain=False, waiting=waiting)


class _Replay:
    """The mutable state of one replay; it never leaves `simulate`."""

    def __init__(self, trace: Sequence[TraceJob], gangs: Sequence[Job], ctx: PlacementContext, policy: str,
                 weights: Weights | None, options: SimOptions, place_fn: PlaceFn,
                 context_at: Callable[[float], PlacementContext] | None = None, timing: Timing | None = None) -> None:
        self.trace, self.gangs, self.ctx = trace, gangs, ctx
        self.context_at = context_at
        self.timing = timing
        self.waiting: list[tuple[float, int]] = []  # (release, job): flexible jobs waiting for their hour
        self.policy, self.weights, self.options, self.place_fn = policy, weights, options, place_fn
        self.index = {name: i for i, name in enumerate(ctx.names)}
        self.pool_of: IntArray = ctx.cluster_of * len(ctx.gpu_names) + ctx.gpu_of
        self.pools = int(self.pool_of.max()) + 1 if self.pool_of.size else 0
        self.initial: IntArray = np.where(ctx.ready, ctx.gpus_free, 0).astype(np.int64)
        self.free: IntArray = self.initial.copy()
        self.domains: Domains | None = None  # built at the first reservation: a replay without backfill needs none
        # A reservation depends on the free GPUs, what runs and the domains already reserved: kept while they are.
        self.reserved: dict[tuple[int, int, tuple[str, ...]], Reservation | None] = {}
        self.version = 0  # bumped whenever free GPUs change: a refusal at the same version stands
        self.refused: dict[int, tuple[int, float]] = {}  # job -> (version, until): a waiting refusal ends in time
        self.refused_outside: dict[int, tuple[int, tuple[str, ...]]] = {}  # job -> (version, reserved domains)
        # When each gang was first told to wait for a healthy ring: its patience counts from then (the queueing
        # before it is sunk whatever the gang does next; policies/patience.py).
        self.told_to_wait: dict[int, float] = {}
        self.wakeups: list[float] = []  # when a waiting gang's patience runs out: the queue is served again
        self.fits_idle: dict[tuple[int, int], bool] = {}
        self.queue: deque[int] = deque()
        self.running: list[tuple[float, int, int]] = []  # (finish, start order, job)
        self.held: dict[int, tuple[list[int], list[int]]] = {}
        self.records: list[JobRecord] = []
        self.unplaced: list[Unplaced] = []

    def run(self, order: Sequence[int]) -> PolicyResult:
        submit = [self.trace[i].submit_time_s for i in order]
        k = 0
        while k < len(order) or self.running or self.queue or self.waiting:
            next_arrival = submit[k] if k < len(order) else np.inf
            next_finish = self.running[0][0] if self.running else np.inf
            next_hour = self.waiting[0][0] if self.waiting else np.inf
            next_wake = self.wakeups[0] if self.wakeups and self.queue else np.inf
            now = float(min(next_arrival, next_finish, next_hour, next_wake))
            if now == np.inf:
                raise RuntimeError("jobs queued with nothing running: _serve should have given them up")
            while self.wakeups and self.wakeups[0] <= now:
                heapq.heappop(self.wakeups)
            while self.running and self.running[0][0] <= now:
                self._release(heapq.heappop(self.running)[2])
            while self.waiting and self.waiting[0][0] <= now:
                self._admit(heapq.heappop(self.waiting)[1], now)
            while k < len(order) and submit[k] <= now:
                self._admit(order[k], now)
                k += 1
            self._serve(now)
        return summarise(self.policy, self.records, self.unplaced, int(self.initial.sum()))

    def _admit(self, j: int, now: float) -> None:
        job = self.gangs[j]
        shape = (job.workers, job.gpus_per_worker)
        if shape not in self.fits_idle:
            self.fits_idle[shape] = self._may_fit(self.initial, job)
        if not self.fits_idle[shape]:
            self._give_up(j, f"no pool of ready nodes holds {job.workers} x {job.gpus_per_worker} GPUs "
                             "even with the fleet idle")
            return
        if self.timing is not None and job.flexible:
            running = [(finish, *self.held[i]) for finish, _, i in self.running]
            release = self.timing.release_at(j, job, now, self.ctx.with_free(self.free), running)
            if release > now:
                heapq.heappush(self.waiting, (release, j))
                return
            if self.timing.urgent(j, job, now):
                self.queue.appendleft(j)
                return
        self.queue.append(j)

    def _serve(self, now: float) -> None:
        if self.timing is not None and len(self.queue) > 1:
            self._promote(now)
        promises = self._promises()
        while self.queue:
            head = self.queue[0]
            placement = self._try(head, now)
            if placement is not None and promises and (self.running or self.waiting):
                # (With nothing running and nothing waiting for its hour, no later event could free what a promise
                # withholds: the head starts.)
                placement = self._kept(head, placement, now, promises)
                if placement is None:
                    break  # it would take a promised region's GPUs past the promise: blocked, the backfill runs
            if placement is not None:
                self.queue.popleft()
                self._start(head, placement, now)
                promises = self._after(head, placement, now, promises)
            elif not self.running and self.refused[head][1] == np.inf:
                # Nothing runs, so the fleet is as idle as it will ever be: the refusal is final (a gang waiting
                # for a healthy ring is asked again when its patience runs out).
                self.queue.popleft()
                self._give_up(head, f"policy {self.policy!r} finds no placement even with the fleet idle")
            else:
                break
        if self.options.backfill and len(self.queue) > 1:
            self._backfill(now, promises)

    def _promises(self) -> list[tuple[int, Reservation]]:
        """The hard promises of the jobs shifted to a later start and not started (`Timing.promise`), as EASY
        reservations (policies/reservation.py) at each one's latest start, in the region it was decided for: the
        running jobs released in order of expected end up to that start, the domain of that region (one pool, as a
        gang needs) that holds the most of the job's workers then, less the workers of the promises of earlier
        latest starts still running then. A job may start now past a promise only as past a reservation
        (`Reservation.admits`): it ends by the promised start or leaves the domain enough for the promised job.
        A promise the domain no longer holds then (broken by a run longer than predicted) is not kept: its job goes
        to the queue's front at its latest start (`Timing.urgent`, `rank`) and gets the head's reservation there.
        Computed afresh at every pass, as the reservations are: none outlives the jobs it was computed from."""
        if self.timing is None:
            return []
        asks = []
        for j in [j for _, j in self.waiting] + list(self.queue):
            promised = self.timing.promise(j, self.gangs[j])
            if promised is not None and promised[1] is not None:
                asks.append((promised[0], j, promised[1]))
        if not asks:
            return []
        asks.sort()
        if self.domains is None:
            self.domains = Domains.of(self.ctx, self.initial)
        regions = self.domains.ids[1]
        ordered = sorted(self.running)
        free = self.free.copy()
        k = 0
        out: list[tuple[int, Reservation]] = []
        earlier: list[tuple[float, int, int]] = []  # (end, region, GPUs) of the promises before
        for start, j, region in asks:
            while k < len(ordered) and ordered[k][0] <= start:
                nodes, gpus = self.held[ordered[k][2]]
                free[nodes] += gpus
                k += 1
            job = self.gangs[j]
            gpw = job.gpus_per_worker
            mask = self.ctx.region_of == region
            if job.gpu is not None:
                mask &= self.ctx.gpu_of == (self.ctx.gpu_names.index(job.gpu) if job.gpu in self.ctx.gpu_names
                                            else -1)
            end = start + self.trace[j].duration_s
            if mask.any():
                counts = np.bincount(regions[mask], weights=free[mask] // gpw, minlength=len(self.domains.labels[1]))
                domain = int(np.argmax(counts))
                ahead = sum(g for e, r, g in earlier if r == region and e > start) // gpw
                count = int(counts[domain]) - ahead
                if count >= job.workers:
                    out.append((j, Reservation(job.name, start, self.domains.labels[1][domain],
                                               self.domains.nodes(1, domain), job.workers, gpw, free.copy(), count)))
            earlier.append((end, region, job.gpus))
        return out

    def _binding(self, j: int, run: float, promises: list[tuple[int, Reservation]]) -> list[Reservation]:
        """The promises job `j`, starting now for `run` seconds, must not break: for a flexible job, those of
        earlier latest starts than its own on this placement (`Timing.promise`'s less what the ring stretches the
        run beyond its declared time: earliest deadline first, whether it holds a promise or not; a gang only one
        region holds, first in the queue, is bound by those of earlier latest starts too); every one for a job
        without a deadline, as EASY's reservations bind every job behind the head."""
        assert self.timing is not None
        job = self.gangs[j]
        own = self.timing.promise(j, job) if job.flexible else None
        if own is None:
            return [r for i, r in promises if i != j]
        latest = own[0] - max(run - self.trace[j].duration_s, 0.0)
        return [r for i, r in promises if i != j and r.start < latest]

    def _kept(self, j: int, placement: Placement, now: float,
              promises: list[tuple[int, Reservation]]) -> Placement | None:
        """The placement, if it breaks no promise job `j` is bound by; else the job placed outside the domains of
        those promises (None: none there)."""
        nodes, gpus = self._holds(j, placement)
        finish = now + self._run_time(j, placement)
        binding = self._binding(j, finish - now, promises)
        broken = [r for r in binding if not r.admits(nodes, gpus, finish)]
        if not broken:
            return placement
        return self._outside(j, now, broken)

    def _after(self, j: int, placement: Placement, now: float,
               promises: list[tuple[int, Reservation]]) -> list[tuple[int, Reservation]]:
        """The promises once job `j` has started (its own dropped; what it holds at the others' starts counted)."""
        nodes, gpus = self._holds(j, placement)
        finish = now + self._run_time(j, placement)
        return [(i, r.after(nodes, gpus, finish)) for i, r in promises if i != j]

    def _promote(self, now: float) -> None:
        """The queue by the time hook's rank (`Timing.rank`), stable within a rank, the urgent ones earliest deadline
        first: a flexible job whose latest start has come goes to the front (joining the queue before it, it could
        otherwise wait behind others past it), one with slack left lets jobs without slack pass. A run without a time
        hook never gets here; a run that does not shift ranks every job alike, so its queue keeps its order."""
        assert self.timing is not None
        queued = list(self.queue)
        ordered: list[tuple[float, int, int]] = []

        def earliest(job: Job) -> Callable[[], float]:
            def soonest() -> float:
                if self._may_fit(self.free, job):
                    return now
                if not ordered:
                    ordered.extend(sorted(self.running))
                return self._shadow_time(job, ordered)

            return soonest

        ranks = [self.timing.rank(j, self.gangs[j], now, earliest(self.gangs[j])) if self.gangs[j].flexible else 1
                 for j in queued]
        order = sorted(range(len(queued)),
                       key=lambda k: (ranks[k], self._deadline(queued[k]) if ranks[k] == 0 else 0.0, k))
        if order != list(range(len(queued))):
            self.queue = deque(queued[k] for k in order)

    def _deadline(self, j: int) -> float:
        s = self.gangs[j].schedule
        return s.deadline if s is not None and s.deadline is not None else np.inf

    def _backfill(self, now: float, promises: list[tuple[int, Reservation]] | None = None) -> None:
        """EASY backfill with zone-aware reservations (policies/reservation.py): the blocked head, then each blocked
        multi-node gang among the candidates, gets a reservation in a domain no earlier reservation holds; a candidate
        starts now only if it delays none of them, nor breaks a hard promise it is bound by (`_promises`,
        `_binding`). Computed afresh at every pass, from what runs now."""
        promises = promises or []
        head = self.queue.popleft()
        held: list[Reservation] = []
        reserving = self.options.reservations
        if reserving:
            self._reserve(head, held)
        candidates = [self.queue.popleft() for _ in range(min(self.options.backfill_depth, len(self.queue)))]
        waiting = []
        for j in candidates:
            placement = self._try(j, now)
            if placement is not None:
                nodes, gpus = self._holds(j, placement)
                finish = now + self._run_time(j, placement)
                guards = held + self._binding(j, finish - now, promises) if promises else held
                if not all(r.admits(nodes, gpus, finish) for r in guards):
                    # Its choice would delay a reservation: asked again on what no reservation holds, as Slurm's
                    # backfill tests a job against the resources outside the reservations.
                    placement = self._outside(j, now, guards)
                    if placement is not None:
                        nodes, gpus = self._holds(j, placement)
                        finish = now + self._run_time(j, placement)
            if placement is not None:
                self._start(j, placement, now)
                held = [r.after(nodes, gpus, finish) for r in held]
                if promises:
                    promises = self._after(j, placement, now, promises)
                continue
            waiting.append(j)
            if reserving and self.gangs[j].workers > 1:
                self._reserve(j, held)
        self.queue.extendleft(reversed([head, *waiting]))

    def _reserve(self, j: int, held: list[Reservation]) -> None:
        """Append gang `j`'s reservation, in a domain none of `held` holds, if it has one."""
        key = (j, self.version, tuple(r.domain for r in held))
        if self.domains is None:
            self.domains = Domains.of(self.ctx, self.initial)
        if key not in self.reserved:
            job = self.gangs[j]
            taken = None
            if held:
                taken = np.zeros(len(self.free), dtype=bool)
                for r in held:
                    taken |= r.nodes
            releases = [(finish, *self.held[i]) for finish, _, i in self.running]
            if len(self.reserved) > 4096:
                self.reserved.clear()  # old versions are never asked again
            self.reserved[key] = reserve(job.name, job.workers, job.gpus_per_worker, self.free, releases,
                                         self.domains, taken=taken)
        reservation = self.reserved[key]
        if reservation is not None:
            held.append(reservation)

    def _shadow_time(self, head: Job, ordered: Sequence[tuple[float, int, int]] | None = None) -> float:
        """When `head` could start at the soonest after the next completion, releasing the running jobs in finish
        order (`ordered`: them, already sorted)."""
        free = self.free.copy()
        for finish, _, j in ordered if ordered is not None else sorted(self.running):
            nodes, gpus = self.held[j]
            free[nodes] += gpus
            if self._may_fit(free, head):
                return finish
        return np.inf

    def _may_fit(self, free: IntArray, job: Job) -> bool:
        """Some (cluster, GPU model) pool holds every worker by free GPU count: every policy needs that."""
        if self.pools == 0:
            return False
        workers = np.bincount(self.pool_of, weights=free // job.gpus_per_worker, minlength=self.pools)
        return bool(workers.max() >= job.workers)

    def _try(self, j: int, now: float) -> Placement | None:
        # A refusal stands at the same free GPUs whatever the hour (the grid changes scores, not what fits), until
        # its patience runs out for a gang waiting for a healthy ring.
        version, until = self.refused.get(j, (-1, 0.0))
        if version == self.version and now < until:
            return None
        result = self._ask(j, now, self.free.copy())
        if isinstance(result, Placement):
            return result
        until = np.inf
        if isinstance(result, NoFit) and result.retry_after_s is not None:
            until = now + result.retry_after_s
            self.told_to_wait.setdefault(j, now)
            heapq.heappush(self.wakeups, until)
        self.refused[j] = (self.version, until)
        return None

    def _ask(self, j: int, now: float, free: IntArray) -> Placement | NoFit | None:
        """The policy's answer for job `j` on `free` (None: no pool could hold it, the policy is not asked)."""
        job, trace = self.gangs[j], self.trace[j]
        if not self._may_fit(free, job):
            return None
        ctx = self.context_at(now) if self.context_at is not None else self.ctx
        if self.timing is not None and job.flexible:
            ctx = self.timing.context(j, job, now, ctx) or ctx
        # The replay knows each job's run time, as its backfill does (EASY's user estimates, exact here).
        waiting = Waiting(now - self.told_to_wait.get(j, now), trace.duration_s, self._behind(j, now))
        seen = ctx.with_free(free)
        result = self.place_fn(job, seen, self.policy, self.weights, waiting)
        if isinstance(result, Placement) and self.timing is not None and job.flexible:
            # A flexible job's placement ends by its deadline (Timing.in_time), wherever the replay asks.
            result = self.timing.in_time(j, job, now, result, trace.duration_s,
                                         lambda w: self.place_fn(job, seen, self.policy, w, waiting))
        return result

    def _behind(self, j: int, now: float) -> Behind | None:
        """What a strict queue (no backfill) holds behind its head `j` (policies/strictqueue.py); None otherwise."""
        if self.options.backfill or len(self.queue) < 2 or self.queue[0] != j or self.policy not in QUEUE_AWARE:
            return None  # (a policy that does not read it is not handed it: building it costs a walk of what runs)
        queued = [(self.gangs[i], self.trace[i].duration_s)
                  for i in itertools.islice(self.queue, 1, 1 + self.options.backfill_depth)]
        return Behind(queued, lambda: self._ends(now))

    def _ends(self, now: float) -> Iterator[tuple[float, list[int], list[int]]]:
        """The running jobs' (expected end from `now`, nodes, GPUs), in order of end, read as far as the reader goes."""
        ends = list(self.running)  # a heap already; copied, so the replay's own is untouched
        while ends:
            finish, _, i = heapq.heappop(ends)
            yield (finish - now, *self.held[i])

    def _outside(self, j: int, now: float, held: list[Reservation]) -> Placement | None:
        """Job `j` placed on the free GPUs outside every reserved domain (a refusal stands while they do)."""
        key = (self.version, tuple(r.domain for r in held))
        if self.refused_outside.get(j) == key:
            return None
        free = self.free.copy()
        for r in held:
            free[r.nodes] = 0
        result = self._ask(j, now, free)
        if isinstance(result, Placement):
            return result
        self.refused_outside[j] = key
        return None

    def _run_time(self, j: int, placement: Placement) -> float:
        return self.trace[j].duration_s * _slowdown(self.gangs[j], placement)

    def _holds(self, j: int, placement: Placement) -> tuple[list[int], list[int]]:
        """The nodes a placement takes and the GPUs it takes on each. Plain lists: a gang spans a handful of nodes,
        where numpy's per-call overhead would dominate."""
        gpw = self.gangs[j].gpus_per_worker
        return [self.index[a.node] for a in placement.assignments], [a.workers * gpw for a in placement.assignments]

    def _start(self, j: int, placement: Placement, now: float) -> None:
        job, trace = self.gangs[j], self.trace[j]
        nodes, gpus = self._holds(j, placement)
        free = self.free.copy()
        free[nodes] -= gpus
        if len(set(nodes)) != len(nodes) or sum(gpus) != job.gpus or free[nodes].min() < 0:
            raise RuntimeError(f"policy {self.policy!r} placed job {job.name!r} on GPUs that are not free")
        self._set_free(free)
        slowdown = _slowdown(job, placement)
        run = trace.duration_s * slowdown
        hours = run / 3600.0
        heapq.heappush(self.running, (now + run, len(self.records), j))
        self.held[j] = (nodes, gpus)
        kgco2e = placement.score.gco2e_per_hour * hours / 1000.0
        if self.timing is not None:
            kgco2e = self.timing.kgco2e(job, placement, self.ctx, now, now + run)
            self.timing.started(j)
        deadline = job.schedule.deadline if job.schedule is not None else None
        self.records.append(JobRecord(
            id=trace.id, submit_s=trace.submit_time_s, start_s=now, finish_s=now + run, gpus=job.gpus,
            workers=job.workers, zones=placement.zones, regions=placement.regions, slowdown=slowdown,
            usd=placement.score.usd_per_hour * hours, kgco2e=kgco2e, flexible=job.flexible, deadline_s=deadline,
        ))

    def _release(self, j: int) -> None:
        nodes, gpus = self.held.pop(j)
        free = self.free.copy()
        free[nodes] += gpus
        self._set_free(free)

    def _set_free(self, free: IntArray) -> None:
        self.free = free
        self.version += 1

    def _give_up(self, j: int, reason: str) -> None:
        self.unplaced.append(Unplaced(self.trace[j].id, self.trace[j].line, reason))


def _slowdown(job: Job, placement: Placement) -> float:
    compute = job.profile.compute_ms
    return placement.score.step_ms / compute if compute > 0 else 1.0
