"""Simulation results as documents (rows, CSV, JSON). Pure: they return values and text; console printing
stays in `geosched.render`, the picture (`simulate --plot`) is `geosched.plots.simulation`."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from geosched.simulate.metrics import PolicyResult

OUTPUTS = ("table", "wide", "json", "yaml", "csv")


def rows(results: Sequence[PolicyResult]) -> list[dict[str, Any]]:
    return [r.summary() for r in results]


def table_rows(results: Sequence[PolicyResult]) -> list[dict[str, Any]]:
    """One row per metric, one column per policy (fits a terminal for the handful of policies compared);
    in hours where people read them. The CSV and JSON keep one record per policy, seconds, full precision."""
    metrics: list[tuple[str, Callable[[PolicyResult], float | int]]] = [
        ("avg JCT h", lambda r: r.avg_jct_s / 3600),
        ("p95 JCT h", lambda r: r.p95_jct_s / 3600),
        ("makespan h", lambda r: r.makespan_s / 3600),
        ("avg queue h", lambda r: r.avg_queue_s / 3600),
        ("GPU util", lambda r: r.gpu_util),
        ("cost $", lambda r: r.cost_usd),
        ("kgCO2e", lambda r: r.kgco2e),
        ("jobs", lambda r: r.jobs),
        ("unplaced", lambda r: r.unplaced),
        ("avg slowdown", lambda r: r.avg_slowdown),
        ("multi-zone jobs", lambda r: r.multi_zone_jobs),
    ]
    return [{"metric": name, **{r.policy: value(r) for r in results}} for name, value in metrics]


def to_csv(results: Sequence[PolicyResult]) -> str:
    data = rows(results)
    if not data:
        return ""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(data[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(data)
    return buf.getvalue()


def document(results: Sequence[PolicyResult], meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = dict(meta or {})
    doc["results"] = rows(results)
    doc["unplaced"] = {r.policy: [{"id": u.id, "line": u.line, "reason": u.reason} for u in r.unplaced_jobs]
                       for r in results if r.unplaced_jobs}
    return doc


def to_json(results: Sequence[PolicyResult], meta: Mapping[str, Any] | None = None) -> str:
    return json.dumps(document(results, meta), indent=2) + "\n"
