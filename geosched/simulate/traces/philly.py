"""Microsoft's Philly trace (msr-fiddle/philly-traces), the `cluster_job_log` JSON list.

Each job: `jobid`, `submitted_time` ("2017-10-03 02:06:11"), `status`, `attempts` [{start_time, end_time,
detail: [{ip, gpus: [...]}]}]. Per the trace's README a job may have no attempts, an attempt may lack its
times (a logging error), and a last attempt without end_time was still running at snapshot time.

- submit: seconds since the earliest `submitted_time` in the file (the timestamps are local wall-clock
  time without a zone; one DST change in the window can shift a job by an hour, which we accept);
- run time: the sum of the attempts that have both times (a retried job held its GPUs for each);
- GPUs: those of the last such attempt; gpus_per_worker: its per-machine GPU count when every machine
  held the same number (the job's real layout), else left to the simulator.

Line numbers are those of each job's opening brace.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from geosched.core.errors import InputError
from geosched.files.gate import decode_json_at
from geosched.simulate.traces.model import Collector, RowError, TraceJob

NAME = "philly"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def looks_like(head: str) -> bool:
    return head.lstrip().startswith(("[", "{"))


def parse(text: str, out: Collector) -> list[TraceJob]:
    parsed: list[tuple[TraceJob, datetime]] = []
    for line, item in _items(text, out.source):
        try:
            job = _job(item, line, out)
        except RowError as exc:
            out.error(line, str(exc))
            continue
        if job is not None:
            parsed.append(job)
    if not parsed:
        return []
    start = min(submitted for _, submitted in parsed)
    return [dataclasses.replace(job, submit_time_s=(submitted - start).total_seconds()) for job, submitted in parsed]


def _items(text: str, source: str) -> list[tuple[int, Any]]:
    """The list's elements with the line each starts on (json.loads keeps no positions)."""
    pos = _skip_space(text, 0)
    if pos >= len(text) or text[pos] != "[":
        raise InputError(source, f"line {_line(text, pos)}", "expected a JSON list of jobs")
    pos = _skip_space(text, pos + 1)
    items: list[tuple[int, Any]] = []
    if pos < len(text) and text[pos] == "]":
        _nothing_after(text, pos + 1, source)
        return items
    line, counted = 1, 0  # newlines are counted incrementally: the real log holds ~100k jobs
    while True:
        item, end = decode_json_at(text, pos, source)
        line, counted = line + text.count("\n", counted, pos), pos
        items.append((line, item))
        pos = _skip_space(text, end)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_space(text, pos + 1)
            continue
        if pos < len(text) and text[pos] == "]":
            _nothing_after(text, pos + 1, source)
            return items
        raise InputError(source, f"line {_line(text, pos)}", "not valid JSON: expected ',' or ']' after a job")


def _nothing_after(text: str, pos: int, source: str) -> None:
    rest = _skip_space(text, pos)
    if rest < len(text):
        raise InputError(source, f"line {_line(text, rest)}", "not valid JSON: text after the list")


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _job(item: Any, line: int, out: Collector) -> tuple[TraceJob, datetime] | None:
    if not isinstance(item, dict):
        raise RowError(f"expected a job object, got {type(item).__name__}")
    jobid = item.get("jobid")
    if not isinstance(jobid, str) or not jobid:
        raise RowError("jobid: expected a non-empty string")
    submitted = _time(item.get("submitted_time"), f"{jobid}: submitted_time")
    attempts = item.get("attempts")
    if not isinstance(attempts, list):
        raise RowError(f"{jobid}: attempts: expected a list")
    if not attempts:
        out.skip(line, f"{jobid}: no scheduling attempts (never ran)")
        return None
    for i, attempt in enumerate(attempts):
        if not isinstance(attempt, dict):
            raise RowError(f"{jobid}: attempts[{i}]: expected an object")
    if _missing(attempts[-1].get("end_time")) and not _missing(attempts[-1].get("start_time")):
        out.skip(line, f"{jobid}: still running when the trace was taken (last attempt has no end_time)")
        return None
    run_s = 0.0
    last: dict[str, Any] | None = None
    for i, attempt in enumerate(attempts):
        if _missing(attempt.get("start_time")) or _missing(attempt.get("end_time")):
            continue
        start = _time(attempt["start_time"], f"{jobid}: attempts[{i}].start_time")
        end = _time(attempt["end_time"], f"{jobid}: attempts[{i}].end_time")
        if end < start:
            raise RowError(f"{jobid}: attempts[{i}]: end_time is before start_time")
        run_s += (end - start).total_seconds()
        last = attempt
    if last is None:
        out.skip(line, f"{jobid}: no attempt has both start_time and end_time")
        return None
    per_machine = _gpus_per_machine(last.get("detail"), jobid)
    if sum(per_machine) == 0:
        out.skip(line, f"{jobid}: its attempts record no GPUs")
        return None
    uniform = per_machine[0] if len(set(per_machine)) == 1 else None
    job = TraceJob(id=jobid, submit_time_s=0.0, gpus=sum(per_machine), duration_s=run_s,
                   gpus_per_worker=uniform, line=line)
    return job, submitted


def _gpus_per_machine(detail: Any, jobid: str) -> list[int]:
    if not isinstance(detail, list):
        raise RowError(f"{jobid}: detail: expected a list of machines")
    counts = []
    for i, machine in enumerate(detail):
        gpus = machine.get("gpus") if isinstance(machine, dict) else None
        if not isinstance(gpus, list):
            raise RowError(f"{jobid}: detail[{i}].gpus: expected a list")
        counts.append(len(gpus))
    return counts or [0]


def _missing(value: Any) -> bool:
    """An attempt time the trace does not have: null, or the string "None" or "" (the trace's own analysis
    notebook, msr-fiddle/philly-traces analysis/Philly Trace Analysis.ipynb `parse_date`, reads a time as missing
    when `date_str is None or date_str == '' or date_str == 'None'`)."""
    return value is None or (isinstance(value, str) and value.strip() in ("", "None"))


def _time(value: Any, what: str) -> datetime:
    if not isinstance(value, str):
        raise RowError(f"{what}: expected a time like '2017-10-03 02:06:11'")
    try:
        return datetime.strptime(value.strip(), TIME_FORMAT)
    except ValueError:
        raise RowError(f"{what}: expected a time like '2017-10-03 02:06:11', got {value[:40]!r}") from None
