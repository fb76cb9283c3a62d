"""Simulation results as documents (rows, CSV, JSON) and as a PNG plot.

The document builders are pure and return text; `write_plot` is the one function here that touches the
file system. Console printing stays in `geosched.render`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from geosched.errors import GeoschedError
from geosched.simulate.metrics import PolicyResult
from geosched.writes import write_file

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


def write_plot(results: Sequence[PolicyResult], path: Path, title: str = "") -> None:
    """Four panels: avg and p95 JCT, $ cost, kgCO2e per policy, and each policy's JCT distribution."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise GeoschedError("--plot needs matplotlib, which is not installed (pip install matplotlib)") from None
    names = [r.policy for r in results]
    x = np.arange(len(results))
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    ax = axes[0][0]
    ax.bar(x - 0.2, [r.avg_jct_s / 3600 for r in results], 0.4, label="avg")
    ax.bar(x + 0.2, [r.p95_jct_s / 3600 for r in results], 0.4, label="p95")
    _bars_axis(ax, names, "JCT (h)")
    ax.legend()
    _bars_axis(axes[0][1], names, "cost ($)", [r.cost_usd for r in results])
    _bars_axis(axes[1][0], names, "emissions (kgCO2e)", [r.kgco2e for r in results])
    ax = axes[1][1]
    for r in results:
        jct = np.sort([rec.jct_s / 3600 for rec in r.records])
        if jct.size:
            ax.plot(jct, np.arange(1, jct.size + 1) / jct.size, label=r.policy)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (h)")
    ax.set_ylabel("fraction of jobs")
    ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    write_file(path, buf.getvalue())


def _bars_axis(ax: Any, names: list[str], label: str, values: list[float] | None = None) -> None:
    x = np.arange(len(names))
    if values is not None:
        ax.bar(x, values)
    ax.set_xticks(x)
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_ylabel(label)
