"""Grid carbon intensity: reading a signal file, and the one resolver every decision uses.

File (`--carbon-hourly FILE` for place, submit, gitops and simulate; `--carbon FILE` for the report): a CSV with
the columns `region` (`provider:region`, e.g. `gcp:us-central1`), `gco2e_per_kwh`, and one or both of:

- `datetime`: an RFC 3339 time on the hour (`2025-03-01T12:00:00Z`): the measured intensity of that UTC hour.
  This is the shape of Electricity Maps' history (API v3 `GET /v3/carbon-intensity/history?zone=...` answers
  `{"zone": ..., "history": [{"datetime": "2025-03-01T12:00:00.000Z", "carbonIntensity": 302, ...}, ...]}`, one
  entry per hour): one row per entry, `datetime` as given, `carbonIntensity` as `gco2e_per_kwh`, and the
  Electricity Maps zone replaced by the cloud region it powers. WattTime's historical data (`point_time`,
  `value`) maps the same way once its lbs/MWh are converted (x 0.4536).
- `hour`: an integer 0..N-1, a cyclic profile read at (whole hours since the Unix epoch) mod N, so 24 rows are
  a profile by UTC hour of day; a row whose `hour` and `datetime` are both empty sets the region's mean.

`decision_signal` turns a signal into the intensity of one instant for every region of a fleet: the measured
hour when the series has it, else the profile's hour, else the signal's mean, else the fleet's own (yearly)
figure; each region whose value is not a measured hour gets a note, for `--explain`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from geosched.errors import InputError
from geosched.fields import parse_time
from geosched.gate import CsvRows, Kind, read_text
from geosched.models import HOUR_S, CarbonSignal, Fleet, NetworkView
from geosched.policies import PlacementContext

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
        if ":" not in region:
            raise InputError(source, where, f"region must be provider:region, got {region!r}")
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
    seconds = parsed.timestamp()
    if seconds % HOUR_S:
        raise InputError(source, where, f"datetime must be on the hour (a series is hourly), got {stamp!r}")
    return int(seconds // HOUR_S)


def decision_time(text: str | None, where: str = "--at") -> datetime:
    """`--at` as given (RFC 3339 / ISO 8601 with an offset), else now."""
    return parse_time(text, where, "") if text is not None else datetime.now(UTC)


def load_carbon(path: Path | None) -> CarbonSignal | None:
    return parse_carbon_csv(read_text(path, Kind.CARBON), str(path)) if path is not None else None


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
        why = f"{hour} is outside its hourly series ({_span(series)})" if series else "no hourly series for it"
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


def contexts_by_hour(fleet: Fleet, network: NetworkView, signal: CarbonSignal | None, start: datetime,
                     ) -> Callable[[float], PlacementContext]:
    """For a replay: the placement context of the hour `start + t` seconds falls in. Contexts are built once per
    distinct set of intensities (every hour outside the series shares the yearly one)."""
    built: dict[tuple[float, ...], PlacementContext] = {}
    origin = start.timestamp()

    def at(t: float) -> PlacementContext:
        resolved = decision_signal(fleet, signal, datetime.fromtimestamp(origin + t, UTC)).signal
        key = tuple(resolved.intensity[k] for k in sorted(resolved.intensity))
        ctx = built.get(key)
        if ctx is None:
            ctx = built[key] = PlacementContext(fleet, network, resolved)
        return ctx

    return at
