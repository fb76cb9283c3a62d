"""What a probe run may do and how long it may take: one frozen value passed from the CLI to every layer."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """What to measure. RTT and loss come from the same echo run; throughput is a separate iperf3 test."""

    RTT = "rtt"
    LOSS = "loss"
    THROUGHPUT = "throughput"


ALL_KINDS: frozenset[Kind] = frozenset(Kind)


class RttMethod(StrEnum):
    """`auto` pings and falls back to timed TCP connects when no echo comes back (ICMP filtered)."""

    AUTO = "auto"
    ICMP = "icmp"
    TCP = "tcp"


class PlanKind(StrEnum):
    AUTO = "auto"
    FULL = "full"
    SAMPLED = "sampled"


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    kinds: frozenset[Kind] = ALL_KINDS
    concurrency: int = 16
    # Each probe opens a channel on its source node's one connection; OpenSSH's MaxSessions default is 10.
    sessions_per_node: int = 8
    deadline_s: float = 300.0
    connect_timeout_s: float = 10.0
    command_timeout_s: float = 30.0
    # Attempts per connection for transient errors (resets, lost connections); never for auth or host keys.
    connect_attempts: int = 3
    trust_on_first_use: bool = False
    rtt_method: RttMethod = RttMethod.AUTO
    ping_count: int = 20
    ping_interval_s: float = 0.05
    ping_reply_timeout_s: float = 1.0
    throughput_seconds: int = 3
    # The first second of a TCP test is slow start, not the link.
    throughput_omit_s: int = 1
    iperf_port: int = 5201
    iperf_port_tries: int = 20
    # Time kept back from the run deadline to stop iperf3 servers and close connections.
    cleanup_s: float = 3.0

    def __post_init__(self) -> None:
        checks = {
            "concurrency": self.concurrency >= 1,
            "sessions_per_node": self.sessions_per_node >= 1,
            "deadline_s": self.deadline_s > 0,
            "connect_timeout_s": self.connect_timeout_s > 0,
            "command_timeout_s": self.command_timeout_s > 0,
            "connect_attempts": self.connect_attempts >= 1,
            "ping_count": self.ping_count >= 1,
            "ping_interval_s": self.ping_interval_s > 0,
            "ping_reply_timeout_s": self.ping_reply_timeout_s > 0,
            "throughput_seconds": self.throughput_seconds >= 1,
            "throughput_omit_s": self.throughput_omit_s >= 0,
            "iperf_port": 1 <= self.iperf_port <= 65535 - self.iperf_port_tries,
            "iperf_port_tries": self.iperf_port_tries >= 1,
            "cleanup_s": self.cleanup_s >= 0,
            "kinds": bool(self.kinds),
        }
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid probe settings: {', '.join(bad)}")

    @property
    def echo(self) -> bool:
        return Kind.RTT in self.kinds or Kind.LOSS in self.kinds

    @property
    def throughput(self) -> bool:
        return Kind.THROUGHPUT in self.kinds

    @property
    def throughput_budget_s(self) -> float:
        """How long one iperf3 client may take: its test, the omitted start, and its connect timeout."""
        return self.throughput_seconds + self.throughput_omit_s + self.connect_timeout_s


def parse_kinds(text: str) -> frozenset[Kind]:
    """`rtt,loss,throughput` -> kinds; raises ValueError naming the unknown ones."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    known = {k.value: k for k in Kind}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"unknown kind(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}")
    return frozenset(known[n] for n in names)
