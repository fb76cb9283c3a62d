"""Which cloud errors are retried in place, on the one retry policy (geosched/core/retry.py): throttling and 5xx
(`failover.retry_in_place`), backed off with full jitter, bounded by attempts and by the budget's deadline (a retry
that would sleep past the zone's deadline is not made)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from geosched.core.retry import RetryPolicy, retry
from geosched.providers.base import Budget, ProviderError
from geosched.providers.failover import retry_in_place

T = TypeVar("T")
OnRetry = Callable[[ProviderError, float], None]


def call(fn: Callable[[], T], budget: Budget, policy: RetryPolicy, on_retry: OnRetry | None = None,
         sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `fn`; on RateError or TransientError, wait and run it again. The last error is re-raised."""

    def retried(exc: Exception, pause: float) -> None:
        if on_retry is not None and isinstance(exc, ProviderError):
            on_retry(exc, pause)

    return retry(fn, policy, lambda e: isinstance(e, ProviderError) and retry_in_place(e),
                 remaining=budget.remaining, on_retry=retried, sleep=sleep)
