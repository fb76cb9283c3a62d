"""The HTML report's charts as PNG bytes (matplotlib, Agg canvas). Pure: figures in memory, bytes out.

Figures are built with `Figure` and an Agg canvas, not pyplot, so no global state or GUI backend is touched
and the report can run inside another program's process.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from geosched.report.aggregate import Group
from geosched.report.baseline import REFERENCE, Outcome, Savings

DPI = 100
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def cost_by_region(groups: Sequence[Group]) -> bytes:
    shown = list(groups)[:25]
    fig = Figure(figsize=(9, max(2.5, 0.35 * len(shown) + 1.2)), layout="constrained")
    ax = fig.add_subplot()
    names = [g.key for g in shown][::-1]
    ax.barh(names, [g.usd for g in shown][::-1], color="#3b6ea8")
    ax.set_xlabel("cost (USD)")
    ax.set_title("Cost by region")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def emissions_over_time(per_region: Mapping[str, Mapping[float, float]], bucket_s: float) -> bytes:
    """Stacked bars: kgCO2e per time bucket (day or hour, UTC), one colour per region."""
    fig = Figure(figsize=(9, 4.5), layout="constrained")
    ax = fig.add_subplot()
    buckets = sorted({b for series in per_region.values() for b in series})
    x = list(range(len(buckets)))
    bottom = [0.0] * len(buckets)
    for region in sorted(per_region, key=lambda r: -sum(per_region[r].values())):
        values = [per_region[region].get(b, 0.0) / 1000.0 for b in buckets]
        ax.bar(x, values, width=0.8, bottom=bottom, label=region)
        bottom = [a + b for a, b in zip(bottom, values, strict=True)]
    daily = bucket_s >= 86400
    fmt = "%Y-%m-%d" if daily else "%m-%d %H:00"
    # At most ~12 labels, so a month of days or a week of hours stays readable.
    step = max(1, len(buckets) // 12)
    ax.set_xticks(x[::step], [datetime.fromtimestamp(b, UTC).strftime(fmt) for b in buckets][::step],
                  rotation=30, ha="right")
    ax.set_ylabel("kgCO2e per " + ("day" if daily else "hour"))
    ax.set_title("Emissions by region over time (UTC)")
    ax.grid(axis="y", alpha=0.3)
    if per_region:
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _png(fig)


def cost_vs_carbon(outcomes: Sequence[Outcome]) -> bytes:
    """One point per job and placement: the recorded one and each baseline's."""
    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ax = fig.add_subplot()
    labels = [REFERENCE, *sorted({o.label for o in outcomes} - {REFERENCE})]
    for marker, label in zip(MARKERS * 3, labels, strict=False):
        points = [o for o in outcomes if o.label == label and o.usd is not None and o.gco2e is not None]
        if not points:
            continue
        ax.scatter([o.usd or 0.0 for o in points], [(o.gco2e or 0.0) / 1000.0 for o in points], marker=marker,
                   s=60 if label == REFERENCE else 36, label=label, alpha=0.85)
        if label == REFERENCE and len(points) <= 20:
            for o in points:
                _annotate(ax, o.job, o.usd or 0.0, (o.gco2e or 0.0) / 1000.0)
    shown = [o for o in outcomes if o.usd and o.gco2e]
    # Jobs of 8 and of 512 GPUs differ by orders of magnitude: log axes keep the small ones visible.
    if shown and max(o.usd or 0.0 for o in shown) > 100 * min(o.usd or 0.0 for o in shown):
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("cost (USD)")
    ax.set_ylabel("emissions (kgCO2e)")
    ax.set_title("Cost and carbon per placement")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return _png(fig)


def _annotate(ax: Axes, text: str, x: float, y: float) -> None:
    ax.annotate(text, (x, y), textcoords="offset points", xytext=(5, 5), fontsize="small")


def savings_bars(rows: Sequence[Savings]) -> bytes:
    """Per baseline: what it would have cost and emitted next to what the recorded placements did."""
    fig = Figure(figsize=(9, 4), layout="constrained")
    cost_ax, carbon_ax = fig.subplots(1, 2)
    x = list(range(len(rows)))
    names = [r.label for r in rows]
    for ax, base, ref, unit in ((cost_ax, [r.baseline_usd for r in rows], [r.reference_usd for r in rows], "USD"),
                                (carbon_ax, [r.baseline_gco2e / 1000 for r in rows],
                                 [r.reference_gco2e / 1000 for r in rows], "kgCO2e")):
        ax.bar([i - 0.2 for i in x], base, 0.4, label="baseline")
        ax.bar([i + 0.2 for i in x], ref, 0.4, label="recorded")
        ax.set_xticks(x, names)
        ax.set_ylabel(unit)
        ax.grid(axis="y", alpha=0.3)
    cost_ax.set_title("Cost: baseline vs recorded")
    carbon_ax.set_title("Emissions: baseline vs recorded")
    cost_ax.legend(fontsize="small", loc="lower left")
    return _png(fig)
