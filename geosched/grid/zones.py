"""Which cloud regions each grid zone powers: the shipped map (`geosched/data/grid_zones.csv`, Electricity Maps' own
data-centre table) and a user's own map in the same CSV shape (`provider,region,zone`). Pure but for reading the
shipped file through `importlib.resources`.

The shipped rows are Electricity Maps' `config/data_centers/data_centers.json` (electricitymaps/electricitymaps-contrib
at b354f28a), the table its API resolves `dataCenterProvider` + `dataCenterRegion` with, for AWS and GCP. Where other
sources place a region elsewhere (GCP us-central1, Council Bluffs, is in MidAmerican Energy's MISO territory but the
table says US-CENT-SWPP; AWS us-west-2 and GCP us-west1 sit in Bonneville's balancing area but the table says
US-NW-PACW) the shipped map follows the table, and a user's map overrides it row by row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from geosched.core.errors import InputError
from geosched.core.models import region_key
from geosched.files.gate import CsvRows

SHIPPED = "grid_zones.csv"
COLUMNS = ("provider", "region", "zone")


@dataclass(frozen=True)
class ZoneMap:
    """Region key (`provider:region`) -> grid zone, and where each row came from."""

    zone_of: Mapping[str, str]
    source: str

    def regions_of(self, zone: str) -> tuple[str, ...]:
        return tuple(sorted(r for r, z in self.zone_of.items() if z == zone))

    def over(self, base: ZoneMap) -> ZoneMap:
        """This map's rows over `base`'s."""
        return ZoneMap({**base.zone_of, **self.zone_of}, f"{self.source} over {base.source}")


def parse_zone_map(text: str, source: str) -> ZoneMap:
    rows = CsvRows(text, source)
    header = [c.strip() for c in next(rows, [])]
    if tuple(header[:3]) != COLUMNS:
        raise InputError(source, "line 1", f"expected the columns {','.join(COLUMNS)}, got {','.join(header)[:120]}")
    out: dict[str, str] = {}
    for cells in rows:
        if not cells or cells == [""]:
            continue
        where = f"line {rows.line_num}"
        provider, region, zone = (c.strip() for c in ([*cells, "", "", ""])[:3])
        if not (provider and region and zone):
            raise InputError(source, where, "provider, region and zone must all be given")
        key = region_key(provider, region)
        if key in out:
            raise InputError(source, where, f"{key} is mapped twice")
        out[key] = zone
    return ZoneMap(out, source)


@cache
def shipped_zone_map() -> ZoneMap:
    text = resources.files("geosched.data").joinpath(SHIPPED).read_text(encoding="utf-8")
    return parse_zone_map(text, f"geosched/data/{SHIPPED}")
