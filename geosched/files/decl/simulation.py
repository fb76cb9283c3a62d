"""SimulationReport: what `geosched simulate -o json|yaml` prints, one result per policy (seconds), the jobs left
unplaced by each. Built by geosched.cli.simulate.report_doc from `PolicyResult.summary`, which prints what it dumps."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from geosched.files.decl.base import Declared, OutputDocument


class PolicyResultRow(Declared):
    policy: str
    avg_jct_s: float
    p95_jct_s: float
    makespan_s: float
    avg_queue_s: float
    gpu_util: float
    cost_usd: float
    kgco2e: float
    jobs: int
    unplaced: int
    avg_slowdown: float
    multi_zone_jobs: int
    flexible_jobs: int = Field(description="jobs that had slack (simulate --time-shift)")
    deadline_misses: int = Field(description="flexible jobs that finished after their deadline")
    avg_jct_inflexible_s: float = Field(description="average JCT of the jobs without slack")


class UnplacedJob(Declared):
    id: str | int
    line: int | None
    reason: str


class SimulationReportDoc(OutputDocument):
    KIND: ClassVar[str] = "SimulationReport"
    DESCRIPTION: ClassVar[str] = (
        "A trace replay under one or more policies (`geosched simulate`): one result per policy, seconds."
    )

    trace: str
    format: str
    fleet: str
    jobs_read: int
    rows_with_errors: int
    rows_skipped: int
    results: list[PolicyResultRow]
    unplaced: dict[str, list[UnplacedJob]] = Field(description="by policy: the jobs it left unplaced")
