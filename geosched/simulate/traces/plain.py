"""The plain CSV: `submit_time,gpus,duration[,model]`, seconds, one job per line.

With a header row the columns may come in any order and `id` and `gpus_per_worker` may be added; without
one the columns are positional. A `model` naming a Gavel job type (e.g. `ResNet-50 (batch size 64)`) gets
that model's measured communication profile in the simulator.
"""

from __future__ import annotations

from geosched.core.errors import InputError
from geosched.files.gate import CsvRows
from geosched.simulate.traces.model import Collector, RowError, TraceJob, integer, number

NAME = "csv"
POSITIONAL = ("submit_time", "gpus", "duration", "model")
KNOWN = frozenset({*POSITIONAL, "id", "gpus_per_worker"})


def looks_like(head: str) -> bool:
    cells = [c.strip() for c in head.strip().split(",")]
    if {"submit_time", "gpus", "duration"} <= set(cells):
        return True
    if len(cells) not in (3, 4):
        return False
    try:
        for cell in cells[:3]:
            float(cell)
    except ValueError:
        return False
    return True


def parse(text: str, out: Collector) -> list[TraceJob]:
    reader = CsvRows(text, out.source)
    first = next(reader, None)
    if first is None:
        return []
    header = [c.strip() for c in first]
    rows: list[tuple[int, list[str]]] = []
    if _is_header(header):
        unknown = [c for c in header if c not in KNOWN]
        missing = [c for c in POSITIONAL[:3] if c not in header]
        if unknown or missing:
            problem = f"unknown column(s) {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}"
            raise InputError(out.source, "line 1", f"{problem} (known: {', '.join(sorted(KNOWN))})")
        columns = header
    else:
        columns = list(POSITIONAL)
        rows.append((reader.line_num, first))
    # Without a header the trailing `model` may be left out row by row.
    widths = {len(columns)} if columns is header else {3, 4}
    rows.extend((reader.line_num, row) for row in reader)
    jobs: list[TraceJob] = []
    for line, row in rows:
        if not any(cell.strip() for cell in row):
            continue
        try:
            jobs.append(_row(row, columns, widths, line))
        except RowError as exc:
            out.error(line, str(exc))
    return jobs


def _is_header(cells: list[str]) -> bool:
    try:
        float(cells[0])
    except (ValueError, IndexError):
        return True
    return False


def _row(row: list[str], columns: list[str], widths: set[int], line: int) -> TraceJob:
    if len(row) not in widths:
        expected = " or ".join(str(w) for w in sorted(widths))
        raise RowError(f"expected {expected} comma-separated fields, got {len(row)}")
    cell = dict(zip(columns, row, strict=False))
    gpus = integer(cell["gpus"], "gpus", minimum=1)
    per_worker_text = cell.get("gpus_per_worker", "").strip()
    per_worker = integer(per_worker_text, "gpus_per_worker", minimum=1) if per_worker_text else None
    if per_worker is not None and gpus % per_worker:
        raise RowError(f"gpus {gpus} is not a multiple of gpus_per_worker {per_worker}")
    model = cell.get("model", "").strip() or None
    return TraceJob(
        id=cell.get("id", "").strip() or f"job-{line}",
        submit_time_s=number(cell["submit_time"], "submit_time", minimum=0),
        gpus=gpus,
        duration_s=number(cell["duration"], "duration", minimum=0),
        model=model,
        gpus_per_worker=per_worker,
        line=line,
    )
