"""A gang's requeue wait (geosched/kube/scheduler/requeue.py) on the FakeClock: the scheduler's own schedule (the
SchedulerConfig defaults, 1 s doubling to 60 s, deploy/ and geosched/kube/scheduler/settings.py) on the one retry
policy, cut short by a change of capacity for a gang that did not fit, forgotten once the gang is placed."""

from __future__ import annotations

from geosched.core.retry import RetryPolicy
from geosched.kube.scheduler.pods import GangKey
from geosched.kube.scheduler.requeue import Requeue
from geosched.kube.scheduler.settings import SchedulerSettings
from tests.clock import FakeClock

TRAIN = GangKey("ml", "pod-group", "train-a")
EVAL = GangKey("ml", "owner", "eval-b")


def requeue(clock: FakeClock) -> Requeue:
    s = SchedulerSettings()
    return Requeue(RetryPolicy(initial_s=s.backoff_initial_s, max_s=s.backoff_max_s), clock)


def test_a_refused_gang_waits_doubling_to_the_cap_and_is_tried_once_its_wait_ends() -> None:
    clock = FakeClock()
    queue = requeue(clock)
    waits = []
    for _ in range(9):
        waits.append(queue.failed(TRAIN, capacity_version=3))
        assert queue.waiting(TRAIN, clock(), 3)
        clock.advance(waits[-1] - 0.01)
        assert queue.waiting(TRAIN, clock(), 3)  # not a moment early
        clock.advance(0.01)
        assert not queue.waiting(TRAIN, clock(), 3)
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
    queue.placed(TRAIN)
    assert queue.failed(TRAIN, 3) == 1.0  # placed, then refused again: its schedule starts over
    assert not queue.waiting(EVAL, clock(), 3)  # a gang that never failed does not wait


def test_capacity_changing_cuts_a_refused_gangs_wait_short_but_not_a_failed_binds() -> None:
    clock = FakeClock()
    queue = requeue(clock)
    queue.failed(TRAIN, capacity_version=3)  # did not fit
    queue.failed(EVAL, capacity_version=None)  # its binding failed and was rolled back
    assert queue.waiting(TRAIN, clock(), 3) and not queue.waiting(TRAIN, clock(), 4)
    assert queue.waiting(EVAL, clock(), 4)


def test_the_loop_sleeps_until_the_first_wait_ends() -> None:
    clock = FakeClock()
    queue = requeue(clock)
    assert queue.soonest() is None
    queue.failed(TRAIN, 1)
    queue.failed(TRAIN, 1)  # 2 s
    queue.failed(EVAL, 1)  # 1 s
    assert queue.soonest() == clock() + 1.0
    queue.placed(EVAL)
    assert queue.soonest() == clock() + 2.0


def test_an_ended_wait_wakes_nothing_and_a_gang_pending_no_more_is_forgotten() -> None:
    # attack5: a gang refused, then deleted, left a wait ending in the past, and the loop spun on it for ever.
    clock = FakeClock()
    queue = requeue(clock)
    queue.failed(TRAIN, 1)  # 1 s
    queue.failed(EVAL, 1)
    queue.failed(EVAL, 1)  # 2 s
    clock.advance(1.5)
    assert queue.soonest() == clock() + 0.5  # TRAIN's wait has ended: EVAL's is the one to wake for
    clock.advance(1.0)
    assert queue.soonest() is None
    queue.keep([EVAL])  # TRAIN deleted
    assert queue.failed(TRAIN, 1) == 1.0  # back again: a new gang, its schedule from the start
    assert queue.failed(EVAL, 1) == 4.0  # EVAL still pending all along: its schedule goes on
