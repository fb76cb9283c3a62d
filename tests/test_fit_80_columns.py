"""What a user sees on an 80-column terminal fits it, and nothing in it is cut (issue 23 item 8).

Before: `place --explain`'s candidates table was 140-152 columns wide, the demo's attempts table 171 with the GCE
error cut at "Try a different zone,", its cost and baseline tables 92 and 91, `simulate`'s title split the trace's
path, and `--help` cut variable names to `GEOSCHED_NETWORK_…`. Each command runs as a user runs it: its own process,
COLUMNS=80 (rich and click read it as the terminal's width). `-o wide` still has every column, `-o json` every key.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from geosched.cli import clidoc
from geosched.cli.main import app
from geosched.console import lists as kinds
from geosched.simulate import shipped
from tests.test_cli import JOBS

WIDTH = 80
# The GCE error the demo's emulated zone answers with: the message Compute Engine sends for
# ZONE_RESOURCE_POOL_EXHAUSTED (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-resource-
# availability), the project and zone filled in as the emulator (emulators/geosched_emulators/gce.py) fills them.
GCE_ERROR = ("The zone 'projects/geosched-demo/zones/us-central1-a' does not have enough resources available to "
             "fulfill the request. Try a different zone, or try again later.")


def geosched(*args: str | Path, home: Path) -> str:
    env = {**os.environ, "GEOSCHED_HOME": str(home), "COLUMNS": str(WIDTH)}
    run = subprocess.run([sys.executable, "-m", "geosched", *map(str, args)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> str:
    return geosched("demo", home=tmp_path_factory.mktemp("home"))


def test_the_demo_fits(demo: str) -> None:
    assert not too_wide(demo), too_wide(demo)
    assert "attempts for gang-" in demo and "cost and carbon by job" in demo and "against baselines" in demo


def test_the_demos_attempts_table_wraps_the_gce_error_whole(demo: str) -> None:
    lines = demo.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("seq ") and line.rstrip().endswith("why"))
    at = lines[head].index("why")
    # The first attempt's `why` cells, until the second attempt's row: the message wrapped in its column.
    rows = []
    for line in lines[head + 2:]:
        if re.match(r"\s*2\s", line):
            break
        rows.append(line[at:].strip())
    # Wrapped at words, or folded inside one (the zone's path is longer than the column): whole either way.
    assert "".join(rows).replace(" ", "") == GCE_ERROR.replace(" ", ""), rows
    assert rows[-1].endswith("try again later.")


@pytest.mark.parametrize("job", ["train-8.yaml", "train-64.yaml", "train-512.yaml"])
def test_explain_fits_and_wide_and_json_keep_everything(job: str, tmp_path: Path) -> None:
    explained = geosched("place", JOBS / job, "--explain", "--limit", "0", home=tmp_path)
    assert "candidates (chosen first)" in explained
    assert not too_wide(explained), too_wide(explained)
    wide = geosched("place", JOBS / job, "-o", "wide", "--limit", "0", home=tmp_path)
    doc = json.loads(geosched("place", JOBS / job, "-o", "json", home=tmp_path))
    assert "comm" in wide.split() and "comm" not in explained.split()  # a wide-only column's heading
    hops = [f"{h['from']}->{h['to']}" for c in (doc, *doc["alternatives"]) if (h := c["score"]["bounding_hop"])]
    assert set(hops) <= set(wide.split()) and not set(hops) & set(explained.split())
    assert {c.key for c in kinds.CANDIDATES} - {"zones", "cluster", "bounding_hop"} <= set(doc["score"])


def test_simulate_keeps_the_traces_path_on_one_line(tmp_path: Path) -> None:
    text = geosched("simulate", "--trace", "seed0_b436b2", home=tmp_path)
    assert not too_wide(text), too_wide(text)
    path = str(shipped.resolve("seed0_b436b2"))
    assert len(path) < WIDTH and any(path in line for line in text.splitlines()), text[:400]


@pytest.mark.parametrize("path", [p for p, _, _ in clidoc.commands()])
def test_help_cuts_no_variable_name_or_summary(path: str) -> None:
    result = CliRunner().invoke(app, [*path.split()[1:], "--help"], env={"COLUMNS": str(WIDTH), "TERM": "dumb"},
                                terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    assert not too_wide(result.output), too_wide(result.output)
    assert "…" not in result.output
    words = set(result.output.replace(";", " ").replace("]", " ").split())
    # Every variable the help names, named whole (typer's panels cut them to the column's width).
    command = typer.main.get_command(app)
    for name in path.split()[1:]:
        command = command.commands[name]  # type: ignore[attr-defined]
    shown = [p.envvar for p in command.params if getattr(p, "show_envvar", False) and isinstance(p.envvar, str)]
    for name in shown:
        assert name in words, (path, name)
    # A group's commands, each summary whole (click cuts them to the width with `...`).
    assert not [line for line in result.output.splitlines()[1:] if line.rstrip().endswith("...")], result.output
