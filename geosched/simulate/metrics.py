"""What one replay produced, per job and per policy, and the summary that turns the first into the second.

- JCT: finish - submit; avg and p95 (numpy's linear interpolation between ranks).
- queueing delay: start - submit, averaged.
- makespan: last finish - first submit.
- GPU utilisation: GPU-seconds the trace's jobs held / (GPUs free at the start on ready nodes x makespan);
  GPUs busy in the snapshot stay busy and are not counted as capacity.
- $: each job's gang price per hour (the placement's `usd_per_hour`) x its hours; kgCO2e likewise from the
  placement's `gco2e_per_hour`, or, in a replay with an hourly series, the grid of every hour it runs
  (`geosched.simulate.shifting`). A job is billed for the time it runs, network waits included.
- flexible jobs (with slack): how many ran, how many finished after their deadline (`deadline_misses`), and the
  average JCT of the other jobs (`avg_jct_inflexible_s`, what time shifting must not make worse).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: str
    submit_s: float
    start_s: float
    finish_s: float
    gpus: int
    workers: int
    zones: tuple[str, ...]
    regions: tuple[str, ...]
    slowdown: float
    usd: float
    kgco2e: float
    flexible: bool = False
    deadline_s: float | None = None

    @property
    def missed(self) -> bool:
        """Finished after its deadline (a flexible job's promise)."""
        return self.deadline_s is not None and self.finish_s > self.deadline_s + 1e-6

    @property
    def jct_s(self) -> float:
        return self.finish_s - self.submit_s

    @property
    def queue_s(self) -> float:
        return self.start_s - self.submit_s

    @property
    def run_s(self) -> float:
        return self.finish_s - self.start_s


@dataclass(frozen=True, slots=True)
class Unplaced:
    """A job no placement could ever hold on this fleet under this policy (even with the fleet idle)."""

    id: str
    line: int
    reason: str


@dataclass(frozen=True)
class PolicyResult:
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
    flexible_jobs: int = 0
    deadline_misses: int = 0
    avg_jct_inflexible_s: float = 0.0
    records: tuple[JobRecord, ...] = field(default=(), repr=False, compare=False)
    unplaced_jobs: tuple[Unplaced, ...] = field(default=(), repr=False, compare=False)

    def summary(self) -> dict[str, str | int | float]:
        """The scalar fields, in declaration order: one row of a table, CSV or JSON document."""
        return {
            "policy": self.policy,
            "avg_jct_s": self.avg_jct_s,
            "p95_jct_s": self.p95_jct_s,
            "makespan_s": self.makespan_s,
            "avg_queue_s": self.avg_queue_s,
            "gpu_util": self.gpu_util,
            "cost_usd": self.cost_usd,
            "kgco2e": self.kgco2e,
            "jobs": self.jobs,
            "unplaced": self.unplaced,
            "avg_slowdown": self.avg_slowdown,
            "multi_zone_jobs": self.multi_zone_jobs,
            "flexible_jobs": self.flexible_jobs,
            "deadline_misses": self.deadline_misses,
            "avg_jct_inflexible_s": self.avg_jct_inflexible_s,
        }


def summarise(policy: str, records: Sequence[JobRecord], unplaced: Sequence[Unplaced],
              capacity_gpus: int) -> PolicyResult:
    if not records:
        return PolicyResult(policy, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, len(unplaced), 0.0, 0,
                            unplaced_jobs=tuple(unplaced))
    submit = np.array([r.submit_s for r in records])
    start = np.array([r.start_s for r in records])
    finish = np.array([r.finish_s for r in records])
    gpus = np.array([r.gpus for r in records], dtype=np.float64)
    jct = finish - submit
    makespan = float(finish.max() - submit.min())
    busy = float((gpus * (finish - start)).sum())
    util = busy / (capacity_gpus * makespan) if capacity_gpus > 0 and makespan > 0 else 0.0
    return PolicyResult(
        policy=policy,
        avg_jct_s=float(jct.mean()),
        p95_jct_s=float(np.percentile(jct, 95)),
        makespan_s=makespan,
        avg_queue_s=float((start - submit).mean()),
        gpu_util=util,
        cost_usd=float(sum(r.usd for r in records)),
        kgco2e=float(sum(r.kgco2e for r in records)),
        jobs=len(records),
        unplaced=len(unplaced),
        avg_slowdown=float(np.mean([r.slowdown for r in records])),
        multi_zone_jobs=sum(1 for r in records if len(r.zones) > 1),
        flexible_jobs=sum(1 for r in records if r.flexible),
        deadline_misses=sum(1 for r in records if r.missed),
        avg_jct_inflexible_s=float(np.mean([r.jct_s for r in records if not r.flexible] or [0.0])),
        records=tuple(records),
        unplaced_jobs=tuple(unplaced),
    )
