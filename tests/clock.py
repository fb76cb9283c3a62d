"""A clock tests move by hand: `clock()` is the time, `clock.sleep(s)` records the pause and moves the time on at
once, so code that waits (backoff, polling, leases) runs its schedule in microseconds and the test can read it."""

from __future__ import annotations


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)
