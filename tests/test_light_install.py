"""The light install (issue 23 item 7): `pip install geosched` places, simulates, renders GitOps trees and reports
with no cloud SDK, and a command that needs an extra says which one in one line, exit 1, no traceback.

Here the extras' modules are hidden from the import system of the CLI's own process (what an install without them
sees: `import boto3` raises ModuleNotFoundError), so every command of the core is run against the real code in
seconds. scripts/smoke proves the same with the built wheel installed alone into an empty venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from geosched.core.extras import EXTRA_OF_MODULE

ROOT = Path(__file__).parent.parent
DATA = ROOT / "geosched" / "data"

# Runs the CLI as the console script does, with the named top-level modules unimportable.
HIDDEN_CLI = """
import sys
hidden = set(sys.argv[1].split(","))

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Hide())
sys.argv = ["geosched", *sys.argv[2:]]
from geosched.cli.main import main
main()
"""

EVERY_EXTRA = sorted(EXTRA_OF_MODULE)


def geosched(tmp_path: Path, *args: str, hidden: list[str] = EVERY_EXTRA,
             cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GEOSCHED_HOME": str(tmp_path / "home"), "COLUMNS": "200",
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, "-c", HIDDEN_CLI, ",".join(hidden), *args], capture_output=True,
                          text=True, env=env, cwd=cwd or tmp_path, timeout=300)


def test_the_core_commands_run_without_any_extra(tmp_path: Path) -> None:
    placed = geosched(tmp_path, "place", str(DATA / "jobs" / "train-64.yaml"), "--record")
    assert placed.returncode == 0, placed.stderr
    assert "score" in placed.stdout
    simulated = geosched(tmp_path, "simulate", "--trace", str(DATA / "gavel" / "seed0_2869ce.trace"),
                         "--policy", "zone-first", "--policy", "spread", "-o", "csv")
    assert simulated.returncode == 0, simulated.stderr
    assert len(simulated.stdout.splitlines()) >= 3
    listed = geosched(tmp_path, "catalog", "--gpu", "H100:8", "-o", "csv")
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) > 1, listed.stderr
    reported = geosched(tmp_path, "report", "cost", "-o", "json")
    assert reported.returncode == 0, reported.stderr


def test_gitops_render_and_check_run_without_any_extra(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "examples" / "gitops", repo)
    args = ("--jobs", "jobs", "--snapshot", "snapshot", "--clusters", "clusters.yaml", "--config", "gitops.yaml",
            "--out", ".")
    rendered = geosched(tmp_path, "gitops", "render", *args, cwd=repo)
    assert rendered.returncode == 0, rendered.stderr
    checked = geosched(tmp_path, "gitops", "check", *args, cwd=repo)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_html_report_without_plots_keeps_its_tables_and_says_why_no_chart(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    done = geosched(tmp_path, "report", "cost", "-o", "html", "--out", str(page))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert "<h2>Summary</h2>" in text
    assert "No charts: matplotlib is not installed; it comes with the &#x27;plots&#x27; extra" in text


def _probe_inventory(tmp_path: Path) -> Path:
    # The inventory shape of tests/probes/probe_support.py (write_inventory); addresses from 198.18.0.0/15, never
    # reached: the command stops at the missing SSH library.
    path = tmp_path / "inventory.yaml"
    path.write_text("regions: [{provider: onprem, name: lab, grid_gco2e_per_kwh: 50, pue: 1.2}]\nnodes:\n"
                    + "".join(f"- {{name: {n}, address: 198.18.0.{i}, port: 22, user: root, key: {tmp_path}/key, "
                              f"zone: lab-a, region: lab, provider: onprem}}\n" for i, n in enumerate("ab", 1)))
    return path


COMMANDS = {
    "aws": ("catalog", "refresh", "--provider", "aws"),
    "gcp": ("catalog", "refresh", "--provider", "gcp"),
    "kubernetes": ("jobs",),
    "plots": ("place", str(DATA / "jobs" / "train-8.yaml"), "--plot", "placement.png"),
    "probes": ("probe", "run", "--inventory", "{inventory}"),
}


@pytest.mark.parametrize("extra", sorted(COMMANDS))
def test_a_command_whose_extra_is_absent_names_it_in_one_line(extra: str, tmp_path: Path) -> None:
    args = [a.replace("{inventory}", str(_probe_inventory(tmp_path))) for a in COMMANDS[extra]]
    # Only this extra's modules are hidden: the message must name it, not another one that is absent too.
    hidden = [m for m, e in EXTRA_OF_MODULE.items() if e == extra]
    done = geosched(tmp_path, *args, hidden=hidden)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith("error: ") and lines[0].endswith(f"pip install 'geosched[{extra}]'"), lines


def test_check_says_per_provider_which_extra_to_install(tmp_path: Path) -> None:
    done = geosched(tmp_path, "check", "-o", "json")
    assert done.returncode == 1, done.stderr
    assert "pip install 'geosched[aws]'" in done.stdout and "pip install 'geosched[gcp]'" in done.stdout
    assert "Traceback" not in done.stderr


def test_a_missing_module_of_no_extra_is_not_dressed_up_as_one(tmp_path: Path) -> None:
    # A broken install (yaml gone) is a bug to report with its traceback, not an extra to install.
    done = geosched(tmp_path, "place", str(DATA / "jobs" / "train-8.yaml"), hidden=["yaml"])
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr and "pip install" not in done.stderr
