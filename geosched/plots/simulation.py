"""The picture of a trace replay, readable when policies overlap. Pure: builds a Figure, writes nothing.

- JCT CDF per policy on a log axis (hours), and the CDF of each job's bounded slowdown: its JCT over its run
  time alone (the trace's duration: no queue, the ideal link), that time taken as at least 10 s; 1 = no loss.
- Policies differ by line style and marker as well as colour, so identical curves stay distinguishable
  (their markers are staggered along the line) and the picture survives grey print.
- One legend for both CDFs, outside the data; cost and emissions per policy as bars beneath.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from geosched.plots.files import plain
from geosched.simulate.metrics import JobRecord, PolicyResult

LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
HATCHES = ("", "//", "..", "xx", "\\\\", "oo", "--")
MARKS_PER_LINE = 8
BOUND_S = 10.0  # the usual bound of bounded slowdown, seconds


@dataclass(frozen=True, slots=True)
class Style:
    linestyle: str | tuple[int, tuple[int, ...]]
    marker: str
    hatch: str


def style(i: int) -> Style:
    """The i-th policy's style; line style and marker each cycle, so their pair stays distinct for 49 policies."""
    return Style(LINESTYLES[i % len(LINESTYLES)], MARKERS[(i + i // len(MARKERS)) % len(MARKERS)],
                 HATCHES[i % len(HATCHES)])


def job_slowdown(record: JobRecord) -> float:
    """Bounded slowdown (Feitelson et al.): JCT / max(the job's run time alone, BOUND_S), at least 1. The run time
    alone is its trace duration (`run_s / slowdown`: no queue, the ideal link); the bound keeps a job of seconds
    that queued for an hour from reading as a slowdown of thousands."""
    alone = record.run_s / record.slowdown if record.slowdown > 0 else record.run_s
    return max(record.jct_s / max(alone, BOUND_S), 1.0)


def simulation_figure(results: Sequence[PolicyResult], title: str = "",
                      replay: Callable[[Axes, Axes], None] | None = None) -> Figure:
    """`replay`: draws the grid over the replay and the flexible jobs' starts (`plots.timing.draw_replay`) in two
    rows of their own beneath."""
    fig = Figure(figsize=(13, 8.5 + (7.0 if replay is not None else 0.0)), layout="constrained")
    grid = fig.add_gridspec(4 if replay is not None else 2, 2, height_ratios=(3, 2, 2.2, 2.2)[:4 if replay else 2])
    if replay is not None:
        replay(fig.add_subplot(grid[2, :]), fig.add_subplot(grid[3, :]))
    jct_ax, slow_ax = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    cost_ax, carbon_ax = fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[1, 1])
    for i, r in enumerate(results):
        _cdf(jct_ax, [rec.jct_s / 3600 for rec in r.records], r.policy, i, len(results))
        _cdf(slow_ax, [job_slowdown(rec) for rec in r.records], r.policy, i, len(results))
    jct_ax.set_xlabel("job completion time (h, log scale)")
    jct_ax.set_title("JCT: submit to finish")
    slow_ax.set_xlabel("bounded slowdown (JCT / max(run time alone, 10 s), log scale; 1 = no queue, ideal links)")
    slow_ax.set_title("Slowdown per job")
    for ax in (jct_ax, slow_ax):
        ax.set_xscale("log")
        ax.set_ylabel("fraction of jobs (CDF)")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3, which="both")
    handles, labels = jct_ax.get_legend_handles_labels()
    if handles:
        # Beside the CDFs, clear of the data and of the figure's title.
        fig.legend(handles, labels, loc="outside right center", title="policy")
    names = [r.policy for r in results]
    _bars(cost_ax, names, [r.cost_usd for r in results], "cost (USD)", "Cost of the replay")
    _bars(carbon_ax, names, [r.kgco2e for r in results], "emissions (kgCO2e)", "Emissions of the replay")
    if title:
        fig.suptitle(plain(textwrap.fill(title, 110)))
    return fig


def _cdf(ax: Axes, values: Sequence[float], policy: str, i: int, count: int) -> None:
    data = np.sort(np.asarray(values, dtype=float))
    if not data.size:
        return
    y = np.arange(1, data.size + 1) / data.size
    s = style(i)
    # Markers evenly spaced along the line (a fraction of the axes' diagonal), each policy's shifted: identical
    # curves still show every policy's markers.
    step = 1.0 / MARKS_PER_LINE
    ax.step(data, y, where="post", label=plain(policy), linestyle=s.linestyle, marker=s.marker, markersize=5,
            markevery=(step * i / max(count, 1), step), linewidth=1.6, color=f"C{i}")


def _bars(ax: Axes, names: Sequence[str], values: Sequence[float], unit: str, title: str) -> None:
    x = np.arange(len(names))
    for i, (xi, v) in enumerate(zip(x, values, strict=True)):
        ax.bar([xi], [v], color=f"C{i}", hatch=style(i).hatch, edgecolor="white")
    ax.set_xticks(x, labels=[plain(n) for n in names], rotation=20, ha="right")
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
