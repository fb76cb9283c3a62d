"""The job traces shipped with geosched, named by their file name with or without its suffix, so
`simulate --trace seed0_b436b2` or `simulate --trace acme-kalos` needs no path into the installed package:
Gavel's Philly-derived traces in `geosched/data/gavel` (`.trace`) and public traces of multi-node jobs in
`geosched/data/traces` (`.csv`, the plain CSV reader's format). Provenance in each folder's SOURCES.md."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

FOLDERS = (("gavel", ".trace"), ("traces", ".csv"))


def _files() -> dict[str, Path]:
    # The package is installed as files (a wheel unpacked, or the source tree): its folders are real paths.
    out: dict[str, Path] = {}
    for folder, suffix in FOLDERS:
        for p in Path(str(resources.files("geosched.data").joinpath(folder))).iterdir():
            if p.name.endswith(suffix):
                out[p.name.removesuffix(suffix)] = p
    return out


def names() -> list[str]:
    """The shipped traces' names, without their suffix."""
    return sorted(_files())


def resolve(name: str) -> Path | None:
    """The shipped file a bare name (`seed0_b436b2`, `seed0_b436b2.trace`, `acme-kalos`, `acme-kalos.csv`) names;
    None for any other text."""
    files = _files()
    for _, suffix in FOLDERS:
        found = files.get(name.removesuffix(suffix))
        if found is not None and (name == found.stem or name == found.name):
            return found
    return None
