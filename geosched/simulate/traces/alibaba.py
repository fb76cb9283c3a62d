"""Alibaba's 2023 GPU cluster trace (clusterdata `cluster-trace-gpu-v2023`, `openb_pod_list_*.csv`).

    name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time

Times are seconds. A pod is one worker on one node: submit = creation_time, run time = deletion_time -
scheduled_time, gpus_per_worker = num_gpu. A GPU-sharing pod (num_gpu 1, gpu_milli < 1000) is counted as a
whole GPU, since placement here is by whole GPUs. `gpu_spec` (GPU-type constraints such as `V100M16`) names
Alibaba's own parts, which no cloud fleet offers, and is ignored. Skipped, with their line: CPU-only pods
(num_gpu 0), pods never scheduled (no scheduled_time) and pods with no deletion_time.
"""

from __future__ import annotations

from geosched.core.errors import InputError
from geosched.files.gate import CsvRows
from geosched.simulate.traces.model import Collector, RowError, TraceJob, integer, number

NAME = "alibaba"
REQUIRED = ("name", "num_gpu", "gpu_milli", "creation_time", "deletion_time", "scheduled_time")


def looks_like(head: str) -> bool:
    columns = {c.strip() for c in head.strip().split(",")}
    return {"name", "num_gpu", "gpu_milli", "creation_time"} <= columns


def parse(text: str, out: Collector) -> list[TraceJob]:
    reader = CsvRows(text, out.source)
    header = [c.strip() for c in next(reader, [])]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(out.source, "line 1", f"header lacks column(s) {', '.join(missing)}")
    col = {name: i for i, name in enumerate(header)}
    jobs: list[TraceJob] = []
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        try:
            job = _row(row, col, len(header), line, out)
        except RowError as exc:
            out.error(line, str(exc))
            continue
        if job is not None:
            jobs.append(job)
    return jobs


def _row(row: list[str], col: dict[str, int], width: int, line: int, out: Collector) -> TraceJob | None:
    if len(row) != width:
        raise RowError(f"expected {width} comma-separated fields, got {len(row)}")
    name = row[col["name"]].strip()
    if not name:
        raise RowError("name: empty")
    gpus = integer(row[col["num_gpu"]], "num_gpu", minimum=0)
    integer(row[col["gpu_milli"]], "gpu_milli", minimum=0)
    created = number(row[col["creation_time"]], "creation_time", minimum=0)
    scheduled_text = row[col["scheduled_time"]].strip()
    deleted_text = row[col["deletion_time"]].strip()
    if gpus == 0:
        out.skip(line, f"{name}: CPU-only pod (num_gpu 0)")
        return None
    if not scheduled_text:
        out.skip(line, f"{name}: never scheduled (no scheduled_time)")
        return None
    if not deleted_text:
        out.skip(line, f"{name}: no deletion_time (still running when the trace was taken)")
        return None
    scheduled = number(scheduled_text, "scheduled_time", minimum=0)
    deleted = number(deleted_text, "deletion_time", minimum=0)
    if scheduled < created:
        raise RowError(f"scheduled_time {scheduled_text} is before creation_time {row[col['creation_time']].strip()}")
    if deleted < scheduled:
        raise RowError(f"deletion_time {deleted_text} is before scheduled_time {scheduled_text}")
    return TraceJob(id=name, submit_time_s=created, gpus=gpus, duration_s=deleted - scheduled,
                    gpus_per_worker=gpus, line=line)
