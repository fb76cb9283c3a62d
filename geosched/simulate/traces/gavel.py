"""Gavel's Philly-derived traces: one tab-separated job per line.

    job type, command, steps argument, needs data dir (0/1), total steps, arrival time (s), GPUs (scale factor)

The trace carries steps, not time: the duration comes from Gavel's measured throughput of the job type
at its scale factor (see geosched/simulate/gavel.py).
"""

from __future__ import annotations

from geosched.simulate.gavel import Throughputs
from geosched.simulate.traces.model import Collector, RowError, TraceJob, integer, lines, number

NAME = "gavel"
FIELDS = 7


def looks_like(head: str) -> bool:
    fields = head.rstrip("\r\n").split("\t")
    if len(fields) != FIELDS:
        return False
    try:
        int(fields[4])
        float(fields[5])
        int(fields[6])
    except ValueError:
        return False
    return True


def parse(text: str, out: Collector, throughputs: Throughputs) -> list[TraceJob]:
    jobs: list[TraceJob] = []
    for line, raw in lines(text):
        if not raw.strip():
            continue
        try:
            jobs.append(_row(raw, line, throughputs))
        except RowError as exc:
            out.error(line, str(exc))
    return jobs


def _row(raw: str, line: int, throughputs: Throughputs) -> TraceJob:
    fields = raw.split("\t")
    if len(fields) != FIELDS:
        raise RowError(f"expected {FIELDS} tab-separated fields, got {len(fields)}")
    job_type = fields[0].strip()
    total_steps = integer(fields[4], "total steps", minimum=1)
    arrival = number(fields[5], "arrival time", minimum=0)
    gpus = integer(fields[6], "GPUs (scale factor)", minimum=1)
    try:
        duration = throughputs.duration_s(job_type, gpus, total_steps)
    except KeyError as exc:
        raise RowError(str(exc.args[0])) from None
    return TraceJob(id=f"job-{line}", submit_time_s=arrival, gpus=gpus, duration_s=duration,
                    total_steps=total_steps, model=job_type, line=line)
