"""What the grid will be: the hours a start-time decision looks at, per region, as predicted at the decision time.

Three sources, each labelled wherever a figure built on it is shown:

- **forecast file**: a forecast the user passes (Electricity Maps' `carbon-intensity/forecast`, WattTime's
  `/v3/forecast`, or geosched's CSV of future hours), for the hours it covers;
- **the forecaster** (`Forecaster`, from the series alone; Hyndman & Athanasopoulos, *Forecasting: Principles and
  Practice*, 3rd ed., section 5.2 "Some simple forecasting methods"): the default (`DEFAULT_FORECASTER`) is the mean
  of the same hour over the last 7 days known plus the last known hour's departure from its own 7-day profile,
  fading by 0.97 per hour ahead; `SEASONAL_NAIVE` (each hour as the same hour of the last day known, y(h) =
  y(h - 24k) for the least whole k that reaches a known hour) is the one it replaced. The default was chosen by
  measured error on held-out days (grid/README.md, "Forecasts"). A day with no value is skipped, up to
  `MAX_DAYS_BACK` days back. Data are taken as known through the hour before the decision (`lag_h` = 1: Electricity
  Maps' US zones are often published hours late, which a larger lag models). Its error on a series is measured by
  `mape` and shown (`simulate`, `place --explain`);
- **oracle**: the measured series itself, perfect foresight, only to bound what a forecast could reach (the
  simulator's "oracle" runs); never used for a live decision.

Where none of them has a value (a region without a series, hours past a forecast without history behind it) the
hour is NaN and the caller falls back to the region's mean, labelled. Pure: numpy arrays in and out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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


class Agg(StrEnum):
    MEAN = "mean"
    MEDIAN = "median"


@dataclass(frozen=True)
class Forecaster:
    """A simple forecaster of the hours ahead from the series alone (Hyndman & Athanasopoulos, *Forecasting:
    Principles and Practice*, 3rd ed., 5.2 "Some simple forecasting methods" and 3.3 on the decomposition into a daily
    profile and what is left):

        base(h)  = the mean (or median) of the same hour on the `days` last days known before h
        f(h)     = base(h) + decay^a x (y(t) - base(t))

    where t is the last hour known and a = h - t the hours ahead: the daily profile of the last days, plus the last
    hour's departure from its own profile, fading by `decay` per hour (persistence of the weather: a windy night is
    likely still windy an hour later, hardly a day later). `days` = 1 and `decay` = 0 is the seasonal-naive forecast.
    A day with no value is skipped (up to `MAX_DAYS_BACK` days back) and a missing last hour adds no departure."""

    days: int = 1
    agg: Agg = Agg.MEAN
    decay: float = 0.0

    @property
    def label(self) -> str:
        if self.days == 1 and self.decay == 0:
            return "seasonal naive"
        base = f"{self.agg.value} of the same hour over {self.days} days"
        return base if self.decay == 0 else f"{base} + last hour's departure x {self.decay:g}^h"

    def predict(self, at: Callable[[IntArray], FloatArray], targets: IntArray, last_known: IntArray | int,
                ) -> FloatArray:
        """The forecast of `targets` (epoch hours, each after its `last_known` hour), reading the series through
        `at` (hours -> values, NaN where missing; any leading axes, the hours last)."""
        ahead = targets - last_known
        k = -(-ahead // SEASON_H)  # the least whole days back that reach a known hour
        back = np.stack([at(targets - SEASON_H * (k + j)) for j in range(self.days)])
        out = _aggregate(back, self.agg)
        for extra in range(self.days, max(self.days, MAX_DAYS_BACK)):
            missing = np.isnan(out)
            if not missing.any():
                break
            out[missing] = at(targets - SEASON_H * (k + extra))[missing]
        if self.decay > 0:
            last = np.broadcast_to(np.asarray(last_known, dtype=np.int64), targets.shape)
            profile = _aggregate(np.stack([at(last - SEASON_H * j) for j in range(1, self.days + 1)]), self.agg)
            departure = np.nan_to_num(at(last) - profile)
            out = out + departure * self.decay ** ahead.astype(np.float64)
        return out


def _aggregate(values: FloatArray, agg: Agg) -> FloatArray:
    """The mean or median over the first axis, ignoring NaN; NaN where every value is (without numpy's warning)."""
    if values.shape[0] == 1:
        out: FloatArray = values[0].copy()
        return out
    known = ~np.isnan(values)
    count = known.sum(axis=0)
    if agg is Agg.MEAN:
        total = np.where(known, values, 0.0).sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            result: FloatArray = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        return result
    filled = np.where(known, values, np.inf)
    ordered = np.sort(filled, axis=0)  # NaN (as inf) last; the median of the `count` known values per column
    lo = np.maximum((count - 1) // 2, 0)
    hi = np.maximum(count // 2, 0)
    low = np.take_along_axis(ordered, lo[None], axis=0)[0]
    high = np.take_along_axis(ordered, hi[None], axis=0)[0]
    median: FloatArray = np.where(count > 0, (low + high) / 2, np.nan)
    return median


SEASONAL_NAIVE = Forecaster()
# The default: chosen by measured error on held-out days of the shipped 2023 series (grid/README.md, "Forecasts"):
# the parameters tuned on days 1-9 of every month, the methods compared on days 10-31 (the days the benchmark's
# replays run on), day-ahead MAPE pooled over the eight zones 16.5% (seasonal naive) -> 12.7%.
DEFAULT_FORECASTER = Forecaster(days=7, agg=Agg.MEAN, decay=0.97)


def predicted(series: Dense, hours: IntArray, decided_hour: int, lag_h: int = 1,
              forecaster: Forecaster = DEFAULT_FORECASTER) -> FloatArray:
    """The forecast of `hours`, made at the start of epoch hour `decided_hour` with the series known through hour
    `decided_hour - lag_h`. A known hour (before the cut) is its own value."""
    known_until = decided_hour - lag_h  # the last known hour
    out = series.at(np.minimum(hours, known_until)) if series.values.size else np.full(hours.shape, np.nan)
    ahead = hours > known_until
    if ahead.any():
        out[ahead] = forecaster.predict(series.at, hours[ahead], known_until)
    return out


def seasonal_naive(series: Dense, hours: IntArray, decided_hour: int, lag_h: int = 1) -> FloatArray:
    """`predicted` by the seasonal-naive forecaster: y(h) = y(h - 24k), the least whole k that reaches a known hour."""
    return predicted(series, hours, decided_hour, lag_h, SEASONAL_NAIVE)


@dataclass(frozen=True)
class Error:
    """Mean absolute percentage error of a forecaster over a series, for horizons 1-24 h and 25-48 h,
    each over every hour of the series that can be forecast and has a measured value (`points`)."""

    day_ahead: float
    two_days_ahead: float
    points: int

    def text(self) -> str:
        return (f"MAPE {self.day_ahead:.1%} for 1-24 h ahead, {self.two_days_ahead:.1%} for 25-48 h, over "
                f"{self.points:,} forecast hours")


def mape(series: Dense, lag_h: int = 1, forecaster: Forecaster = DEFAULT_FORECASTER) -> Error | None:
    """The forecaster's error on the series itself (for each hour h and horizon H, the forecast made H hours
    before: `scored`). None when the series is too short to forecast a day ahead."""
    if series.values.size <= 2 * SEASON_H + lag_h:
        return None
    return scored(series, forecaster, lag_h).error()


@dataclass(frozen=True)
class Scored:
    """Sums of absolute percentage errors and their counts, for horizons 1-24 h and 25-48 h: poolable over series."""

    ape: tuple[float, float]
    count: tuple[int, int]

    def __add__(self, other: Scored) -> Scored:
        return Scored((self.ape[0] + other.ape[0], self.ape[1] + other.ape[1]),
                      (self.count[0] + other.count[0], self.count[1] + other.count[1]))

    def error(self) -> Error:
        day, two = (a / c if c else float("nan") for a, c in zip(self.ape, self.count, strict=True))
        return Error(day, two, sum(self.count))


def scored(series: Dense, forecaster: Forecaster, lag_h: int = 1, days: Callable[[IntArray], npt.NDArray[np.bool_]]
           | None = None) -> Scored:
    """The forecaster's errors on the series: every hour h with a measured value (> 0) forecast at each horizon
    H = 1..48 as it would have been H hours before (known through h - H + 1 - lag_h). `days` (epoch hours -> bool)
    keeps the hours scored, e.g. held-out days: the history the forecast reads is the whole series before them."""
    hours = np.arange(series.first, series.first + series.values.size, dtype=np.int64)
    actual = series.values
    keep = ~np.isnan(actual) & (actual > 0)
    if days is not None:
        keep &= days(hours)
    hours, actual = hours[keep], actual[keep]
    ape, count = [0.0, 0.0], [0, 0]
    for horizon in range(1, HORIZON_H + 1):
        guess = forecaster.predict(series.at, hours, hours - (horizon - 1 + lag_h))
        ok = ~np.isnan(guess)
        i = 0 if horizon <= SEASON_H else 1
        ape[i] += float((np.abs(guess[ok] - actual[ok]) / actual[ok]).sum())
        count[i] += int(ok.sum())
    return Scored((ape[0], ape[1]), (count[0], count[1]))


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
            forecast: Mapping[str, Dense] | None = None, lag_h: int = 1,
            forecaster: Forecaster = DEFAULT_FORECASTER) -> Outlook:
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
                row[gap] = predicted(series, span[gap], decided_hour, lag_h, forecaster)
                if not np.isnan(row[gap]).all():
                    used.append(forecaster.label)
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
                hours: int, method: Method, lag_h: int, forecaster: Forecaster = DEFAULT_FORECASTER) -> Outlook:
        span = np.arange(decided_hour, decided_hour + hours, dtype=np.int64)
        rows = np.array([self.index.get(r, -1) for r in regions], dtype=np.int64)
        have = rows >= 0
        values = np.full((len(regions), hours), np.nan)
        label = "measured (oracle)" if method is Method.ORACLE else forecaster.label
        if have.any():
            if method is Method.ORACLE:
                values[have] = self._at(rows[have], span)
            else:
                known_until = decided_hour - lag_h
                past = span <= known_until
                values[np.ix_(have, past)] = self._at(rows[have], span[past])
                future = span[~past]
                if future.size:
                    mine = rows[have]
                    values[np.ix_(have, ~past)] = forecaster.predict(lambda h: self._at(mine, h), future,
                                                                     known_until)
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
    forecaster: Forecaster = DEFAULT_FORECASTER

    def outlook(self, regions: tuple[str, ...] | list[str], decided_hour: int, hours: int,
                method: Method = Method.FORECAST) -> Outlook:
        if self.forecast:
            return outlook(regions, self.series, self.means, decided_hour, hours, method, self.forecast, self.lag_h,
                           self.forecaster)
        return self._stacked.outlook(regions, self.means, decided_hour, hours, method, self.lag_h, self.forecaster)

    @cached_property
    def _stacked(self) -> Stacked:
        return Stacked.of(self.series)

    def error(self, region: str) -> Error | None:
        series = self.series.get(region)
        return mape(series, self.lag_h, self.forecaster) if series is not None else None
