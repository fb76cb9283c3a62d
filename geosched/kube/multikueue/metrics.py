"""What the dispatcher counts, and the optional Prometheus endpoint that shows it.

The counts are always kept (`Stats`, for logs, tests and the benchmark). With `--metrics-port` they are also
exported through prometheus_client (the `metrics` extra), on its own registry so two dispatchers in one
process (the tests) do not collide:

- `geosched_multikueue_decisions_total{outcome}`: nominated, renominated, no_fit, not_a_gang, conflict, error, held
  (a flexible Workload waiting for the start hour it chose: geosched.kube.flex)
- `geosched_multikueue_decision_seconds`: from reading a Workload to its status written (histogram)
- `geosched_multikueue_worker_clusters{state}`: usable, left_out
- `geosched_multikueue_events_dropped_total`: Events not sent (queue full, or the server refused one), read from
  the dispatcher's EventSink at each scrape
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

OUTCOMES = ("nominated", "renominated", "no_fit", "not_a_gang", "conflict", "error", "held")
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


@dataclass
class Stats:
    passes: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    latencies_s: deque[float] = field(default_factory=lambda: deque(maxlen=100_000))  # the latest, for p99
    # The decision alone (Workload read to its write sent): parsing, ranking, the apply body; no API round trip.
    decide_s: deque[float] = field(default_factory=lambda: deque(maxlen=100_000))
    usable: int = 0
    left_out: int = 0


class Metrics:
    def __init__(self) -> None:
        self.stats = Stats()
        self._prom: dict[str, Any] = {}
        self.registry: Any = None
        self._server: tuple[Any, Any] | None = None
        self.events_dropped: Callable[[], int] = lambda: 0  # the dispatcher's EventSink count, when it sends Events

    def serve(self, port: int, address: str = "127.0.0.1") -> None:
        """Export on http://address:port/metrics (loopback unless an address is chosen)."""
        try:
            import prometheus_client as prom
            from prometheus_client.core import CounterMetricFamily
        except ImportError:  # --metrics-port without the extra: one line naming it, exit 1
            from geosched.core.errors import MissingExtra
            raise MissingExtra("metrics", "prometheus_client (for --metrics-port)") from None
        self.registry = prom.CollectorRegistry()
        self._prom = {
            "decisions": prom.Counter("geosched_multikueue_decisions", "Dispatcher decisions by outcome",
                                      ["outcome"], registry=self.registry),
            "latency": prom.Histogram("geosched_multikueue_decision_seconds", "Workload read to status written",
                                      buckets=BUCKETS, registry=self.registry),
            "workers": prom.Gauge("geosched_multikueue_worker_clusters", "Worker clusters by state", ["state"],
                                  registry=self.registry),
        }
        self.registry.register(_Dropped(self, CounterMetricFamily))
        for outcome in OUTCOMES:
            self._prom["decisions"].labels(outcome)
        self._server = prom.start_http_server(port, addr=address, registry=self.registry)

    def close(self) -> None:
        if self._server is not None:
            self._server[0].shutdown()
            self._server[0].server_close()
            self._server = None

    def decided(self, outcome: str, seconds: float | None = None, deciding: float | None = None) -> None:
        self.stats.outcomes[outcome] += 1
        if deciding is not None:
            self.stats.decide_s.append(deciding)
        if self._prom:
            self._prom["decisions"].labels(outcome).inc()
        if seconds is not None:
            self.stats.latencies_s.append(seconds)
            if self._prom:
                self._prom["latency"].observe(seconds)

    def workers(self, usable: int, left_out: int) -> None:
        self.stats.usable, self.stats.left_out = usable, left_out
        if self._prom:
            self._prom["workers"].labels("usable").set(usable)
            self._prom["workers"].labels("left_out").set(left_out)


class _Dropped:
    """The EventSink's own count, read when scraped (a second counter beside it could only drift from it)."""

    def __init__(self, metrics: Metrics, family: Callable[..., Any]) -> None:
        self.metrics = metrics
        self.family = family  # prometheus_client's CounterMetricFamily, imported where the extra is checked

    def collect(self) -> Iterator[Any]:
        yield self.family("geosched_multikueue_events_dropped", "Events on Workloads dropped, not sent",
                                  value=self.metrics.events_dropped())
