"""The one retry policy (geosched/core/retry.py) on a fake clock: the backoff schedule, the attempt cap, the deadline,
Retry-After, and which errors are retried, as the cloud providers and the Kubernetes client use it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

import pytest

from geosched.core.retry import RetryPolicy, aretry, retry
from tests.clock import FakeClock


class Throttled(Exception):
    def __init__(self, after: float | None = None) -> None:
        super().__init__("Throttling: Rate exceeded")
        self.after = after


class Denied(Exception):
    pass


class Highest(random.Random):
    """Full jitter drawn at its top: every pause is the cap of its step, so the schedule can be written down."""

    def uniform(self, a: float, b: float) -> float:
        return b


def failing(errors: list[Exception], result: str = "ok") -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        if errors:
            raise errors.pop(0)
        return result

    return calls, fn


def test_backoff_doubles_from_initial_up_to_its_cap_then_succeeds() -> None:
    clock = FakeClock()
    calls, fn = failing([Throttled() for _ in range(5)])
    policy = RetryPolicy(attempts=6, initial_s=0.5, max_s=3.0)
    assert retry(fn, policy, lambda e: isinstance(e, Throttled), sleep=clock.sleep, rng=Highest()) == "ok"
    assert clock.slept == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert len(calls) == 6


def test_full_jitter_stays_within_the_step() -> None:
    policy = RetryPolicy(initial_s=0.2, max_s=10.0)
    rng = random.Random(7)
    for n in range(1, 10):
        pauses = [policy.backoff(n, rng) for _ in range(200)]
        high = min(10.0, 0.2 * 2 ** (n - 1))
        assert all(0.0 <= p <= high for p in pauses)
        assert max(pauses) > high * 0.9  # spread over the whole step, not a fixed pause


def test_the_unjittered_schedule_is_the_ceiling_of_the_jittered_one_and_survives_days_of_retries() -> None:
    # The scheduler mode's reconnects and requeues wait `delay` (no herd to spread): each step the cap backoff draws
    # under, so the two schedules cannot drift apart.
    policy = RetryPolicy(initial_s=0.5, max_s=30.0)
    assert [policy.delay(n) for n in range(1, 10)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert all(policy.backoff(n, Highest()) == policy.delay(n) for n in range(1, 40))
    # A gang refused for days has retried past 2 ** 1024 (a float overflow); the wait stays the cap. initial_s 0
    # (the scheduler's settings allow it) is no wait at all, at any step.
    assert policy.delay(5000) == 30.0
    assert RetryPolicy(initial_s=0.0, max_s=60.0).delay(5000) == 0.0


def test_the_last_error_is_raised_after_the_attempts() -> None:
    clock = FakeClock()
    errors: list[Exception] = [Throttled() for _ in range(10)]
    calls, fn = failing(errors)
    with pytest.raises(Throttled):
        retry(fn, RetryPolicy(attempts=3), lambda e: isinstance(e, Throttled), sleep=clock.sleep)
    assert len(calls) == 3 and len(clock.slept) == 2


def test_an_error_not_retryable_is_raised_at_once() -> None:
    clock = FakeClock()
    calls, fn = failing([Denied()])
    with pytest.raises(Denied):
        retry(fn, RetryPolicy(), lambda e: isinstance(e, Throttled), sleep=clock.sleep)
    assert len(calls) == 1 and clock.slept == []


def test_no_retry_starts_that_would_sleep_past_the_deadline() -> None:
    # The providers' zone budget: 4 s left; pauses 1, 2 fit (1 s then 2 s, leaving 1 s), the next (4 s) does not.
    clock = FakeClock()
    deadline = clock() + 4.0
    retried: list[float] = []
    calls, fn = failing([Throttled() for _ in range(10)])
    with pytest.raises(Throttled):
        retry(fn, RetryPolicy(attempts=10, initial_s=1.0, max_s=60.0), lambda e: isinstance(e, Throttled),
              remaining=lambda: deadline - clock(), on_retry=lambda e, s: retried.append(s), sleep=clock.sleep,
              rng=Highest())
    assert clock.slept == [1.0, 2.0] == retried
    assert len(calls) == 3
    assert clock() <= deadline


def test_retry_after_is_waited_up_to_its_cap() -> None:
    # The Kubernetes client's 429 with Retry-After: at least what the server asked, at most max_retry_after_s.
    clock = FakeClock()
    calls, fn = failing([Throttled(after=5.0), Throttled(after=3600.0)])
    policy = RetryPolicy(initial_s=0.2, max_s=10.0, max_retry_after_s=60.0)
    retry(fn, policy, lambda e: isinstance(e, Throttled), retry_after=lambda e: getattr(e, "after", None),
          sleep=clock.sleep, rng=Highest())
    assert clock.slept == [5.0, 60.0]
    assert len(calls) == 3


def test_a_coroutine_is_retried_on_the_same_schedule_and_gives_up_on_the_same_errors() -> None:
    # aretry (the probes' SSH connects, once on tenacity) awaits the pauses `retry` sleeps: the same jittered steps
    # and attempt cap, and an error the edge does not call transient ends it at once.
    policy = RetryPolicy(attempts=3, initial_s=0.2, max_s=2.0)
    waited: list[float] = []

    async def pause(seconds: float) -> None:
        waited.append(seconds)

    def run(errors: list[Exception]) -> tuple[list[int], str | Exception]:
        calls, fn = failing(errors)

        async def dial() -> str:
            return fn()

        try:
            return calls, asyncio.run(aretry(dial, policy, lambda e: isinstance(e, Throttled), sleep=pause,
                                             rng=Highest()))
        except Exception as exc:  # the error that ended it, as the caller sees it
            return calls, exc

    calls, out = run([Throttled(), Throttled()])
    assert (len(calls), out, waited) == (3, "ok", [0.2, 0.4])
    waited.clear()
    calls, out = run([Throttled(), Throttled(), Throttled()])
    assert len(calls) == 3 and isinstance(out, Throttled) and waited == [0.2, 0.4]
    waited.clear()
    calls, out = run([Denied()])
    assert len(calls) == 1 and isinstance(out, Denied) and waited == []
