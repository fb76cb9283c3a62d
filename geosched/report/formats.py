"""Report rows as JSON and Markdown text (CSV: geosched.files.csvtext, the one CSV writer). Pure: text out,
nothing written.

CSV and JSON keep full precision and grams; the table and Markdown are for people (kgCO2e, rounded).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from geosched.files.decl.reports import CarbonRow, CostRow, EmbodiedCarbonRow
from geosched.report.aggregate import Group, Grouping, ReportKind
from geosched.report.baseline import Savings


def row(group: Group, by: Grouping, kind: ReportKind, embodied: bool) -> dict[str, Any]:
    """One machine-readable row (CSV, Markdown, the tables), as the report document holds it."""
    return row_doc(group, by, kind, embodied).dump()


def row_doc(group: Group, by: Grouping, kind: ReportKind, embodied: bool) -> CostRow | CarbonRow:
    """One row of a CostReport or CarbonReport; the column set depends on the kind of report."""
    key = {by.value: group.key}
    if kind is ReportKind.COST:
        return CostRow.build(**key, intervals=group.intervals, gpu_hours=group.gpu_hours, cost_usd=group.usd,
                             usd_per_gpu_hour=group.usd_per_gpu_hour, priced_from=group.priced_from_label,
                             unpriced_gpu_hours=group.unpriced_gpu_hours)
    carbon = {"energy_kwh": group.energy_kwh, "gco2e": group.gco2e, "gco2e_per_kwh": group.gco2e_per_kwh,
              "uncounted_kwh": group.uncounted_kwh}
    if embodied:
        return EmbodiedCarbonRow.build(**key, intervals=group.intervals, gpu_hours=group.gpu_hours, **carbon,
                                       embodied_gco2e=group.embodied_gco2e)
    return CarbonRow.build(**key, intervals=group.intervals, gpu_hours=group.gpu_hours, **carbon)


def display_row(data: Mapping[str, Any]) -> dict[str, Any]:
    """The same row for people: kgCO2e instead of grams, short column names."""
    names = {"gpu_hours": "GPU-h", "cost_usd": "cost $", "usd_per_gpu_hour": "$/GPU-h", "priced_from": "priced from",
             "unpriced_gpu_hours": "unpriced GPU-h", "energy_kwh": "kWh", "gco2e_per_kwh": "gCO2e/kWh",
             "uncounted_kwh": "kWh w/o intensity"}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("gco2e", "embodied_gco2e"):
            out["kgCO2e" if key == "gco2e" else "embodied kgCO2e"] = None if value is None else value / 1000.0
        else:
            out[names.get(key, key)] = value
    return out


def savings_rows(savings: Sequence[Savings], kind: ReportKind | None = None) -> list[dict[str, Any]]:
    """The baselines for people, as the table shows them (JSON carries the same in `baselines.savings`): a cost
    report shows dollars, a carbon report kgCO2e, the demo (`kind` None) both, without the jobs and recorded
    columns (the same on every row; its caption says them: `recorded_caption`) so that it fits 80 columns; `run x`
    is the largest run-time ratio a baseline was charged for, and `at equal run` the saving without it."""
    rows = []
    for s in savings:
        out: dict[str, Any] = {"baseline": s.label}
        if kind is not None:
            out["jobs"] = s.jobs
        if kind is not ReportKind.CARBON:
            out.update({"baseline $": s.baseline_usd, "saved $": s.usd_saved} if kind is None else
                       {"baseline $": s.baseline_usd, "recorded $": s.reference_usd, "saved $": s.usd_saved})
        if kind is not ReportKind.COST:
            out.update({"baseline kgCO2e": s.baseline_gco2e / 1000, "saved kgCO2e": s.gco2e_saved / 1000}
                       if kind is None else
                       {"baseline kgCO2e": s.baseline_gco2e / 1000, "recorded kgCO2e": s.reference_gco2e / 1000,
                        "saved kgCO2e": s.gco2e_saved / 1000})
        out["run x"] = s.run_ratio
        if kind is ReportKind.CARBON:
            out["saved kgCO2e at equal run"] = s.gco2e_saved_at_equal_run_time / 1000
        else:
            out["saved $ at equal run"] = s.usd_saved_at_equal_run_time
        rows.append(out)
    return rows


def recorded_caption(savings: Sequence[Savings]) -> str | None:
    """What the recorded jobs cost and emitted, against which every baseline row is compared (the demo's caption
    for the columns `savings_rows` leaves out)."""
    if not savings:
        return None
    s = savings[0]
    return f"{s.jobs} jobs; recorded ${s.reference_usd:,.2f}, {s.reference_gco2e / 1000:,.1f} kgCO2e"


def to_json(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2) + "\n"


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) >= 1 or value == 0 else f"{value:.4g}"
    return str(value)


def md_table(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return "_nothing in this window_\n"
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(_md_escape(cell(r[k])) for k in head) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def to_markdown(title: str, meta: Sequence[str], rows: Sequence[Mapping[str, Any]], notes: Sequence[str]) -> str:
    parts = [f"# {_md_escape(title)}", "", *(f"- {_md_escape(m)}" for m in meta), "",
             md_table([display_row(r) for r in rows])]
    if notes:
        parts += ["## Notes", "", *(f"- {_md_escape(n)}" for n in notes), ""]
    return "\n".join(parts)


def _md_escape(text: str) -> str:
    # Names come from the store (node, job and cluster names): keep them from breaking the table or the markup.
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("*", "\\*").replace("_", "\\_")

