"""The demo's last stage: cost and carbon of what the demo did, by the same report as `geosched report`, from
the demo's own store: the emulated gang's real (seconds-long) usage, which the providers' journal wrote into the
ledger as the machines came and went, and the placed jobs, which the demo does not run: each is recorded in the
ledger as if it ran for one hour from now on its placed nodes. The user's store never receives this assumed
usage."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.markup import escape

from geosched.console import render
from geosched.core.models import Fleet, Placement
from geosched.files.documents import Output
from geosched.report import Kind, Source, close_interval, open_interval
from geosched.report.aggregate import Grouping, ReportKind
from geosched.report.baseline import stands_on
from geosched.report.formats import display_row, recorded_caption, row, savings_rows
from geosched.report.report import Rendered, report
from geosched.report.window import iso
from geosched.store.db import Store

ASSUMED_S = 3600.0
# 80 columns (issue 23 item 8): the intervals count (a ledger detail) and $/GPU-h (cost $ / GPU-h) are
# `geosched report cost --by job`'s (-o wide).
COLUMNS = ("job", "GPU-h", "cost $", "priced from", "kWh", "kgCO2e")


def record_assumed_usage(store: Store, placed: Sequence[Placement], fleet: Fleet, start: float) -> int:
    """One closed job interval per placed node, [start, start + 1 h); returns how many were recorded."""
    recorded = 0
    for p in placed:
        for a in p.assignments:
            node = fleet.by_name[a.node]
            open_interval(store, kind=Kind.JOB, name=p.job.name, job=p.job.name, provider=node.provider,
                          region=node.region, zone=node.zone, cluster=node.cluster or p.cluster,
                          instance_type=node.instance_type, gpu=node.gpu, gpus=a.workers * p.job.gpus_per_worker,
                          pricing=p.job.pricing, source=Source.DEMO, start=start, ref=node.name)
            recorded += close_interval(store, kind=Kind.JOB, name=p.job.name, source=Source.DEMO,
                                       end=start + ASSUMED_S, ref=node.name)
    return recorded


def job_rows(result: Rendered) -> list[dict[str, Any]]:
    """Cost and carbon side by side, one row per job (the report's own rows, merged)."""
    assert result.data is not None
    data = result.data
    out = []
    for group in data.groups[Grouping.JOB]:
        merged = {**row(group, Grouping.JOB, ReportKind.COST, False), **row(group, Grouping.JOB, ReportKind.CARBON,
                                                                            False)}
        shown = display_row(merged)
        out.append({k: shown[k] for k in COLUMNS})
    return out


def savings_lines(result: Rendered) -> list[str]:
    """Per baseline, the saving and what it stands on (`baseline.stands_on`): a saving that comes from a
    baseline's gangs predicted to run several times as long on modelled links says so."""
    assert result.data is not None
    data = result.data
    return [f"  saved ${s.usd_saved:,.0f} and {s.gco2e_saved / 1000:,.1f} kgCO2e "
            f"{stands_on(s, data.snapshot or '-')}" for s in data.savings]


def run(n: int, placed: Sequence[Placement], fleet: Fleet, store: Store, html: Path) -> Rendered:
    start = time.time()
    record_assumed_usage(store, placed, fleet, start)
    until = start + ASSUMED_S
    render.out.print(f"[bold]{n}. Cost and carbon[/] of what this demo did (the report `geosched report` makes), "
                     f"from the demo store {escape(str(store.path))}: the emulated gang's usage as the ledger "
                     f"recorded it, and the {len(placed)} placed jobs, assumed 1 h each from now on their placed "
                     "nodes (nothing ran). Your own store gets none of this usage.", markup=True)
    result = report(store, ReportKind.COST, Grouping.JOB, until=until, output=Output.HTML, out=html)
    assert result.data is not None
    t = result.data.total
    render.table("cost and carbon by job", job_rows(result),
                 caption=f"total {t.gpu_hours:,.2f} GPU-h, ${t.usd:,.2f}, {t.energy_kwh:,.1f} kWh, "
                         f"{t.gco2e / 1000:,.2f} kgCO2e")
    render.table("the placed jobs against baselines (each re-placed on the embedded fleet for the same hour; "
                 "saved = baseline - recorded; run x: how much longer the baseline's slowest gang runs)",
                 savings_rows(result.data.savings), caption=recorded_caption(result.data.savings))
    for line in savings_lines(result):
        render.out.print(line, markup=False)
    render.out.print(f"  HTML report: {html}", markup=False)
    render.out.print(f"  The same from the command line: geosched --home {store.home} report cost --by job "
                     f"--until {iso(until + 60)}", markup=False)
    return result
