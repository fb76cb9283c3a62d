"""The real hourly series geosched ships (`geosched/data/carbon/`, Electricity Maps data-portal exports of 2023 as
downloaded, xz-compressed; provenance and licence in geosched/data/SOURCES.md), read by the same parser as a user's
file. For the demo, the benchmarks and the tests; a user's decisions use the files they pass."""

from __future__ import annotations

import lzma
from functools import cache
from importlib import resources

from geosched.grid.formats import Basis, ZoneSeries, electricity_maps_csv

FOLDER = "carbon"
SUFFIX = "_2023_hourly.csv.xz"


def shipped_zones() -> tuple[str, ...]:
    folder = resources.files("geosched.data").joinpath(FOLDER)
    return tuple(sorted(p.name.removesuffix(SUFFIX) for p in folder.iterdir() if p.name.endswith(SUFFIX)))


@cache
def shipped_text(zone: str) -> str:
    """The export's exact text (its line endings too)."""
    data = resources.files("geosched.data").joinpath(FOLDER, f"{zone}{SUFFIX}").read_bytes()
    return lzma.decompress(data).decode("utf-8")


@cache
def shipped_series(zone: str, basis: Basis = Basis.LIFECYCLE) -> ZoneSeries:
    (series,) = electricity_maps_csv(shipped_text(zone), f"geosched/data/{FOLDER}/{zone}{SUFFIX}", basis)
    return series
