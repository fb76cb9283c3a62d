"""CostReport and CarbonReport: what `geosched report cost|carbon -o json|yaml` prints (geosched.report.formats builds
them): rows by the grouping, totals, the prices used, baselines (METHODOLOGY.md). Declared for the shape and the
schema; the rows' keys are the table's columns too (geosched.console.kinds.report_columns, a test compares them)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict

from geosched.files.decl.base import Declared, OutputDocument, Time

GROUPS = ("job", "cluster", "region", "provider", "day")


def _one_group(schema: dict[str, Any]) -> None:
    """Exactly one group key; no default written (a key not given is left out, not empty or null)."""
    for prop in schema["properties"].values():
        prop.pop("default", None)
    schema["oneOf"] = [{"required": [g]} for g in GROUPS]


class _Row(Declared):
    """One group: its key under the report's `by` (exactly one of job, cluster, region, provider, day)"""

    model_config = ConfigDict(json_schema_extra=_one_group)

    job: str = ""
    cluster: str = ""
    region: str = ""
    provider: str = ""
    day: str = ""
    intervals: int
    gpu_hours: float


class CostRow(_Row):
    __doc__ = f"{_Row.__doc__}; grams and seconds as in the keys"

    cost_usd: float
    usd_per_gpu_hour: float | None
    priced_from: str | None
    unpriced_gpu_hours: float


class CarbonRow(_Row):
    __doc__ = f"{_Row.__doc__}; embodied_gco2e only with --embodied; grams and seconds as in the keys"

    energy_kwh: float
    gco2e: float
    gco2e_per_kwh: float | None
    uncounted_kwh: float
    embodied_gco2e: float | None = None


class Total(Declared):
    intervals: int
    gpu_hours: float
    cost_usd: float | None
    unpriced_gpu_hours: float
    energy_kwh: float
    gco2e: float
    uncounted_kwh: float
    embodied_gco2e: float | None


class Saving(Declared):
    """What the recorded placements saved over one baseline policy, on the same jobs."""

    baseline: str
    jobs: int
    baseline_usd: float
    recorded_usd: float
    saved_usd: float
    baseline_gco2e: float
    recorded_gco2e: float
    saved_gco2e: float
    run_ratio: float
    saved_usd_at_equal_run_time: float
    saved_gco2e_at_equal_run_time: float
    stands_on: str


class BaselineJob(Declared):
    job: str
    placement: str
    policy: str
    usd: float | None
    gco2e: float | None
    zones: list[str]
    regions: list[str]
    run_ratio: float | None
    bound: str | None
    note: str | None


class Baselines(Declared):
    snapshot: str | None
    savings: list[Saving]
    jobs: list[BaselineJob]


class _Report(OutputDocument):
    by: str
    since: Time | None
    until: Time
    generated_at: Time
    usage: str
    total: Total
    priced_from_usd: dict[str, float]
    baselines: Baselines
    notes: list[str]
    methodology: str


class CostReportDoc(_Report):
    KIND: ClassVar[str] = "CostReport"
    DESCRIPTION: ClassVar[str] = (
        "`geosched report cost -o json|yaml`: rows by the grouping, totals, baselines (METHODOLOGY.md)."
    )

    report: Literal["cost"]
    rows: list[CostRow]


class CarbonReportDoc(_Report):
    KIND: ClassVar[str] = "CarbonReport"
    DESCRIPTION: ClassVar[str] = (
        "`geosched report carbon -o json|yaml`: rows by the grouping, totals, baselines (METHODOLOGY.md)."
    )

    report: Literal["carbon"]
    rows: list[CarbonRow]
