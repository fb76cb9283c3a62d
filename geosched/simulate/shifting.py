"""Time shifting in a replay: which jobs have slack, when a flexible job joins the queue, and what every job emits.

- **Flexible jobs** (`flexible`): a share of the trace's jobs, chosen by a hash of the job's id (the same jobs on every
  run and policy), gets `schedule: {runtime: <its trace duration>, deadline: submit + duration + slack}`, the slack
  definition of Sukprasert et al. ("On the Limitations of Carbon-Aware Temporal and Spatial Workload Shifting in the
  Cloud", EuroSys'24). The runtime is the trace's (users are assumed to know their run time; the network slow-down
  of the placement is not foreseen).
- **Start-now runs** ignore the slack (`ShiftTiming` with `shift=None`): every job starts as soon as it fits, as
  today; only the emissions are counted hour by hour.
- **Shifted runs** (`shift=Method.FORECAST` or `Method.ORACLE`): a flexible job is decided when it arrives by
  `geosched.policies.timeshift.decide` on what is free then, with the hours ahead seen through the forecaster
  (`grid.forecast.DEFAULT_FORECASTER`, or the series itself, the oracle), counting on the GPUs running jobs free
  by their predicted end and on what earlier flexible jobs were promised (`timeshift.Queue`). When its chosen hour
  comes it is decided again (a rolling horizon: a fresher forecast, the GPUs free then) and joins the queue, or
  waits once more when a later start saves at least `timeshift.RESHIFT_SAVING` of the run's carbon against the best
  start then (a higher bar than the first decision's 2%: without it a job chases each next day's forecast dip to its
  latest start).
  Measured on the shipped series, deciding again beat deciding once (benchmarks/bench_timeshift.py). A guard of
  `GUARD_SHARE` of its slack is kept for queueing: no decision plans a start later than deadline - runtime - guard,
  and a job released at that latest start goes to the queue's front. A job no region can hold at any start of its
  window joins the queue at once, and so does a gang only one region can hold whole (`sole_domain`): it is not
  shifted, and goes to the queue's front (grid/README.md, "A gang only one region holds is not shifted").
- **Hard promises** (`ShiftTiming.promise`, the engine's `_promises`): a job shifted to a later start holds, until
  it starts, an EASY reservation at its latest start in the region it was decided for; jobs without a deadline, and
  flexible ones whose own latest start is later, may not take those GPUs past then (policies/README.md, "Hard
  promises"). `binding=True` (measured, not the default): admission against the sum of promises, `_hold` and
  `timeshift.admitted`.
- **Emissions** (every run with a series): a placement's energy per hour by region (`policies.energy`) times the
  *measured* intensity of every hour it runs, whatever the decision forecast.

Times: the replay's clock is trace seconds; `origin` is the Unix time of trace time 0, so schedules (in trace
seconds) and the grid (in UTC hours) meet here and nowhere else.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from geosched.core.models import HOUR_S, Job, NoFit, Placement, Schedule, Weights
from geosched.grid.forecast import GridHistory, Method, run_means
from geosched.policies import timeshift
from geosched.policies.context import PlacementContext
from geosched.policies.energy import kwh_per_hour_by_region
from geosched.simulate.engine import SimOptions, simulate
from geosched.simulate.metrics import PolicyResult
from geosched.simulate.traces.model import TraceJob

GUARD_SHARE = 0.25
# A flexible job's placement must end by its deadline less this share of its stretched run (`ShiftTiming.in_time`):
# in the replay the stretch is exact, so the margin covers only what a later event could add; 1% of a 148 h run is
# 1.5 h, a tenth of the 24 h slack the benchmark gives.
FINISH_MARGIN = 0.01
# The weights a flexible job is placed with when the policy's placement would end after its deadline: the fastest
# ring the policy finds among the GPUs free now (network alone, no band of near-ties to trade it away in).
FASTEST = Weights(network=1.0, cost=0.0, carbon=0.0, zone_tolerance=0.0)


@dataclass(frozen=True)
class Flexibility:
    """`share` of the jobs (0..1) get `slack_s` of slack."""

    slack_s: float = 24 * HOUR_S
    share: float = 0.5


def chosen(job_id: str, share: float) -> bool:
    """Whether a job is among the flexible share: a hash of its id, so the choice is the same on every run."""
    digest = hashlib.sha256(job_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def flexible(trace: Sequence[TraceJob], flex: Flexibility) -> Callable[[Sequence[Job]], list[Job]]:
    """The `jobs` hook of `simulate`: the gangs, with a schedule on the flexible share."""

    def rewrite(gangs: Sequence[Job]) -> list[Job]:
        out = []
        for t, gang in zip(trace, gangs, strict=True):
            if chosen(t.id, flex.share):
                deadline = t.submit_time_s + t.duration_s + flex.slack_s
                gang = replace(gang, schedule=Schedule(runtime_s=t.duration_s, deadline=deadline))
            out.append(gang)
        return out

    return rewrite


class ShiftTiming:
    """The replay's time hook (`geosched.simulate.engine.Timing`) for one run."""

    def __init__(self, trace: Sequence[TraceJob], history: GridHistory, origin: float, policy: str,
                 weights: Weights | None, shift: Method | None, deadline_aware: bool = True,
                 sole_domain_starts_now: bool = True, hard_promises: bool = True, binding: bool = False) -> None:
        self.trace, self.history, self.origin = trace, history, origin
        self.policy, self.weights, self.shift = policy, weights, shift
        # False: the placement as the policy chose it and jobs without slack passing a flexible job until its latest
        # start, as before the deadline work (benchmarks/bench_timeshift.py's "before" runs).
        self.deadline_aware = deadline_aware
        # False: a gang only one region can hold is shifted like any other (the benchmark's runs without the rule).
        self.sole_domain_starts_now = sole_domain_starts_now
        # False: promises stay soft (a job without slack, or one released, takes what it finds), as before issue 24's
        # hard promises (`promise`; the benchmark's runs without them).
        self.hard_promises = hard_promises
        # True (with hard promises): admission against the sum of promises (`_hold`, `timeshift.admitted`), measured
        # and not the default (grid/README.md, "Admission against the sum of promises, measured").
        self.binding = binding and hard_promises
        # job shifted to a later start at least once (binding: or sent to the queue by a decision) -> the region
        # decided for: where its promise stands (`promise`)
        self.deferred: dict[int, int] = {}
        self._sole: dict[int, bool] = {}  # job -> only one region can hold it whole (`sole_domain`)
        # job -> what it holds in the decisions after its own, (region, start, end, GPUs) each (`_hold`): what
        # `timeshift.Queue` counts.
        self.promised: dict[int, list[tuple[int, float, float, float]]] = {}
        self.latest: dict[int, float] = {}  # job -> latest start (trace seconds) on the placement it was decided for

    def _queue(self, running: Sequence[tuple[float, Sequence[int], Sequence[int]]]) -> timeshift.Queue:
        ends = [(self.origin + finish, n, g) for finish, nodes, gpus in running
                for n, g in zip(nodes, gpus, strict=True)]
        promised = [p for held in self.promised.values() for p in held]
        return timeshift.Queue(
            np.array([e[0] for e in ends], dtype=np.float64), np.array([e[1] for e in ends], dtype=np.int64),
            np.array([e[2] for e in ends], dtype=np.int64), np.array([p[0] for p in promised], dtype=np.int64),
            np.array([p[1] for p in promised], dtype=np.float64), np.array([p[2] for p in promised], dtype=np.float64),
            np.array([p[3] for p in promised], dtype=np.float64))

    def _finish_by(self, j: int, job: Job) -> float | None:
        """The latest planned finish (trace seconds): the deadline less the guard; None without one or unshifted."""
        s = job.schedule
        if self.shift is None or s is None or s.deadline is None:
            return None
        guard = GUARD_SHARE * (s.deadline - s.runtime_s - self.trace[j].submit_time_s)
        return s.deadline - max(guard, 0.0)

    def _window(self, j: int, job: Job, now: float) -> timeshift.Window | None:
        """Starts up to the deadline less the run and the guard; and a placement's stretched run (a ring slower than
        compute alone) must end by the deadline itself: the guard absorbs a small stretch, a large one moves the
        latest start earlier."""
        finish_by = self._finish_by(j, job)
        if finish_by is None or job.schedule is None or job.schedule.deadline is None:
            return None
        runtime = job.schedule.runtime_s
        latest = min(finish_by - runtime, self.latest.get(j, np.inf))
        if latest <= now:
            return None
        return timeshift.Window(self.origin + now, self.origin + min(latest, now + timeshift.MAX_SHIFT_H * HOUR_S),
                                runtime, finish_by=self.origin + job.schedule.deadline)

    def _pinned(self, j: int, job: Job, ctx: PlacementContext) -> bool:
        """Whether a flexible job is run as an inflexible one: the rule is on and only one region can hold it."""
        if self.shift is None or not self.sole_domain_starts_now or job.schedule is None:
            return False
        if j not in self._sole:
            self._sole[j] = sole_domain(job, ctx)
        return self._sole[j]

    def release_at(self, j: int, job: Job, now: float, ctx: PlacementContext,
                   running: Sequence[tuple[float, Sequence[int], Sequence[int]]]) -> float:
        again = self.promised.pop(j, None) is not None  # decided again: its own promise is not in its way
        window = self._window(j, job, now)
        if window is None or self._pinned(j, job, ctx):
            return now
        look = self.history.outlook(ctx.region_keys, int(window.now // HOUR_S), window.hours_needed(),
                                    self.shift or Method.FORECAST)
        decision = timeshift.decide(job, ctx, window, look, self.policy, self.weights, explain=False,
                                    min_saving=timeshift.RESHIFT_SAVING if again else timeshift.MIN_SAVING,
                                    queue=self._queue(running), admit=self.binding)
        if isinstance(decision.placement, Placement):
            # Its latest start on the placement it was decided for (a slow ring stretches the run): from then on it
            # is urgent, and it goes to the queue's front (`engine._Replay._promote`).
            stretched = window.runtime_s * timeshift.slowdown(job, decision.placement)
            self.latest[j] = min(self.latest.get(j, np.inf), window.finish_by - stretched - self.origin
                                 if window.finish_by is not None else np.inf)
        if not isinstance(decision.placement, Placement):
            return now
        region = ctx.region_keys.index(decision.placement.regions[0])
        if j in self.deferred:
            self.deferred[j] = region  # its promise follows the latest decision (`promise`)
        if decision.start <= window.now:
            if self.binding:
                # Sent to the queue now, it holds a promise there as a shifted job does: else a job refused a later
                # hour (`timeshift.admitted`) waited in the queue with no reservation, invisible to the decisions
                # after it, while the shifted jobs' promises bound it.
                self.deferred[j] = region
                self._hold(j, job, region, window.now, decision.placement)
            return now
        self.deferred[j] = region
        self._hold(j, job, region, decision.start, decision.placement)
        return decision.start - self.origin

    def _hold(self, j: int, job: Job, region: int, start: float, placement: Placement) -> None:
        """What a job holds in the decisions after its own: its declared run at the hour chosen, until that hour
        comes. Binding: until it starts (`started`), its run as the ring decided stretches it, at the hour chosen
        and at its latest start, where the engine holds its reservation (`promise`); a later job is shifted only to
        an hour whose promises, so counted, still fit (`timeshift.admitted`); a job released or sent to the queue
        holds them until it starts: it is waiting for the GPUs it was promised."""
        run = job.schedule.runtime_s if job.schedule is not None else 0.0
        if self.binding:
            run *= timeshift.slowdown(job, placement)
        held = [(region, start, start + run, float(job.gpus))]
        latest = self.origin + self.latest.get(j, np.inf)
        if self.binding and latest < np.inf:
            if latest < start + run:
                held = [(region, start, max(latest + run, start + run), float(job.gpus))]
            else:
                held.append((region, latest, latest + run, float(job.gpus)))
        self.promised[j] = held

    def started(self, j: int) -> None:
        """Job `j` has started: it is a running job now, and holds no promise (`_hold`)."""
        self.promised.pop(j, None)

    def promise(self, j: int, job: Job) -> tuple[float, int | None] | None:
        """A hard promise (the engine's `_promises`): a job this run shifted to a later start holds, until it
        starts, an EASY reservation at its latest start (deadline - predicted run on the placement decided -
        the guard, `GUARD_SHARE` of its slack: the margin for the queue) in the region it was last decided for.
        Jobs started now or passing it may take those GPUs only if they end by then or leave enough; at that
        start it is urgent and goes to the queue's front (`urgent`, `rank`), so it starts then whatever the
        forecaster chose. Without it, a job whose promised capacity others took when its hour came queued
        behind them past its deadline (geo, January, share 1.0: seasonal naive's llm-523 and four of the
        oracle's; grid/README.md). With `binding`, a flexible job sent to the queue now holds one too, in the
        region decided (`release_at`). A flexible job without one gets its latest start alone (region None):
        promises of earlier latest starts bind it, later ones do not (earliest deadline first)."""
        if not self.hard_promises or self.shift is None:
            return None
        finish_by = self._finish_by(j, job)
        if finish_by is None or job.schedule is None:
            return None
        return min(finish_by - job.schedule.runtime_s, self.latest.get(j, np.inf)), self.deferred.get(j)

    def urgent(self, j: int, job: Job, now: float) -> bool:
        return self.shift is not None and self._window(j, job, now) is None

    def rank(self, j: int, job: Job, now: float, earliest: Callable[[], float]) -> int:
        """At its latest start a flexible job goes first; before it, jobs without slack pass it (it has hours to
        spare, they have none), until the soonest it could start as the running jobs end (`earliest`, optimistic)
        comes within one guard of its latest start: then it goes first too. Without that, a gang needing most of a
        region (geo, January, llm-393: 1,024 GPUs) let the jobs without slack pass it until its latest start, when
        the region was full of their runs, and started 0.25 h after its deadline; started-now met it. Started-now
        runs keep the queue's order."""
        if self.shift is None:
            return 1
        if self._sole.get(j, False):
            # Not shifted (`sole_domain`), and first in the queue (earliest deadline first among the first): its one
            # region is the capacity the shifted jobs' hours crowd, and at the head it holds EASY backfill's
            # reservation there. Measured on the shipped geo fleet, January (grid/README.md): keeping the queue's
            # order instead left 5 added misses at share 1.0; first only near its latest start, 1 at share 0.5.
            return 0
        window = self._window(j, job, now)
        s = job.schedule
        if window is None or s is None or s.deadline is None:
            return 0
        guard = GUARD_SHARE * max(s.deadline - s.runtime_s - self.trace[j].submit_time_s, 0.0)
        if not self.deadline_aware:
            return 2
        return 0 if earliest() + guard >= window.latest - self.origin else 2

    def context(self, j: int, job: Job, now: float, ctx: PlacementContext) -> PlacementContext | None:
        """A flexible job starting now is placed on the predicted mean of its run, as it was decided."""
        s = job.schedule
        if self.shift is None or s is None:
            return None
        at = self.origin + now
        look = self.history.outlook(ctx.region_keys, int(at // HOUR_S), int(np.ceil(s.runtime_s / HOUR_S)) + 2,
                                    self.shift)
        return ctx.with_grid(run_means(look, np.array([at]), s.runtime_s)[0])

    def in_time(self, j: int, job: Job, now: float, placement: Placement, run_s: float,
                again: Callable[[Weights], Placement | NoFit]) -> Placement:
        """The placement a flexible job starts on at `now` in a shifted run: the policy's, unless its stretched run
        (`run_s` x the ring's slowdown, plus `FINISH_MARGIN`) would end after the deadline; then the fastest the
        policy finds now (`FASTEST`), if it ends in time or at least sooner. Shifting used the slack, so the ring
        chosen for carbon must not spend the rest of it: a 148 h job started in time, on a pair of nodes whose ring
        stretched it 1.163x, missed by 0.15 h where started-now's 1.145x pair met it (geo-us, March, oracle,
        share 1.0: `tests/test_simulate_shifting.py`). Started-now runs keep the policy's placement, as today."""
        s = job.schedule
        if self.shift is None or not self.deadline_aware or s is None or s.deadline is None:
            return placement
        budget = s.deadline - now

        def finish(p: Placement) -> float:
            return run_s * timeshift.slowdown(job, p) * (1 + FINISH_MARGIN)

        if finish(placement) <= budget:
            return placement
        fastest = again(FASTEST)
        if isinstance(fastest, Placement) and finish(fastest) < finish(placement):
            return fastest
        return placement

    def kgco2e(self, job: Job, placement: Placement, ctx: PlacementContext, start: float, finish: float) -> float:
        """The measured intensity of every hour of [start, finish), whatever was forecast."""
        at, run = self.origin + start, finish - start
        look = self.history.outlook(ctx.region_keys, int(at // HOUR_S), int(np.ceil(run / HOUR_S)) + 2, Method.ORACLE)
        index = timeshift.node_index(ctx)
        nodes = np.array([index[a.node] for a in placement.assignments], dtype=np.int64)
        gpus = np.array([a.workers * job.gpus_per_worker for a in placement.assignments], dtype=np.int64)
        energy = kwh_per_hour_by_region(ctx, job.profile.utilisation, nodes, gpus)
        return float(energy @ run_means(look, np.array([at]), run)[0]) * run / HOUR_S / 1000.0


def sole_domain(job: Job, ctx: PlacementContext) -> bool:
    """Whether at most one region of the fleet can hold the gang whole (its GPUs, in whole workers, counted on every
    node of the region, busy or not). Such a gang is not shifted: it joins the queue at once, at its front
    (`ShiftTiming.rank`). Its only region holds it one gang at a time, so the capacity a shift's latest start counts
    on cannot be promised: the jobs that fill the region meanwhile, and the other gangs of its size held for the same
    green hours, are all in its way, and a late start is a missed deadline. Measured: the shipped geo fleet (only
    us-east-1 holds a 1,024-GPU gang), January, every job flexible, the 7-day forecaster: 20 of its 22 added misses
    were such gangs (grid/README.md, "A gang only one region holds is not shifted")."""
    g = max(job.gpus_per_worker, 1)
    per_region = np.bincount(ctx.region_of, weights=(ctx.gpus_total // g) * g, minlength=len(ctx.region_keys))
    return int(np.count_nonzero(per_region >= job.gpus)) <= 1


SHIFTS = (Method.FORECAST, Method.ORACLE)
DEFAULT_OPTIONS = SimOptions()


def label(policy: str, shift: Method | None) -> str:
    """A run's name in the results: the policy, and how its flexible jobs were shifted."""
    return policy if shift is None else f"{policy} +shift({shift.value})"


def replay(trace_jobs: Sequence[TraceJob], ctx: PlacementContext, policy_names: Sequence[str],
           weights: Weights | None, history: GridHistory, origin: float, *, options: SimOptions = DEFAULT_OPTIONS,
           context_at: Callable[[float], PlacementContext] | None = None, flex: Flexibility | None = None,
           ) -> list[PolicyResult]:
    """Each policy started now (emissions counted hour by hour), and with `flex` also shifted by the forecast and by
    the oracle, side by side: the same trace, the same flexible jobs, the same measured grid."""
    jobs = flexible(trace_jobs, flex) if flex is not None else None
    out = []
    for name in policy_names:
        for shift in (None, *SHIFTS) if flex is not None else (None,):
            def timing(policy: str, shift: Method | None = shift) -> ShiftTiming:
                return ShiftTiming(trace_jobs, history, origin, policy, weights, shift)

            (result,) = simulate(trace_jobs, ctx, [name], weights, options=options, context_at=context_at, jobs=jobs,
                                 timing=timing)
            out.append(replace(result, policy=label(name, shift)))
    return out
