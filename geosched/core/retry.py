"""Retry in place: exponential backoff with full jitter (AWS's "Exponential Backoff and Jitter"), bounded by a
number of attempts and, if the caller has one, by a deadline; at least as long as the server's Retry-After.

One policy for every edge that retries (the cloud providers, the Kubernetes client, the probes' SSH connects, the
scheduler mode's reconnects and gang requeues). The
edge says which errors are worth another try and what its server asked for; this module only counts, waits and gives
up. Pure apart from the clock it is handed: `sleep`, `remaining` and `rng` are injectable, so tests run on a fake
clock (tests/test_retry.py).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how long to retry. The pause before retry n (1-based) is uniform in [0, min(max_s,
    initial_s x 2^(n-1))], raised to the server's Retry-After capped at `max_retry_after_s` (a server asking for
    an hour is not waited on)."""

    attempts: int = 6
    initial_s: float = 0.5
    max_s: float = 20.0
    max_retry_after_s: float = 60.0

    def delay(self, retry: int) -> float:
        """The pause before retry `retry` (1 for the first) without jitter: `initial_s` doubling up to `max_s`, the
        ceiling `backoff` draws under. For a loop that keeps its own schedule and is alone in waiting on it (the
        scheduler's reconnects and gang requeues), where there is no herd of clients for jitter to spread."""
        # The exponent is capped so that a loop retrying for days computes no float too large (2.0 ** 1024 raises
        # OverflowError); any positive initial_s has reached any max_s long before 2 ** 1000.
        return min(self.max_s, self.initial_s * 2.0 ** min(retry - 1, 1000))

    def backoff(self, retry: int, rng: random.Random | None = None) -> float:
        """The jittered pause before retry `retry` (1 for the first)."""
        return (rng or _RNG).uniform(0.0, self.delay(retry))


_RNG = random.Random()


def retry(fn: Callable[[], T], policy: RetryPolicy, retryable: Callable[[Exception], bool], *,
          retry_after: Callable[[Exception], float | None] | None = None,
          remaining: Callable[[], float] | None = None,
          on_retry: Callable[[Exception, float], None] | None = None,
          sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> T:
    """Run `fn`; while it raises an error `retryable` accepts, wait and run it again. The last error is raised
    unchanged when it is not retryable, after `policy.attempts` runs, or when the pause would reach past the
    deadline (`remaining()` seconds left: a retry that could not finish in time is not started)."""
    attempt = 1
    while True:
        try:
            return fn()
        except Exception as exc:
            if not retryable(exc) or attempt >= policy.attempts:
                raise
            pause = policy.backoff(attempt, rng)
            asked = retry_after(exc) if retry_after is not None else None
            if asked is not None:
                pause = max(pause, min(asked, policy.max_retry_after_s))
            if remaining is not None and remaining() <= pause:
                raise
            if on_retry is not None:
                on_retry(exc, pause)
            sleep(pause)
            attempt += 1


async def aretry(fn: Callable[[], Awaitable[T]], policy: RetryPolicy, retryable: Callable[[Exception], bool], *,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, rng: random.Random | None = None) -> T:
    """`retry` for a coroutine (the probes' SSH connects): the same attempts and jittered pauses, awaited so the
    other connects go on meanwhile. No Retry-After and no deadline: an SSH server states neither, and the caller's
    run deadline cancels the task."""
    attempt = 1
    while True:
        try:
            return await fn()
        except Exception as exc:
            if not retryable(exc) or attempt >= policy.attempts:
                raise
            await sleep(policy.backoff(attempt, rng))
            attempt += 1
