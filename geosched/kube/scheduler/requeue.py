"""A gang that did not fit or failed to bind waits before it is tried again: `backoff_initial_s` doubling up to
`backoff_max_s` (the scheduler's settings), on the one retry policy (geosched.core.retry, without jitter: the
scheduler is the one waiter). A gang that did not fit is tried again at once when the cluster's capacity changes
(a node joins or frees up); one that was placed is forgotten.

Pure apart from the clock it is handed (tests move a FakeClock: tests/kubeapi/test_requeue.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from geosched.core.retry import RetryPolicy
from geosched.kube.scheduler.pods import GangKey


@dataclass(frozen=True, slots=True)
class _Wait:
    until: float
    retries: int  # failures in a row, the retry number the next wait is the delay of
    capacity_version: int | None  # None: a failed bind, which capacity changing does not cut short


class Requeue:
    def __init__(self, policy: RetryPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.clock = clock
        self._waits: dict[GangKey, _Wait] = {}

    def failed(self, key: GangKey, capacity_version: int | None) -> float:
        """The gang failed once more: its wait (seconds), the next step of its schedule."""
        previous = self._waits.get(key)
        retries = previous.retries + 1 if previous is not None else 1
        delay = self.policy.delay(retries)
        self._waits[key] = _Wait(self.clock() + delay, retries, capacity_version)
        return delay

    def waiting(self, key: GangKey, now: float, capacity_version: int) -> bool:
        wait = self._waits.get(key)
        if wait is None:
            return False
        if wait.capacity_version is not None and wait.capacity_version != capacity_version:
            return False
        return now < wait.until

    def placed(self, key: GangKey) -> None:
        self._waits.pop(key, None)

    def soonest(self) -> float | None:
        """When the first wait ends, None when no gang waits."""
        return min((w.until for w in self._waits.values()), default=None)
