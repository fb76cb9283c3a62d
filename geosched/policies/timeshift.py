"""When a flexible job starts, and where: the start hour and the placement chosen together (policies/README.md,
"Time shifting").

A job with slack (`Job.schedule`: a predicted run, and `start_within` or a `deadline`) may start at its decision
time or at any whole UTC hour up to its latest start (at most `MAX_SHIFT_H` ahead). The objective is the policy's
own weighted score with the carbon term counted over the job's predicted run, not its first hour: at start s a
region r emits at the mean m[s, r] of its predicted intensity over [s, s + run).

The search is exact for placements within one region and costs one `place`: the network and cost terms of a
placement do not depend on the start, and its carbon term grows with m[s, r] alone, so every placement in region r
is best started at the same s*_r = argmin_s m[s, r]. One call of the policy on the grid m[s*_r, r] (each region at
its own best start) therefore picks the placement of the best (placement, start) pair, and its region names the
start. A placement over several regions (rare: zone first keeps gangs together) starts at the argmin of its own
energy-weighted mean, which the single call may have judged a little too green; it is still the policy's choice.

A job starts later only when that saves at least `MIN_SAVING` of its run's predicted carbon against the best start
now (the policy's choice among the GPUs free now, a second `place` when the first chose a later hour): a shift on a
forecast's noise would delay the job for nothing. The decision is rolling: the caller asks again when the
chosen hour comes (with what is free then and a fresher forecast), and a job at its latest start starts as soon
as it fits. Capacity is the free GPUs of the context, as for any decision: what the queue frees later is not
promised. Pure: the context is a snapshot, nothing is changed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from geosched import policies
from geosched.core.models import HOUR_S, Job, NoFit, Placement, Weights
from geosched.grid.forecast import GridHistory, Method, Outlook, run_means
from geosched.policies.context import FloatArray, IntArray, PlacementContext
from geosched.policies.energy import kwh_per_gpu_hour, kwh_per_hour_by_region
from geosched.policies.patience import Waiting

MIN_SAVING = 0.02
# When a held job's hour comes and it is decided again, a later start must save this much more: without a higher
# bar a job chases each next day's forecast dip to its latest start (measured: benchmarks/bench_timeshift.py).
RESHIFT_SAVING = 0.10
MAX_SHIFT_H = 168


@dataclass(frozen=True)
class Window:
    """Starts a decision may choose: from `now` to `latest` (Unix seconds), for a run of `runtime_s`.

    `finish_by` (Unix seconds), when set, also bounds the start by the chosen placement: a placement whose predicted
    step is slower than the job's compute alone (`Placement.score.step_ms` over `CommProfile.compute_ms`) stretches
    the run, so it must start by `finish_by - runtime_s x slowdown`. The replay sets it (its runtimes are the trace's
    compute-bound durations, which the engine stretches the same way); `Window.of` does not (a user's `runtime` is
    the wall-clock run they predict)."""

    now: float
    latest: float
    runtime_s: float
    finish_by: float | None = None

    @staticmethod
    def of(job: Job, submitted: float, now: float) -> Window | None:
        """The job's window at decision time `now`; None for a job without slack, or past its latest start."""
        s = job.schedule
        if s is None or not s.flexible:
            return None
        latest = min(s.latest_start(submitted), now + MAX_SHIFT_H * HOUR_S)
        return Window(now, latest, s.runtime_s) if latest > now else None

    def starts(self) -> FloatArray:
        """`now`, then every whole hour up to `latest`."""
        first = math.ceil(self.now / HOUR_S) * HOUR_S
        hours = np.arange(first, self.latest + 1e-6, HOUR_S, dtype=np.float64)
        return np.concatenate(([self.now], hours[hours > self.now]))

    def hours_needed(self) -> int:
        """Hours of outlook from the decision's hour that cover every start's run."""
        return math.ceil((self.latest + self.runtime_s) / HOUR_S) - int(self.now // HOUR_S) + 1


@dataclass(frozen=True)
class Shift:
    """A decision: when (`start`) and where (`placement`), with the predicted kgCO2e of the run, and, when asked
    for (`explain`), the best placement starting now and its kgCO2e, for the saving."""

    start: float
    placement: Placement | NoFit
    kgco2e: float | None
    window: Window
    outlook: Outlook
    starts: FloatArray
    means: FloatArray
    """Predicted mean gCO2e/kWh over the run, per start (rows) and region (columns, `ctx.region_keys`)."""
    start_now: Placement | NoFit | None = None
    start_now_kgco2e: float | None = None

    @property
    def deferred_s(self) -> float:
        return self.start - self.window.now

    @property
    def saving_kgco2e(self) -> float | None:
        if self.kgco2e is None or self.start_now_kgco2e is None:
            return None
        return self.start_now_kgco2e - self.kgco2e


def decide(job: Job, ctx: PlacementContext, window: Window, look: Outlook, policy: str = policies.DEFAULT_POLICY,
           weights: Weights | None = None, explain: bool = True, min_saving: float = MIN_SAVING,
           queue: Queue | None = None, admit: bool = False) -> Shift:
    """The start and placement of a flexible job (module docstring). `look`'s rows follow `ctx.region_keys` and
    start at the hour of `window.now`. `queue`: what running jobs will free and when, and what waiting flexible jobs
    were promised, so that a later start can count on GPUs that are busy now (and a crowd of flexible jobs does not
    choose one green hour that cannot hold them all); without it, every start sees the GPUs free now. `admit` (with
    `queue`): admission against the sum of promises (`admitted`), measured and not the default (policies/README.md,
    "The queue")."""
    starts = window.starts()
    means = run_means(look, starts, window.runtime_s)
    now_means = means[0]
    regions = np.arange(means.shape[1])
    room: npt.NDArray[np.bool_] | None = None
    if queue is not None:
        room = queue.room(job, ctx, starts, window.runtime_s)
        best = earliest_minimum(np.where(room, means, np.inf))
        best = np.where(room[best, regions], best, 0)  # no start with room: the policy judges now
        gain = (now_means - means[best, regions]) / np.maximum(now_means, 1e-12)
        best = np.where((gain < min_saving) & room[0], 0, best)
    else:
        best = earliest_minimum(means)
        gain = (now_means - means[best, regions]) / np.maximum(now_means, 1e-12)
        best = np.where(gain < min_saving, 0, best)
    chosen_means = means[best, regions]
    seen = ctx.with_grid(chosen_means)
    if queue is not None and room is not None:
        free = queue.free_by_region_start(ctx, starts[best])
        full = np.asarray(room.sum(axis=0) == 0, dtype=bool)
        if not full.all():
            # A region with no room at any start is promised to jobs waiting for their hour: taking its GPUs now
            # (they may be free now) would break the promise and push those jobs past their deadlines.
            free = np.where(full[ctx.region_of], 0, free)
        seen = seen.with_free(free)
    result = policies.place(job, seen, policy, weights, explain)
    start_idx = 0
    kg = None
    late = False  # no later start fits (its run past `finish_by`, or an hour already promised): start now instead
    if isinstance(result, Placement):
        energy = _energy(ctx, job, result)
        used = np.flatnonzero(energy)
        start_idx = int(best[used[0]]) if used.size == 1 else int(earliest_minimum((means @ energy)[:, None])[0])
        fits = None
        if queue is not None and room is not None:
            fits = admitted(job, result, ctx, window, starts, queue, used) if admit else \
                np.asarray(room[:, used].all(axis=1), dtype=bool)
        if window.finish_by is not None or (admit and fits is not None):
            in_time = _in_time(job, result, window, starts, means @ energy, start_idx, fits)
            late, start_idx = start_idx > 0 and in_time == 0, in_time
        kg = float(energy @ means[start_idx]) * window.runtime_s / HOUR_S / 1000.0
    if start_idx == 0 and not explain and not late:
        return Shift(float(starts[0]), result, kg, window, look, starts, means)
    if not explain and kg is not None and kg <= (1 - min_saving) * _now_floor(job, ctx, now_means, window):
        # No placement starting now can emit less than the floor: the later start clears the bar without asking.
        return Shift(float(starts[start_idx]), result, kg, window, look, starts, means)
    # The best start now (anywhere the GPUs are free now): the alternative shown, and the bar a later start clears.
    now_result = policies.place(job, ctx.with_grid(now_means), policy, weights, explain)
    now_kg = None
    if isinstance(now_result, Placement):
        now_kg = float(_energy(ctx, job, now_result) @ now_means) * window.runtime_s / HOUR_S / 1000.0
        if late or (start_idx > 0 and kg is not None and kg > now_kg * (1 - min_saving)):
            result, kg, start_idx = now_result, now_kg, 0
    return Shift(float(starts[start_idx]), result, kg, window, look, starts, means, now_result, now_kg)


def admitted(job: Job, placement: Placement, ctx: PlacementContext, window: Window, starts: FloatArray,
             queue: Queue, used: IntArray) -> npt.NDArray[np.bool_]:
    """Per start, whether the placement's regions (`used`) still hold the job there once what is already promised
    is counted: admission against the sum of promises. The run counted is the stretched one (a slow ring holds its
    GPUs longer than the declared runtime), and a later start must also leave room at the job's latest start, where
    its own promise (the replay's hard promise, an EASY reservation) will stand if its hour's GPUs are taken. Without
    it, the hours chosen were checked against the promises only on the declared run, and the promises of one
    region and hour added up to more than it holds: the replay then dropped the promises it could not keep, and
    region-sized gangs missed their deadlines (geo, share 1.0: grid/README.md, "Hard promises, measured")."""
    run = window.runtime_s * slowdown(job, placement)
    room = np.asarray(queue.room(job, ctx, np.append(starts, window.latest), run)[:, used].all(axis=1), dtype=bool)
    fits = room[:-1].copy()
    fits[1:] &= bool(room[-1])
    return fits


def _in_time(job: Job, placement: Placement, window: Window, starts: FloatArray, emitted: FloatArray, start_idx: int,
             room: npt.NDArray[np.bool_] | None) -> int:
    """The chosen start, or, when the placement's stretched run would end after `window.finish_by` or the start
    is not admitted (`room`: `admitted`, when the queue is known), the best start (the lowest `emitted`) that is
    both; now when none is."""
    allowed = np.ones(starts.size, dtype=bool)
    if window.finish_by is not None:
        allowed &= starts + window.runtime_s * slowdown(job, placement) <= window.finish_by + 1e-6
    if room is not None:
        allowed &= room
    if allowed[start_idx]:
        return start_idx
    if not allowed[1:].any():
        return 0
    return int(earliest_minimum(np.where(allowed, emitted, np.inf)[:, None])[0])


def slowdown(job: Job, placement: Placement) -> float:
    """How much longer the run is on this placement than on the job's compute alone (>= 1): the replay's stretch."""
    compute = job.profile.compute_ms
    return max(placement.score.step_ms / compute, 1.0) if compute > 0 else 1.0


def _now_floor(job: Job, ctx: PlacementContext, now_means: FloatArray, window: Window) -> float:
    """kgCO2e no placement starting now can beat: every GPU on the cleanest node free now."""
    usable = ctx.ready & (ctx.gpus_free >= job.gpus_per_worker)
    if job.gpu is not None:
        usable &= ctx.gpu_of == (ctx.gpu_names.index(job.gpu) if job.gpu in ctx.gpu_names else -1)
    if not usable.any():
        return math.inf
    per_gpu = kwh_per_gpu_hour(ctx, job.profile.utilisation) * now_means[ctx.region_of]
    return float(per_gpu[usable].min()) * job.gpus * window.runtime_s / HOUR_S / 1000.0


@dataclass(frozen=True)
class Queue:
    """What the queue holds for later hours: the GPUs running jobs free when they are predicted to end (`release_at`,
    `release_node`, `release_gpus`), and the GPUs promised to flexible jobs waiting for their hour (`promise_region`
    in `region_keys` order, `promise_start`, `promise_end`, `promise_gpus`). Times are Unix seconds.

    A region has room at a start when the whole workers its nodes of the job's kind hold then (free now, plus what
    ends by then) less the promises overlapping the run hold the job. Predicted ends are taken as given; a job
    without slack arriving later takes what it finds, and the rolling decision then looks again."""

    release_at: FloatArray
    release_node: IntArray
    release_gpus: IntArray
    promise_region: IntArray
    promise_start: FloatArray
    promise_end: FloatArray
    promise_gpus: FloatArray

    def room(self, job: Job, ctx: PlacementContext, starts: FloatArray, runtime_s: float) -> npt.NDArray[np.bool_]:
        """(starts x regions): whether the region can hold the job at that start."""
        usable = ctx.ready & (ctx.gpus_total >= job.gpus_per_worker)
        if job.gpu is not None:
            usable &= ctx.gpu_of == (ctx.gpu_names.index(job.gpu) if job.gpu in ctx.gpu_names else -1)
        regions = len(ctx.region_keys)
        order = np.argsort(self.release_at, kind="stable")
        at, node, gpus = self.release_at[order], self.release_node[order], self.release_gpus[order]
        taken = np.zeros((starts.size, regions))
        if self.promise_region.size:
            overlap = (starts[:, None] < self.promise_end[None, :]) & \
                (starts[:, None] + runtime_s > self.promise_start[None, :])
            for r in np.unique(self.promise_region).tolist():
                mine = self.promise_region == r
                taken[:, r] = overlap[:, mine].astype(np.float64) @ self.promise_gpus[mine]
        # Whole workers each node holds at each start: free now, plus what has ended by then, event by event.
        free = ctx.gpus_free.copy()
        workers = np.where(usable, free // job.gpus_per_worker, 0)
        held = np.bincount(ctx.region_of, weights=workers, minlength=regions)
        cut = np.searchsorted(at, starts, side="right")
        out = np.empty((starts.size, regions), dtype=bool)
        done = 0
        for k in range(starts.size):
            if cut[k] > done:
                nodes = node[done:cut[k]]
                np.add.at(free, nodes, gpus[done:cut[k]])
                touched = np.unique(nodes)
                now_workers = np.where(usable[touched], np.minimum(free[touched], ctx.gpus_total[touched])
                                       // job.gpus_per_worker, 0)
                held += np.bincount(ctx.region_of[touched], weights=now_workers - workers[touched],
                                    minlength=regions)
                workers[touched] = now_workers
                done = int(cut[k])
            out[k] = held * job.gpus_per_worker - taken[k] >= job.gpus
        return out

    def free_by_region_start(self, ctx: PlacementContext, region_start: FloatArray) -> IntArray:
        """Each node's free GPUs at the start chosen for its region: free now plus what ends there by then."""
        if not self.release_node.size:
            return ctx.gpus_free
        done = self.release_at <= region_start[ctx.region_of[self.release_node]]
        freed = np.bincount(self.release_node[done], weights=self.release_gpus[done], minlength=len(ctx.names))
        out: IntArray = np.minimum(ctx.gpus_free + freed.astype(np.int64), ctx.gpus_total)
        return out


def earliest_minimum(values: FloatArray) -> IntArray:
    """Per column, the first row within a relative 1e-9 of the column's minimum: of equal starts (a flat mean read
    through floating-point sums) the earliest."""
    low = values.min(axis=0)
    out: IntArray = np.argmax(values <= low + 1e-9 * np.maximum(np.abs(low), 1.0), axis=0).astype(np.int64)
    return out


def run_kgco2e(ctx: PlacementContext, placement: Placement, gco2e_per_kwh: Mapping[str, float],
               hours: float) -> float:
    """kgCO2e of `hours` of a placement at these intensities per region key."""
    energy = _energy(ctx, placement.job, placement)
    grid = np.array([gco2e_per_kwh.get(k, 0.0) for k in ctx.region_keys])
    return float(energy @ grid) * hours / 1000.0


def _energy(ctx: PlacementContext, job: Job, placement: Placement) -> FloatArray:
    """kWh per hour of the placement in each region of the context."""
    index = node_index(ctx)
    nodes: IntArray = np.array([index[a.node] for a in placement.assignments], dtype=np.int64)
    gpus: IntArray = np.array([a.workers * job.gpus_per_worker for a in placement.assignments], dtype=np.int64)
    return kwh_per_hour_by_region(ctx, job.profile.utilisation, nodes, gpus)


_INDEX: dict[int, tuple[list[str], dict[str, int]]] = {}


def node_index(ctx: PlacementContext) -> dict[str, int]:
    """Node name -> index, built once per snapshot (contexts made by `with_free`/`with_grid` share `names`)."""
    key = id(ctx.names)
    hit = _INDEX.get(key)
    if hit is None or hit[0] is not ctx.names:
        if len(_INDEX) > 16:
            _INDEX.clear()
        hit = _INDEX[key] = (ctx.names, {name: i for i, name in enumerate(ctx.names)})
    return hit[1]


def when_text(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    return f"{moment:%Y-%m-%dT%H:%MZ}" if moment.second == 0 and moment.microsecond == 0 else \
        f"{moment:%Y-%m-%dT%H:%M:%SZ}"


def hours_text(seconds: float) -> str:
    return f"{seconds / HOUR_S:.1f} h" if seconds % HOUR_S else f"{seconds / HOUR_S:.0f} h"


def region_rows(shift: Shift, ctx: PlacementContext) -> list[dict[str, Any]]:
    """Per region: what its grid is predicted to be over the run when starting now and at its own best start, and
    what that rests on (the explanation's table and the JSON's `start.regions`)."""
    rows = []
    for r, key in enumerate(ctx.region_keys):
        best = int(earliest_minimum(shift.means[:, r:r + 1])[0])
        now, low = float(shift.means[0, r]), float(shift.means[best, r])
        rows.append({"region": key, "now_gco2e_per_kwh": round(now, 3), "best_start": when_text(shift.starts[best]),
                     "best_gco2e_per_kwh": round(low, 3), "saving": round(1 - low / now, 4) if now > 0 else 0.0,
                     "source": shift.outlook.sources[r]})
    return rows


def shift_doc(shift: Shift, ctx: PlacementContext) -> dict[str, Any]:
    """The `start` block of a flexible job's Placement document."""
    now = shift.start_now
    doc: dict[str, Any] = {
        "at": when_text(shift.start),
        "decided_at": when_text(shift.window.now),
        "latest": when_text(shift.window.latest),
        "deferred_s": round(shift.deferred_s, 3),
        "runtime_s": shift.window.runtime_s,
        "kgco2e": None if shift.kgco2e is None else round(shift.kgco2e, 6),
        "start_now": None if now is None else {
            "zones": list(now.zones) if isinstance(now, Placement) else [],
            "cluster": now.cluster if isinstance(now, Placement) else None,
            "kgco2e": None if shift.start_now_kgco2e is None else round(shift.start_now_kgco2e, 6),
        },
        "saving_kgco2e": None if shift.saving_kgco2e is None else round(shift.saving_kgco2e, 6),
        "forecast": shift.outlook.method.value,
        "regions": region_rows(shift, ctx),
    }
    return doc


def shift_lines(shift: Shift) -> list[str]:
    """The decision in words, for `place --explain`."""
    w = shift.window
    lines = []
    if shift.deferred_s > 0:
        lines.append(f"start: {when_text(shift.start)}, {hours_text(shift.deferred_s)} after {when_text(w.now)} "
                     f"(latest start {when_text(w.latest)}); carbon counted over the predicted "
                     f"{hours_text(w.runtime_s)} run")
    else:
        lines.append(f"start: now ({when_text(w.now)}; latest start {when_text(w.latest)}): no later start saves "
                     f"{MIN_SAVING:.0%} of the predicted {hours_text(w.runtime_s)} run's carbon")
    if shift.kgco2e is not None and shift.start_now_kgco2e is not None and isinstance(shift.start_now, Placement):
        saving = shift.start_now_kgco2e - shift.kgco2e
        share = saving / shift.start_now_kgco2e if shift.start_now_kgco2e > 0 else 0.0
        lines.append(f"carbon over the run: {shift.kgco2e:.3f} kgCO2e as chosen; starting now in "
                     f"{', '.join(shift.start_now.zones)}: {shift.start_now_kgco2e:.3f} kgCO2e; saving "
                     f"{saving:.3f} kgCO2e ({share:.1%}), by the {shift.outlook.method.value}")
    return lines


def deadline_note(job: Job, when: float) -> str | None:
    """What every path that decides a job at `when` says when its deadline cannot be kept any more (the job is
    then placed to start now, as one without slack; `Window.of` gives it no window): None while it can."""
    s = job.schedule
    if s is None or s.deadline is None or not s.misses_deadline(when):
        return None
    return (f"job {job.name} cannot finish by its deadline {when_text(s.deadline)}: it starts now (its predicted "
            f"{hours_text(s.runtime_s)} run ends {when_text(when + s.runtime_s)} at the earliest)")


def place_in_time(job: Job, ctx: PlacementContext, history: GridHistory | None, when: float,
                  policy: str = policies.DEFAULT_POLICY, weights: Weights | None = None, explain: bool = True,
                  method: Method = Method.FORECAST, submitted: float | None = None, min_saving: float = MIN_SAVING,
                  waiting: Waiting | None = None) -> tuple[Placement | NoFit, Shift | None]:
    """A job decided at `when`: a flexible one (with a grid to look at) by `decide`, over its window from
    `submitted` (default `when`); any other by the policy alone, as always, with `waiting` for its patience
    (policies/patience.py: a flexible job already chooses when it starts, and is not made to wait for links too)."""
    window = Window.of(job, when if submitted is None else submitted, when) if history is not None else None
    if window is None or history is None:
        return policies.place(job, ctx, policy, weights, explain, waiting=waiting), None
    look = history.outlook(ctx.region_keys, int(when // HOUR_S), window.hours_needed(), method)
    shift = decide(job, ctx, window, look, policy, weights, explain, min_saving)
    return shift.placement, shift
