"""Habits people bring from kubectl and SkyPilot (issue 14): -h, global options after the verb, completion,
credentials checked before anything is asked or launched, honest exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from geosched.cli import hoist_global_options
from tests.test_cli import JOBS, geosched


def test_h_is_help_everywhere(tmp_path: Path) -> None:
    for args in (["-h"], ["place", "-h"], ["gitops", "render", "-h"], ["probe", "run", "-h"]):
        run = geosched(*args, home=tmp_path)
        assert run.returncode == 0 and "Usage:" in run.stdout, (args, run.stderr)


def test_completion_is_offered(tmp_path: Path) -> None:
    run = geosched("--help", home=tmp_path)
    assert "--install-completion" in run.stdout and "--show-completion" in run.stdout


def test_home_after_the_verb(tmp_path: Path) -> None:
    home = tmp_path / "elsewhere"
    run = geosched("place", JOBS / "train-8.yaml", "--record", "--home", str(home), "-o", "json", home=tmp_path)
    assert run.returncode == 0, run.stderr
    listed = geosched("placements", f"--home={home}", "-o", "json", home=tmp_path)
    assert [r["job"] for r in json.loads(listed.stdout)["items"]] == ["finetune-8"]
    assert not (tmp_path / "geosched.db").exists()  # GEOSCHED_HOME was not used


def test_hoist_moves_only_global_options_after_the_verb() -> None:
    assert hoist_global_options(["place", "j.yaml", "--home", "H", "-o", "json"]) == \
        ["--home", "H", "place", "j.yaml", "-o", "json"]
    assert hoist_global_options(["--home", "H", "place"]) == ["--home", "H", "place"]
    assert hoist_global_options(["x", "--", "--home", "H"]) == ["x", "--", "--home", "H"]


def _no_cloud(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_", "CLOUDSDK_"))}
    env.update({"GEOSCHED_HOME": str(tmp_path / "home"), "HOME": str(tmp_path), "COLUMNS": "200",
                "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                "AWS_EC2_METADATA_DISABLED": "true", "GEOSCHED_ADMIN_CIDRS": "198.51.100.0/24",
                "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "no-such-credentials.json")})
    return env


def test_provision_without_credentials_exits_4_before_asking(tmp_path: Path) -> None:
    # Before: it asked to confirm, then printed 96 auth failures and exited 3 (no fit).
    run = subprocess.run([sys.executable, "-m", "geosched", "provision", "--gpu", "A100:8", "--nodes", "2"],
                         capture_output=True, text=True, env=_no_cloud(tmp_path), timeout=120, input="")
    assert run.returncode == 4, run.stderr
    assert run.stderr.strip().splitlines()[-1] == "error: no credentials for aws, gcp: run `geosched check`"
    assert "Launch" not in run.stdout  # no prompt
    dry = subprocess.run([sys.executable, "-m", "geosched", "provision", "--gpu", "A100:8", "--nodes", "2",
                          "--dry-run"], capture_output=True, text=True, env=_no_cloud(tmp_path), timeout=120)
    assert dry.returncode == 0, dry.stderr  # a plan needs no credentials


def test_sweep_that_could_not_look_is_not_a_clean_sweep(tmp_path: Path) -> None:
    # Before: exit 0, "nothing to show", when no provider could be read.
    run = subprocess.run([sys.executable, "-m", "geosched", "sweep", "--provider", "gcp"], capture_output=True,
                         text=True, env=_no_cloud(tmp_path), timeout=120)
    assert run.returncode == 1 and "describe failed" in run.stderr


def test_catalog_refresh_without_credentials_exits_4_in_one_line(tmp_path: Path) -> None:
    # Issue 23 item 9: it printed `NoCredentialsError: AWS credentials unavailable: NoCredentialsError`, exit 1,
    # where docs/exit-codes.md says 4 for missing credentials.
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GEOSCHED_", "GOOGLE_"))}
    env = {**clean, "HOME": str(tmp_path), "GEOSCHED_HOME": str(tmp_path / "home"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_CONFIG_FILE": str(tmp_path / "none"),
           "AWS_EC2_METADATA_DISABLED": "true"}
    run = subprocess.run([sys.executable, "-m", "geosched", "catalog", "refresh", "--provider", "aws",
                          "--region", "us-east-1"], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 4, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "aws" in lines[0] and "geosched check" in lines[0], run.stderr
    assert lines[0].count("NoCredentialsError") <= 1 and "Traceback" not in run.stderr
