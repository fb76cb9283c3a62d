"""Retry in place for throttling and 5xx: exponential backoff with full jitter, bounded by attempts and by
the budget's deadline (a retry that would sleep past the zone's deadline is not made)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_any,
    wait_random_exponential,
)
from tenacity.stop import stop_base

from geosched.providers.base import Budget, ProviderError
from geosched.providers.failover import retry_in_place

T = TypeVar("T")
OnRetry = Callable[[ProviderError, float], None]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 6
    initial_s: float = 0.5
    max_s: float = 20.0


def call(fn: Callable[[], T], budget: Budget, policy: RetryPolicy, on_retry: OnRetry | None = None,
         sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `fn`; on RateError or TransientError, wait and run it again. The last error is re-raised."""

    class OutOfTime(stop_base):
        def __call__(self, state: RetryCallState) -> bool:
            return budget.remaining() <= (state.upcoming_sleep or 0.0)

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is None or state.outcome is None:
            return
        exc = state.outcome.exception()
        if isinstance(exc, ProviderError):
            on_retry(exc, state.upcoming_sleep or 0.0)

    retrying = Retrying(
        retry=retry_if_exception(lambda e: isinstance(e, ProviderError) and retry_in_place(e)),
        wait=wait_random_exponential(multiplier=policy.initial_s, max=policy.max_s),
        stop=stop_any(stop_after_attempt(policy.attempts), OutOfTime()),
        before_sleep=before_sleep,
        sleep=sleep,
        reraise=True,
    )
    return retrying(fn)
