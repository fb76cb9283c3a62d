"""Where scripts/realkube built the control plane's binaries (its `paths` command), or why they are missing."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "realkube"


@dataclass(frozen=True)
class Binaries:
    paths: dict[str, str]

    def __getitem__(self, name: str) -> str:
        return self.paths[name]

    @property
    def kueue_config(self) -> Path:
        return Path(self.paths["kueue-config"])

    @property
    def jobset_config(self) -> Path:
        return Path(self.paths["jobset-config"])

    @property
    def kwok_stages(self) -> Path:
        return Path(self.paths["kwok-stages"])


class Missing(Exception):
    """What is not built, with the last build's log (the exact `go` error) when there was one."""


def find(*, build: bool = False) -> Binaries:
    """The built binaries. With `build`, first `scripts/realkube build`: it builds what is missing, or waits for
    the build already running (scripts/test starts one in the background before the linters)."""
    built = None
    if build:
        built = subprocess.run([sys.executable, str(SCRIPT), "build"], capture_output=True, text=True)
    proc = subprocess.run([sys.executable, str(SCRIPT), "paths"], capture_output=True, text=True, timeout=30)
    if proc.returncode == 0:
        return Binaries(json.loads(proc.stdout))
    if built is not None and built.returncode != 0:
        raise Missing(f"{proc.stderr.strip()}\n{built.stderr.strip()}")
    logs = []
    cache = Path(json.loads(subprocess.run([sys.executable, str(SCRIPT), "cache"], capture_output=True, text=True,
                                           timeout=30).stdout or '""') or ".")
    for log in sorted(cache.glob("build-*.log")):
        lines = log.read_text(errors="replace").splitlines()
        if lines:
            logs.append(f"--- {log} (last lines) ---\n" + "\n".join(lines[-25:]))
    raise Missing("\n".join([proc.stderr.strip(), *logs]))
