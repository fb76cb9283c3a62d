"""Simulation results as documents (rows, CSV, JSON). Pure: they return values and text; console printing
stays in `geosched.console.render`, the picture (`simulate --plot`) is `geosched.plots.simulation`."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

from geosched.simulate.metrics import PolicyResult

OUTPUTS = ("table", "wide", "json", "yaml", "csv")


def rows(results: Sequence[PolicyResult]) -> list[dict[str, Any]]:
    return [r.summary() for r in results]


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
