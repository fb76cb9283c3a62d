"""A strict queue's head weighed against the jobs it holds behind it (policies/strictqueue.py, issue 22).

The fleet, shaped as the geo fleet's seed-6 loss in small (policies/README.md, "Under Kueue's two queues"): cluster
`big` has one zone `ba` of four 8-GPU nodes, the only pool that holds a 4 x 8 GPU gang; cluster `small` has two zones
of one node each, `sa` and `sb`, in another region, joined by the shipped cross-zone link. A 2 x 8 GPU head fits on
two `ba` nodes (one zone: zone-first's choice, fewest zones first) or across `sa` + `sb` (two zones, a slower ring).
"""

from __future__ import annotations

from geosched.core.models import Job, NoFit, Placement
from geosched.policies import PlacementContext, place, placer, strictqueue
from geosched.policies.patience import Waiting
from geosched.policies.strictqueue import Behind
from geosched.simulate import SimOptions, TraceJob, simulate
from tests.handmade import fleet, network, node
from tests.test_patience import GANG as patience_gang
from tests.test_patience import ctx as slow_pair_ctx

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


RUN = 3 * 3600.0  # a head that holds its GPUs longer than bound 3's 2 h


def test_without_a_strict_queue_behind_the_head_takes_the_one_zone() -> None:
    assert zones(place(HEAD, ctx())) == ("ba",)
    assert zones(place(HEAD, ctx(), waiting=Waiting(0.0, RUN))) == ("ba",)


def test_the_head_leaves_the_only_pool_of_the_gang_it_would_hold_up() -> None:
    # On `ba` the head holds the 4 x 8 gang (and everything behind it) for its whole run; on sa + sb it runs a little
    # slower and the gang starts now.
    behind = Behind(queue=[(LARGE, RUN)], running=list)
    assert zones(place(HEAD, ctx(), waiting=Waiting(0.0, RUN, behind))) == ("sa", "sb")


def test_a_head_that_ends_within_two_hours_is_not_weighed() -> None:
    # Bound 3: a head whose run on `ba` ends within 2 h, a short 4 x 8 gang behind it: the walk would move the head
    # (it saves a third of the summed completion times: the gang waits the head's whole run on `ba`), but it is not
    # weighed.
    behind = Behind(queue=[(LARGE, 1000.0)], running=list)
    short = 1.2 * 3600.0  # 1.4 h on the one-zone ring (1.16x its compute)
    assert zones(place(HEAD, ctx(), waiting=Waiting(0.0, short, behind))) == ("ba",)


def test_the_head_keeps_its_ring_when_what_waits_behind_fits_beside_it() -> None:
    # A one-node job behind fits beside the head wherever it goes: moving would only slow the head, and no running
    # job's end is read (`running` would fail the test if it were called).
    def unread() -> list[strictqueue.Release]:
        raise AssertionError("the running jobs' ends were read though every queued job fits now")

    behind = Behind(queue=[(SMALL, RUN)], running=unread)
    assert zones(place(HEAD, ctx(), waiting=Waiting(0.0, RUN, behind))) == ("ba",)


def test_the_rule_is_zone_first_s_alone() -> None:
    behind = Behind(queue=[(LARGE, RUN)], running=list)
    assert zones(place(HEAD, ctx(), "tas", waiting=Waiting(0.0, RUN, behind))) == ("ba",)  # its own choice


def trace_job(i: int, submit: float, gpus: int, duration: float) -> TraceJob:
    return TraceJob(id=f"j{i}", submit_time_s=submit, gpus=gpus, duration_s=duration, gpus_per_worker=8, line=i)


def test_the_replay_tells_a_strict_queue_s_head_what_waits_behind_it() -> None:
    # Both arrive together: under StrictFIFO (no backfill) j1 is the head with j2 behind it; with the reservations'
    # backfill nothing is held behind a head that starts, so j1 takes `ba` and j2 waits for it.
    trace = [trace_job(1, 0, 16, RUN), trace_job(2, 0, 32, RUN)]
    (strict,) = simulate(trace, ctx(), ["zone-first"], options=SimOptions(backfill=False))
    got = {r.id: r for r in strict.records}
    assert got["j1"].zones == ("sa", "sb") and got["j2"].zones == ("ba",)
    assert got["j2"].start_s == 0.0
    (reserving,) = simulate(trace, ctx(), ["zone-first"], options=SimOptions(backfill=True))
    got = {r.id: r for r in reserving.records}
    assert got["j1"].zones == ("ba",) and got["j2"].start_s == got["j1"].finish_s


def test_a_one_node_head_is_not_weighed() -> None:
    # Bound 1: with `ba4` busy, a one-node head on `ba` leaves the 3 x 8 gang behind it two nodes short of its only
    # pool, and on sa or sb it would not: the walk saves a third of the summed completion times (33,400 -> 22,600 s),
    # but a one-node head is not weighed. Checked on the placement itself (zone-first puts a one-node head in the
    # tighter pool `small` of its own accord).
    c = ctx()
    free = c.gpus_free.copy()
    free[c.names.index("ba4")] = 0
    on_ba = free.copy()
    on_ba[[c.names.index("sa1"), c.names.index("sb1")]] = 0
    one = Job("one", workers=1, gpus_per_worker=8)
    head = place(one, c.with_free(on_ba))
    assert zones(head) == ("ba",)
    behind = Behind(queue=[(Job("three", workers=3, gpus_per_worker=8), RUN)], running=list)
    assert strictqueue.check(head, c.with_free(free), "zone-first", RUN, behind, placer("zone-first", None)) is None



def test_a_head_patience_holds_waits_and_is_not_weighed() -> None:
    # Patience is asked first: the walk assumes the head starts now, so a head patience holds (its only ring now is
    # 7.8x a healthy one's: tests/test_patience.py's fleet with za1 and zb1 busy) waits as it does without a queue
    # behind it, and no running job's end is read for it. Asked the other way round, the walk of the gang behind it
    # (which fits nowhere beside it) would read them. Degraded geo seed 9 (policies/README.md): weighed as if it
    # started now, a 512-GPU head on a degraded NIC was moved to a slower ring still (5.09x -> 14.25x).
    def unread() -> list[strictqueue.Release]:
        raise AssertionError("a head patience holds was weighed")

    behind = Behind(queue=[(Job("next", workers=2, gpus_per_worker=8), RUN)], running=unread)
    result = place(patience_gang, slow_pair_ctx(busy=("za1", "zb1")), waiting=Waiting(0.0, RUN, behind))
    assert isinstance(result, NoFit) and result.waiting
