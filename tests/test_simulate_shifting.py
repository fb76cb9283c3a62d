"""Time shifting in a replay (issue 24): on the real 2023 series of three US grid zones and LLM gangs with 24 h of
slack, shifting misses no deadline that starting now meets, and does not slow the jobs without slack by more than
5% (both measured against started-now in the same run); a flexible job whose slow placement stretches its run past
its deadline is started in time; the decision for one job over a 48 h window at 10,000 nodes stays within a few
`place` calls measured in the same run."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from geosched import policies
from geosched.core.models import (
    HOUR_S,
    CarbonSignal,
    Fleet,
    Job,
    LinkStats,
    NetworkView,
    Node,
    Placement,
    Schedule,
    Weights,
)
from geosched.grid.carbon import GridInput, grid_history
from geosched.grid.forecast import SEASONAL_NAIVE, Forecaster, Method
from geosched.grid.formats import Basis
from geosched.grid.shipped import shipped_series, shipped_zones
from geosched.grid.zones import shipped_zone_map
from geosched.policies import timeshift
from geosched.simulate.engine import SimOptions, contexts_by_hour, simulate
from geosched.simulate.fleets import GEO_US_ZONES, geo_fleet
from geosched.simulate.llm import llm_trace
from geosched.simulate.metrics import JobRecord
from geosched.simulate.shifting import Flexibility, ShiftTiming, flexible, replay, sole_domain
from geosched.simulate.traces.model import TraceJob
from tests.handmade import fleet, network, node

ZONES = ("US-MIDA-PJM", "US-CENT-SWPP", "US-NW-PACW")  # the grids of geo-us's three regions (shipped map)
JANUARY = datetime(2023, 1, 10, tzinfo=UTC)  # bench_timeshift's January


def shipped_grid(f: Fleet) -> GridInput:
    zone_map = shipped_zone_map()
    hourly = {region: dict(shipped_series(zone).hours) for zone in ZONES for region in zone_map.regions_of(zone)
              if region in f.regions}
    return GridInput(CarbonSignal({}, hourly), None, Basis.LIFECYCLE)


# (month = seed, flexible share): on (11, 1.0) the code before the deadline fixes missed one (the oracle's llm-13).
@pytest.mark.parametrize(("seed", "share"), [(3, 0.5), (6, 0.5), (9, 0.5), (11, 1.0)])
def test_shifting_misses_no_deadline_and_does_not_slow_the_inflexible_jobs(seed: int, share: float) -> None:
    f, net = geo_fleet(nodes=150, degraded=0.0, layout=GEO_US_ZONES, slow_pairs=False)
    grid = shipped_grid(f)
    assert grid.signal is not None and len(grid.signal.hourly) == 3
    ctx = policies.PlacementContext(f, net)
    start = datetime(2023, seed, 10, tzinfo=UTC)
    # Gangs any region holds (us-west-2 has 256 GPUs here), as on the benchmark's fleet of 600 nodes: a gang that only
    # the whole of one region holds waits for it whatever the policy, and a smaller fleet keeps the test short.
    trace = [t for t in llm_trace(300, capacity_gpus=sum(n.gpus for n in f.nodes), load=0.5, min_gpus=16,
                                  cluster="kalos", seed=seed) if t.gpus <= 128]
    now, fcst, oracle = replay(trace, ctx, ["zone-first"], Weights(carbon=1.0), grid_history(f, grid),
                               start.timestamp(), options=SimOptions(gpu="H100", backfill=True),
                               context_at=contexts_by_hour(f, net, grid.signal, start),
                               flex=Flexibility(24 * HOUR_S, share))
    assert now.flexible_jobs > 50 and now.jobs == fcst.jobs == oracle.jobs
    assert share == 1.0 or now.avg_jct_inflexible_s > 0
    missed_now = {r.id for r in now.records if r.missed}
    for shifted in (fcst, oracle):
        deferred = [r for r in shifted.records if r.flexible and r.start_s > r.submit_s + HOUR_S]
        assert len(deferred) > 10, "nothing was shifted: the property below would hold trivially"
        # A deadline that no start meets (a ring slower than the slack allows, even started at once) is missed
        # started-now too; shifting adds no miss to those.
        assert {r.id for r in shifted.records if r.missed} <= missed_now, shifted.policy
        assert shifted.avg_jct_inflexible_s <= 1.05 * now.avg_jct_inflexible_s, shifted.policy


def test_a_stretched_run_starts_early_enough_to_finish_by_its_deadline() -> None:
    # Two zones of one region, so the 4-node gang's ring crosses a slow zone link and runs several times its
    # compute: the latest start that ends in time is then earlier than the one the declared runtime gives.
    slow = LinkStats(rtt_p50_ms=40.0, rtt_p95_ms=60.0, loss=0.0, throughput_gbps=1.0)
    nodes: list[Node] = [node(f"a{i}", "usw1-az1", "us-west-1", provider="aws", gpu="H100") for i in range(2)]
    nodes += [node(f"b{i}", "usw1-az3", "us-west-1", provider="aws", gpu="H100") for i in range(2)]
    f = fleet(nodes)
    links = {(a.name, b.name) if a.name < b.name else (b.name, a.name): slow
             for a in nodes for b in nodes if a.zone != b.zone}
    ctx = policies.PlacementContext(f, network(f, links))
    history = grid_history(f, GridInput(CarbonSignal({}, {"aws:us-west-1": dict(shipped_series("US-CAL-CISO")
                                                                                  .hours)}), None, Basis.LIFECYCLE))
    at = datetime(2023, 6, 10, 8, tzinfo=UTC).timestamp()  # night in California: the solar dip is ~6 h away
    job = Job("flex", 4, 8, gpu="H100", schedule=Schedule(3 * HOUR_S, start_within_s=24 * HOUR_S))
    placed = policies.place(job, ctx, weights=Weights(carbon=1.0), explain=False)
    assert isinstance(placed, Placement)
    stretch = timeshift.slowdown(job, placed)
    assert stretch > 1.5
    finish_by = at + 3 * HOUR_S * stretch + 2 * HOUR_S  # the stretched run must start within 2 h, the declared not
    window = timeshift.Window(at, finish_by - 3 * HOUR_S, 3 * HOUR_S)
    look = history.outlook(ctx.region_keys, int(at // HOUR_S), window.hours_needed(), Method.ORACLE)
    blind = timeshift.decide(job, ctx, window, look, weights=Weights(carbon=1.0), explain=False)
    assert blind.start > at and blind.start + 3 * HOUR_S * stretch > finish_by  # what the fix is about
    bound = timeshift.Window(at, finish_by - 3 * HOUR_S, 3 * HOUR_S, finish_by=finish_by)
    nothing_queued = timeshift.Queue(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                                     np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), np.zeros(0))
    for queue in (None, nothing_queued):
        shift = timeshift.decide(job, ctx, bound, look, weights=Weights(carbon=1.0), explain=False, queue=queue)
        assert isinstance(shift.placement, Placement)
        assert shift.start + 3 * HOUR_S * timeshift.slowdown(job, shift.placement) <= finish_by + 1e-6


def geo_grid(f: Fleet) -> GridInput:
    """Every shipped grid zone's 2023 series on the fleet's regions it powers (the shipped map)."""
    zone_map = shipped_zone_map()
    hourly = {region: dict(shipped_series(zone).hours) for zone in shipped_zones()
              for region in zone_map.regions_of(zone) if region in f.regions}
    return GridInput(CarbonSignal({}, hourly), None, Basis.LIFECYCLE)


def records_by_variant(f: Fleet, net: NetworkView, grid: GridInput, start: datetime, seed: int, share: float,
                       method: Method, variants: Mapping[bool, Mapping[str, Any]],
                       forecaster: Forecaster | None = None) -> dict[bool, dict[str, JobRecord]]:
    """bench_timeshift's replay of 1,000 Kalos-shaped LLM gangs (24 h of slack, `share` of them flexible) from
    `start`, zone-first with carbon weight 1 under the reservations, once per variant of `ShiftTiming`'s options:
    each variant's records by job id."""
    assert grid.signal is not None
    ctx = policies.PlacementContext(f, net)
    trace = llm_trace(1000, capacity_gpus=sum(n.gpus for n in f.nodes), load=0.5, min_gpus=16, cluster="kalos",
                      seed=seed)
    history = grid_history(f, grid)
    if forecaster is not None:
        history = replace(history, forecaster=forecaster)
    out = {}
    for key, options in variants.items():
        def timing(policy: str, options: Mapping[str, Any] = options) -> ShiftTiming:
            return ShiftTiming(trace, history, start.timestamp(), policy, Weights(carbon=1.0), method, **options)

        (result,) = simulate(trace, ctx, ["zone-first"], Weights(carbon=1.0),
                             options=SimOptions(gpu="H100", backfill=True),
                             context_at=contexts_by_hour(f, net, grid.signal, start),
                             jobs=flexible(trace, Flexibility(24 * HOUR_S, share)), timing=timing)
        out[key] = {r.id: r for r in result.records}
    return out


def test_a_placement_chosen_for_carbon_does_not_stretch_a_shifted_run_past_its_deadline() -> None:
    # The benchmark's case (bench_timeshift.py, geo-us, March 2023, every job flexible, the oracle): llm-993, 16 GPUs
    # for 148 h with 24 h of slack, started at once, but on the pair of nodes zone-first chose for carbon its ring
    # stretched the run 1.163x and it ended 0.15 h late, where started-now's 1.145x pair met the deadline. With the
    # placement held to the deadline (`ShiftTiming.in_time`) it takes the fastest ring free then, and meets it.
    f, net = geo_fleet(nodes=600, degraded=0.0, layout=GEO_US_ZONES, slow_pairs=False)
    records = records_by_variant(f, net, shipped_grid(f), datetime(2023, 3, 10, tzinfo=UTC), 3, 1.0, Method.ORACLE,
                                 {False: {"deadline_aware": False}, True: {"deadline_aware": True}})
    before, after = records[False]["llm-993"], records[True]["llm-993"]
    assert before.missed and before.slowdown > 1.16  # the case still arises without the check: the test can fail
    assert not after.missed and after.finish_s <= after.deadline_s
    assert not any(r.missed for r in records[True].values())


def test_a_gang_whose_capacity_is_far_off_is_not_passed_until_its_deadline_is_lost() -> None:
    # The benchmark's case (bench_timeshift.py, the shipped geo fleet, January 2023, flexible share 0.5, the default
    # forecaster): llm-393, 1,024 GPUs (most of us-east-1), released to the queue where jobs without slack passed it
    # until its latest start; by then the region was full of their runs, and it started 0.25 h after its deadline,
    # which started-now met (the gang only one region holds is shifted here, `sole_domain_starts_now=False`: the test is
    # of the rank). Ranked first once the soonest it could start comes within a guard of its latest start
    # (`ShiftTiming.rank`), it meets it.
    f, net = geo_fleet()
    # Soft promises: the test is of the rank (hard promises alone also keep llm-393's deadline here).
    variants = {aware: {"deadline_aware": aware, "sole_domain_starts_now": False, "hard_promises": False}
                for aware in (False, True)}
    records = records_by_variant(f, net, geo_grid(f), JANUARY, 1, 0.5, Method.FORECAST, variants)
    before, after = records[False]["llm-393"], records[True]["llm-393"]
    assert before.gpus == 1024 and before.missed  # the case still arises without the rank: the test can fail
    assert not after.missed


def test_a_shifted_job_whose_capacity_was_taken_keeps_its_promise() -> None:
    # The benchmark's case (bench_timeshift.py, the shipped geo fleet, January 2023, every job flexible, seasonal
    # naive): llm-967, 512 GPUs for 22 h, shifted from 38.4 h to 42 h; when its hour came the GPUs it was decided for
    # were taken, it queued behind the jobs that took them and started at 47.2 h, past its latest start on the ring it
    # got (47.16 h), and ended 0.04 h after its deadline, which started-now met. With hard promises (an EASY
    # reservation at its latest start in the region it was decided for, `ShiftTiming.promise`, engine `_promises`)
    # no job bound by it may take that capacity past then, and it meets its deadline.
    f, net = geo_fleet()
    records = records_by_variant(f, net, geo_grid(f), JANUARY, 1, 1.0, Method.FORECAST,
                                 {hard: {"hard_promises": hard} for hard in (False, True)}, forecaster=SEASONAL_NAIVE)
    before, after = records[False]["llm-967"], records[True]["llm-967"]
    assert before.gpus == 512 and before.missed  # the case still arises with soft promises: the test can fail
    assert not after.missed and after.finish_s <= after.deadline_s


def test_with_admission_against_the_promises_the_oracle_s_llm_967_keeps_its_deadline() -> None:
    # The benchmark's case (bench_timeshift.py, the shipped geo fleet, January 2023, every job flexible, the oracle;
    # grid/README.md, "Hard promises, measured"): with hard promises llm-967 (512 GPUs) was decided for a start 0.16 h
    # before its latest start, the promises of gcp:us-central1 at that hour added up to more than it holds, the
    # engine dropped its promise, and it started 0.77 h past its latest start. With admission against the sum of
    # promises (`ShiftTiming(binding=True)`, `timeshift.admitted`) no hour is promised past what its region holds,
    # and it meets its deadline (the binding run's January: grid/README.md, "Admission against the sum of promises,
    # measured"; off by default: it costs carbon in other months).
    f, net = geo_fleet()
    records = records_by_variant(f, net, geo_grid(f), JANUARY, 1, 1.0, Method.ORACLE,
                                 {binding: {"binding": binding} for binding in (False, True)})
    before, after = records[False]["llm-967"], records[True]["llm-967"]
    assert before.gpus == 512 and before.missed  # the case still arises with hard promises alone: the test can fail
    assert not after.missed and after.finish_s <= after.deadline_s

def test_a_gang_only_one_region_holds_is_not_shifted() -> None:
    # The shipped geo fleet: us-east-1 alone holds 1,024 GPUs; every region holds 64. The 1,024-GPU gang is not
    # shifted (released at once, to the queue's front); the 64-GPU one is shifted as before.
    f, net = geo_fleet()
    ctx = policies.PlacementContext(f, net)
    per_region = {r: sum(n.gpus for n in f.nodes if n.region_key == r) for r in f.regions}
    assert sorted(r for r, g in per_region.items() if g >= 1024) == ["aws:us-east-1"]
    # 2 h runs with 24 h of slack (the 1,024-GPU ring over us-east-1's zones stretches a run ~5x: 2 h ends in time).
    deadline = 2 * HOUR_S + 24 * HOUR_S
    big = Job("big", workers=128, gpus_per_worker=8, schedule=Schedule(runtime_s=2 * HOUR_S, deadline=deadline))
    small = Job("small", workers=8, gpus_per_worker=8, schedule=Schedule(runtime_s=2 * HOUR_S, deadline=deadline))
    assert sole_domain(big, ctx) and not sole_domain(small, ctx)
    # Every region's measured hours (keys: epoch hours): 400 g/kWh, but 100 from 10 h to 20 h ahead: a shift is
    # worth it to both gangs.
    origin = datetime(2023, 1, 10, tzinfo=UTC).timestamp()
    first = int(origin // HOUR_S)
    series = {h: 100.0 if first + 10 <= h < first + 20 else 400.0
              for h in range(first - 24 * 30, first + 24 * 5)}
    grid = GridInput(CarbonSignal({}, {r: series for r in f.regions}), None, Basis.LIFECYCLE)
    history = grid_history(f, grid)
    trace = [TraceJob("big", 0.0, 1024, 2 * HOUR_S), TraceJob("small", 0.0, 64, 2 * HOUR_S)]
    released = {}
    for rule in (False, True):
        timing = ShiftTiming(trace, history, origin, "zone-first", Weights(carbon=1.0), Method.ORACLE,
                             sole_domain_starts_now=rule)
        released[rule] = (timing.release_at(0, big, 0.0, ctx, []), timing.release_at(1, small, 0.0, ctx, []))
        # With the rule, the queue's front (0) from the start; without it, jobs without slack pass it (2) while its
        # capacity is near (the soonest start, `earliest`, hours before its latest).
        assert timing.rank(0, big, 0.0, lambda: 0.0) == (0 if rule else 2)
    assert released[False][0] >= 10 * HOUR_S  # without the rule the big gang waits for the green hours: can fail
    assert released[True][0] == 0.0
    assert released[False][1] >= 10 * HOUR_S and released[True][1] == released[False][1]


def big_fleet(nodes: int = 10_000, regions: int = 40, zones_per_region: int = 5) -> Fleet:
    rng = np.random.default_rng(7)
    out = []
    for i in range(nodes):
        r, z = int(rng.integers(regions)), int(rng.integers(zones_per_region))
        out.append(node(f"n{i:05d}", f"r{r}-z{z}", f"r{r}", provider="synth", gpu="H100",
                        free=int(rng.choice([8, 8, 8, 0, 4]))))
    return fleet(out)


def test_the_decision_for_one_job_over_48_hours_at_10000_nodes_is_fast() -> None:
    f = big_fleet()
    ctx = policies.PlacementContext(f, network(f))
    series = [dict(shipped_series(zone).hours) for zone in ZONES]
    hourly = {key: {h + 24 * i: v for h, v in series[i % 3].items()} for i, key in enumerate(sorted(f.regions))}
    history = grid_history(f, GridInput(CarbonSignal({}, hourly), None, Basis.LIFECYCLE))
    job = Job("flex-64", 8, 8, gpu="H100", schedule=Schedule(6 * HOUR_S, start_within_s=48 * HOUR_S))
    weights = Weights(carbon=1.0)
    place_ms, shift_ms = [], []
    for k in range(12):
        now = datetime(2023, 4, 1 + k, 7, tzinfo=UTC).timestamp()
        t = time.perf_counter()
        policies.place(job, ctx, weights=weights, explain=False)
        place_ms.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        timeshift.place_in_time(job, ctx, history, now, weights=weights, explain=False)
        shift_ms.append((time.perf_counter() - t) * 1e3)
    one_place, decision = float(np.median(place_ms)), float(np.median(shift_ms))
    # The decision is at most two `place` calls plus the outlook: under 4x one place, measured here in the same run
    # (the absolute figure, p50 and p99 against the 50 ms, is benchmarks/bench_timeshift.py's).
    assert decision <= 4 * one_place + 2.0, (decision, one_place)
