"""An RTT heatmap (PNG) of node pairs, grouped by zone. Writes one file; draws nothing on screen."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from geosched.models import Node
from geosched.writes import write_file

TICKS_MS = (0.1, 0.3, 1, 3, 10, 30, 100, 300, 1000)


def write_rtt_heatmap(path: Path, nodes: Sequence[Node], matrix: Sequence[Sequence[float | None]]) -> Path:
    if not nodes:
        raise ValueError("no nodes to draw")
    values = np.array([[math.nan if v is None else v for v in row] for row in matrix], dtype=float)
    size = max(4.0, min(24.0, 0.35 * len(nodes) + 2))
    # A bare Figure on the Agg canvas: no pyplot state, no display, no global backend switch.
    fig = Figure(figsize=(size + 1.5, size))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    # Log colours: a 0.3 ms rack and a 150 ms ocean must both stay readable.
    image = ax.imshow(np.ma.masked_invalid(np.log10(np.clip(values, 0.01, None))), cmap="viridis",
                      interpolation="nearest")
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    finite = values[np.isfinite(values)]
    if finite.size:
        ticks = [t for t in TICKS_MS if finite.min() / 3 <= t <= finite.max() * 3]
        bar.set_ticks([math.log10(t) for t in ticks], labels=[f"{t:g}" for t in ticks])
    bar.set_label("RTT p50 (ms)")
    labels = [n.name for n in nodes]
    ax.set_xticks(range(len(labels)), labels=labels, rotation=90, fontsize=7)
    ax.set_yticks(range(len(labels)), labels=labels, fontsize=7)
    for i in range(1, len(nodes)):
        if nodes[i].zone != nodes[i - 1].zone:
            ax.axhline(i - 0.5, color="white", linewidth=1)
            ax.axvline(i - 0.5, color="white", linewidth=1)
    ax.set_title("RTT between nodes, grouped by zone (blank: unknown)")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    write_file(path, buf.getvalue())  # whole or not at all: a reader never sees half a PNG
    return path
