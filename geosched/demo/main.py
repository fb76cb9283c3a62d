"""`run_demo`: the stages in order, numbered as they run.

Two stores: the user's (placements only, as `geosched place` would record them) and the demo's own under
<home>/demo/store, rebuilt on every run, which holds what must never mix with real records: the emulated
clouds' gang journal and the assumed usage of the placed jobs.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

from rich.markup import escape

from geosched.console import render
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import Placement
from geosched.demo import costs, provisioning, stages
from geosched.policies import PlacementContext
from geosched.store.db import Store


def demo_dir(home: Path) -> Path:
    return home / "demo"


def fresh_store(path: Path) -> Store:
    """The demo's store, emptied first: the emulators start empty on every run, so must their journal."""
    if path.exists():
        shutil.rmtree(path)
    return Store(path)


def run_demo(home: Path) -> list[Placement]:
    """The demo under `home`/demo: its manifests, report and its own store; the store of `home` is not opened."""
    fleet, network = default_fleet(), default_network()
    out = demo_dir(home)
    stage = itertools.count(1)
    stages.show_fleet(next(stage), fleet)
    stages.show_network(next(stage), network)
    placed = stages.place(next(stage), PlacementContext(fleet, network))
    stages.handoff(next(stage), placed, fleet, out / "manifests")
    with fresh_store(out / "store") as demo_store:
        for p in placed:
            demo_store.record_placement(p)  # the report compares each job's placement with the baselines
        provisioning.run(next(stage), placed, fleet, demo_store)
        stages.replay(next(stage), fleet, network)
        shown = escape(str(demo_store.home))
        render.out.print(f"[bold]{next(stage)}. Recorded[/] {len(placed)} placements in the demo's own store {shown} "
                         f"(`geosched --home {shown} placements`); yours is untouched", markup=True)
        costs.run(next(stage), placed, fleet, demo_store, out / "report.html")
    return placed
