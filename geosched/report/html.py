"""The HTML report: one self-contained file (inline CSS, charts as base64 PNG data: URIs, no script, and a
Content-Security-Policy that forbids fetching anything). Pure: returns the page as text.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from html import escape
from types import ModuleType
from typing import Any

from geosched.core.extras import extra_for
from geosched.report.aggregate import Grouping, ReportKind, series
from geosched.report.assemble import ReportData
from geosched.report.baseline import BASELINES, REFERENCE
from geosched.report.formats import cell, display_row, row
from geosched.report.window import iso

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; padding: 0 1rem; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; } th { background: #f0f3f7; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; border: 1px solid #eee; }
.meta { color: #555; } .note { color: #7a4b00; }
"""
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
DAY_S = 86400.0


def page(data: ReportData) -> str:
    title = f"geosched {data.kind.value} report"
    parts = [f"<h1>{escape(title)}</h1>", f'<p class="meta">{escape(_window_text(data))}</p>', _summary(data)]
    parts += _charts(data)
    parts += _savings(data)
    for grouping in [data.by, *(g for g in Grouping if g is not data.by)]:
        if grouping in data.groups:
            rows = [_combined_row(g, grouping, data.embodied) for g in data.groups[grouping]]
            parts += [f"<h2>By {escape(grouping.value)}</h2>", _table(rows)]
    if data.notes:
        parts += ["<h2>Notes</h2>", "<ul>" + "".join(f'<li class="note">{escape(n)}</li>' for n in data.notes)
                  + "</ul>"]
    parts += ["<h2>Method</h2>", METHOD_HTML]
    body = "\n".join(parts)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n<title>{escape(title)}</title>\n'
            f"<style>{STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _window_text(data: ReportData) -> str:
    since = iso(data.window.since) if data.window.since is not None else "the first record"
    return (f"From {since} to {iso(data.window.until)} (UTC); generated {iso(data.generated_at)}; "
            f"usage counted: {data.usage.value} intervals; {len(data.lines)} priced pieces.")


def _summary(data: ReportData) -> str:
    t = data.total
    rows: list[tuple[str, Any]] = [
        ("intervals", t.intervals), ("GPU-hours", t.gpu_hours), ("cost (USD)", t.usd),
        ("energy (kWh, incl. PUE)", t.energy_kwh), ("emissions (kgCO2e)", t.gco2e / 1000.0)]
    if data.embodied:
        rows.append(("embodied (kgCO2e)", None if t.embodied_gco2e is None else t.embodied_gco2e / 1000.0))
    rows += [(f"priced from {source} (USD)", usd) for source, usd in data.usd_by_source.items()]
    if t.unpriced_gpu_hours:
        rows.append(("unpriced GPU-hours", t.unpriced_gpu_hours))
    body = "".join(f"<tr><th>{escape(k)}</th><td class=\"num\">{escape(cell(v))}</td></tr>" for k, v in rows)
    return f"<h2>Summary</h2>\n<table>{body}</table>"


def _img(title: str, png: bytes, level: int = 2) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    return f'<h{level}>{escape(title)}</h{level}>\n<img alt="{escape(title)}" src="data:image/png;base64,{encoded}">'


def _charts_module() -> ModuleType | str:
    """geosched.report.charts, or the note that replaces the charts when matplotlib (the `plots` extra) is not
    installed: the tables of a light install's report stay whole."""
    try:
        # matplotlib takes a third of a second to import: only an HTML report pays for it, not every command.
        from geosched.report import charts
    except ModuleNotFoundError as exc:
        missing = extra_for(exc)
        if missing is None:
            raise
        return f"No charts: {missing}."
    return charts


def _charts(data: ReportData) -> list[str]:
    charts = _charts_module()
    if isinstance(charts, str):
        return [f'<p class="note">{escape(charts)}</p>']
    if not data.lines:
        return ['<p class="note">No usage in this window: nothing to chart.</p>']
    regions = data.groups.get(Grouping.REGION) or []
    span = (max(x.end for x in data.lines) - min(x.start for x in data.lines))
    bucket = DAY_S if span > 3 * DAY_S else 3600.0
    per_region = series(data.lines, lambda x: x.interval.region_key, bucket, lambda x: x.gco2e)
    out = [_img("Cost by region", charts.cost_by_region(regions)),
           _img("Emissions by region over time", charts.emissions_over_time(per_region, bucket))]
    if any(o.usd is not None and o.gco2e is not None for o in data.outcomes):
        out.append(_img("Cost and carbon per placement", charts.cost_vs_carbon(data.outcomes)))
    return out


def _savings(data: ReportData) -> list[str]:
    charts = _charts_module()
    out = ["<h2>Savings against baselines</h2>", SAVINGS_METHOD_HTML]
    if data.snapshot:
        out.append(f'<p class="meta">Snapshot fleet: {escape(data.snapshot)}.</p>')
    if not data.outcomes:
        out.append('<p class="note">No job in this window has a recorded placement: nothing to compare.</p>')
        return out
    if data.savings:
        if not isinstance(charts, str):
            out.append(_img("Baselines against the recorded placements", charts.savings_bars(data.savings), 3))
        out.append(_table([{"baseline": s.label, "jobs": s.jobs, "baseline $": s.baseline_usd,
                            "recorded $": s.reference_usd, "saved $": s.usd_saved,
                            "baseline kgCO2e": s.baseline_gco2e / 1000, "recorded kgCO2e": s.reference_gco2e / 1000,
                            "saved kgCO2e": s.gco2e_saved / 1000} for s in data.savings]))
    out.append("<h3>Per job</h3>")
    out.append(_table([{"job": o.job, "placement": o.label, "policy": o.policy, "cost $": o.usd,
                        "kgCO2e": None if o.gco2e is None else o.gco2e / 1000, "run time x": o.run_ratio,
                        "zones": ", ".join(o.zones),
                        "note": o.note or ""} for o in data.outcomes]))
    return out


def _combined_row(group: Any, by: Grouping, embodied: bool) -> dict[str, Any]:
    merged = {**row(group, by, ReportKind.COST, embodied), **row(group, by, ReportKind.CARBON, embodied)}
    return display_row(merged)


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "<p>Nothing in this window.</p>"
    head = "".join(f"<th>{escape(str(k))}</th>" for k in rows[0])
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{escape(cell(v))}</td>' if isinstance(v, int | float)
                         else f"<td>{escape(cell(v))}</td>" for v in r.values()) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_BASELINE_LIST = ", ".join(f"{b.label} ({b.policy})" for b in BASELINES)
SAVINGS_METHOD_HTML = (
    "<p>Each job with usage in the window is re-placed, as recorded (workers, GPUs per worker, GPU model, pricing), "
    f"by each baseline policy: {escape(_BASELINE_LIST)}, on the snapshot fleet, for the same wall-clock span as "
    "its recorded usage, and costed with the same prices of that time, energy model and grid intensities as the "
    f"rest of this report. <em>{REFERENCE}</em> is the job's recorded placement costed the same way on the "
    "snapshot (or the ledger's own figures when its nodes are not in the snapshot). Saved = baseline minus "
    "recorded, summed over the jobs both could cost; a positive number means the recorded placements were "
    "cheaper or cleaner. Jobs are re-placed one at a time on the snapshot's free GPUs (no contention between "
    "them), and the jobs' zone, region and cluster limits are not recorded with a placement, so a baseline may "
    "use places the job could not.</p>")

METHOD_HTML = (
    "<p><b>Cost</b>: every interval of use is cut at each price change (and UTC midnight); each piece is priced "
    "at the newest <code>price_history</code> observation at or before its start (before the first observation, "
    "the earliest one; with no history for the offering, the shipped catalog's price), for the whole node "
    "(node intervals) or the job's GPUs' share of it (job intervals). The <em>priced from</em> column names "
    "the source.</p>"
    "<p><b>Energy</b> (Cloud Carbon Footprint's method): GPU-hours &times; (idle + u &times; (max &minus; idle)) W "
    "per GPU, plus vCPU-hours &times; (min + 50% &times; (max &minus; min)) W (CCF per-vCPU coefficients per "
    "provider), plus memory GB-hours &times; 0.000392 kWh, all &times; the region's PUE. "
    "<b>Emissions</b> = energy &times; the region's grid intensity (gCO2e/kWh; hour by hour when an hourly series "
    "is given). Sources: Cloud Carbon Footprint (cloudcarbonfootprint.org, methodology and coefficients), "
    "Google's region-carbon-info (GCP grid intensities), CCF's EPA eGRID / EEA / carbonfootprint.com factors "
    "(AWS). The full formulas and constants are in geosched/report/METHODOLOGY.md.</p>")
