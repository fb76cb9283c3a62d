"""Trace readers, one module per format, and the detection that picks one from a file's content.

`read_trace(path)` reads any of them; `fmt` overrides detection. Strict (the default): the first bad row
raises InputError(file, "line N", reason), exit 2. Lenient: bad rows come back in `TraceRead.errors`;
rows that are well formed but cannot be replayed come back in `TraceRead.skipped` either way.
"""

from __future__ import annotations

from pathlib import Path

from geosched.core.errors import InputError
from geosched.files.gate import Kind, read_text
from geosched.simulate.gavel import Throughputs, shipped_throughputs
from geosched.simulate.traces import alibaba, gavel, philly, plain
from geosched.simulate.traces.model import Collector, RowIssue, TraceJob, TraceRead

FORMATS = (gavel.NAME, alibaba.NAME, philly.NAME, plain.NAME)


def detect_format(text: str, source: str = "trace") -> str:
    """Which reader a file's first non-empty line calls for. Order matters: JSON first (a Philly job list
    can hold commas), then the header-led CSVs, then Gavel's tab-separated rows."""
    head = next((line for line in text.split("\n") if line.strip()), "")
    if not head:
        raise InputError(source, "", "empty trace")
    if philly.looks_like(head):
        return philly.NAME
    if alibaba.looks_like(head):
        return alibaba.NAME
    if plain.looks_like(head):
        return plain.NAME
    if gavel.looks_like(head):
        return gavel.NAME
    raise InputError(source, "line 1", f"unknown trace format (known: {', '.join(FORMATS)}){_near_miss(head)}")


def _near_miss(head: str) -> str:
    """The header-led format a CSV header is closest to and the columns it lacks: Alibaba's openb_pod_list_*.csv
    files of the GPU-sharing trace come with and without the time columns, and only those with them replay."""
    columns = {c.strip() for c in head.split(",")}
    wants = {alibaba.NAME: alibaba.REQUIRED, plain.NAME: plain.POSITIONAL[:3]}
    name, required = max(wants.items(), key=lambda kv: len(columns & set(kv[1])))
    missing = [c for c in required if c not in columns]
    if len(columns & set(required)) < 2 or not missing:
        return ""
    return f"; read as {name!r}, the header lacks {', '.join(missing)}"


def parse_trace(text: str, source: str, fmt: str | None = None, *, strict: bool = True,
                throughputs: Throughputs | None = None) -> TraceRead:
    """Parse trace text already in memory: pure, so tests and callers with their own I/O can use it."""
    if fmt is not None and fmt not in FORMATS:
        raise InputError(source, "", f"unknown trace format {fmt!r} (known: {', '.join(FORMATS)})")
    chosen = fmt or detect_format(text, source)
    out = Collector(source, strict)
    if chosen == gavel.NAME:
        jobs = gavel.parse(text, out, throughputs or shipped_throughputs())
    elif chosen == alibaba.NAME:
        jobs = alibaba.parse(text, out)
    elif chosen == philly.NAME:
        jobs = philly.parse(text, out)
    else:
        jobs = plain.parse(text, out)
    return out.result(chosen, jobs)


def read_trace(path: Path, fmt: str | None = None, *, strict: bool = True,
               throughputs: Throughputs | None = None) -> TraceRead:
    text = read_text(path, Kind.TRACE, "utf-8-sig")  # a spreadsheet's BOM is not part of the header
    return parse_trace(text, str(path), fmt, strict=strict, throughputs=throughputs)


__all__ = ["FORMATS", "RowIssue", "TraceJob", "TraceRead", "detect_format", "parse_trace", "read_trace"]
