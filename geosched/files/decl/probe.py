"""ProbeRun: what `geosched probe run -o json|yaml` prints: every measurement and failure of one run, what was
stored (built by geosched.probes.results.run_doc; the command prints what it dumps)."""

from __future__ import annotations

from typing import ClassVar

from geosched.files.decl.base import Declared, OutputDocument, Time


class Planned(Declared):
    echo_pairs: int
    throughput_pairs: int


class Echo(Declared):
    """One node pair's round trips (ping, or timed TCP connects); times null when nothing came back."""

    src: str
    dst: str
    method: str
    sent: int
    received: int
    loss: float
    rtt_p50_ms: float | None
    rtt_p95_ms: float | None
    jitter_ms: float | None


class Throughput(Declared):
    src: str
    dst: str
    gbps: float
    retransmits: int | None


class Failure(Declared):
    subject: str
    kind: str
    reason: str


class Stored(Declared):
    node_samples: int
    zone_samples: int


class SlowNode(Declared):
    node: str
    zone: str
    reason: str


class ProbeRunDoc(OutputDocument):
    KIND: ClassVar[str] = "ProbeRun"
    DESCRIPTION: ClassVar[str] = (
        "One probe run (`geosched probe run`): every measurement and failure, what was stored."
    )

    run: int
    plan: str
    started_at: Time
    wall_s: float
    phases_s: dict[str, float]
    phases_cpu_s: dict[str, float]
    planned: Planned
    connections: dict[str, int]
    echo: list[Echo]
    throughput: list[Throughput]
    failures: list[Failure]
    stored: Stored
    slow_nodes: list[SlowNode]
