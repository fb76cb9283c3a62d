"""A carbon signal from a CSV file, for `--carbon`: `region,hour,gco2e_per_kwh` with region as provider:region.

A row with an empty hour sets the region's mean; rows with hours 0..N-1 (each once) make its hourly series,
which the report reads at (whole hours since the Unix epoch) mod N, so 24 rows are a profile by UTC hour of day.
"""

from __future__ import annotations

import math

from geosched.errors import InputError
from geosched.gate import CsvRows
from geosched.models import CarbonSignal

COLUMNS = ("region", "hour", "gco2e_per_kwh")


def parse_signal(text: str, source: str) -> CarbonSignal:
    reader = CsvRows(text, source)
    header = [c.strip() for c in next(reader, [])]
    if set(COLUMNS) - set(header):
        raise InputError(source, "line 1", f"expected the columns {', '.join(COLUMNS)}")
    means: dict[str, float] = {}
    hours: dict[str, dict[int, float]] = {}
    for cells in reader:
        if not cells:
            continue
        where = f"line {reader.line_num}"
        row = dict(zip(header, cells, strict=False))
        region = (row.get("region") or "").strip()
        if ":" not in region:
            raise InputError(source, where, f"region must be provider:region, got {region!r}")
        try:
            value = float(row.get("gco2e_per_kwh") or "")
        except ValueError:
            raise InputError(source, where, f"gco2e_per_kwh must be a number, got {row.get('gco2e_per_kwh')!r:.60}"
                             ) from None
        if not math.isfinite(value) or value < 0:
            raise InputError(source, where, f"gco2e_per_kwh must be a finite number >= 0, got {value:g}")
        hour_text = (row.get("hour") or "").strip()
        if not hour_text:
            means[region] = value
            continue
        if not (hour_text.isascii() and hour_text.isdigit() and len(hour_text) <= 6):
            raise InputError(source, where, f"hour must be an integer from 0 to 999999, got {hour_text!r:.60}")
        series = hours.setdefault(region, {})
        if int(hour_text) in series:
            raise InputError(source, where, f"hour {hour_text} of {region} given twice")
        series[int(hour_text)] = value
    hourly: dict[str, tuple[float, ...]] = {}
    for region, series in hours.items():
        if sorted(series) != list(range(len(series))):
            raise InputError(source, region, f"hours must run 0..{len(series) - 1} without gaps")
        hourly[region] = tuple(series[h] for h in range(len(series)))
    return CarbonSignal(intensity=means, hourly=hourly)
