"""The shapes the report passes around: an interval of use, and the priced, costed pieces it is cut into."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from geosched.core.models import Pricing, region_key
from geosched.store.usage import Kind, Source

__all__ = ["Interval", "Kind", "Line", "Origin", "PricedFrom", "Source"]


class PricedFrom(StrEnum):
    """Where a piece's price came from, worst last; every row of the report names it."""

    # A node of a node group on an EC2 Capacity Block: the block's upfront fee spread evenly over its duration
    # (fee / nodes / hours), the price actually paid, not the catalog's on-demand price.
    BLOCK = "capacity-block"
    HISTORY = "history"
    # The piece lies before the offering's first observation: the earliest observed price stands in for it.
    HISTORY_EARLIEST = "history-earliest"
    CATALOG = "catalog"
    NONE = "unpriced"


class Usage(StrEnum):
    """Which intervals count. Node intervals are what a provider bills; job intervals what a job used. `auto`
    counts every node interval, and the job intervals of jobs no node interval was recorded for, so a job on
    nodes geosched launched is not counted twice. Here, beside the records, not in accounting (which selects by
    it): `geosched report`'s --usage option names it, and -h must not load the accounting (issue 25)."""

    AUTO = "auto"
    NODE = "node"
    JOB = "job"


class Origin(StrEnum):
    LEDGER = "ledger"
    JOURNAL = "journal"
    MODEL = "model"


@dataclass(frozen=True, slots=True)
class Interval:
    """One interval of use: a node held (kind node) or a job ran (kind job) on `gpus` GPUs of `gpu`.

    `end` is None while it runs. `job` is the gang of a node, or the job of a job row. `origin` says whether
    the row is in the ledger, was derived from the providers' journal, or was made up by a baseline.
    """

    kind: Kind
    name: str
    job: str | None
    provider: str
    region: str
    zone: str | None
    cluster: str | None
    instance_type: str | None
    gpu: str
    gpus: int
    pricing: Pricing
    start: float
    end: float | None
    source: Source
    id: int | None = None
    ref: str | None = None
    utilisation: float | None = None
    origin: Origin = Origin.LEDGER

    @property
    def region_key(self) -> str:
        return region_key(self.provider, self.region)

    @property
    def nodegroup(self) -> bool:
        """A node of a node group or node pool geosched created in a cluster (`provision --cluster`, `up`): a
        provider's node row carrying a cluster (a machine's rows carry none; nodegroups/journal.py writes them),
        charged from the group's create to its deletion, idle time included."""
        return self.kind is Kind.NODE and self.source is Source.PROVIDER and self.cluster is not None

    @property
    def job_name(self) -> str:
        return self.job or (self.name if self.kind is Kind.JOB else "(no job)")


@dataclass(frozen=True, slots=True)
class Line:
    """One piece of an interval inside the report window, with one price and one grid intensity.

    Pieces are cut at price changes, at UTC midnights (so days group exactly) and, where an hourly carbon
    series is given for the region, at every hour.
    """

    interval: Interval
    start: float
    end: float
    gpu_hours: float
    usd: float | None
    usd_per_node_hour: float | None
    priced_from: PricedFrom
    energy_kwh: float
    gco2e: float | None
    gco2e_per_kwh: float | None
    embodied_gco2e: float | None = None

    @property
    def hours(self) -> float:
        return (self.end - self.start) / 3600.0
