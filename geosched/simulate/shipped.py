"""The job traces shipped in `geosched/data/gavel` (Gavel's Philly-derived traces, provenance in SOURCES.md
there), named by their file name with or without `.trace`, so `simulate --trace seed0_b436b2` needs no path
into the installed package."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

SUFFIX = ".trace"


def _folder() -> Path:
    # The package is installed as files (a wheel unpacked, or the source tree): its folder is a real path.
    return Path(str(resources.files("geosched.data").joinpath("gavel")))


def names() -> list[str]:
    """The shipped traces' names, without `.trace`."""
    return sorted(p.name.removesuffix(SUFFIX) for p in _folder().iterdir() if p.name.endswith(SUFFIX))


def resolve(name: str) -> Path | None:
    """The shipped file a bare name (`seed0_b436b2` or `seed0_b436b2.trace`) names; None for any other text."""
    stem = name.removesuffix(SUFFIX)
    return _folder() / f"{stem}{SUFFIX}" if stem in names() else None
