"""CostReport and CarbonReport: what `geosched report cost|carbon -o json|yaml` prints: rows by the grouping,
totals, the prices used, baselines (METHODOLOGY.md). Declared for the shape and the schema, and what writes them
(geosched.report.formats builds the rows, geosched.report.report the document); the rows' keys are the table's
columns too (geosched.console.lists.report_columns, a test compares them)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from geosched.files.decl.base import Declared, OutputDocument, Time

GROUPS = ("job", "cluster", "region", "provider", "day")


def _one_group(schema: dict[str, Any]) -> None:
    """Exactly one group key; no default written (a key not given is left out, not empty or null)."""
    for prop in schema["properties"].values():
        prop.pop("default", None)
    schema["oneOf"] = [{"required": [g]} for g in GROUPS]


def _group() -> Any:
    # A group key the report is not grouped by is left out (not written empty or null).
    return Field(default="", exclude_if=lambda key: not key)


class _Row(Declared):
    """One group: its key under the report's `by` (exactly one of job, cluster, region, provider, day)"""

    model_config = ConfigDict(json_schema_extra=_one_group)
    WRITE_NULLS: ClassVar[bool] = True  # written alone too: the CSV, Markdown and table rows are these


    job: str = _group()
    cluster: str = _group()
    region: str = _group()
    provider: str = _group()
    day: str = _group()
    intervals: int
    gpu_hours: float


class CostRow(_Row):
    __doc__ = f"{_Row.__doc__}; grams and seconds as in the keys"

    cost_usd: float
    usd_per_gpu_hour: float | None
    priced_from: str | None
    unpriced_gpu_hours: float


class CarbonRow(_Row):
    __doc__ = f"{_Row.__doc__}; grams and seconds as in the keys"

    energy_kwh: float
    gco2e: float
    gco2e_per_kwh: float | None
    uncounted_kwh: float


class EmbodiedCarbonRow(CarbonRow):
    __doc__ = f"{_Row.__doc__} (report carbon --embodied); grams and seconds as in the keys"

    embodied_gco2e: float | None


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
    report: str
    by: str
    since: Time | None
    until: Time
    generated_at: Time
    usage: str
    rows: list[Any]
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
    rows: list[EmbodiedCarbonRow | CarbonRow]  # the first with --embodied
