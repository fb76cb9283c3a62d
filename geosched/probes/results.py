"""What one probe run found: measurements per node pair, failures, and what it cost. Plain values, printed as the
ProbeRun document (declared in geosched.files.decl.probe)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from geosched.files.decl.probe import ProbeRunDoc

from geosched.probes.failures import Failure
from geosched.probes.parsers import EchoRun, IperfRun
from geosched.probes.plan import Plan


@dataclass(frozen=True, slots=True)
class EchoResult:
    src: str
    dst: str
    echo: EchoRun


@dataclass(frozen=True, slots=True)
class ThroughputResult:
    src: str
    dst: str
    iperf: IperfRun


@dataclass(frozen=True, slots=True)
class SlowNode:
    """A node much slower than its zone (geosched.probes.aggregate.slow_nodes finds them); a finding of the run,
    defined with the run's other values so the run's document reads it without importing the aggregation."""

    name: str
    zone: str
    rtt_ms: float
    zone_rtt_ms: float
    loss: float
    reason: str


@dataclass(frozen=True)
class RunReport:
    plan: Plan
    started_at: float
    wall_s: float
    echoes: tuple[EchoResult, ...]
    throughputs: tuple[ThroughputResult, ...]
    failures: tuple[Failure, ...]
    # SSH connections opened per node (and per external jump host) in this run.
    connections: Mapping[str, int] = field(default_factory=dict)
    phase_s: Mapping[str, float] = field(default_factory=dict)
    # Controller CPU per phase, and how long each successful task of a phase took (wall): the measured
    # costs the benchmark's projection to large fleets is built from.
    phase_cpu_s: Mapping[str, float] = field(default_factory=dict)
    durations_s: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    @property
    def measured_pairs(self) -> int:
        return len({(r.src, r.dst) for r in self.echoes} | {(r.src, r.dst) for r in self.throughputs})


def run_doc(report: RunReport, node_samples: int, zone_samples: int, slow: Sequence[SlowNode]) -> ProbeRunDoc:
    """The run as `probe run -o json|yaml` prints it: every measurement, every failure, what was stored."""
    from geosched.console.output import rfc3339
    from geosched.files.decl import probe as decl
    return decl.ProbeRunDoc.build(
        run=report.plan.run,
        plan=report.plan.kind.value,
        started_at=rfc3339(report.started_at),
        wall_s=round(report.wall_s, 3),
        phases_s={k: round(v, 3) for k, v in report.phase_s.items()},
        phases_cpu_s={k: round(v, 3) for k, v in report.phase_cpu_s.items()},
        planned=decl.Planned.build(echo_pairs=len(report.plan.echo_pairs),
                                   throughput_pairs=len(report.plan.throughput_pairs)),
        connections=dict(sorted(report.connections.items())),
        echo=[decl.Echo.build(src=r.src, dst=r.dst, method=r.echo.method, sent=r.echo.sent,
                              received=r.echo.received, loss=round(r.echo.loss, 6), **_echo_times(r.echo))
              for r in report.echoes],
        throughput=[decl.Throughput.build(src=r.src, dst=r.dst, gbps=round(r.iperf.gbps, 6),
                                          retransmits=r.iperf.retransmits) for r in report.throughputs],
        failures=[decl.Failure.build(subject=f.subject, kind=f.kind.value, reason=f.reason)
                  for f in report.failures],
        stored=decl.Stored.build(node_samples=node_samples, zone_samples=zone_samples),
        slow_nodes=[decl.SlowNode.build(node=n.name, zone=n.zone, reason=n.reason) for n in slow],
    )


def _echo_times(echo: EchoRun) -> dict[str, float | None]:
    if echo.received == 0:
        return {"rtt_p50_ms": None, "rtt_p95_ms": None, "jitter_ms": None}
    return {"rtt_p50_ms": round(echo.p50_ms, 3), "rtt_p95_ms": round(echo.p95_ms, 3),
            "jitter_ms": round(echo.jitter_ms, 3)}
