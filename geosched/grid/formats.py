"""Grid carbon intensity files exactly as users download them, read into hourly series per grid zone. Pure: text in,
`ZoneSeries` out; one line naming the file, the line (or JSON path) and the reason for anything wrong.

Shapes read (each cited where it is encoded):

- **Electricity Maps data-portal CSV** (app.electricitymaps.com/datasets, "hourly"), both header generations seen
  in real exports: 2021-2023 downloads (`Datetime (UTC),Country,Zone Name,Zone Id,Carbon Intensity gCO₂eq/kWh
  (direct),Carbon Intensity gCO₂eq/kWh (LCA),Low Carbon Percentage,Renewable Percentage,Data Source,Data
  Estimated,Data Estimation Method`; e.g. umassos/decarbonization-potential `downloaded_carbon_data/`,
  jasonm-jones/grid-carbon-intensity `data/hourly/`) and 2024+ downloads (`... Zone name,Zone id,Carbon intensity
  gCO₂eq/kWh (direct),Carbon intensity gCO₂eq/kWh (Life cycle),Carbon-free energy percentage (CFE%),Renewable
  energy percentage (RE%),Data source,Data estimated,Data estimation method`; e.g. rbostandoust/GreenSys26-DAG
  `CarbonTrace/US-CAL-CISO-2024.csv`). Times are `2023-01-01 00:00:00` in UTC (the header says so).
- **Electricity Maps API v3 JSON**: `carbon-intensity/history` (`{"zone", "history": [{"zone", "carbonIntensity",
  "datetime", "updatedAt", "createdAt", "emissionFactorType", "isEstimated", "estimationMethod"}]}`),
  `carbon-intensity/past-range` (the same entries under `data`) and `carbon-intensity/forecast` (`{"zone",
  "forecast": [{"carbonIntensity", "datetime"}], "updatedAt"}`): docs.electricitymaps.com and the Green Software
  Foundation carbon-aware-sdk's client models (`CarbonAware.DataSources.ElectricityMaps/src/Model/`).
  `carbonIntensity` may be null (a missing hour). `emissionFactorType` absent means the API's documented default,
  lifecycle.
- **WattTime API v3** `/v3/historical` and `/v3/forecast`: `{"data": [{"point_time", "value"}], "meta": {"region",
  "signal_type", "units", "data_point_period_seconds", "generated_at"}}` (docs.watttime.org; carbon-aware-sdk
  `CarbonAware.DataSources.WattTime/src/Model/`). Points are 5-minute; an hour's value is the mean of its points.
  `co2_moer` is a *marginal* rate (basis `marginal`), `co2_aoer` an average operating one (basis `direct`);
  `lbs_co2_per_mwh` x 0.45359237 = gCO2/kWh.

The basis (direct, life-cycle or marginal) is the caller's explicit choice; a file that gives another basis is an
error, never converted. Several points in one UTC hour are averaged; the same instant twice is an error (a file in
local time repeats an hour when daylight saving ends: export in UTC). Gaps are kept as gaps: `ZoneSeries.gaps`
says how many hours between the first and the last are missing, for the caller to label.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from geosched.core.errors import InputError
from geosched.core.models import HOUR_S
from geosched.files.fields import MAX_NUMBER, describe, utc_instant
from geosched.files.gate import CsvRows, parse_json

LBS_PER_MWH_TO_G_PER_KWH = 0.45359237
MAX_POINTS = 2_000_000  # ~ 228 years of hours, or 19 years of 5-minute points: a bound on memory, not a rule
# The longest a series may run from its first hour to its last. The forecaster and the time shifting hold a
# series as one array over that span (grid/forecast.py `Dense`), gaps included: three rows 7,000 years apart
# made a 500 MB array per region (attack2, 2026-12-07). Far beyond any download: Electricity Maps' hourly data
# start in 2021, WattTime's history and EIA's hourly grid monitor in the late 2010s.
MAX_SPAN_YEARS = 20
MAX_SPAN_H = MAX_SPAN_YEARS * 8784


def check_span(hours: Mapping[int, float], source: str, where: str) -> None:
    """Refuse a series whose first and last hours lie more than MAX_SPAN_YEARS apart (before it is made dense)."""
    if hours and max(hours) - min(hours) >= MAX_SPAN_H:
        raise InputError(source, where, f"the series runs from {hour_text(min(hours))} to {hour_text(max(hours))}: "
                         f"at most {MAX_SPAN_YEARS} years of hours are read (a time far from the rest?)")


class Basis(StrEnum):
    """What a gCO2e/kWh figure counts: combustion only (`direct`, Electricity Maps' "direct", WattTime's AOER),
    combustion plus the plants' life cycle (`lifecycle`, Electricity Maps' "LCA"/"Life cycle", its API default), or
    the marginal plant's rate (`marginal`, WattTime's MOER)."""

    LIFECYCLE = "lifecycle"
    DIRECT = "direct"
    MARGINAL = "marginal"


class SeriesKind(StrEnum):
    HISTORY = "history"
    FORECAST = "forecast"


@dataclass(frozen=True)
class ZoneSeries:
    """One grid zone's hourly intensity (gCO2e/kWh) keyed by whole UTC hours since the Unix epoch."""

    zone: str
    source: str
    basis: Basis
    hours: Mapping[int, float]
    kind: SeriesKind = SeriesKind.HISTORY
    estimated: int = 0
    issued_hour: int | None = None
    """A forecast's issue time (`updatedAt`, `generated_at`), as an epoch hour."""
    empty: int = 0
    """Points the file lists without a value (a null or empty intensity): gaps the provider left."""

    @property
    def first(self) -> int:
        return min(self.hours)

    @property
    def last(self) -> int:
        return max(self.hours)

    @property
    def gaps(self) -> int:
        return self.last - self.first + 1 - len(self.hours) if self.hours else 0

    def first_gap(self) -> int | None:
        for hour in range(self.first, self.last + 1):
            if hour not in self.hours:
                return hour
        return None


def hour_text(hour: int) -> str:
    return f"{datetime.fromtimestamp(hour * HOUR_S, UTC):%Y-%m-%dT%H:00Z}"


def parse_grid_file(text: str, source: str, basis: Basis) -> list[ZoneSeries]:
    """Any of the shapes in the module docstring, told apart by their content; [] for geosched's own CSV (the
    caller reads that one), so the caller can dispatch on the answer."""
    head = text.lstrip("\ufeff \t\r\n")[:1]
    if head in ("{", "["):
        return _json(parse_json(text.lstrip("\ufeff"), source), source, basis)
    header = [_norm(c) for c in next(CsvRows(text.lstrip("\ufeff"), source), [])]
    if EM_TIME in header:
        return electricity_maps_csv(text.lstrip("\ufeff"), source, basis)
    return []


# --- Electricity Maps data-portal CSV -----------------------------------------------------------------------------

EM_TIME = "datetime (utc)"
EM_ZONE = ("zone id",)
EM_ESTIMATED = "data estimated"
EM_METHOD = "data estimation method"
EM_COLUMNS = {
    Basis.DIRECT: ("carbon intensity gco2eq/kwh (direct)",),
    Basis.LIFECYCLE: ("carbon intensity gco2eq/kwh (lca)", "carbon intensity gco2eq/kwh (life cycle)"),
}


def _norm(cell: str) -> str:
    """Header cells compared case-blind, with CO₂ spelled CO2 (both exports write the subscript)."""
    return " ".join(cell.replace("\u2082", "2").strip().lower().split())


def electricity_maps_csv(text: str, source: str, basis: Basis) -> list[ZoneSeries]:
    rows = CsvRows(text, source)
    header = [_norm(c) for c in next(rows, [])]
    if basis is Basis.MARGINAL:
        raise InputError(source, "line 1", "an Electricity Maps export gives average intensities (direct and "
                         "life-cycle), not marginal ones; choose --carbon-basis direct or lifecycle")
    index = {name: i for i, name in enumerate(header)}
    value_at = next((index[c] for c in EM_COLUMNS[basis] if c in index), None)
    zone_at = next((index[c] for c in EM_ZONE if c in index), None)
    if value_at is None or zone_at is None:
        wanted = " or ".join(repr(c) for c in EM_COLUMNS[basis])
        raise InputError(source, "line 1", f"an Electricity Maps export needs the columns 'Zone Id' and {wanted} "
                         f"(--carbon-basis {basis.value}); got {', '.join(header)[:200]}")
    time_at, estimated_at = index[EM_TIME], index.get(EM_ESTIMATED)
    points: dict[str, _Points] = {}
    for cells in rows:
        if not cells or cells == [""]:
            continue
        where = f"line {rows.line_num}"
        if len(cells) < len(header):
            raise InputError(source, where, f"expected {len(header)} columns as in the header, got {len(cells)}")
        zone = cells[zone_at].strip()
        if not zone:
            raise InputError(source, where, "the zone id is empty")
        _zone(zone, source, where)
        stamp = _em_time(cells[time_at], source, where)
        estimated = estimated_at is not None and cells[estimated_at].strip().lower() == "true"
        points.setdefault(zone, _Points(source)).add(stamp, _value(cells[value_at], source, where), where, estimated)
    if not points:
        raise InputError(source, "", "no data rows")
    return [p.series(zone, basis, SeriesKind.HISTORY) for zone, p in sorted(points.items())]


def _em_time(text: str, source: str, where: str) -> float:
    raw = text.strip()
    try:
        parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(source, where, f"Datetime (UTC) must be like 2023-01-01 00:00:00, got {raw!r:.60}") \
            from None
    # The column is UTC by its name; an explicit offset is honoured (converted), never guessed.
    return utc_instant(parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC), source, where).timestamp()


def _value(text: str | None, source: str, where: str) -> float | None:
    raw = (text or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise InputError(source, where, f"the intensity must be a number, got {raw!r:.60}") from None
    if not math.isfinite(value) or value < 0:
        raise InputError(source, where, f"the intensity must be a finite number >= 0, got {raw!r:.60}")
    return value


@dataclass
class _Points:
    """Timestamped values of one zone, averaged per UTC hour; the same instant twice is an error."""

    source: str
    seen: dict[float, str] = field(default_factory=dict)
    sums: dict[int, float] = field(default_factory=dict)
    counts: dict[int, int] = field(default_factory=dict)
    estimated: set[int] = field(default_factory=set)
    empty: int = 0

    def add(self, stamp: float, value: float | None, where: str, estimated: bool = False) -> None:
        first = self.seen.get(stamp)
        if first is not None:
            raise InputError(self.source, where, f"{datetime.fromtimestamp(stamp, UTC):%Y-%m-%dT%H:%M:%SZ} is given "
                             f"twice (also {first}); a file in local time repeats an hour when daylight saving "
                             "ends: export it in UTC")
        if len(self.seen) >= MAX_POINTS:
            raise InputError(self.source, where, f"more than {MAX_POINTS:,} points")
        self.seen[stamp] = where
        if value is None:
            self.empty += 1
            return
        hour = int(stamp // HOUR_S)
        self.sums[hour] = self.sums.get(hour, 0.0) + value
        self.counts[hour] = self.counts.get(hour, 0) + 1
        if estimated:
            self.estimated.add(hour)

    def series(self, zone: str, basis: Basis, kind: SeriesKind, issued: int | None = None) -> ZoneSeries:
        if not self.sums:
            raise InputError(self.source, zone, "every point of the zone is empty")
        hours = {h: self.sums[h] / self.counts[h] for h in sorted(self.sums)}
        keys = list(hours)
        if len(keys) >= 3:
            step = sorted(b - a for a, b in itertools.pairwise(keys))[len(keys) // 2 - 1]
            if step > 1:
                raise InputError(self.source, zone, f"one value every {step} h (a daily, monthly or yearly export?); "
                                 "download the hourly one")
        return ZoneSeries(zone, self.source, basis, hours, kind, len(self.estimated), issued, self.empty)


# --- JSON: Electricity Maps API v3, WattTime API v3 -----------------------------------------------------------

EM_LISTS = {"history": SeriesKind.HISTORY, "data": SeriesKind.HISTORY, "forecast": SeriesKind.FORECAST}
WATTTIME_SIGNALS = {"co2_moer": Basis.MARGINAL, "co2_aoer": Basis.DIRECT}
WATTTIME_UNITS = {"lbs_co2_per_mwh": LBS_PER_MWH_TO_G_PER_KWH, "g_co2_per_kwh": 1.0}


def _json(doc: Any, source: str, basis: Basis) -> list[ZoneSeries]:
    if isinstance(doc, dict) and isinstance(doc.get("meta"), dict) and isinstance(doc.get("data"), list):
        return [watttime(doc, source, basis)]
    if isinstance(doc, dict) and any(isinstance(doc.get(k), list) for k in EM_LISTS):
        return [electricity_maps_json(doc, source, basis)]
    raise InputError(source, "", "not a grid intensity document: expected Electricity Maps' {\"zone\", \"history\" "
                     "| \"forecast\" | \"data\": [...]} or WattTime's {\"data\": [...], \"meta\": {...}}")


def electricity_maps_json(doc: Mapping[str, Any], source: str, basis: Basis) -> ZoneSeries:
    key = next(k for k in EM_LISTS if isinstance(doc.get(k), list))
    entries: Sequence[Any] = doc[key]
    kind = EM_LISTS[key]
    if basis is Basis.MARGINAL:
        raise InputError(source, key, "Electricity Maps gives average intensities (direct and life-cycle), not "
                         "marginal ones; choose --carbon-basis direct or lifecycle")
    zone = doc.get("zone")
    points = _Points(source)
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        if not isinstance(entry, dict):
            raise InputError(source, where, "expected an object")
        zone = entry.get("zone", zone)
        given = entry.get("emissionFactorType", "lifecycle")  # the API's documented default when absent
        if not isinstance(given, str):
            raise InputError(source, f"{where}.emissionFactorType", f"expected a string, got {describe(given)}")
        if given != basis.value:
            raise InputError(source, f"{where}.emissionFactorType", f"the file gives {given[:40]!r} figures; "
                             f"--carbon-basis is {basis.value} (download it with emissionFactorType={basis.value}, "
                             "or choose that basis)")
        value = entry.get("carbonIntensity")
        if value is not None and not _number(value):
            raise InputError(source, f"{where}.carbonIntensity", f"expected a number up to {MAX_NUMBER:g} or null, "
                             f"got {describe(value)}")
        points.add(_iso(entry.get("datetime"), source, f"{where}.datetime"),
                   _value(None if value is None else str(value), source, f"{where}.carbonIntensity"), where,
                   entry.get("isEstimated") is True)
    if not isinstance(zone, str) or not zone:
        raise InputError(source, "zone", "the document names no zone")
    _zone(zone, source, "zone")
    if not points.seen:
        raise InputError(source, key, "no entries")
    issued = doc.get("updatedAt") if kind is SeriesKind.FORECAST else None
    issued_hour = int(_iso(issued, source, "updatedAt") // HOUR_S) if issued is not None else None
    return points.series(zone, basis, kind, issued_hour)


def watttime(doc: Mapping[str, Any], source: str, basis: Basis) -> ZoneSeries:
    meta: Mapping[str, Any] = doc["meta"]
    signal = meta.get("signal_type")
    given = WATTTIME_SIGNALS.get(str(signal))
    if given is None:
        raise InputError(source, "meta.signal_type", f"expected one of {', '.join(WATTTIME_SIGNALS)}, got "
                         f"{describe(signal)}")
    if given is not basis:
        raise InputError(source, "meta.signal_type", f"{signal} is a {given.value} rate; --carbon-basis is "
                         f"{basis.value} (choose --carbon-basis {given.value} to use it)")
    units = meta.get("units")
    scale = WATTTIME_UNITS.get(str(units))
    if scale is None:
        raise InputError(source, "meta.units", f"expected one of {', '.join(WATTTIME_UNITS)}, got {describe(units)}")
    region = meta.get("region")
    if not isinstance(region, str) or not region:
        raise InputError(source, "meta.region", "the document names no region")
    _zone(region, source, "meta.region")
    points = _Points(source)
    for i, entry in enumerate(doc["data"]):
        where = f"data[{i}]"
        if not isinstance(entry, dict):
            raise InputError(source, where, "expected an object")
        value = entry.get("value")
        if value is not None and not _number(value):
            # A JSON integer of 400 digits is an int float() cannot hold: OverflowError, a traceback, before.
            raise InputError(source, f"{where}.value", f"expected a number up to {MAX_NUMBER:g}, got {describe(value)}")
        scaled = None if value is None else str(float(value) * scale)
        points.add(_iso(entry.get("point_time"), source, f"{where}.point_time"),
                   _value(scaled, source, f"{where}.value"), where)
    if not points.seen:
        raise InputError(source, "data", "no points")
    generated = meta.get("generated_at")
    kind = SeriesKind.FORECAST if generated is not None else SeriesKind.HISTORY
    issued = int(_iso(generated, source, "meta.generated_at") // HOUR_S) if generated is not None else None
    return points.series(region, basis, kind, issued)


def _number(value: Any) -> bool:
    """A JSON number a float holds (NaN and infinities are refused by `_value`)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and not abs(value) > MAX_NUMBER


def _zone(zone: str, source: str, where: str) -> str:
    """A zone id as the notes print it: one without control characters (an ESC would drive the terminal)."""
    if not zone.isprintable():
        raise InputError(source, where, f"the zone id {zone[:40]!r} holds a control character")
    return zone


def _iso(value: Any, source: str, where: str) -> float:
    if not isinstance(value, str):
        raise InputError(source, where, f"expected an ISO 8601 time, got {describe(value)}")
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(source, where, f"expected an ISO 8601 time, got {value!r:.60}") from None
    if parsed.tzinfo is None:
        raise InputError(source, where, f"the time needs an offset (e.g. Z), got {value!r:.60}")
    return utc_instant(parsed, source, where).timestamp()


def merge(series: Iterable[ZoneSeries]) -> dict[str, ZoneSeries]:
    """Series of one zone from several files (one download per year) joined; an hour two files give with different
    values is an error naming both."""
    out: dict[str, ZoneSeries] = {}
    for s in series:
        have = out.get(s.zone)
        if have is None:
            out[s.zone] = s
            continue
        for hour, value in s.hours.items():
            other = have.hours.get(hour)
            if other is not None and abs(other - value) > 1e-9 * max(1.0, abs(value)):
                raise InputError(s.source, s.zone, f"{hour_text(hour)} is {value:g} here and {other:g} in "
                                 f"{have.source}")
        out[s.zone] = ZoneSeries(s.zone, f"{have.source}, {s.source}", s.basis, {**have.hours, **s.hours}, s.kind,
                                 have.estimated + s.estimated, s.issued_hour or have.issued_hour,
                                 have.empty + s.empty)
    return out
