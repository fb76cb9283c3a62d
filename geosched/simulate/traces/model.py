"""What every trace reader returns: jobs, and the rows it could not use, each with its line number."""

from __future__ import annotations

from dataclasses import dataclass, field

from geosched.core.errors import InputError
from geosched.files.fields import MAX_INTEGER, MAX_NUMBER


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace, as the trace states it.

    `duration_s` is the job's run time with its GPUs to itself and no network in the way (Gavel: derived
    from `total_steps` and measured throughput). `gpus_per_worker` is set only when the trace says how the
    job was laid out; otherwise the simulator chooses the gang shape.
    """

    id: str
    submit_time_s: float
    gpus: int
    duration_s: float
    total_steps: int | None = None
    model: str | None = None
    gpus_per_worker: int | None = None
    line: int = 0


@dataclass(frozen=True, slots=True)
class RowIssue:
    line: int
    reason: str

    def describe(self, source: str) -> str:
        return f"{source}: line {self.line}: {self.reason}"


@dataclass(frozen=True, slots=True)
class TraceRead:
    """`errors`: malformed rows. `skipped`: well-formed rows that cannot be replayed (a job that never
    ran, a CPU-only pod); both are the caller's to print, neither is dropped silently."""

    source: str
    format: str
    jobs: tuple[TraceJob, ...]
    errors: tuple[RowIssue, ...] = ()
    skipped: tuple[RowIssue, ...] = ()


@dataclass
class Collector:
    """Strict: the first bad row raises InputError(file, "line N", reason). Lenient: rows are collected."""

    source: str
    strict: bool
    errors: list[RowIssue] = field(default_factory=list)
    skipped: list[RowIssue] = field(default_factory=list)

    def error(self, line: int, reason: str) -> None:
        if self.strict:
            raise InputError(self.source, f"line {line}", reason) from None
        self.errors.append(RowIssue(line, reason))

    def skip(self, line: int, reason: str) -> None:
        self.skipped.append(RowIssue(line, reason))

    def result(self, fmt: str, jobs: list[TraceJob]) -> TraceRead:
        return TraceRead(self.source, fmt, tuple(jobs), tuple(self.errors), tuple(self.skipped))


class RowError(ValueError):
    """Raised inside a row parser; the reader turns it into a RowIssue for the row's line."""


def lines(text: str) -> list[tuple[int, str]]:
    """(line number, text) as an editor counts them: only newlines end a line."""
    return [(i, raw.rstrip("\r")) for i, raw in enumerate(text.split("\n"), start=1)]


def number(text: str, what: str, *, minimum: float | None = None, maximum: float = MAX_NUMBER) -> float:
    try:
        value = float(text)
    except ValueError:
        raise RowError(f"{what}: expected a number, got {text.strip()[:40]!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise RowError(f"{what}: expected a finite number, got {text.strip()[:40]!r}")
    if minimum is not None and value < minimum:
        raise RowError(f"{what}: must be >= {minimum:g}, got {value:g}")
    if abs(value) > maximum:
        raise RowError(f"{what}: must be <= {maximum:g}, got {value:g}")
    return value


def integer(text: str, what: str, *, minimum: int | None = None) -> int:
    value = number(text, what, maximum=MAX_INTEGER)
    if value != int(value):
        raise RowError(f"{what}: expected a whole number, got {text.strip()[:40]!r}")
    if minimum is not None and value < minimum:
        raise RowError(f"{what}: must be >= {minimum}, got {int(value)}")
    return int(value)
