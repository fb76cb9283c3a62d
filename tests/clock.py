"""A clock tests move by hand: `clock()` is the time, `clock.sleep(s)` records the pause and moves the time on at
once, so code that waits (backoff, polling, leases) runs its schedule in microseconds and the test can read it.
`on_sleep`, when given, runs after each pause: what the world does while the code waits (an autoscaler answering,
a fault injected), at the moment the code would look again."""

from __future__ import annotations

from collections.abc import Callable


class FakeClock:
    def __init__(self, start: float = 1000.0, on_sleep: Callable[[], object] | None = None) -> None:
        self.now = start
        self.slept: list[float] = []
        self.on_sleep = on_sleep

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)
        if self.on_sleep is not None:
            self.on_sleep()
