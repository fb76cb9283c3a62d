"""The replay engine on fleets small enough to work every number out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from geosched.core.catalog import gpu_power
from geosched.core.models import CommProfile, Job, NetworkView, NoFit, Placement, Weights, pair_key
from geosched.policies import PlacementContext, names, place
from geosched.policies.patience import Waiting
from geosched.simulate import SimOptions, TraceJob, simulate
from geosched.simulate.gangs import gang_shape, gavel_profiles
from geosched.simulate.gavel import parse_throughputs
from tests.handmade import GOOD, SLOW, fleet, network, node

A100_WATTS = gpu_power()["A100"].watts(CommProfile().utilisation)
GCO2E_PER_GPU_HOUR = A100_WATTS / 1000 * 1.1 * 400.0  # testing.fleet: PUE 1.1, grid 400 g/kWh
USD_PER_GPU_HOUR = 16.0 / 8  # testing.node: $16/h for 8 GPUs


def one_node_ctx() -> PlacementContext:
    f = fleet([node("n1", "za")])
    return PlacementContext(f, network(f))


def job(i: int, submit: float, gpus: int, duration: float, per_worker: int | None = None) -> TraceJob:
    return TraceJob(id=f"j{i}", submit_time_s=submit, gpus=gpus, duration_s=duration,
                    gpus_per_worker=per_worker, line=i)


def test_two_jobs_fifo_by_hand() -> None:
    # A (8 GPUs, 100 s) fills the node at t=0; B (4 GPUs, 50 s) arrives at t=10 and waits for it until 100.
    result, = simulate([job(1, 0, 8, 100), job(2, 10, 4, 50)], one_node_ctx(), ["zone-first"])
    assert [(r.start_s, r.finish_s) for r in result.records] == [(0, 100), (100, 150)]
    assert result.avg_jct_s == pytest.approx((100 + 140) / 2)
    assert result.p95_jct_s == pytest.approx(100 + 0.95 * 40)
    assert result.avg_queue_s == pytest.approx((0 + 90) / 2)
    assert result.makespan_s == pytest.approx(150)
    assert result.gpu_util == pytest.approx((8 * 100 + 4 * 50) / (8 * 150))
    gpu_hours = (8 * 100 + 4 * 50) / 3600
    assert result.cost_usd == pytest.approx(gpu_hours * USD_PER_GPU_HOUR)
    assert result.kgco2e == pytest.approx(gpu_hours * GCO2E_PER_GPU_HOUR / 1000)
    assert (result.jobs, result.unplaced, result.avg_slowdown, result.multi_zone_jobs) == (2, 0, 1.0, 0)


def test_every_policy_gives_the_same_answer_when_there_is_one_choice() -> None:
    results = simulate([job(1, 0, 8, 100), job(2, 10, 4, 50)], one_node_ctx(), names())
    assert {(r.avg_jct_s, r.makespan_s, round(r.cost_usd, 9)) for r in results} == {(120.0, 150.0,
                                                                                     round(2000 / 3600, 9))}


def test_the_policy_is_not_asked_when_no_pool_could_hold_the_gang() -> None:
    calls: list[float] = []

    def counting(job: Job, ctx: PlacementContext, policy: str, weights: Weights | None,
                 waiting: Waiting | None) -> Placement | NoFit:
        calls.append(float(ctx.gpus_free.sum()))
        return place(job, ctx, policy, weights, waiting=waiting)

    simulate([job(1, 0, 8, 100), job(2, 10, 4, 50)], one_node_ctx(), ["pack"], place_fn=counting)
    assert calls == [8.0, 8.0]  # A at t=0; B only once A has finished, not at its arrival


def test_the_context_is_never_changed() -> None:
    ctx = one_node_ctx()
    before = ctx.gpus_free.copy()
    simulate([job(1, 0, 8, 100), job(2, 0, 8, 100)], ctx, ["zone-first", "spread"])
    assert np.array_equal(ctx.gpus_free, before)


def test_backfill_starts_a_short_job_that_ends_before_the_blocked_head_could_start() -> None:
    trace = [job(1, 0, 6, 100), job(2, 1, 8, 10), job(3, 2, 2, 50), job(4, 3, 2, 200)]
    strict, = simulate(trace, one_node_ctx(), ["zone-first"])
    assert [(r.id, r.start_s) for r in strict.records] == [("j1", 0), ("j2", 100), ("j3", 110), ("j4", 110)]
    easy, = simulate(trace, one_node_ctx(), ["zone-first"], options=SimOptions(backfill=True))
    # j3 fits in the 2 free GPUs and ends at 52 <= 100, when j2 can start; j4 would end at 203: it waits.
    assert [(r.id, r.start_s) for r in easy.records] == [("j1", 0), ("j3", 2), ("j2", 100), ("j4", 110)]
    assert easy.avg_jct_s < strict.avg_jct_s


def test_a_gang_no_pool_can_hold_is_unplaced_not_queued_forever() -> None:
    result, = simulate([job(1, 0, 16, 10), job(2, 5, 8, 10)], one_node_ctx(), ["zone-first"])
    assert (result.jobs, result.unplaced) == (1, 1)
    assert result.unplaced_jobs[0].id == "j1" and "even with the fleet idle" in result.unplaced_jobs[0].reason
    assert result.records[0].start_s == 5


def two_zone_ctx(cross_zone_slow: bool) -> PlacementContext:
    f = fleet([node(n, z) for z in ("za", "zb") for n in (f"{z}1", f"{z}2")])
    cross = SLOW if cross_zone_slow else GOOD
    view = NetworkView(zone_links={pair_key("za", "za"): GOOD, pair_key("zb", "zb"): GOOD,
                                   pair_key("za", "zb"): cross})
    return PlacementContext(f, view)


def test_network_slowdown_is_the_ring_all_reduce_over_the_worst_link() -> None:
    # One 16-GPU job: 2 workers x 8, default profile (1000 MB per step after 1000 ms of compute).
    # zone-first keeps both in za: comm = 2(2-1)/2 * 1000 MB * 8 / 50 Gbit/s + (2-1) * 0.2 ms = 160.2 ms.
    # spread puts one worker per zone: over SLOW, comm = 1000 * 8 / 4 + 3.0 = 2003 ms.
    trace = [job(1, 0, 16, 1000)]
    zone_first, spread = simulate(trace, two_zone_ctx(cross_zone_slow=True), ["zone-first", "spread"])
    assert zone_first.records[0].zones == ("za",) and spread.records[0].zones == ("za", "zb")
    assert zone_first.avg_slowdown == pytest.approx(1160.2 / 1000)
    assert spread.avg_slowdown == pytest.approx(3003.0 / 1000)
    assert zone_first.avg_jct_s == pytest.approx(1160.2)
    assert spread.avg_jct_s == pytest.approx(3003.0)


@pytest.mark.parametrize(("free", "slowdown"), [
    ((8,), 1.0),  # all 4 workers on one node: consolidated, no network step
    ((4, 4), 1240.6 / 1000),  # comm = 2(4-1)/4 * 1000 MB * 8 / 50 Gbit/s + (4-1) * 0.2 ms = 240.6 ms
    ((2, 2, 2, 2), 1240.6 / 1000),  # four nodes: the ring's every link still carries 2(n-1)/n, same step
])
def test_a_gang_split_over_nodes_pays_the_ring_once_whatever_the_number_of_nodes(
        free: tuple[int, ...], slowdown: float) -> None:
    # 8 GPUs as 4 workers x 2 (the trace's layout), default profile: 1000 MB after 1000 ms of compute.
    f = fleet([node(f"n{i}", "za", free=k) for i, k in enumerate(free)])
    results = simulate([job(1, 0, 8, 1000, per_worker=2)], PlacementContext(f, network(f)), ["zone-first", "pack"])
    for result in results:
        assert result.records[0].zones == ("za",)
        assert result.avg_slowdown == pytest.approx(slowdown)
        assert result.avg_jct_s == pytest.approx(1000 * slowdown)


def test_zone_first_beats_spread_when_the_cross_zone_link_is_slow() -> None:
    trace = [job(i, 100 * i, 16, 1000) for i in range(1, 6)] + [job(9, 50, 4, 300)]
    zone_first, spread = simulate(trace, two_zone_ctx(cross_zone_slow=True), ["zone-first", "spread"])
    assert zone_first.multi_zone_jobs == 0 and spread.multi_zone_jobs > 0
    assert spread.avg_jct_s > 1.5 * zone_first.avg_jct_s
    # With a fast cross-zone link the two agree: the difference is the network, nothing else.
    fast = simulate(trace, two_zone_ctx(cross_zone_slow=False), ["zone-first", "spread"])
    assert fast[0].avg_jct_s == pytest.approx(fast[1].avg_jct_s)


def test_same_inputs_same_results() -> None:
    trace = [job(i, 7 * i, (1, 2, 4, 8, 16)[i % 5], 50 + 13 * i) for i in range(40)]
    ctx = two_zone_ctx(cross_zone_slow=True)
    first = simulate(trace, ctx, names(), Weights(carbon=0.5))
    second = simulate(trace, ctx, names(), Weights(carbon=0.5))
    assert first == second
    assert [r.records for r in first] == [r.records for r in second]


def test_input_order_of_simultaneous_arrivals_is_kept() -> None:
    trace = [job(2, 0, 8, 10), job(1, 0, 8, 10)]
    result, = simulate(trace, one_node_ctx(), ["pack"])
    assert [r.id for r in result.records] == ["j2", "j1"]


@pytest.mark.parametrize(("gpus", "per_worker", "shape"), [
    (1, None, (1, 1)), (4, None, (1, 4)), (8, None, (1, 8)), (16, None, (2, 8)), (32, None, (4, 8)),
    (20, None, (4, 5)), (7, None, (1, 7)), (11, None, (11, 1)), (16, 4, (4, 4)), (6, 4, (1, 6)),
])
def test_gang_shape(gpus: int, per_worker: int | None, shape: tuple[int, int]) -> None:
    assert gang_shape(job(1, 0, gpus, 1, per_worker)) == shape


def test_gavel_profile_reproduces_the_measured_spread_penalty_on_the_reference_link() -> None:
    # 2 GPUs: 16 steps/s on one server, 8 spread: one iteration (2 steps) takes 125 ms of compute and
    # 250 ms spread, so 125 ms of all-reduce over the reference link (50 Gbit/s, 0.2 ms):
    # 2(2-1)/2 * S * 8 / 50 + 0.2 = 125  =>  S = 124.8 * 50 / 8 = 780 MB.
    throughputs = parse_throughputs({"v100": {"('M', 1)": {"null": 10.0}, "('M', 2)": {"null": 16.0}},
                                     "v100_unconsolidated": {"('M', 2)": {"null": 8.0}}}, "t.json")
    model = throughputs.model("M")
    assert model.message_mb == pytest.approx(780.0)
    profile = gavel_profiles(throughputs)(TraceJob("x", 0, 2, 1, model="M"))
    assert profile.compute_ms == pytest.approx(125.0)
    f = fleet([node("a", "za", gpus=1), node("b", "za", gpus=1)])
    spread_job = TraceJob("x", 0, 2, 1000, model="M", gpus_per_worker=1)  # as measured: one GPU per server
    result, = simulate([spread_job], PlacementContext(f, network(f)), ["zone-first"],
                       profile_for=gavel_profiles(throughputs))
    assert result.avg_slowdown == pytest.approx(2.0)  # = 16 / 8 steps/s, as measured
    unknown = gavel_profiles(throughputs)(TraceJob("y", 0, 2, 1, model="Unmeasured"))
    assert unknown == CommProfile()


def test_a_job_the_policy_refuses_on_the_idle_fleet_is_unplaced() -> None:
    def refuse(job: Job, ctx: PlacementContext, policy: str, weights: Weights | None,
               waiting: Waiting | None) -> Placement | NoFit:
        return NoFit(job, policy, ())

    result, = simulate([job(1, 0, 4, 10), job(2, 1, 4, 10)], one_node_ctx(), ["never"], place_fn=refuse)
    assert (result.jobs, result.unplaced) == (0, 2)
    assert "policy 'never' finds no placement even with the fleet idle" in result.unplaced_jobs[0].reason


def test_an_empty_trace_gives_empty_results() -> None:
    result, = simulate([], one_node_ctx(), ["zone-first"])
    assert (result.jobs, result.avg_jct_s, result.gpu_util, result.records) == (0, 0.0, 0.0, ())


def test_pinning_a_gpu_model_keeps_every_gang_on_it() -> None:
    f = fleet([node("cheap", "za", gpu="L4", price=4.0), node("big", "zb", gpu="H100", price=80.0)])
    ctx = PlacementContext(f, network(f))
    trace = [job(1, 0, 4, 10), job(2, 0, 4, 10)]
    free, = simulate(trace, ctx, ["cheapest"])
    pinned, = simulate(trace, ctx, ["cheapest"], options=SimOptions(gpu="H100"))
    assert {r.zones for r in free.records} == {("za",)}
    assert {r.zones for r in pinned.records} == {("zb",)}
