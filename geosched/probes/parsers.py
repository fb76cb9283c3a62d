"""Probe tool output -> numbers. Pure functions over captured text, unit-tested on real outputs."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class OutputError(ValueError):
    """A tool's output says it failed, or is not what the parser expects."""


@dataclass(frozen=True, slots=True)
class EchoRun:
    """One ping (or timed TCP connect) run: what was sent, what came back, each round trip in ms."""

    method: str
    sent: int
    received: int
    rtts_ms: tuple[float, ...]
    # iputils' own min/avg/max/mdev line, when it printed one.
    summary: tuple[float, float, float, float] | None = None

    @property
    def loss(self) -> float:
        return 0.0 if self.sent == 0 else max(0.0, 1.0 - self.received / self.sent)

    @property
    def p50_ms(self) -> float:
        return percentile(self._times(), 50.0)

    @property
    def p95_ms(self) -> float:
        return percentile(self._times(), 95.0)

    @property
    def jitter_ms(self) -> float:
        """iputils' mdev when given, else the mean absolute deviation of the round trips."""
        if self.summary is not None:
            return self.summary[3]
        times = self._times()
        mean = sum(times) / len(times)
        return sum(abs(t - mean) for t in times) / len(times)

    def _times(self) -> Sequence[float]:
        if self.rtts_ms:
            return self.rtts_ms
        if self.summary is not None:
            # Quiet output: only min/avg/max survive; avg stands for the median, max for the tail.
            return (self.summary[1], self.summary[1], self.summary[2])
        raise OutputError("no round trip was measured")


@dataclass(frozen=True, slots=True)
class IperfRun:
    received_bps: float
    sent_bps: float
    retransmits: int | None
    # TCP's own smallest RTT estimate during the test, a stand-in when no echo run measured the pair.
    min_rtt_ms: float | None

    @property
    def gbps(self) -> float:
        return self.received_bps / 1e9


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), so p50 is the median."""
    if not values:
        raise OutputError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


# --- ping (iputils; busybox's summary lines are accepted too) ---------------------------------------

_TRANSMITTED = re.compile(r"(\d+) packets transmitted, (\d+) (?:packets )?received")
_SUMMARY = re.compile(r"(?:rtt|round-trip) min/avg/max(?:/mdev)? = ([\d.]+)/([\d.]+)/([\d.]+)(?:/([\d.]+))? ms")
_REPLY = re.compile(r"bytes from .*?time[=<]([\d.]+) ms(.*)$")
# Lines that mean "this ping cannot run here" rather than "the peer did not answer".
_PING_ERRORS = (
    (re.compile(r"cannot flood|minimal interval allowed", re.I), "interval too short for this user"),
    (re.compile(r"Operation not permitted|Permission denied|socket: ", re.I), "ICMP not permitted"),
    (re.compile(r"not found|No such file", re.I), "ping is not installed"),
    (re.compile(r"unknown host|Name or service not known|Temporary failure in name resolution", re.I),
     "cannot resolve the destination"),
)


class PingUnavailable(OutputError):
    """ping could not run (not installed, not permitted, interval refused): try another method."""


def parse_ping(stdout: str, stderr: str = "", exit_status: int | None = 0) -> EchoRun:
    """iputils ping output with per-reply lines (not -q) -> EchoRun.

    Exit status 1 with statistics means "some or all replies missing", which is a measurement (loss),
    not an error. Without statistics the run failed, and stderr says why.
    """
    counts = _TRANSMITTED.search(stdout)
    if counts is None:
        text = f"{stderr}\n{stdout}"
        for pattern, reason in _PING_ERRORS:
            if pattern.search(text):
                raise PingUnavailable(reason)
        raise OutputError(f"ping printed no statistics (exit {exit_status}): {_excerpt(text)}")
    sent, received = int(counts.group(1)), int(counts.group(2))
    rtts = []
    for line in stdout.splitlines():
        reply = _REPLY.search(line)
        if reply is not None and "DUP!" not in reply.group(2):
            rtts.append(float(reply.group(1)))
    summary = None
    found = _SUMMARY.search(stdout)
    if found is not None:
        mdev = float(found.group(4)) if found.group(4) is not None else 0.0
        summary = (float(found.group(1)), float(found.group(2)), float(found.group(3)), mdev)
    if received > 0 and not rtts and summary is None:
        raise OutputError("ping reported replies but no round-trip times")
    return EchoRun(method="icmp", sent=sent, received=min(received, sent), rtts_ms=tuple(rtts), summary=summary)


def parse_tcp_rtt(stdout: str, stderr: str = "", exit_status: int | None = 0) -> EchoRun:
    """Output of `commands.TCP_RTT_SCRIPT`: one line per connect attempt, ms or '-'."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if exit_status not in (0, None) or not lines:
        if "No such file" in stderr or "not found" in stderr:
            raise PingUnavailable("python3 is not installed")
        raise OutputError(f"timed TCP connects failed (exit {exit_status}): {_excerpt(stderr)}")
    rtts = []
    for line in lines:
        if line == "-":
            continue
        try:
            rtts.append(float(line))
        except ValueError:
            raise OutputError(f"unexpected line from timed TCP connects: {_excerpt(line)}") from None
    return EchoRun(method="tcp", sent=len(lines), received=len(rtts), rtts_ms=tuple(rtts))


# --- iperf3 -J ---------------------------------------------------------------------------------------

def parse_iperf3(stdout: str) -> IperfRun:
    """iperf3 -J client output -> goodput at the receiver. iperf3 may exit 0 with an "error" member."""
    try:
        doc = json.loads(stdout)
    except json.JSONDecodeError:
        raise OutputError(f"iperf3 printed no JSON: {_excerpt(stdout)}") from None
    if not isinstance(doc, dict):
        raise OutputError("iperf3 JSON is not an object")
    if doc.get("error"):
        raise OutputError(f"iperf3: {_excerpt(str(doc['error']))}")
    end = _mapping(doc.get("end"), "end")
    received = _number(_mapping(end.get("sum_received"), "end.sum_received").get("bits_per_second"),
                       "end.sum_received.bits_per_second")
    sent_sum = _mapping(end.get("sum_sent"), "end.sum_sent")
    sent = _number(sent_sum.get("bits_per_second"), "end.sum_sent.bits_per_second")
    retransmits = sent_sum.get("retransmits")
    min_rtt = None
    rtts = [s["sender"]["min_rtt"] for s in end.get("streams", [])
            if isinstance(s, dict) and isinstance(s.get("sender"), dict)
            and isinstance(s["sender"].get("min_rtt"), int | float) and s["sender"]["min_rtt"] > 0]
    if rtts:
        min_rtt = min(rtts) / 1000.0  # iperf3 reports microseconds
    return IperfRun(received_bps=received, sent_bps=sent,
                    retransmits=int(retransmits) if isinstance(retransmits, int) else None, min_rtt_ms=min_rtt)


def parse_pid(line: str) -> int:
    text = line.strip()
    if not text.isdigit() or int(text) <= 1:
        raise OutputError(f"expected a process id, got {_excerpt(text)}")
    return int(text)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise OutputError(f"iperf3 JSON lacks {where}")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise OutputError(f"iperf3 JSON lacks a number at {where}")
    return float(value)


def _excerpt(text: str, limit: int = 160) -> str:
    """Tool output quoted in errors: one line, bounded, so a chatty tool cannot flood the report."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
