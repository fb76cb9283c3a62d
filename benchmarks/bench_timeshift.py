"""Carbon-aware time shifting, measured (issue 24). Run by hand: python benchmarks/bench_timeshift.py [--quick].

1. **Decision latency.** One flexible job (64 GPUs, a 6 h run, a 48 h window) on the synthetic fleet of 10,000 nodes
   in 200 zones of 40 regions (benchmarks/bench_place.py), each region given one of the shipped 2023 series (eight
   grid zones, each region its zone's hours shifted by a whole number of days, so no two regions move alike):
   `timeshift.place_in_time` (the outlook from the default forecaster, the run means of every start, one
   `place`, and a second when it defers) against one `place` of the same job on the same context, in the same run;
   also with a queue of 2,000 running jobs' releases (`timeshift.Queue`). p50 / p99 of each and the ratio.
2. **Savings, JCT, deadlines.** The LLM workload (`geosched.simulate.llm`, like Kalos, jobs of >= 16 GPUs, load 0.5,
   EASY backfill) replayed on a fleet whose every region has a real hourly series, on each month of 2023 (trace time
   0 on the 10th at 00:00 UTC, the month's number the seed): zone-first started now, and shifted
   (`geosched.simulate.shifting`) before this lane's deadline handling (seasonal naive, the oracle) and after it
   (each forecaster of `FORECASTERS`, the oracle), all in the same run, carbon weight 1 throughout.
   Fleets: `geo-us` (the geo fleet's shape over us-east-1 / PJM, us-central1 / SPP, us-west-2 / PacifiCorp West,
   600 nodes so each region holds every gang, clean links), `geo-ca` (the same with N. California, us-west-1 /
   CAISO, for Oregon: a solar grid) and `geo` (the shipped geo fleet: eu-north-1 has no
   shipped series and stays at its yearly mean, 3% degraded NICs). Flexible share 0.5 (the JCT of the others is
   the one that must not suffer) and 1.0 (every job with 24 h of slack). Reported per month and pooled (sums over
   months): kgCO2e saved against started-now by the forecast and by the oracle, the forecast's share of the
   oracle's saving, the inflexible jobs' average JCT against started-now, deadline misses; and the forecaster's
   measured error (MAPE) on each series.
0. **Forecasters**: each family's parameters tuned on days 1-9 of every month, scored on days 10-31 (held out).

3. **Bound** (also alone with `--bounds`): what shifting could save at most on fleets of the shipped zones
   (`ZONE_SETS`), every job flexible, alone, at the best zone and hour by the oracle, with 18-72 h of slack, and
   each zone's daily swing: whether a 30% saving is there to be had at all, said in one line.

Targets (issue 24): >= 30% less kgCO2e than started-now with the forecast, within 10% of the oracle's saving;
inflexible average JCT within +5%; no deadline missed; the decision under 50 ms at 10,000 nodes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from bench_place import synthetic

from geosched import policies
from geosched.core.models import HOUR_S, CarbonSignal, Fleet, Job, Schedule, Weights
from geosched.grid.carbon import GridInput, grid_history
from geosched.grid.forecast import (
    DEFAULT_FORECASTER,
    SEASONAL_NAIVE,
    Agg,
    Forecaster,
    GridHistory,
    Method,
    Scored,
    mape,
    scored,
)
from geosched.grid.formats import Basis
from geosched.grid.shipped import shipped_series, shipped_zones
from geosched.grid.zones import shipped_zone_map
from geosched.policies import timeshift
from geosched.simulate.engine import SimOptions, contexts_by_hour, simulate
from geosched.simulate.fleets import GEO_US_ZONES, geo_fleet
from geosched.simulate.llm import llm_trace
from geosched.simulate.metrics import JobRecord, PolicyResult
from geosched.simulate.shifting import Flexibility, ShiftTiming, flexible
from geosched.simulate.traces.model import TraceJob

YEAR = int(datetime(2023, 1, 1, tzinfo=UTC).timestamp() // HOUR_S)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def synthetic_grid(fleet: Fleet) -> GridHistory:
    """Each synthetic region gets a shipped zone's hours, shifted by a whole number of days."""
    zones = shipped_zones()
    hourly = {}
    for i, key in enumerate(sorted(fleet.regions)):
        hours = shipped_series(zones[i % len(zones)]).hours
        shift = 24 * (i // len(zones))
        hourly[key] = {h + shift: v for h, v in hours.items()}
    return grid_history(fleet, GridInput(CarbonSignal({}, hourly), None, Basis.LIFECYCLE))


def latency(repeats: int) -> None:
    fleet, net = synthetic(10_000, 200, 40)
    ctx = policies.PlacementContext(fleet, net)
    grid = synthetic_grid(fleet)
    job = Job("flex-64", 8, 8, gpu="H100", schedule=Schedule(6 * HOUR_S, start_within_s=48 * HOUR_S))
    weights = Weights(carbon=1.0)
    rng = np.random.default_rng(1)
    running = rng.choice(len(ctx.names), 2000)
    queue = timeshift.Queue(rng.uniform(0, 48 * HOUR_S, 2000), running.astype(np.int64),
                            np.full(2000, 8, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0),
                            np.zeros(0), np.zeros(0))
    place_ms, shift_ms, queue_ms, deferred = [], [], [], 0
    days = np.arange(repeats) * 24 + 100 * 24 + 7  # a different morning each repeat
    for k in range(repeats):
        now = (YEAR + int(days[k])) * HOUR_S
        t = time.perf_counter()
        policies.place(job, ctx, weights=weights, explain=False)
        place_ms.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        _, shift = timeshift.place_in_time(job, ctx, grid, now, weights=weights, explain=False)
        shift_ms.append((time.perf_counter() - t) * 1e3)
        deferred += shift is not None and shift.start > now
        window = timeshift.Window.of(job, now, now)
        assert window is not None
        t = time.perf_counter()
        look = grid.outlook(ctx.region_keys, int(now // HOUR_S), window.hours_needed())
        timeshift.decide(job, ctx, window, look, weights=weights, explain=False,
                         queue=replace(queue, release_at=queue.release_at + now))
        queue_ms.append((time.perf_counter() - t) * 1e3)
    print(f"1. decision latency, 10,000 nodes, 40 regions, 64 GPUs, 48 h window ({repeats} decisions, {deferred} "
          "deferred):")
    for label, ms in (("one place (start now)", place_ms), ("time-shift decision", shift_ms),
                      ("time-shift decision with a queue of 2,000 releases", queue_ms)):
        print(f"   {label:52s} p50 {percentile(ms, 50):6.1f} ms  p99 {percentile(ms, 99):6.1f} ms  "
              f"(p50 {percentile(ms, 50) / percentile(place_ms, 50):.2f}x one place)")


# geo-us with its Oregon region replaced by N. California (us-west-1, CAISO: the solar grid, whose intensity
# halves from night to noon): the same shape, the regions' p5.48xlarge offers from the shipped catalog.
GEO_CA_ZONES = (*GEO_US_ZONES[:6], ("aws", "us-west-1", "usw1-az1", "p5.48xlarge", 40),
                ("aws", "us-west-1", "usw1-az3", "p5.48xlarge", 25))
FLEETS = {
    "geo-us": lambda: geo_fleet(nodes=600, degraded=0.0, layout=GEO_US_ZONES, slow_pairs=False),
    "geo-ca": lambda: geo_fleet(nodes=600, degraded=0.0, layout=GEO_CA_ZONES, slow_pairs=False),
    "geo": lambda: geo_fleet(),
}


def shipped_grid(fleet: Fleet) -> tuple[GridInput, GridHistory]:
    """The shipped series on the fleet's regions, by the shipped zone map."""
    zones = shipped_zone_map()
    hourly = {}
    for zone in shipped_zones():
        for region in zones.regions_of(zone):
            if region in fleet.regions:
                hourly[region] = dict(shipped_series(zone).hours)
    grid = GridInput(CarbonSignal({}, hourly), None, Basis.LIFECYCLE)
    return grid, grid_history(fleet, grid)


# The forecasters the replay compares (grid/README.md, "Forecasts"): the one the default replaced, the default, and
# the runner-up family on held-out days (median profile, decaying last hour), each tuned on days 1-9 of every month.
FORECASTERS = {"seasonal naive": SEASONAL_NAIVE, "7d mean+last h": DEFAULT_FORECASTER,
               "10d median+last h": Forecaster(days=10, agg=Agg.MEDIAN, decay=0.98)}


@dataclass(frozen=True)
class Variant:
    """One shifted run: how the hours ahead are seen, and whether the deadline handling of this lane is on (the
    placement held to the deadline, a gang whose capacity is far off ranked first: `ShiftTiming.deadline_aware`)."""

    name: str
    shift: Method
    forecaster: Forecaster
    deadline_aware: bool
    # A gang only one region holds starts as an inflexible job would (`shifting.sole_domain`); False: shifted.
    sole_rule: bool = True
    # A shifted job holds a reservation at its latest start (`ShiftTiming.promise`); False: promises stay soft.
    hard: bool = True
    # Admission against the sum of promises (`ShiftTiming.binding`, `timeshift.admitted`); not the default.
    binding: bool = False


VARIANTS = (
    Variant("before: seasonal naive", Method.FORECAST, SEASONAL_NAIVE, False, False),
    Variant("before: oracle", Method.ORACLE, SEASONAL_NAIVE, False, False),
    *(Variant(f"no sole rule: {label}", Method.FORECAST, f, True, False) for label, f in FORECASTERS.items()),
    Variant("no sole rule: oracle", Method.ORACLE, DEFAULT_FORECASTER, True, False),
    *(Variant(f"soft promises: {label}", Method.FORECAST, f, True, hard=False) for label, f in FORECASTERS.items()),
    Variant("soft promises: oracle", Method.ORACLE, DEFAULT_FORECASTER, True, hard=False),
    *(Variant(f"after: {label}", Method.FORECAST, f, True) for label, f in FORECASTERS.items()),
    Variant("after: oracle", Method.ORACLE, DEFAULT_FORECASTER, True),
    *(Variant(f"binding: {label}", Method.FORECAST, f, True, binding=True) for label, f in FORECASTERS.items()),
    Variant("binding: oracle", Method.ORACLE, DEFAULT_FORECASTER, True, binding=True),
)


def run(trace: list[TraceJob], ctx: policies.PlacementContext, history: GridHistory, start: datetime,
        context_at: Callable[[float], policies.PlacementContext], flex: Flexibility,
        variant: Variant | None) -> PolicyResult:
    """Started now (`variant` None) or one shifted variant: `shifting.replay`'s runs, one at a time."""
    seen = replace(history, forecaster=variant.forecaster) if variant is not None else history

    def timing(policy: str) -> ShiftTiming:
        return ShiftTiming(trace, seen, start.timestamp(), policy, Weights(carbon=1.0),
                           variant.shift if variant is not None else None,
                           deadline_aware=variant.deadline_aware if variant is not None else True,
                           sole_domain_starts_now=variant.sole_rule if variant is not None else True,
                           hard_promises=variant.hard if variant is not None else True,
                           binding=variant.binding if variant is not None else False)

    (result,) = simulate(trace, ctx, ["zone-first"], Weights(carbon=1.0), options=SimOptions(gpu="H100", backfill=True),
                         context_at=context_at, jobs=flexible(trace, flex), timing=timing)
    return result


def targets(fleet_name: str, months: list[int], jobs: int, shares: list[float],
            variants: tuple[Variant, ...] = VARIANTS) -> None:
    fleet, net = FLEETS[fleet_name]()
    grid, history = shipped_grid(fleet)
    assert grid.signal is not None
    ctx = policies.PlacementContext(fleet, net)
    capacity = sum(n.gpus for n in fleet.nodes)
    print(f"\n2. {fleet_name}: {len(fleet.nodes)} nodes in {', '.join(sorted(fleet.regions))}; series: "
          f"{', '.join(sorted(history.series)) or 'none'} (others at their yearly mean)", flush=True)
    for region, series in sorted(history.series.items()):
        for label, f in FORECASTERS.items():
            error = mape(series, forecaster=f)
            print(f"   forecaster {label} on {region}: {error.text() if error else '-'} (whole year)")
    for share in shares:
        flex = Flexibility(24 * HOUR_S, share)
        pooled: list[tuple[PolicyResult, dict[str, PolicyResult]]] = []
        print(f"   flexible share {share:g}, slack 24 h, carbon weight 1; saved against started-now, added misses "
              "(deadlines started-now met) in brackets, the inflexible jobs' average JCT against started-now:",
              flush=True)
        print("   month  now kg  " + "  ".join(f"{v.name[:22]:>22s}" for v in variants) + "   s")
        for month in months:
            start = datetime(2023, month, 10, tzinfo=UTC)
            trace = llm_trace(jobs, capacity_gpus=capacity, load=0.5, min_gpus=16, cluster="kalos", seed=month)
            t = time.perf_counter()
            context_at = contexts_by_hour(fleet, net, grid.signal, start)
            now = run(trace, ctx, history, start, context_at, flex, None)
            shifted = {v.name: run(trace, ctx, history, start, context_at, flex, v) for v in variants}
            pooled.append((now, shifted))
            cells = [f"{1 - r.kgco2e / now.kgco2e:6.1%} ({_added_misses(now, r)}) {_jct(now, r)}"
                     for r in shifted.values()]
            print(f"   {month:5d} {now.kgco2e:7.0f}  " + "  ".join(f"{c:>22s}" for c in cells) +
                  f"  {time.perf_counter() - t:4.0f}", flush=True)
            for name, r in shifted.items():
                for miss in _added(now, r):
                    print(f"         added miss, {name}: {miss.id} ({miss.gpus} GPUs in {', '.join(miss.regions)}, "
                          f"submitted {miss.submit_s / HOUR_S:.1f} h, started {miss.start_s / HOUR_S:.1f} h, "
                          f"ring {miss.slowdown:.2f}x, {(miss.finish_s - (miss.deadline_s or 0)) / HOUR_S:.2f} h "
                          "late)", flush=True)
        print(f"   bound (each flexible job alone, any region that holds it, the oracle's hours, the guard kept): "
              f"{bound(fleet, history, months, jobs, capacity, share):.1%} of the flexible jobs' own emissions")
        now_kg = sum(r[0].kgco2e for r in pooled)
        saved = {v.name: 1 - sum(r[1][v.name].kgco2e for r in pooled) / now_kg for v in variants}
        inflex_now = statistics.fmean(r[0].avg_jct_inflexible_s for r in pooled)
        print(f"   pooled over {len(months)} months ({sum(r[0].flexible_jobs for r in pooled):,} flexible jobs; "
              f"started-now missed {sum(r[0].deadline_misses for r in pooled)}, deadlines no start meets):")
        for v in variants:
            oracle = saved.get(v.name if v.shift is Method.ORACLE else
                               next((u.name for u in variants if u.shift is Method.ORACLE
                                     and (u.deadline_aware, u.sole_rule, u.hard)
                                     == (v.deadline_aware, v.sole_rule, v.hard)), ""),
                               0.0)
            inflex = statistics.fmean(r[1][v.name].avg_jct_inflexible_s for r in pooled)
            jct = f"{inflex / inflex_now - 1:+.1%}" if inflex_now > 0 else "n/a (no inflexible job)"
            ratio = f"{saved[v.name] / oracle:.2f}" if oracle > 0 else "n/a"
            per_month = [1 - r[1][v.name].kgco2e / r[0].kgco2e for r in pooled]
            print(f"     {v.name:42s} saves {saved[v.name]:6.1%} (per month {min(per_month):6.1%}.."
                  f"{max(per_month):6.1%}), of the oracle's {ratio:>4s}; inflexible JCT {jct}; misses "
                  f"{sum(r[1][v.name].deadline_misses for r in pooled)}, added "
                  f"{sum(_added_misses(r[0], r[1][v.name]) for r in pooled)}", flush=True)


def bound(fleet: Fleet, history: GridHistory, months: list[int], jobs: int, capacity: int, share: float) -> float:
    """What shifting could save at most on these traces: each flexible job alone on an idle fleet, in the region
    of the lowest mean over its run among those whose GPUs hold it, at the best start of its window (less the guard)
    against the best region at its submit time; GPU-hours weighted (one energy per GPU-hour: the fleet is all H100).
    No queue, no capacity taken by others, perfect foresight: an upper bound, not a target."""
    from geosched.grid.forecast import Method, run_means
    from geosched.simulate.shifting import GUARD_SHARE, chosen

    regions = sorted(fleet.regions)
    size = {r: sum(n.gpus for n in fleet.nodes if n.region_key == r) for r in regions}
    now_total = best_total = 0.0
    for month in months:
        origin = datetime(2023, month, 10, tzinfo=UTC).timestamp()
        for t in llm_trace(jobs, capacity_gpus=capacity, load=0.5, min_gpus=16, cluster="kalos", seed=month):
            if not chosen(t.id, share):
                continue
            at = origin + t.submit_time_s
            starts = at + np.arange(0.0, (1 - GUARD_SHARE) * 24 * HOUR_S + 1, HOUR_S)
            look = history.outlook(regions, int(at // HOUR_S), 30 + int(t.duration_s // HOUR_S), Method.ORACLE)
            means = run_means(look, starts, t.duration_s)
            fits = np.array([size[r] >= t.gpus for r in regions])
            weight = t.gpus * t.duration_s
            now_total += weight * means[0, fits].min()
            best_total += weight * means[:, fits].min()
    return 1 - best_total / now_total if now_total else 0.0


def day_of_month(hours: np.ndarray) -> np.ndarray:
    days = (hours * HOUR_S).astype("datetime64[s]").astype("datetime64[D]")
    out: np.ndarray = (days - days.astype("datetime64[M]")).astype(np.int64) + 1
    return out


# The candidates of each family (grid/README.md, "Forecasts"); each family's parameters are chosen on the tuning days.
FAMILIES = {
    "seasonal naive": [SEASONAL_NAIVE],
    "mean of days": [Forecaster(d) for d in (2, 3, 5, 7, 10, 14)],
    "median of days": [Forecaster(d, Agg.MEDIAN) for d in (3, 5, 7, 10, 14)],
    "mean + decaying last hour": [Forecaster(d, Agg.MEAN, k) for d in (2, 3, 5, 7, 10, 14)
                                  for k in (0.9, 0.95, 0.97, 0.98, 0.99, 0.995)],
    "median + decaying last hour": [Forecaster(d, Agg.MEDIAN, k) for d in (3, 5, 7, 10, 14)
                                    for k in (0.9, 0.95, 0.97, 0.98, 0.99, 0.995)],
}


def forecasters() -> None:
    """Each family's parameters tuned on days 1-9 of every month of the shipped series (pooled day-ahead MAPE over
    the eight zones), then every family scored on days 10-31, which no choice looked at (and which the replays of
    part 2 run on). The history each forecast reads is the whole series before the hour."""
    from geosched.grid.forecast import Dense

    zones = shipped_zones()
    series = {z: Dense.of(dict(shipped_series(z).hours)) for z in zones}

    def pooled(f: Forecaster, first_days: bool) -> tuple[Scored, dict[str, Scored]]:
        def days(h: np.ndarray) -> np.ndarray:
            dom = day_of_month(h)
            out: np.ndarray = dom <= 9 if first_days else dom >= 10
            return out

        per = {z: scored(series[z], f, days=days) for z in zones}
        return sum(per.values(), start=Scored((0.0, 0.0), (0, 0))), per

    print("\n0. forecasters, tuned on days 1-9 of each month, scored on days 10-31 (day-ahead MAPE, 1-24 h; pooled "
          "25-48 h after the slash):")
    print(f"   {'family':28s} {'chosen on days 1-9':62s} {'tune':>6s} {'held-out':>14s}  " +
          " ".join(f"{z[-5:]:>6s}" for z in zones))
    for family, candidates in FAMILIES.items():
        best = min(candidates, key=lambda f: pooled(f, True)[0].error().day_ahead)
        tune = pooled(best, True)[0].error()
        held, per = pooled(best, False)
        error = held.error()
        print(f"   {family:28s} {best.label:68s} {tune.day_ahead:6.1%} {error.day_ahead:6.1%}/"
              f"{error.two_days_ahead:6.1%}  " + " ".join(f"{p.error().day_ahead:6.1%}" for p in per.values()),
              flush=True)
    print(f"   default: {DEFAULT_FORECASTER.label}")


# Fleets of the shipped grid zones (any region, no capacity limit), for what shifting could save at most.
ZONE_SETS = {
    "geo-us (PJM, SPP, PACW)": ("US-MIDA-PJM", "US-CENT-SWPP", "US-NW-PACW"),
    "geo-ca (PJM, SPP, CAISO)": ("US-MIDA-PJM", "US-CENT-SWPP", "US-CAL-CISO"),
    "CAISO alone": ("US-CAL-CISO",), "SPP alone": ("US-CENT-SWPP",), "DE alone": ("DE",),
    "PACW alone": ("US-NW-PACW",), "CAISO + DE": ("US-CAL-CISO", "DE"), "CAISO + PACW": ("US-CAL-CISO", "US-NW-PACW"),
    "DE + FR": ("DE", "FR"),
    "all eight": ("US-MIDA-PJM", "US-CENT-SWPP", "US-NW-PACW", "US-CAL-CISO", "DE", "FR", "US-NW-BPAT",
                  "US-MIDW-MISO"),
}


def zone_bounds(months: list[int], jobs: int, slacks: tuple[int, ...] = (18, 24, 48, 72)) -> None:
    """The oracle's upper bound on any fleet of the shipped zones: every job of the traces flexible and alone (no
    queue, every zone holds every gang), at the (zone, whole-hour start within the slack) of the lowest measured
    mean over its run, against the lowest zone at its submit time; GPU-hours weighted. 18 h is 24 h less the
    replay's guard; 48 h and 72 h show what longer slack would give. Then each zone's daily swing (the mean over
    days of (max - min) / mean of the day's hours): what there is to shift in time."""
    from geosched.grid.forecast import Dense

    dense = {z: Dense.of(dict(shipped_series(z).hours)) for z in shipped_zones()}
    traces = {m: llm_trace(jobs, capacity_gpus=4800, load=0.5, min_gpus=16, cluster="kalos", seed=m) for m in months}
    print("\n3. what shifting could save at most (oracle, no queue, any zone of the set, every job flexible):",
          flush=True)
    table: dict[str, list[float]] = {}
    for name, zones in ZONE_SETS.items():
        cells = []
        for slack in slacks:
            now_total = best_total = 0.0
            for month, trace in traces.items():
                origin = datetime(2023, month, 10, tzinfo=UTC).timestamp()
                for t in trace:
                    at = origin + t.submit_time_s
                    first = int(at // HOUR_S)
                    hours = np.arange(first, first + slack + 4 + int(t.duration_s // HOUR_S))
                    values = np.stack([dense[z].at(hours) for z in zones], axis=1)
                    values = np.where(np.isnan(values), np.nanmean(values, axis=0), values)
                    starts = at + np.arange(0.0, slack * HOUR_S + 1, HOUR_S)
                    means = _run_means(values, first, starts, max(t.duration_s, 1.0))
                    now_total += t.gpus * t.duration_s * float(means[0].min())
                    best_total += t.gpus * t.duration_s * float(means.min())
            cells.append(1 - best_total / now_total)
        table[name] = cells
        print(f"   {name:26s} " + "   ".join(f"slack {slack} h: {c:5.1%}" for slack, c in zip(slacks, cells,
                                                                                                strict=True)),
              flush=True)
    print("   daily swing of each zone, 2023 (mean over days of (max - min) / mean): " + ", ".join(
        f"{z} {_swing(d):.0%}" for z, d in sorted(dense.items(), key=lambda kv: -_swing(kv[1]))))
    at24 = slacks.index(24)
    best = max(table, key=lambda k: table[k][at24])
    over = [f"{name} ({slack} h: {c:.1%})" for name, cells in table.items() for slack, c in zip(slacks, cells,
                                                                                                 strict=True)
            if c >= 0.30]
    print(f"   30% with the forecaster, plainly: at 24 h of slack the oracle itself, with no queue, saves at most "
          f"{table[best][at24]:.1%} ({best}); no fleet of the shipped zones offers 30% even to perfect foresight, "
          "and the replay's queue, the inflexible half and the forecast's error take most of the rest. "
          f"Sets reaching 30% with longer slack: {', '.join(over) or 'none'}.")


def _swing(series: object) -> float:
    from geosched.grid.forecast import Dense

    assert isinstance(series, Dense)
    days = series.values[: series.values.size // 24 * 24].reshape(-1, 24)
    ok = ~np.isnan(days).any(axis=1)
    days = days[ok]
    return float(np.mean((days.max(axis=1) - days.min(axis=1)) / days.mean(axis=1)))


def _run_means(values: np.ndarray, first: int, starts: np.ndarray, run: float) -> np.ndarray:
    """(starts x zones): the mean of hourly `values` (rows from epoch hour `first`) over [s, s + run). Hourly values
    are constant within the hour, so the running sum gives it exactly."""
    total = np.vstack([np.zeros((1, values.shape[1])), np.cumsum(values, axis=0)])

    def integral(x: np.ndarray) -> np.ndarray:
        u = x / HOUR_S - first
        i = np.floor(u).astype(np.int64)
        out: np.ndarray = total[i] + (u - i)[:, None] * values[np.minimum(i, len(values) - 1)]
        return out

    result: np.ndarray = (integral(starts + run) - integral(starts)) * HOUR_S / run
    return result


def _added(now: PolicyResult, shifted: PolicyResult) -> list[JobRecord]:
    """The jobs whose deadline the shifted run missed and the started-now run met (the others no start could meet:
    a ring slower than the slack allows, or a gang queueing past it even when started at once)."""
    missed_now = {r.id for r in now.records if r.missed}
    return [r for r in shifted.records if r.missed and r.id not in missed_now]


def _jct(now: PolicyResult, shifted: PolicyResult) -> str:
    """The inflexible jobs' average JCT against started-now's (- when there is none)."""
    base = now.avg_jct_inflexible_s
    return f"{shifted.avg_jct_inflexible_s / base - 1:+.1%}" if base > 0 else "-"


def _added_misses(now: PolicyResult, shifted: PolicyResult) -> int:
    return len(_added(now, shifted))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="3 months, 500 jobs, share 0.5 only, geo-us only unless --fleets")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--months", default="1,2,3,4,5,6,7,8,9,10,11,12")
    parser.add_argument("--fleets", default="geo-us,geo-ca,geo")
    parser.add_argument("--shares", default="0.5,1.0")
    parser.add_argument("--variants", default="",
                        help="only the shifted runs whose name starts with one of these (comma-separated)")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--skip-forecasters", action="store_true")
    parser.add_argument("--skip-bounds", action="store_true")
    parser.add_argument("--bounds", action="store_true", help="only the oracle's bound on fleets of shipped zones")
    parser.add_argument("--min-saving", type=float, default=None,
                        help="the bar a first shift of the replays must clear (timeshift.MIN_SAVING, default "
                             f"{timeshift.MIN_SAVING:g}), for every shifted run, the oracle's too")
    args = parser.parse_args()
    if args.min_saving is not None:
        # The replay reads the module's bar at each decision (`shifting.ShiftTiming.release_at`), so setting it here
        # moves every shifted run and nothing else; measured at 0.05 and not kept (policies/README.md, "When not to
        # wait").
        product, timeshift.MIN_SAVING = timeshift.MIN_SAVING, args.min_saving
        print(f"bar of a first shift in the replays: {args.min_saving:g} (the product's is {product:g})")
    months = [int(m) for m in args.months.split(",")]
    fleets, shares, jobs = args.fleets.split(","), [float(s) for s in args.shares.split(",")], args.jobs
    if args.quick:
        months, shares, jobs = [3, 6, 9], [0.5], 500
        fleets = fleets if args.fleets != parser.get_default("fleets") else ["geo-us"]
    if args.bounds:
        zone_bounds(months, jobs)
        return
    if not args.skip_forecasters:
        forecasters()
    if not args.skip_latency:
        latency(10 if args.quick else args.repeats)
    prefixes = [p for p in args.variants.split(",") if p]
    variants = tuple(v for v in VARIANTS if not prefixes or any(v.name.startswith(p) for p in prefixes))
    for name in fleets:
        targets(name, months, jobs, shares, variants)
    if not args.skip_bounds:
        zone_bounds(months, jobs)


if __name__ == "__main__":
    main()
