"""Pictures of time shifting (issue 24 item 5). Pure: they draw on Axes they are given, write nothing.

- `draw_window`: one flexible job's decision: the predicted grid intensity of each candidate region over the job's
  window (the hours a decision looked at), the run as chosen (a band on its region's line) and the run had it
  started now (a hatched band), the decision time and the latest start as vertical lines. gids: `intensity-<region>`,
  `chosen-run`, `now-run`, `latest-start`.
- `draw_replay`: a replay with flexible jobs: the measured intensity of each region over the replay (top) and the
  GPU-hours of flexible jobs started in each hour, per run (bottom), so it shows where in time each run put them.
  gids: `grid-<region>`, `starts-<run>`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes

from geosched.core.models import HOUR_S, Placement
from geosched.plots.files import plain
from geosched.plots.simulation import style
from geosched.policies.timeshift import Shift
from geosched.simulate.metrics import PolicyResult

MAX_REGIONS = 8


def draw_window(ax: Axes, shift: Shift, region_keys: Sequence[str], usable: Collection[str] | None = None) -> None:
    """`region_keys`: the rows of the shift's outlook; `usable`: the regions the job could be placed in (all)."""
    look = shift.outlook
    hours = (np.arange(look.hours) + look.first_hour) * HOUR_S
    rel = (hours - shift.window.now) / HOUR_S
    chosen = shift.placement.regions if isinstance(shift.placement, Placement) else ()
    now_regions = shift.start_now.regions if isinstance(shift.start_now, Placement) else ()
    shown = [r for r in region_keys if r in chosen or r in now_regions]
    # The other regions by their best mean over the window, greenest first, up to MAX_REGIONS in all.
    best = shift.means.min(axis=0)
    others = [region_keys[i] for i in np.argsort(best, kind="stable")
              if region_keys[i] not in shown and (usable is None or region_keys[i] in usable)]
    shown += others[:MAX_REGIONS - len(shown)]
    for i, key in enumerate(shown):
        r = list(region_keys).index(key)
        s = style(i)
        ax.step(rel, look.values[r], where="post", color=f"C{i}", linestyle=s.linestyle, linewidth=1.5,
                label=plain(f"{key} ({look.sources[r]})"), gid=f"intensity-{key}")
    run_h = shift.window.runtime_s / HOUR_S
    start_h = (shift.start - shift.window.now) / HOUR_S
    top = float(look.values.max()) if look.values.size else 1.0
    if chosen:
        ax.axvspan(start_h, start_h + run_h, color="#5a9e5a", alpha=0.25, gid="chosen-run",
                   label=plain(f"run as chosen in {', '.join(chosen)}"))
    if now_regions:
        ax.axvspan(0, run_h, facecolor="none", edgecolor="#888888", hatch="//", gid="now-run",
                   label=plain(f"run had it started now in {', '.join(now_regions)}"))
    latest_h = (shift.window.latest - shift.window.now) / HOUR_S
    ax.axvline(latest_h, color="#c0392b", linestyle="--", gid="latest-start", label="latest start")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlim(0, max(latest_h + run_h, 1.0))
    ax.set_ylim(0, top * 1.1)
    ax.set_xlabel("hours after the decision (UTC hours of the grid's series)")
    ax.set_ylabel(f"predicted gCO2e/kWh ({shift.outlook.method.value})")
    ax.set_title("Grid over the job's window, per candidate region")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")


def draw_replay(grid_ax: Axes, starts_ax: Axes, results: Sequence[PolicyResult],
                measured: Mapping[str, tuple[np.ndarray, np.ndarray]], origin: float) -> None:
    """`measured`: region -> (epoch hours, gCO2e/kWh) over the replay; `origin`: Unix time of trace time 0."""
    for i, (key, (hours, values)) in enumerate(sorted(measured.items())[:MAX_REGIONS]):
        rel = hours * HOUR_S / HOUR_S - origin / HOUR_S
        grid_ax.step(rel, values, where="post", color=f"C{i}", linestyle=style(i).linestyle, linewidth=1.2,
                     label=plain(key), gid=f"grid-{key}")
    grid_ax.set_ylabel("measured gCO2e/kWh")
    grid_ax.set_title("Grid per region over the replay")
    grid_ax.grid(alpha=0.3)
    grid_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    for i, r in enumerate(results):
        flex = [rec for rec in r.records if rec.flexible]
        if not flex:
            continue
        hour = np.array([int(rec.start_s // HOUR_S) for rec in flex])
        gpu_h = np.array([rec.gpus * rec.run_s / HOUR_S for rec in flex])
        span = np.arange(hour.min(), hour.max() + 2)
        per_hour = np.bincount(hour - span[0], weights=gpu_h, minlength=span.size)
        s = style(i)
        starts_ax.step(span, per_hour, where="post", color=f"C{i}", linestyle=s.linestyle, linewidth=1.4,
                       label=plain(r.policy), gid=f"starts-{r.policy}")
    starts_ax.set_xlabel("hours after the replay's start")
    starts_ax.set_ylabel("GPU-hours of flexible jobs started")
    starts_ax.set_title("Where each run put the flexible jobs in time")
    starts_ax.grid(alpha=0.3)
    if starts_ax.get_legend_handles_labels()[0]:
        starts_ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    starts_ax.sharex(grid_ax)
