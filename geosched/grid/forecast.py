"""What the grid will be: the hours a start-time decision looks at, per region, as predicted at the decision time.

Three sources, each labelled wherever a figure built on it is shown:

- **forecast file**: a forecast the user passes (Electricity Maps' `carbon-intensity/forecast`, WattTime's
  `/v3/forecast`, or geosched's CSV of future hours), for the hours it covers;
- **seasonal naive** (the default, Hyndman & Athanasopoulos, *Forecasting: Principles and Practice*, 3rd ed.,
  section 5.2 "Some simple forecasting methods"): each hour is predicted by the same hour of the last day known,
  y(h) = y(h - 24k) for the least whole k that reaches a known hour; a missing value there is taken from a day
  earlier still, up to `MAX_DAYS_BACK` days. Data are taken as known through the hour before the decision
  (`lag_h` = 1: Electricity Maps' US zones are often published hours late, which a larger lag models). Its error
  on a series is measured by `mape` and shown (`simulate`, `place --explain`);
- **oracle**: the measured series itself, perfect foresight, only to bound what a forecast could reach (the
  simulator's "oracle" runs); never used for a live decision.

Where none of them has a value (a region without a series, hours past a forecast without history behind it) the
hour is NaN and the caller falls back to the region's mean, labelled. Pure: numpy arrays in and out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

SEASON_H = 24
MAX_DAYS_BACK = 7
HORIZON_H = 48


class Method(StrEnum):
    FORECAST = "forecast"
    ORACLE = "oracle"


@dataclass(frozen=True)
class Dense:
    """An hourly series as an array from `first` (epoch hour) on; NaN where an hour is missing."""

    first: int
    values: FloatArray

    @staticmethod
    def of(hours: Mapping[int, float]) -> Dense:
        if not hours:
            return Dense(0, np.zeros(0))
        first, last = min(hours), max(hours)
        values = np.full(last - first + 1, np.nan)
        keys = np.fromiter(hours.keys(), dtype=np.int64, count=len(hours))
        values[keys - first] = np.fromiter(hours.values(), dtype=np.float64, count=len(hours))
        return Dense(first, values)

    def at(self, hours: IntArray) -> FloatArray:
        """Values at these epoch hours, NaN outside the series."""
        idx = hours - self.first
        inside = (idx >= 0) & (idx < self.values.size)
        out = np.full(hours.shape, np.nan)
        out[inside] = self.values[idx[inside]]
        return out


def seasonal_naive(series: Dense, hours: IntArray, decided_hour: int, lag_h: int = 1) -> FloatArray:
    """The seasonal-naive prediction of `hours`, made at the start of epoch hour `decided_hour` with the series known
    through hour `decided_hour - lag_h`. A known hour (before the cut) is its own value."""
    known_until = decided_hour - lag_h  # the last known hour
    out = series.at(np.minimum(hours, known_until)) if series.values.size else np.full(hours.shape, np.nan)
    ahead = hours > known_until
    if not ahead.any():
        return out
    future = hours[ahead]
    k = -(-(future - known_until) // SEASON_H)  # the least k with h - 24k <= known_until
    guess = np.full(future.shape, np.nan)
    for extra in range(MAX_DAYS_BACK):
        missing = np.isnan(guess)
        if not missing.any():
            break
        guess[missing] = series.at(future[missing] - SEASON_H * (k[missing] + extra))
    out[ahead] = guess
    return out


@dataclass(frozen=True)
class Error:
    """Mean absolute percentage error of the seasonal-naive forecast over a series, for horizons 1-24 h and 25-48 h,
    each over every hour of the series that can be forecast and has a measured value (`points`)."""

    day_ahead: float
    two_days_ahead: float
    points: int

    def text(self) -> str:
        return (f"MAPE {self.day_ahead:.1%} for 1-24 h ahead, {self.two_days_ahead:.1%} for 25-48 h, over "
                f"{self.points:,} forecast hours")


def mape(series: Dense, lag_h: int = 1) -> Error | None:
    """The seasonal-naive forecaster's error on the series itself (for each hour h and horizon H, the forecast made
    H hours before). None when the series is too short to forecast a day ahead."""
    v = series.values
    n = v.size
    if n <= 2 * SEASON_H + lag_h:
        return None
    errors: list[float] = []
    points = 0
    for horizons in (range(1, SEASON_H + 1), range(SEASON_H + 1, HORIZON_H + 1)):
        total, count = 0.0, 0
        for horizon in horizons:
            # Made at hour t = h - horizon + 1 (known through t - lag_h): h - 24k <= t - lag_h.
            k = -(-(horizon - 1 + lag_h) // SEASON_H)
            shift = SEASON_H * k
            actual, guess = v[shift:], v[: n - shift]
            ok = ~np.isnan(actual) & ~np.isnan(guess) & (actual > 0)
            total += float(np.abs(guess[ok] - actual[ok]).__truediv__(actual[ok]).sum())
            count += int(ok.sum())
        errors.append(total / count if count else float("nan"))
        points += count
    return Error(errors[0], errors[1], points)


@dataclass(frozen=True)
class Outlook:
    """Predicted intensity per region (rows, in the caller's region order) for the hours `first_hour`, ... as one
    decision sees them, and what each region's figures rest on (`sources`, for the explanation)."""

    first_hour: int
    values: FloatArray
    sources: tuple[str, ...]
    method: Method

    @property
    def hours(self) -> int:
        return int(self.values.shape[1])


def outlook(regions: tuple[str, ...] | list[str], history: Mapping[str, Dense], means: Mapping[str, float],
            decided_hour: int, hours: int, method: Method = Method.FORECAST,
            forecast: Mapping[str, Dense] | None = None, lag_h: int = 1) -> Outlook:
    """The hours `decided_hour .. decided_hour + hours - 1` of every region: by `method` (module docstring), then
    the region's mean where nothing else has a value."""
    span = np.arange(decided_hour, decided_hour + hours, dtype=np.int64)
    values = np.empty((len(regions), hours))
    sources: list[str] = []
    for i, region in enumerate(regions):
        series = history.get(region)
        used: list[str] = []
        if method is Method.ORACLE:
            row = series.at(span) if series is not None else np.full(hours, np.nan)
            if not np.isnan(row).all():
                used.append("measured (oracle)")
        else:
            given = (forecast or {}).get(region)
            row = given.at(span) if given is not None else np.full(hours, np.nan)
            if not np.isnan(row).all():
                used.append("forecast file")
            gap = np.isnan(row)
            if gap.any() and series is not None:
                row[gap] = seasonal_naive(series, span[gap], decided_hour, lag_h)
                if not np.isnan(row[gap]).all():
                    used.append("seasonal naive")
        gap = np.isnan(row)
        if gap.any():
            row[gap] = means[region]
            used.append("mean" if gap.all() else f"mean for {int(gap.sum())} h")
        values[i] = row
        sources.append(", then ".join(used))
    return Outlook(decided_hour, values, tuple(sources), method)


def run_means(look: Outlook, starts_s: FloatArray, run_s: float) -> FloatArray:
    """Mean intensity over [start, start + run) of every start (rows) and region (columns): the intensity is constant
    within each UTC hour, so its integral is piecewise linear between hour boundaries (`np.interp` is exact).
    A run past the outlook's last hour is counted at that hour's value."""
    run_s = max(run_s, 1.0)  # a zero-length run reads the hour it starts in
    knots = np.arange(look.hours + 1, dtype=np.float64)
    begin = starts_s / 3600.0 - look.first_hour
    end = begin + run_s / 3600.0
    out = np.empty((starts_s.size, look.values.shape[0]))
    for r in range(look.values.shape[0]):
        row = look.values[r]
        cum = np.concatenate(([0.0], np.cumsum(row)))
        last = row[-1]
        tail = np.maximum(end - look.hours, 0.0) * last
        inside_end = np.minimum(end, look.hours)
        integral = np.interp(inside_end, knots, cum) + tail - np.interp(np.minimum(begin, look.hours), knots, cum) \
            - np.maximum(begin - look.hours, 0.0) * last
        out[:, r] = integral / (run_s / 3600.0)
    return out


@dataclass(frozen=True)
class Stacked:
    """Every region's series on one hour axis (rows in `index` order), so an outlook over many regions is a few
    array operations rather than a few per region: the same figures as `outlook`, faster (a decision over 40
    regions at 10,000 nodes: benchmarks/bench_timeshift.py)."""

    first: int
    values: FloatArray
    index: Mapping[str, int]

    @staticmethod
    def of(series: Mapping[str, Dense]) -> Stacked:
        keys = sorted(k for k, s in series.items() if s.values.size)
        if not keys:
            return Stacked(0, np.zeros((0, 0)), {})
        first = min(series[k].first for k in keys)
        last = max(series[k].first + series[k].values.size for k in keys)
        values = np.full((len(keys), last - first), np.nan)
        for i, k in enumerate(keys):
            s = series[k]
            values[i, s.first - first:s.first - first + s.values.size] = s.values
        return Stacked(first, values, {k: i for i, k in enumerate(keys)})

    def _at(self, rows: IntArray, hours: IntArray) -> FloatArray:
        idx = hours - self.first
        inside = (idx >= 0) & (idx < self.values.shape[1])
        out = np.full((rows.size, hours.size), np.nan)
        if inside.any():
            out[:, inside] = self.values[np.ix_(rows, idx[inside])]
        return out

    def outlook(self, regions: tuple[str, ...] | list[str], means: Mapping[str, float], decided_hour: int,
                hours: int, method: Method, lag_h: int) -> Outlook:
        span = np.arange(decided_hour, decided_hour + hours, dtype=np.int64)
        rows = np.array([self.index.get(r, -1) for r in regions], dtype=np.int64)
        have = rows >= 0
        values = np.full((len(regions), hours), np.nan)
        label = "measured (oracle)" if method is Method.ORACLE else "seasonal naive"
        if have.any():
            if method is Method.ORACLE:
                values[have] = self._at(rows[have], span)
            else:
                known_until = decided_hour - lag_h
                past = span <= known_until
                values[np.ix_(have, past)] = self._at(rows[have], span[past])
                future = span[~past]
                if future.size:
                    k = -(-(future - known_until) // SEASON_H)
                    guess = np.full((int(have.sum()), future.size), np.nan)
                    for extra in range(MAX_DAYS_BACK):
                        missing = np.isnan(guess)
                        if not missing.any():
                            break
                        back = self._at(rows[have], future - SEASON_H * (k + extra))
                        guess[missing] = back[missing]
                    values[np.ix_(have, ~past)] = guess
        sources = []
        for i, region in enumerate(regions):
            row = values[i]
            gap = np.isnan(row)
            used = [label] if have[i] and not gap.all() else []
            if gap.any():
                row[gap] = means[region]
                used.append("mean" if gap.all() else f"mean for {int(gap.sum())} h")
            sources.append(", then ".join(used))
        return Outlook(decided_hour, values, tuple(sources), method)


@dataclass(frozen=True)
class GridHistory:
    """Everything a start-time decision reads about the grid, by region key: the measured series, a forecast the
    user gave, and each region's mean (its series' mean, else the file's or the fleet's yearly figure)."""

    series: Mapping[str, Dense]
    means: Mapping[str, float]
    forecast: Mapping[str, Dense] | None = None
    lag_h: int = 1

    def outlook(self, regions: tuple[str, ...] | list[str], decided_hour: int, hours: int,
                method: Method = Method.FORECAST) -> Outlook:
        if self.forecast:
            return outlook(regions, self.series, self.means, decided_hour, hours, method, self.forecast, self.lag_h)
        return self._stacked.outlook(regions, self.means, decided_hour, hours, method, self.lag_h)

    @cached_property
    def _stacked(self) -> Stacked:
        return Stacked.of(self.series)

    def error(self, region: str) -> Error | None:
        series = self.series.get(region)
        return mape(series, self.lag_h) if series is not None else None
