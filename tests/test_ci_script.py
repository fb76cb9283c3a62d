"""scripts/test, the README's test command and CI's entry point, run whole in a sandbox whose tools are stand-ins.

Stop 27's CI ran 2,020 tests green and still failed: the script's EXIT trap killed a smoke test that had already
ended, and under `set -e` that failing `kill` replaced the script's exit status with 1. The script's own control
flow (background jobs, waits, the trap) is what is tested here, so every tool it calls is a stand-in that ends at
once with the status the test chooses.
"""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _sandbox(tmp_path: Path, pytest_status: int, smoke_status: int = 0) -> Path:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "test", tmp_path / "scripts" / "test")
    _tool(tmp_path / "scripts" / "setup", "exit 0")
    _tool(tmp_path / "scripts" / "smoke", f"echo smoke-ran; exit {smoke_status}")
    # Run as `python3 scripts/realkube build`: a Python file.
    (tmp_path / "scripts" / "realkube").write_text("print('build-ran')\n")
    for name in ("ruff", "mypy", "lint-imports"):
        _tool(tmp_path / ".venv" / "bin" / name, "exit 0")
    # .venv/bin/python runs pytest: it records its arguments and ends with the chosen status.
    _tool(tmp_path / ".venv" / "bin" / "python", f'echo "pytest-args: $*"; exit {pytest_status}')
    return tmp_path


def _run(root: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    return subprocess.run(["bash", str(root / "scripts" / "test"), "-q"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_green_run_exits_zero_although_the_smoke_test_ended_long_before(tmp_path: Path) -> None:
    done = _run(_sandbox(tmp_path, pytest_status=0))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "smoke-ran" in done.stdout
    # The README's arguments reach pytest after the script's own; the slowest tests are listed in every CI log.
    args = next(line for line in done.stdout.splitlines() if line.startswith("pytest-args: ")).split()[1:]
    assert args[:2] == ["-m", "pytest"] and args[2].startswith("--basetemp=") and args[3:] == ["--durations=30", "-q"]


@pytest.mark.parametrize("status", [1, 5])
def test_a_failing_pytest_fails_the_run_with_its_status(tmp_path: Path, status: int) -> None:
    done = _run(_sandbox(tmp_path, pytest_status=status))
    assert done.returncode == status, done.stdout + done.stderr


def test_a_failing_smoke_test_fails_the_run_before_pytest(tmp_path: Path) -> None:
    done = _run(_sandbox(tmp_path, pytest_status=0, smoke_status=3))
    assert done.returncode == 1
    assert "scripts/smoke failed" in done.stderr and "pytest-args" not in done.stdout


def test_the_temporary_files_are_removed(tmp_path: Path) -> None:
    done = _run(_sandbox(tmp_path, pytest_status=0))
    basetemp = next(a.split("=", 1)[1] for a in done.stdout.split() if a.startswith("--basetemp="))
    assert not Path(basetemp).exists()
