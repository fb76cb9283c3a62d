"""Hangs and blow-ups (issue 19, item 7): inputs that made a command wait or grow out of proportion to what it
was given. Each ends quickly: refused in one line before any work, or done in time proportional to its size.
(`--load nan`, `--jobs 100000000` and `--min-gpus`: tests/inputs/test_edge_values.py.)"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from geosched.simulate.traces import read_trace
from tests.inputs.inputs_support import ROOT, in_process

TRACES = ROOT / "tests" / "data" / "traces"


# --- proxy_jump loops -----------------------------------------------------------------------------

def test_a_proxy_jump_loop_is_refused_before_anything_dials(tmp_path: Path) -> None:
    """Before: each node's connection waited on the other's until the run's deadline (the audit: half of it)."""
    # The shape of tests/data/good/inventory.yaml: GPU nodes reached through an inventory bastion by name.
    inventory = tmp_path / "loop.yaml"
    inventory.write_text("""
regions: [{provider: onprem, name: zurich, grid_gco2e_per_kwh: 30, pue: 1.25}]
nodes:
  - {name: hpc-a1, address: 198.18.0.11, zone: zrh-a, region: zurich, proxy_jump: hpc-b1, gpu: A100, gpus: 8}
  - {name: hpc-b1, address: 198.18.0.12, zone: zrh-b, region: zurich, proxy_jump: hpc-a1, gpu: A100, gpus: 8}
""")
    started = time.monotonic()
    run = in_process(["probe", "run", "--inventory", inventory, "--deadline", "20", "--connect-timeout", "2"],
                     tmp_path)
    assert run.one_line_error, (run.code, run.stderr[-2000:])
    assert "loop.yaml: nodes[0].proxy_jump: proxy_jump chain loops: hpc-a1 -> hpc-b1 -> hpc-a1" in run.stderr
    assert time.monotonic() - started < 10


def test_a_loop_across_two_kept_inventories_is_refused_before_anything_dials(tmp_path: Path) -> None:
    """Each file passes alone (`ops@jump.zrh` is a node in one and an outside host in the other); merged into
    the store's targets they loop. Before: `probe run` without --inventory dialled and waited until the deadline."""
    from geosched.files.inventory import parse_inventory
    from geosched.store.db import Store

    # The shape of tests/data/good/inventory.yaml, split over two sites' files as `provision` keeps them.
    region = {"provider": "onprem", "name": "zurich", "grid_gco2e_per_kwh": 30, "pue": 1.25}
    first = {"regions": [region], "nodes": [
        {"name": "ops@jump.zrh", "address": "198.18.0.10", "zone": "zrh-a", "region": "zurich",
         "proxy_jump": "hpc-b1"},
        {"name": "hpc-b1", "address": "198.18.0.12", "zone": "zrh-b", "region": "zurich"}]}
    second = {"regions": [region], "nodes": [
        {"name": "hpc-b1", "address": "198.18.0.12", "zone": "zrh-b", "region": "zurich", "proxy_jump": "ops@jump.zrh",
         "gpu": "A100", "gpus": 8}]}
    with Store(tmp_path) as store:
        store.save_inventory(parse_inventory(first, "a-site.yaml"))
        store.save_inventory(parse_inventory(second, "b-site.yaml"))
    started = time.monotonic()
    run = in_process(["probe", "run", "--deadline", "20", "--connect-timeout", "2"], tmp_path)
    assert run.one_line_error, (run.code, run.stderr[-2000:])
    assert run.stderr == ("error: a-site.yaml: nodes[0].proxy_jump: proxy_jump chain loops: ops@jump.zrh -> hpc-b1 "
                          "-> ops@jump.zrh\n")
    assert time.monotonic() - started < 10


# --- trace reading is linear ----------------------------------------------------------------------

def _rows(sample: str, count: int) -> str:
    """`count` rows cycled from a shipped sample file's rows (its header, if any, kept once)."""
    lines = (TRACES / sample).read_text().splitlines()
    header, rows = (lines[:1], lines[1:]) if sample.endswith(".csv") else ([], lines)
    return "\n".join([*header, *(rows[i % len(rows)] for i in range(count))]) + "\n"


def _philly(count: int) -> str:
    jobs = json.loads((TRACES / "philly.json").read_text())
    return json.dumps([jobs[i % len(jobs)] | {"jobid": f"job-{i}"} for i in range(count)], indent=2)


# The shapes `simulate --trace` accepts, each from the shipped samples in tests/data/traces (real rows of
# Gavel's traces, Alibaba's openb_pod_list, Philly's cluster_job_log, and the plain CSV).
SHAPES: dict[str, Callable[[int], str]] = {
    "gavel": lambda n: _rows("gavel.trace", n),
    "alibaba": lambda n: _rows("alibaba.csv", n),
    "csv": lambda n: _rows("plain.csv", n),
    "philly": _philly,
}


@pytest.mark.parametrize("fmt", SHAPES)
def test_reading_a_trace_takes_time_proportional_to_its_rows(tmp_path: Path, fmt: str) -> None:
    def seconds(count: int) -> float:
        path = tmp_path / f"{fmt}-{count}"
        path.write_text(SHAPES[fmt](count))
        best = float("inf")
        gc.disable()  # a collection in one run and not the other is noise, not growth
        try:
            for _ in range(2):
                started = time.perf_counter()
                read = read_trace(path, strict=False)
                best = min(best, time.perf_counter() - started)
        finally:
            gc.enable()
        assert read.format == fmt and not read.errors
        return best

    small, large = seconds(5_000), seconds(50_000)
    # Ten times the rows: about ten times the time when linear, a hundred when quadratic.
    assert large < 25 * small, (small, large)
