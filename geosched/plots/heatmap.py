"""An RTT heatmap of a `LinkGrid` (node or zone scope). Pure: builds a Figure, writes nothing
(`geosched.plots.files` does); matplotlib is imported only by whoever asks for a heatmap.

Colours are log-scaled (a 0.3 ms rack and a 150 ms ocean both stay readable); each cell also carries its value
written out (and its loss where there is any) while the grid is small enough to read them; labels name the node
or zone on both axes, zone scope with its region; white lines separate the groups (zones, or regions).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from geosched.plots.files import plain
from geosched.plots.grid import LinkGrid

TICKS_MS = (0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000)
WRITTEN_CELLS = 48  # rows up to which every cell carries its value (a 40-zone fleet still does)


def heatmap_figure(grid: LinkGrid) -> Figure:
    n = len(grid.labels)
    if not n:
        raise ValueError("no nodes to draw")
    values = np.array([[math.nan if v is None else v for v in row] for row in grid.rtt_ms], dtype=float)
    size = max(5.0, min(20.0, (0.45 if grid.scope == "zone" else 0.35) * n + 3))
    fig = Figure(figsize=(size + 2.5, size), layout="constrained")
    ax = fig.add_subplot()
    logs = np.log10(np.clip(values, 0.01, None))
    image = ax.imshow(np.ma.masked_invalid(logs), cmap="viridis", interpolation="nearest")
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    finite = values[np.isfinite(values)]
    if finite.size:
        ticks = [t for t in TICKS_MS if finite.min() / 3 <= t <= finite.max() * 3]
        bar.set_ticks([math.log10(t) for t in ticks], labels=[f"{t:g}" for t in ticks])
    bar.set_label("RTT p50 (ms, log scale)")
    labels = [plain(x) for x in grid.labels]
    font = 8 if n <= WRITTEN_CELLS else 6
    ax.set_xticks(range(n), labels=labels, rotation=90, fontsize=font)
    ax.set_yticks(range(n), labels=labels, fontsize=font)
    ax.set_xlabel("zone (provider:region)" if grid.scope == "zone" else "node")
    ax.set_ylabel("zone (provider:region)" if grid.scope == "zone" else "node")
    for i in range(1, n):
        if grid.groups[i] != grid.groups[i - 1]:
            ax.axhline(i - 0.5, color="white", linewidth=2)
            ax.axvline(i - 0.5, color="white", linewidth=2)
    if n <= WRITTEN_CELLS:
        _write_cells(ax, grid, logs)
    ax.set_title(plain(grid.title + " (blank: unknown)"), fontsize=10)
    return fig


def _write_cells(ax: Axes, grid: LinkGrid, logs: npt.NDArray[np.float64]) -> None:
    known = logs[np.isfinite(logs)]
    low, span = (float(known.min()), float(np.ptp(known)) or 1.0) if known.size else (0.0, 1.0)
    for i, row in enumerate(grid.rtt_ms):
        for j, rtt in enumerate(row):
            if rtt is None:
                continue
            loss = grid.loss[i][j]
            text = f"{rtt:.3g}" + (f"\n{loss:.1%} loss" if loss else "")
            # Dark text on the light (slow, yellow) end of viridis, light text on the dark end.
            light = (float(logs[i, j]) - low) / span > 0.6
            ax.text(j, i, text, ha="center", va="center", fontsize=7,
                    color="black" if light else "white").set_gid(f"cell-{i}-{j}")
