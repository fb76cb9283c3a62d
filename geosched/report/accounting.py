"""Intervals of use -> priced, costed, emitted pieces (`Line`s) inside the report window. Pure.

A node interval is charged the whole node; a job interval its GPUs' share of the node (gpus / the node's GPUs),
for price, CPU and memory alike. Pieces are cut at every price change, every UTC midnight and, in a region with
an hourly carbon series, every hour, so each piece has one price and one grid intensity.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from geosched.core import energy as model
from geosched.core.models import CarbonSignal, Region
from geosched.core.specs import InstanceSpec, SpecIndex
from geosched.report import energy as en
from geosched.report.prices import PriceBook, PriceKey
from geosched.report.records import Interval, Kind, Line, PricedFrom, Usage
from geosched.report.window import Window

HOUR_S = 3600.0
DAY_S = 86400.0


def select(intervals: Iterable[Interval], usage: Usage) -> list[Interval]:
    items = list(intervals)
    if usage is Usage.NODE:
        return [i for i in items if i.kind is Kind.NODE]
    if usage is Usage.JOB:
        return [i for i in items if i.kind is Kind.JOB]
    billed = {i.job for i in items if i.kind is Kind.NODE and i.job}
    return [i for i in items if i.kind is Kind.NODE or i.job_name not in billed]


@dataclass(frozen=True)
class Rates:
    """Every figure the accounting reads, as snapshots."""

    prices: PriceBook
    specs: SpecIndex
    platforms: Mapping[tuple[str, str], InstanceSpec]
    regions: Mapping[str, Region]
    energy: model.EnergyModel
    carbon: CarbonSignal | None = None
    # USD per node-hour fixed by what was paid, by (cluster, node interval name): nodes on a Capacity Block.
    fixed: Mapping[tuple[str, str], float] = field(default_factory=dict)

    def hourly(self, region: str) -> bool:
        return self.carbon is not None and self.carbon.varies(region)

    def intensity(self, region: str, start: float) -> float | None:
        """gCO2e/kWh at `start` (`CarbonSignal.lookup`: the measured hour, the profile's hour at whole hours since
        the Unix epoch mod N, so a 24-value profile is by UTC hour of day, the signal's mean), else the region's
        grid."""
        found = self.carbon.lookup(region, start) if self.carbon is not None else None
        if found is not None:
            return found[0]
        known = self.regions.get(region)
        return known.grid_gco2e_per_kwh if known else None


@dataclass(frozen=True)
class Accounted:
    lines: tuple[Line, ...]
    notes: tuple[str, ...] = field(default=())


def account(intervals: Iterable[Interval], window: Window, rates: Rates) -> Accounted:
    lines: list[Line] = []
    notes: set[str] = set()
    for interval in intervals:
        lines.extend(interval_lines(interval, window, rates, notes))
    return Accounted(tuple(lines), tuple(sorted(notes)))


def interval_lines(interval: Interval, window: Window, rates: Rates, notes: set[str]) -> list[Line]:
    start = interval.start if window.since is None else max(interval.start, window.since)
    end = window.until if interval.end is None else min(interval.end, window.until)
    if end <= start:
        return []
    fixed = rates.fixed.get((interval.cluster or "", interval.name)) if interval.kind is Kind.NODE else None
    key = _price_key(interval)
    changes = rates.prices.changes(key, start, end) if key and fixed is None else []
    hourly = rates.hourly(interval.region_key)
    bounds = [start, *cuts(start, end, HOUR_S if hourly else DAY_S, changes), end]
    spec = rates.specs.get((interval.provider, interval.instance_type or ""))
    share = _share(interval, spec)
    power, own = rates.energy.gpu(interval.gpu)
    if not own:
        notes.add(f"GPU {interval.gpu} has no power figures: counted as {power.gpu} ({power.max_watts:g} W max)")
    if spec is None:
        notes.add(f"no vCPU or memory figures for {interval.provider} {interval.instance_type or '(no instance type)'}"
                  f": GPU energy only, and a job on it is charged the whole node")
    pue, own_pue = model.pue(rates.regions, interval.region_key)
    if not own_pue:
        notes.add(f"no PUE for region {interval.region_key}: {pue} assumed")
    platform = rates.platforms.get((spec.provider, spec.family)) if spec else None
    if rates.energy.embodied and platform is None:
        notes.add(f"no platform figures for {interval.provider} {interval.instance_type}: embodied emissions not "
                  f"counted")
    utilisation = rates.energy.gpu_utilisation if interval.utilisation is None else interval.utilisation
    out = []
    for a, b in pairwise(bounds):
        hours = (b - a) / HOUR_S
        usd_h: float | None
        if fixed is not None:
            usd_h, priced_from = fixed, PricedFrom.BLOCK
        else:
            usd_h, priced_from = rates.prices.price(key, a, interval.region) if key else (None, PricedFrom.NONE)
        if usd_h is None:
            notes.add(f"no price for {interval.provider} {interval.instance_type or '(no instance type)'} in "
                      f"{interval.zone or interval.region} ({interval.pricing.value}): its cost is not counted")
        use = rates.energy.use(hours, interval.gpus, power, utilisation, interval.provider, spec, share, pue)
        intensity = rates.intensity(interval.region_key, a)
        if intensity is None:
            notes.add(f"no grid intensity for region {interval.region_key}: its emissions are not counted")
        embodied = (en.embodied_g(platform, spec.vcpus * share, hours)
                    if rates.energy.embodied and platform is not None and spec is not None else None)
        out.append(Line(
            interval=interval, start=a, end=b, gpu_hours=interval.gpus * hours,
            usd=None if usd_h is None else usd_h * hours * share, usd_per_node_hour=usd_h, priced_from=priced_from,
            energy_kwh=use.kwh, gco2e=None if intensity is None else en.emissions_g(use.kwh, intensity),
            gco2e_per_kwh=intensity, embodied_gco2e=embodied))
    return out


def cuts(start: float, end: float, step: float, extra: Sequence[float] = ()) -> list[float]:
    """Multiples of `step` and the `extra` moments strictly inside (start, end), sorted, each once."""
    first = math.floor(start / step) + 1
    last = math.ceil(end / step) - 1
    grid = [k * step for k in range(first, last + 1)]
    return sorted({t for t in (*grid, *extra) if start < t < end})


def _price_key(interval: Interval) -> PriceKey | None:
    if not interval.instance_type:
        return None
    return (interval.provider, interval.instance_type, interval.zone or "", interval.pricing.value)


def _share(interval: Interval, spec: InstanceSpec | None) -> float:
    """The fraction of the node an interval pays for: all of it for a node, its GPUs' share for a job."""
    if interval.kind is Kind.NODE or spec is None or spec.gpus <= 0:
        return 1.0
    return min(1.0, interval.gpus / spec.gpus)
