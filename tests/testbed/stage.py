"""Build and configure the C delay/loss/rate stage (see stage.c for the packet path)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from .model import Link
from .netns import TestbedError, run_checked

STAGE_SOURCE = Path(__file__).with_name("stage.c")
MAX_STAGE_ZONES = 64


def compile_stage(workdir: Path) -> Path:
    """Compile stage.c into workdir (about 0.3 s); a fresh binary per testbed keeps
    cleanup trivial and avoids races between concurrent testbeds."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise TestbedError("no C compiler found (apt-get install gcc)")
    out = workdir / "stage"
    run_checked([cc, "-O2", "-Wall", "-o", str(out), str(STAGE_SOURCE)], timeout=120)
    return out


def stage_config(
    *,
    seed: int,
    host_zones: Mapping[str, int],
    links: Mapping[tuple[int, int], Link],
) -> str:
    lines = [f"seed {seed}"]
    for address, zone in host_zones.items():
        if not 0 <= zone < MAX_STAGE_ZONES:
            raise TestbedError(f"zone index {zone} out of range")
        lines.append(f"host {address} {zone}")
    for (za, zb), link in links.items():
        rate = 0.0 if link.rate_mbit is None else link.rate_mbit
        lines.append(f"link {za} {zb} {link.delay_ms!r} {link.loss!r} {rate!r} {link.queue_ms!r}")
    return "\n".join(lines) + "\n"


def parse_stats(text: str) -> dict[str, dict[str, int]]:
    """Stats file -> {"global": {...}, "<za>-><zb>": {...}} keyed by zone index."""
    result: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "global":
            key, fields = "global", parts[1:]
        elif parts[0] == "link" and len(parts) >= 3:
            key, fields = f"{parts[1]}->{parts[2]}", parts[3:]
        else:
            continue
        result[key] = {k: int(v) for k, v in (f.split("=", 1) for f in fields)}
    return result
