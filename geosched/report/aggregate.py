"""Lines -> one row per job, cluster, region, provider or UTC day, and time series for the charts. Pure."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from geosched.report.records import Line, PricedFrom
from geosched.report.window import day


class Grouping(StrEnum):
    JOB = "job"
    CLUSTER = "cluster"
    REGION = "region"
    PROVIDER = "provider"
    DAY = "day"


class ReportKind(StrEnum):
    COST = "cost"
    CARBON = "carbon"


@dataclass(frozen=True, slots=True)
class Group:
    """Sums over the lines of one group. `usd` counts priced lines only (`unpriced_gpu_hours` says how much was
    left out); `gco2e` counts lines with a known grid intensity only (`uncounted_kwh` is the rest)."""

    key: str
    intervals: int
    gpu_hours: float
    usd: float
    unpriced_gpu_hours: float
    priced_from: tuple[PricedFrom, ...]
    energy_kwh: float
    gco2e: float
    uncounted_kwh: float
    embodied_gco2e: float | None

    @property
    def usd_per_gpu_hour(self) -> float | None:
        priced = self.gpu_hours - self.unpriced_gpu_hours
        return self.usd / priced if priced > 0 else None

    @property
    def gco2e_per_kwh(self) -> float | None:
        counted = self.energy_kwh - self.uncounted_kwh
        return self.gco2e / counted if counted > 0 else None

    @property
    def priced_from_label(self) -> str | None:
        """The pricings used (`ondemand+spot`), or None when nothing was priced."""
        return "+".join(p.value for p in self.priced_from) or None


def group_key(line: Line, by: Grouping) -> str:
    i = line.interval
    if by is Grouping.JOB:
        return i.job_name
    if by is Grouping.CLUSTER:
        return i.cluster or "(no cluster)"
    if by is Grouping.REGION:
        return i.region_key
    if by is Grouping.PROVIDER:
        return i.provider
    return day(line.start)


def summarise(key: str, lines: Sequence[Line]) -> Group:
    sources = {line.priced_from for line in lines}
    embodied = [line.embodied_gco2e for line in lines if line.embodied_gco2e is not None]
    return Group(
        key=key,
        intervals=len({id(line.interval) for line in lines}),
        gpu_hours=math.fsum(line.gpu_hours for line in lines),
        usd=math.fsum(line.usd for line in lines if line.usd is not None),
        unpriced_gpu_hours=math.fsum(line.gpu_hours for line in lines if line.usd is None),
        priced_from=tuple(p for p in PricedFrom if p in sources),
        energy_kwh=math.fsum(line.energy_kwh for line in lines),
        gco2e=math.fsum(line.gco2e for line in lines if line.gco2e is not None),
        uncounted_kwh=math.fsum(line.energy_kwh for line in lines if line.gco2e is None),
        embodied_gco2e=math.fsum(embodied) if embodied else None,
    )


def aggregate(lines: Iterable[Line], by: Grouping, kind: ReportKind = ReportKind.COST) -> list[Group]:
    """Days in date order; other groups largest first (by $ or by gCO2e, as the report's kind), then by name."""
    buckets: dict[str, list[Line]] = {}
    for line in lines:
        buckets.setdefault(group_key(line, by), []).append(line)
    groups = [summarise(key, items) for key, items in buckets.items()]
    if by is Grouping.DAY:
        return sorted(groups, key=lambda g: g.key)
    if kind is ReportKind.COST:
        return sorted(groups, key=lambda g: (-g.usd, g.key))
    return sorted(groups, key=lambda g: (-g.gco2e, g.key))


def total(lines: Sequence[Line]) -> Group:
    return summarise("total", lines)


def usd_by_source(lines: Iterable[Line]) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in lines:
        if line.usd is not None:
            out[line.priced_from.value] = out.get(line.priced_from.value, 0.0) + line.usd
    return {p.value: out[p.value] for p in PricedFrom if p.value in out}


def series(lines: Iterable[Line], key: Callable[[Line], str], bucket_s: float,
           value: Callable[[Line], float | None]) -> dict[str, dict[float, float]]:
    """value per key per time bucket; a line spanning buckets is shared out by time (its rate is constant)."""
    out: dict[str, dict[float, float]] = {}
    for line in lines:
        amount = value(line)
        if amount is None or line.end <= line.start:
            continue
        per_s = amount / (line.end - line.start)
        t = line.start
        while t < line.end:
            bucket = math.floor(t / bucket_s) * bucket_s
            upto = min(line.end, bucket + bucket_s)
            row = out.setdefault(key(line), {})
            row[bucket] = row.get(bucket, 0.0) + per_s * (upto - t)
            t = upto
    return out
