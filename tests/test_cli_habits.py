"""Habits people bring from kubectl and SkyPilot (issue 14): -h, global options after the verb, completion,
credentials checked before anything is asked or launched, honest exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from geosched.cli.main import hoist_global_options
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


# --- issue 23, item 9: policies described, policy names completed, `place -`, shipped traces by name -----------

def test_policies_says_what_each_policy_does(tmp_path: Path) -> None:
    # Before: `geosched policies` listed bare names (cheapest, greenest, karmada, ...) and `default`.
    doc = json.loads(geosched("policies", "-o", "json", home=tmp_path).stdout)
    described = {item["name"]: item["description"] for item in doc["items"]}
    assert set(described) >= {"zone-first", "spread", "pack", "cheapest", "greenest", "karmada", "tas", "random"}
    assert all(text and "\n" not in text and len(text) <= 100 for text in described.values()), described
    assert len(set(described.values())) == len(described)  # each says something of its own
    table = geosched("policies", home=tmp_path).stdout
    assert described["zone-first"] in table


def _complete(*words: str, tmp_path: Path) -> list[str]:
    """What bash completion offers after `words` (click's protocol: COMP_WORDS and COMP_CWORD)."""
    env = {**os.environ, "GEOSCHED_HOME": str(tmp_path), "_GEOSCHED_COMPLETE": "complete_bash",
           "COMP_WORDS": " ".join(("geosched", *words)), "COMP_CWORD": str(len(words))}
    run = subprocess.run([sys.executable, "-m", "geosched"], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    return run.stdout.split()


def test_completion_offers_policy_names(tmp_path: Path) -> None:
    # Before: --policy completed to nothing (bash fell back to file names).
    from geosched import policies

    assert _complete("place", "--policy", "", tmp_path=tmp_path) == policies.names()
    assert _complete("simulate", "--policy", "zo", tmp_path=tmp_path) == ["zone-first"]


def _place_stdin(text: str | bytes, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GEOSCHED_HOME": str(tmp_path), "COLUMNS": "200"}
    data = text.encode() if isinstance(text, str) else text
    return subprocess.run([sys.executable, "-m", "geosched", "place", "-", "-o", "json", *extra],
                          capture_output=True, input=data, env=env, timeout=120)


def test_place_reads_the_job_from_stdin(tmp_path: Path) -> None:
    # Before: `place -` said "-: no such file".
    from_file = json.loads(geosched("place", JOBS / "train-8.yaml", "-o", "json", home=tmp_path).stdout)
    run = _place_stdin((JOBS / "train-8.yaml").read_text(), tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == from_file


def test_place_stdin_errors_are_one_line_naming_stdin(tmp_path: Path) -> None:
    bad = _place_stdin("name: [unclosed\n", tmp_path)
    assert bad.returncode == 2 and bad.stderr.decode().count("\n") == 1
    assert bad.stderr.decode().startswith("error: <stdin>") and "not valid YAML" in bad.stderr.decode()
    # Bounded like a file: 1 MiB over the job limit set to 1 MiB is refused before it is parsed.
    big = subprocess.run([sys.executable, "-m", "geosched", "place", "-"], capture_output=True, timeout=120,
                         input=b"# " + b"x" * (2 * 1024 * 1024) + b"\n",
                         env={**os.environ, "GEOSCHED_HOME": str(tmp_path), "GEOSCHED_INPUT_LIMITS": "job=1"})
    err = big.stderr.decode()
    assert big.returncode == 2 and err.count("\n") == 1 and err.startswith("error: <stdin>") and "limit" in err, err
    latin = _place_stdin(b"name: caf\xe9\n", tmp_path)
    assert latin.returncode == 2 and latin.stderr.decode().startswith("error: <stdin>: not UTF-8")


def test_simulate_names_a_shipped_trace(tmp_path: Path) -> None:
    # Before: `--trace seed0_b436b2` was "no such file": the shipped traces could only be named by their path
    # inside the installed package.
    by_name = geosched("simulate", "--trace", "seed0_b436b2", "-o", "json", home=tmp_path)
    assert by_name.returncode == 0, by_name.stderr
    assert json.loads(by_name.stdout)["trace"].endswith("seed0_b436b2.trace")
    unknown = geosched("simulate", "--trace", "seed0_nope", home=tmp_path)
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert "seed0_b436b2" in unknown.stderr and "seed0_103959" in unknown.stderr
    assert "seed0_b436b2" in geosched("simulate", "-h", home=tmp_path).stdout


@pytest.mark.parametrize("trace", ["t" * 5000, "traces/" + "t" * 5000])
def test_a_trace_name_the_os_refuses_is_one_line(trace: str, tmp_path: Path) -> None:
    # Before: Path.exists() raised ENAMETOOLONG (it swallows only "no such file" errors): an OSError traceback.
    run = geosched("simulate", "--trace", trace, home=tmp_path)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and run.stderr.startswith("error: "), run.stderr[-500:]
