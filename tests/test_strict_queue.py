"""A strict queue's head weighed against the jobs it holds behind it (policies/strictqueue.py, issue 22).

The fleet, shaped as the geo fleet's seed-6 loss in small (policies/README.md, "Under Kueue's two queues"): cluster
`big` has one zone `ba` of four 8-GPU nodes, the only pool that holds a 4 x 8 GPU gang; cluster `small` has two zones
of one node each, `sa` and `sb`, in another region, joined by the shipped cross-zone link. A 2 x 8 GPU head fits on
two `ba` nodes (one zone: zone-first's choice, fewest zones first) or across `sa` + `sb` (two zones, a slower ring).
"""

from __future__ import annotations

from geosched.core.models import Job, NoFit, Placement
from geosched.policies import PlacementContext, place
from geosched.policies.patience import Waiting
from geosched.policies.strictqueue import Behind
from geosched.simulate import SimOptions, TraceJob, simulate
from tests.handmade import fleet, network, node

HEAD = Job("head", workers=2, gpus_per_worker=8)
LARGE = Job("large", workers=4, gpus_per_worker=8)  # only `big` holds it
SMALL = Job("small", workers=1, gpus_per_worker=8)  # fits anywhere


def ctx() -> PlacementContext:
    nodes = [node(f"ba{i}", "ba", "r1", cluster="big") for i in range(1, 5)]
    nodes += [node("sa1", "sa", "r2", cluster="small"), node("sb1", "sb", "r2", cluster="small")]
    f = fleet(nodes)
    return PlacementContext(f, network(f))


def zones(result: Placement | NoFit) -> tuple[str, ...]:
    assert isinstance(result, Placement), result
    return result.zones


def test_without_a_strict_queue_behind_the_head_takes_the_one_zone() -> None:
    assert zones(place(HEAD, ctx())) == ("ba",)
    assert zones(place(HEAD, ctx(), waiting=Waiting(0.0, 1000.0))) == ("ba",)


def test_the_head_leaves_the_only_pool_of_the_gang_it_would_hold_up() -> None:
    # On `ba` the head holds the 4 x 8 gang (and everything behind it) for its whole run; on sa + sb it runs a little
    # slower and the gang starts now.
    behind = Behind(queue=[(LARGE, 1000.0)], releases=[])
    assert zones(place(HEAD, ctx(), waiting=Waiting(0.0, 1000.0, behind))) == ("sa", "sb")


def test_the_head_keeps_its_ring_when_what_waits_behind_fits_beside_it() -> None:
    # A one-node job behind fits beside the head wherever it goes: moving would only slow the head.
    behind = Behind(queue=[(SMALL, 1000.0)], releases=[])
    assert zones(place(HEAD, ctx(), waiting=Waiting(0.0, 1000.0, behind))) == ("ba",)


def test_the_rule_is_zone_first_s_alone() -> None:
    behind = Behind(queue=[(LARGE, 1000.0)], releases=[])
    assert zones(place(HEAD, ctx(), "tas", waiting=Waiting(0.0, 1000.0, behind))) == ("ba",)  # its own choice


def trace_job(i: int, submit: float, gpus: int, duration: float) -> TraceJob:
    return TraceJob(id=f"j{i}", submit_time_s=submit, gpus=gpus, duration_s=duration, gpus_per_worker=8, line=i)


def test_the_replay_tells_a_strict_queue_s_head_what_waits_behind_it() -> None:
    # Both arrive together: under StrictFIFO (no backfill) j1 is the head with j2 behind it; with the reservations'
    # backfill nothing is held behind a head that starts, so j1 takes `ba` and j2 waits for it.
    trace = [trace_job(1, 0, 16, 1000), trace_job(2, 0, 32, 1000)]
    (strict,) = simulate(trace, ctx(), ["zone-first"], options=SimOptions(backfill=False))
    got = {r.id: r for r in strict.records}
    assert got["j1"].zones == ("sa", "sb") and got["j2"].zones == ("ba",)
    assert got["j2"].start_s == 0.0
    (reserving,) = simulate(trace, ctx(), ["zone-first"], options=SimOptions(backfill=True))
    got = {r.id: r for r in reserving.records}
    assert got["j1"].zones == ("ba",) and got["j2"].start_s == got["j1"].finish_s
