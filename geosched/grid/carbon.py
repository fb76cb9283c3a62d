"""Grid carbon intensity: reading signal files, and the one resolver every decision uses.

Files (`--carbon-hourly FILE`, repeatable, for place, submit, gitops and simulate; `--carbon FILE` for the report)
come in two kinds, told apart by their content:

1. **As users download them** (`geosched.grid.formats`): Electricity Maps' data-portal CSV (either header
   generation), its API v3 history / past-range / forecast JSON, and WattTime's API v3 historical / forecast JSON.
   These are keyed by grid zone; each zone becomes the cloud regions it powers by the shipped map
   (`geosched/data/grid_zones.csv`, Electricity Maps' own data-centre table) or a user's map over it
   (`--grid-zones FILE`, `provider,region,zone`). The basis is chosen explicitly (`--carbon-basis lifecycle`, the
   default and Electricity Maps' own; `direct`; `marginal` for WattTime's MOER), and a file on another basis is an
   error. Several files of one zone (a download per year) join.
2. **geosched's own CSV**, keyed by region: the columns `region` (`provider:region`, e.g. `gcp:us-central1`),
   `gco2e_per_kwh`, and one or both of
   - `datetime`: an RFC 3339 time on the hour (`2025-03-01T12:00:00Z`): the measured intensity of that UTC hour;
   - `hour`: an integer 0..N-1, a cyclic profile read at (whole hours since the Unix epoch) mod N, so 24 rows are
     a profile by UTC hour of day; a row whose `hour` and `datetime` are both empty sets the region's mean.

`decision_signal` turns a signal into the intensity of one instant for every region of a fleet: the measured
hour when the series has it, else the profile's hour, else the signal's mean, else the fleet's own (yearly)
figure; each region whose value is not a measured hour gets a note, for `--explain`. A flexible job's start looks
ahead instead (`geosched.grid.forecast`, `geosched.policies.timeshift`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from geosched.core.errors import InputError
from geosched.core.models import HOUR_S, CarbonSignal, Fleet
from geosched.files.fields import parse_time, utc_instant
from geosched.files.gate import CsvRows, Kind, read_text
from geosched.grid.formats import Basis, ZoneSeries, check_span, hour_text, merge, parse_grid_file
from geosched.grid.zones import ZoneMap, parse_zone_map, shipped_zone_map

if TYPE_CHECKING:  # numpy-backed: imported where a series is forecast or a placement is built, not by `geosched -h`
    from geosched.grid.forecast import Error, GridHistory

REQUIRED = ("region", "gco2e_per_kwh")


def parse_carbon_csv(text: str, source: str) -> CarbonSignal:
    reader = CsvRows(text, source)  # a field over 128 KiB or a NUL byte is one line, not a `_csv.Error`
    header = [c.strip() for c in next(reader, [])]
    fields = set(header)
    if set(REQUIRED) - fields or not fields & {"hour", "datetime"}:
        raise InputError(source, "line 1", "expected the columns region, gco2e_per_kwh and datetime (RFC 3339 "
                         "hours) or hour (a profile 0..N-1)")
    means: dict[str, float] = {}
    profiles: dict[str, dict[int, float]] = {}
    hourly: dict[str, dict[int, float]] = {}
    for cells in reader:
        if not cells:
            continue
        where = f"line {reader.line_num}"
        row = dict(zip(header, cells, strict=False))
        region = (row.get("region") or "").strip()
        if ":" not in region or not region.isprintable():  # printable: the notes print it
            raise InputError(source, where, f"region must be provider:region, got {region[:60]!r}")
        text_value = row.get("gco2e_per_kwh")
        try:
            value = float(text_value or "")
        except ValueError:
            raise InputError(source, where, f"gco2e_per_kwh must be a number, got {text_value!r:.60}") from None
        if not math.isfinite(value) or value < 0:
            raise InputError(source, where, f"gco2e_per_kwh must be a finite number >= 0, got {value:g}")
        stamp = (row.get("datetime") or "").strip()
        hour_text = (row.get("hour") or "").strip()
        if stamp and hour_text:
            raise InputError(source, where, "give datetime or hour, not both")
        if stamp:
            hour = epoch_hour(stamp, source, where)
            _put(hourly.setdefault(region, {}), hour, value, source, where, f"{stamp} of {region}")
        elif hour_text:
            if not (hour_text.isascii() and hour_text.isdigit() and len(hour_text) <= 6):
                raise InputError(source, where, f"hour must be an integer from 0 to 999999, got {hour_text!r:.60}")
            _put(profiles.setdefault(region, {}), int(hour_text), value, source, where, f"hour {hour_text} of {region}")
        else:
            means[region] = value
    profile: dict[str, tuple[float, ...]] = {}
    for region, series in profiles.items():
        if sorted(series) != list(range(len(series))):
            raise InputError(source, region, f"hours must run 0..{len(series) - 1} without gaps")
        profile[region] = tuple(series[h] for h in range(len(series)))
    return CarbonSignal(intensity=means, hourly=hourly, profile=profile)


def _put(into: dict[int, float], key: int, value: float, source: str, where: str, what: str) -> None:
    if key in into:
        raise InputError(source, where, f"{what} given twice")
    into[key] = value


def epoch_hour(stamp: str, source: str, where: str) -> int:
    """Whole UTC hours since the Unix epoch of an RFC 3339 time on the hour."""
    try:
        parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(source, where, f"datetime must be RFC 3339, e.g. 2025-03-01T12:00:00Z, got {stamp!r}") \
            from None
    if parsed.tzinfo is None:
        raise InputError(source, where, f"datetime needs an offset (e.g. Z), got {stamp!r}")
    seconds = utc_instant(parsed, source, where).timestamp()
    if seconds % HOUR_S:
        raise InputError(source, where, f"datetime must be on the hour (a series is hourly), got {stamp!r}")
    return int(seconds // HOUR_S)


def decision_time(text: str | None, where: str = "--at") -> datetime:
    """`--at` as given (RFC 3339 / ISO 8601 with an offset), else now."""
    return parse_time(text, where, "") if text is not None else datetime.now(UTC)


def load_carbon(path: Path | None, basis: Basis = Basis.LIFECYCLE) -> CarbonSignal | None:
    """One file of any shape `load_grid` reads, as a signal by region (its notes dropped: callers that show notes
    use `load_grid`)."""
    return load_grid([path], basis).signal if path is not None else None


@dataclass(frozen=True)
class GridInput:
    """What the carbon files say, by cloud region: the measured hours (`signal`), a forecast the user gave
    (`forecast`), the basis every figure is on, and notes for `--explain` (where each region's series came from,
    its estimated hours and gaps, zones no region of the map is in)."""

    signal: CarbonSignal | None
    forecast: CarbonSignal | None
    basis: Basis
    notes: tuple[str, ...] = ()

    def mape(self, region: str) -> Error | None:
        from geosched.grid.forecast import Dense, mape

        series = self.signal.hourly.get(region) if self.signal is not None else None
        return mape(Dense.of(series)) if series else None


def load_grid(paths: Sequence[Path], basis: Basis = Basis.LIFECYCLE, forecasts: Sequence[Path] = (),
              zone_map: Path | None = None) -> GridInput:
    """Carbon files as users download them (`geosched.grid.formats`: Electricity Maps' portal CSV and API JSON,
    WattTime's API JSON) or geosched's own CSV (above), each through the input gate; grid zones become the cloud
    regions they power by the shipped map (`geosched.grid.zones`), or `zone_map`'s rows over it."""
    zones = shipped_zone_map()
    if zone_map is not None:
        zones = parse_zone_map(read_text(zone_map, Kind.CARBON), str(zone_map)).over(zones)
    notes: list[str] = []
    signal = _by_region([read_text(p, Kind.CARBON) for p in paths], [str(p) for p in paths], basis, zones, notes)
    forecast = _by_region([read_text(p, Kind.CARBON) for p in forecasts], [str(p) for p in forecasts], basis, zones,
                          notes, "forecast ")
    return GridInput(signal, forecast, basis, tuple(notes))


def _by_region(texts: Sequence[str], sources: Sequence[str], basis: Basis, zones: ZoneMap, notes: list[str],
               what: str = "") -> CarbonSignal | None:
    if not texts:
        return None
    own: list[CarbonSignal] = []
    own_sources: list[str] = []
    series: list[ZoneSeries] = []
    for text, source in zip(texts, sources, strict=True):
        found = parse_grid_file(text, source, basis)
        if found:
            series.extend(found)
        else:  # geosched's own region-keyed CSV: its figures are on whatever basis its author used
            own.append(parse_carbon_csv(text, source))
            own_sources.append(source)
            notes.append(f"carbon {what}{source}: geosched's region CSV; its basis is as its author made it "
                         f"(the decision takes it as {basis.value})")
    hourly: dict[str, dict[int, float]] = {}
    origin: dict[str, str] = {}
    for zone, s in sorted(merge(series).items()):
        check_span(s.hours, s.source, zone)  # merged: two files years apart make one long series
        regions = zones.regions_of(zone)
        span = f"{hour_text(s.first)}..{hour_text(s.last)}"
        flags = [f"{s.estimated:,} estimated by the provider"] if s.estimated else []
        if s.gaps:
            flags.append(f"{s.gaps:,} missing (first {hour_text(s.first_gap() or s.first)}): the forecaster and the "
                         "mean stand in there")
        tail = f"; {'; '.join(flags)}" if flags else ""
        if not regions:
            notes.append(f"carbon {what}{zone} ({s.source}): no region of the zone map ({zones.source}) is in this "
                         f"zone, so it is not used; --grid-zones FILE maps regions to it{tail}")
            continue
        notes.append(f"carbon {what}{zone} ({s.source}): {len(s.hours):,} h {span}, {basis.value} -> "
                     f"{', '.join(regions)}{tail}")
        for region in regions:
            if region in origin:
                raise InputError(s.source, zone, f"region {region} is also in zone {origin[region]}'s series")
            origin[region] = zone
            hourly[region] = dict(s.hours)
    for signal, source in zip(own, own_sources, strict=True):
        for region, hours in signal.hourly.items():
            check_span(hours, source, region)
            if region in origin:
                raise InputError(sources[0], region, f"region {region} is also in zone {origin[region]}'s series")
            hourly[region] = dict(hours)
            origin[region] = region
    profile = {k: v for s in own for k, v in s.profile.items()}
    means = {k: v for s in own for k, v in s.intensity.items()}
    return CarbonSignal(intensity=means, hourly=hourly, profile=profile)


@dataclass(frozen=True)
class Resolved:
    """A signal reduced to one instant: `signal.intensity` holds every fleet region's value at `when`."""

    signal: CarbonSignal
    when: datetime
    notes: tuple[str, ...]


def decision_signal(fleet: Fleet, signal: CarbonSignal | None, when: datetime) -> Resolved:
    """The grid intensity a decision at `when` uses, per region of the fleet (see the module doc for the order)."""
    instant = when.astimezone(UTC)
    seconds = instant.timestamp()
    hour = instant.replace(minute=0, second=0, microsecond=0).strftime("%Y-%m-%dT%H:00Z")
    values: dict[str, float] = {}
    notes: list[str] = []
    for key, region in sorted(fleet.regions.items()):
        found = signal.lookup(key, seconds) if signal is not None else None
        value, origin = found if found is not None else (region.grid_gco2e_per_kwh, "yearly")
        values[key] = value
        if signal is None or origin == "hour":
            continue
        what = {"profile": "the file's profile", "mean": "the file's mean", "yearly": "yearly mean"}[origin]
        series = signal.hourly.get(key)
        why = "no hourly series for it" if not series else (
            f"{hour} is a gap in its hourly series ({_span(series)})" if min(series) <= seconds // HOUR_S <= max(series)
            else f"{hour} is outside its hourly series ({_span(series)})")
        notes.append(f"carbon {key}: {what} {value:g} gCO2e/kWh; {why}")
    return Resolved(CarbonSignal(values), instant, tuple(notes))


def _span(series: Mapping[int, float]) -> str:
    first, last = min(series), max(series)
    return (f"{datetime.fromtimestamp(first * HOUR_S, UTC):%Y-%m-%dT%H:00Z}.."
            f"{datetime.fromtimestamp(last * HOUR_S, UTC):%Y-%m-%dT%H:00Z}")


def series_start(signal: CarbonSignal | None) -> datetime | None:
    """The first measured hour of any region, or None without a series."""
    hours = [h for series in (signal.hourly.values() if signal else ()) for h in series]
    return datetime.fromtimestamp(min(hours) * HOUR_S, UTC) if hours else None


def grid_history(fleet: Fleet, grid: GridInput | None) -> GridHistory:
    """The grid a start-time decision reads (`GridHistory`) for every region of the fleet."""
    from geosched.grid.forecast import Dense, GridHistory

    signal = grid.signal if grid is not None else None
    series = {k: Dense.of(v) for k, v in (signal.hourly.items() if signal else ()) if k in fleet.regions and v}
    means: dict[str, float] = {}
    for key, region in fleet.regions.items():
        hours = signal.hourly.get(key) if signal else None
        given = signal.intensity.get(key) if signal else None
        means[key] = (sum(hours.values()) / len(hours) if hours else given if given is not None
                      else region.grid_gco2e_per_kwh)
    forecast = grid.forecast if grid is not None else None
    # The fleet's regions only, as for the history: each series becomes an array over its span, and a file may
    # name any number of regions.
    ahead = ({k: Dense.of(v) for k, v in forecast.hourly.items() if k in fleet.regions and v}
             if forecast is not None else None)
    return GridHistory(series, means, ahead)


def forecast_notes(history: GridHistory) -> list[str]:
    """The forecaster's measured error on each series, one line per series (its regions together)."""
    by_text: dict[str, list[str]] = {}
    for region in sorted(history.series):
        error = history.error(region)
        if error is not None:
            by_text.setdefault(error.text(), []).append(region)
    return [f"forecast {', '.join(regions)}: {history.forecaster.label}; {text} on the series"
            for text, regions in by_text.items()]
