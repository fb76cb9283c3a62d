"""What the CLI calls: build one picture from the library's values and write it (`files.write_figure`).
The only module here that combines a figure with a file; the figures themselves are built by pure functions.
Imported by the commands only when a picture is asked for (it brings in matplotlib)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from geosched.core.models import Fleet, NetworkView, Node, Placement
from geosched.plots.candidates import ranked
from geosched.plots.files import write_figure
from geosched.plots.gang import gang_map
from geosched.plots.grid import node_grid, zone_grid
from geosched.plots.heatmap import heatmap_figure
from geosched.plots.placement import placement_figure
from geosched.plots.simulation import simulation_figure
from geosched.plots.timing import draw_replay, draw_window
from geosched.policies.timeshift import Shift
from geosched.simulate.metrics import PolicyResult


def placement_plot(path: Path, placement: Placement, fleet: Fleet, network: NetworkView, *,
                   option: str = "--plot", shift: Shift | None = None) -> Path:
    """With `shift` (a flexible job's decision), the grid over its window and where the run was put, beneath."""
    candidates, total = ranked(placement)
    gang = gang_map(placement, fleet, network)
    # The regions the job could use: those of the candidates the policy considered, chosen first.
    zones = [*placement.zones, *(z for c in placement.alternatives for z in c.zones)]
    usable = {fleet.zones[z].region_key for z in zones}
    window = (lambda ax: draw_window(ax, shift, sorted(fleet.regions), usable)) if shift is not None else None
    fig = placement_figure(placement, candidates, total, gang, window)
    more = [] if len(candidates) >= total else [f"{len(candidates)} of {total} candidates shown (-o json lists all)"]
    return write_figure(path, fig, option, f"geosched place: {placement.job.name}", notes=[gang.bound, *more])


def simulation_plot(path: Path, results: Sequence[PolicyResult], title: str, *, option: str = "--plot",
                    measured: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None, origin: float = 0.0) -> Path:
    """With `measured` (region -> epoch hours, gCO2e/kWh) and flexible jobs in the results, the grid over the
    replay and where each run put the flexible jobs in time, beneath."""
    shifted = measured is not None and any(rec.flexible for r in results for rec in r.records)
    replay = (lambda grid_ax, starts_ax: draw_replay(grid_ax, starts_ax, results, measured or {}, origin)) \
        if shifted else None
    return write_figure(path, simulation_figure(results, title, replay), option, f"geosched simulate: {title}")


def heatmap_plot(path: Path, view: NetworkView, nodes: Sequence[Node], scope: str, *,
                 option: str = "--heatmap") -> Path:
    """The view's RTT heatmap at node or zone scope (`geosched.plots.grid`)."""
    grid = zone_grid(view, nodes) if scope == "zone" else node_grid(view, nodes)
    return write_figure(path, heatmap_figure(grid), option, f"geosched probe show: {grid.title}")
