"""A gang that did not fit or failed to bind waits before it is tried again: `backoff_initial_s` doubling up to
`backoff_max_s` (the scheduler's settings), on the one retry policy (geosched.core.retry, without jitter: the
scheduler is the one waiter). A gang that did not fit is tried again at once when the cluster's capacity changes
(a node joins or frees up); one that was placed, or is pending no more (deleted, bound by someone else), is
forgotten (`keep`).

Pure apart from the clock it is handed (tests move a FakeClock: tests/kubeapi/test_requeue.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
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

    def keep(self, keys: Iterable[GangKey]) -> None:
        """Forget every gang but `keys` (the gangs pending now): a gang refused and then deleted kept its wait for
        as long as the scheduler ran (attack5)."""
        live = set(keys)
        for key in [k for k in self._waits if k not in live]:
            del self._waits[key]

    def soonest(self) -> float | None:
        """When the first wait still running ends, None when none is. A wait that has ended is not one to wake for:
        its gang was tried in the cycle after (and waits again, or was placed), or it cannot be tried until its
        pods change, which wakes the loop by itself. Counted, an ended wait was a time in the past, and the loop,
        sleeping until then (at least 10 ms), ran ~30 cycles a second for as long as it lived (attack5)."""
        now = self.clock()
        return min((w.until for w in self._waits.values() if w.until > now), default=None)
