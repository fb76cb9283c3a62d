"""Headless Chromium (the Debian package `chromium`) for the tests of geosched's HTML: the report, the plots."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def need_chromium() -> str:
    if CHROMIUM:
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail("chromium is missing; CI must install the Debian package chromium")
    pytest.skip("chromium is not installed (apt-get install chromium); set CI=1 to make this a failure")


def chromium(binary: str, tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{name}"
    return subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=180, check=False)
