"""The picture of one placement decision: the candidates ranked as stacked bars of their weighted terms (chosen
first, marked) beside a zone-level map of the gang and its ring. Pure: builds a Figure, writes nothing
(`geosched.plots.files` does).

Artists that tests and readers look for carry a `gid` (kept as the SVG element's id): `bar-<rank>-<term>` for
each bar segment, `chosen-marker`, `zone-<zone>`, `hop-<a>-<b>` and `bounding-hop`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle

from geosched.core.models import Placement, Weights
from geosched.plots.candidates import TERMS, RankedCandidate
from geosched.plots.files import plain
from geosched.plots.gang import GangMap

COLOURS = {"network": "#3b6ea8", "cost": "#e0a030", "carbon": "#5a9e5a"}
HATCH = {"network": "", "cost": "//", "carbon": ".."}  # readable in grey print too
REGION_COLOURS = ("#cfe0f3", "#f6dcc0", "#d5ecd2", "#eed3ee", "#f3f0c0", "#d9d9d9")
BOUNDING = "#c0392b"


def placement_figure(placement: Placement, candidates: Sequence[RankedCandidate], total: int,
                     gang: GangMap, window: Callable[[Axes], None] | None = None) -> Figure:
    """`window`: draws a flexible job's window (`plots.timing.draw_window`) in a row of its own beneath."""
    height = max(5.0, 0.42 * len(candidates) + 2.0)
    fig = Figure(figsize=(15, height + (5.0 if window is not None else 0.0)), layout="constrained")
    if window is None:
        bars_ax, map_ax = fig.subplots(1, 2, width_ratios=(1.5, 1))
    else:
        grid = fig.add_gridspec(2, 2, width_ratios=(1.5, 1), height_ratios=(height, 5.0))
        bars_ax, map_ax = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
        window(fig.add_subplot(grid[1, :]))
    draw_candidates(bars_ax, candidates, total, placement.weights, placement.policy)
    draw_gang(map_ax, gang)
    job = placement.job
    fig.suptitle(plain(f"{job.name}: {job.workers} x {job.gpus_per_worker} GPUs by {placement.policy} -> "
                       f"{', '.join(placement.zones)} ({placement.cluster or 'no cluster'})"))
    return fig


def draw_candidates(ax: Axes, candidates: Sequence[RankedCandidate], total: int, weights: Weights,
                    policy: str) -> None:
    y = list(range(len(candidates)))
    left = [0.0] * len(candidates)
    factor = {"network": weights.network, "cost": weights.cost, "carbon": weights.carbon}
    for t, term in enumerate(TERMS):
        widths = [c.terms[t] for c in candidates]
        bars = ax.barh(y, widths, left=left, color=COLOURS[term], hatch=HATCH[term], edgecolor="white",
                       label=f"{term} x {factor[term]:g}")
        for c, patch in zip(candidates, bars.patches, strict=True):
            patch.set_gid(f"bar-{c.rank}-{term}")
        left = [a + b for a, b in zip(left, widths, strict=True)]
    span = max(left, default=1.0) or 1.0
    for c, end in zip(candidates, left, strict=True):
        figures = f"{c.total:.3f}  step {c.step_ms:,.0f} ms  ${c.usd_per_hour:,.2f}/h"
        ax.text(end + span * 0.01, c.rank - 1, plain(figures), va="center", fontsize=8)
        if c.chosen:
            ax.barh([c.rank - 1], [end], color="none", edgecolor="black", linewidth=2.0).patches[0].set_gid(
                "chosen-marker")
    ax.set_yticks(y, labels=[plain(("▶ chosen: " if c.chosen else "") + c.label) for c in candidates], fontsize=8)
    for label, c in zip(ax.get_yticklabels(), candidates, strict=True):
        if c.chosen:
            label.set_fontweight("bold")
    ax.invert_yaxis()  # rank 1 on top
    ax.set_xlim(0, span * 1.45)  # room for the figures written after each bar
    ax.set_xlabel("score (weighted terms, lower is better; 1.0 per term = ideal network, median price / carbon)")
    shown = f"{len(candidates)} of {total}" if len(candidates) < total else f"all {total}"
    title = f"Candidates, chosen first, then by total ({shown})"
    # A chosen bar longer than others is the policy's rules at work (zone first within a tolerance, best fit):
    # say so, or the picture reads as a mistake.
    lower = sum(1 for c in candidates if c.total < candidates[0].total) if candidates else 0
    if lower:
        title += f"\n{lower} with a lower total lost by {policy}'s rules: --explain says why"
    ax.set_title(plain(title), fontsize=10)
    # Below the axes, never over a bar or its figures.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=len(TERMS), fontsize=8, title="term x weight",
              title_fontsize=8, frameon=False)
    ax.grid(axis="x", alpha=0.3)


def draw_gang(ax: Axes, gang: GangMap) -> None:
    """Zones on a circle in ring order, sized by workers and coloured by region; hops as lines with their RTT."""
    n = len(gang.zones)
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_xlim(-1.6, 1.6)
    ax.set_ylim(-2.0, 1.6)  # room below the circle for the bounding hop's words
    ax.set_title("The gang by zone: workers, ring hops (RTT p50)", fontsize=10)
    # Top first, clockwise; one zone sits in the middle.
    where = {z.zone: (0.0, 0.0) if n == 1 else (math.sin(2 * math.pi * i / n), math.cos(2 * math.pi * i / n))
             for i, z in enumerate(gang.zones)}
    for hop in gang.hops:
        (xa, ya), (xb, yb) = where[hop.a], where[hop.b]
        line = ax.plot([xa, xb], [ya, yb], color=BOUNDING if hop.bounding else "#777777",
                       linewidth=3.5 if hop.bounding else 1.5, linestyle="-" if hop.bounding else "--", zorder=1)[0]
        line.set_gid("bounding-hop" if hop.bounding else f"hop-{hop.a}-{hop.b}")
        rtt = "RTT ?" if hop.rtt_ms is None else f"{hop.rtt_ms:.3g} ms"
        both = " (both ways)" if n == 2 else ""
        ax.text((xa + xb) / 2, (ya + yb) / 2, plain(rtt + both + (" - bounding" if hop.bounding else "")),
                ha="center", va="center", fontsize=8, color=BOUNDING if hop.bounding else "#333333",
                bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "none", "alpha": 0.85}, zorder=3)
    regions = sorted({(z.provider, z.region) for z in gang.zones})
    fill = {r: REGION_COLOURS[i % len(REGION_COLOURS)] for i, r in enumerate(regions)}
    most = max((z.workers for z in gang.zones), default=1)
    # The largest zone as large as its neighbours on the circle allow; area grows with workers.
    largest = 0.5 if n < 3 else min(0.5, 0.3 * 2 * math.sin(math.pi / n))
    for z in gang.zones:
        radius = largest * (0.5 + 0.5 * math.sqrt(z.workers / most))
        inside = z.zone == gang.bounding_zone
        circle = Circle(where[z.zone], radius, facecolor=fill[(z.provider, z.region)], zorder=2,
                        edgecolor=BOUNDING if inside else "#333333", linewidth=3.0 if inside else 1.0)
        circle.set_gid(f"zone-{z.zone}")
        ax.add_patch(circle)
        ax.text(*where[z.zone], plain(f"{z.zone}\n{z.provider}:{z.region}\n{z.workers} workers, {z.nodes} nodes"),
                ha="center", va="center", fontsize=8, zorder=4)
    ax.text(0, -1.6, plain(gang.bound), ha="center", va="top", fontsize=8,
            color=BOUNDING if gang.bounding_zone or any(h.bounding for h in gang.hops) else "#333333")
