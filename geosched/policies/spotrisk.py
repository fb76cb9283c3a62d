"""Spot interruption risk and the risk-adjusted spot price: one pure resolver for the provisioning plan and the
placement cost term. The mapping and its sources are in geosched/policies/README.md ("Spot risk").

A signal (an AWS Spot placement score, the volatility of a spot price history, a provider's documented default)
becomes a per-node hourly interruption hazard; a gang of n nodes stops when any member is reclaimed, and each
stop costs the work since the last checkpoint (half an interval on average) plus the restart. So

    expected $ per useful hour = price/h x (1 + weight x P(gang interrupted in an hour) x rework hours)
    P(gang interrupted in an hour) = 1 - exp(-n x hazard)

(first order in the rework: the hours lost are billed at the same price). No signal is never zero risk: it is
priced at the worst score (`UNKNOWN`), and said so.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from geosched import clouds
from geosched.clouds import CloudSpec
from geosched.core.models import CommProfile

if TYPE_CHECKING:  # numpy is imported where it computes: the catalog and provision verbs read this module's rules
    import numpy as np
    import numpy.typing as npt

# Score 10 is anchored to the Spot Instance Advisor's best band (interruption frequency "<5%" per month,
# aws.amazon.com/ec2/spot/instance-advisor: <5%, 5-10%, 10-15%, 15-20%, >20%), its upper edge; score 1 to a
# median lifetime of one day (50% per day). The Advisor has no band beyond ">20%" and AWS publishes no mapping
# from placement scores to interruptions: the score-1 anchor is our assumption (a pool where a request "is not
# likely to succeed" has no spare capacity, so a running instance is first in line to be reclaimed). Scores in
# between are geometric: each step of the score divides the hazard by the same factor (~1.95).
HOURS_PER_MONTH = 730.0
HAZARD_BEST = -math.log(1.0 - 0.05) / HOURS_PER_MONTH  # score 10: ~7.0e-5 per node-hour
HAZARD_WORST = -math.log(1.0 - 0.50) / 24.0  # score 1: ~2.9e-2 per node-hour
# A cloud that publishes no interruption signal may document a daily preemption rate (its spec's
# `spot_daily_preemption`; GCP's, and why it is an assumption, in geosched.clouds.gcp): `documented_default`.
# Volatility: a spot price whose coefficient of variation over the window reaches this is scored 1, a flat one
# 10, linearly between (our assumption: since 2017 AWS moves spot prices gradually with long-term supply and
# demand, so a moving price means moving spare capacity; a weak signal, used only without a placement score).
CV_WORST = 0.20
VOLATILITY_WINDOW_S = 7 * 24 * 3600.0

Num = TypeVar("Num", float, "npt.NDArray[np.float64]")

SOURCE_SCORE = "aws:spot-placement-score"
SOURCE_VOLATILITY = "aws:spot-price-volatility"
DOCUMENTED_DEFAULT = "documented-default"  # a cloud's documented default is the source `<cloud>:documented-default`
SOURCE_UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class SpotRisk:
    """Per-node hourly interruption hazard, where it came from and when that source was observed."""

    hazard_per_hour: float
    source: str
    detail: str
    observed_at: float | None = None

    @property
    def known(self) -> bool:
        return self.source != SOURCE_UNKNOWN


@dataclass(frozen=True, slots=True)
class Rework:
    """What an interruption costs: half a checkpoint interval of lost work plus the restart. Defaults (1 h
    between checkpoints, 15 min to relaunch, rejoin and load) are assumptions, overridable per run."""

    checkpoint_interval_h: float = 1.0
    restart_h: float = 0.25

    @property
    def hours(self) -> float:
        return self.checkpoint_interval_h / 2.0 + self.restart_h

    @staticmethod
    def of(profile: CommProfile) -> Rework:
        """A job's own: its profile's `checkpoint_minutes` and `restart_minutes` (defaults as above)."""
        return Rework(profile.checkpoint_minutes / 60.0, profile.restart_minutes / 60.0)


@dataclass(frozen=True, slots=True)
class Volatility:
    cv: float
    changes: int
    samples: int


def hazard_from_score(score: float) -> float:
    """Per-node hourly hazard for an AWS Spot placement score (1-10; clamped)."""
    s = min(10.0, max(1.0, float(score)))
    return HAZARD_WORST * math.exp(math.log(HAZARD_BEST / HAZARD_WORST) * (s - 1.0) / 9.0)


def score_from_volatility(v: Volatility) -> float:
    return 10.0 - 9.0 * min(1.0, v.cv / CV_WORST)


def volatility(history: Sequence[tuple[float, float]], start: float, end: float) -> Volatility | None:
    """Time-weighted coefficient of variation and the number of price changes of one spot price history,
    (timestamp, price) records as DescribeSpotPriceHistory lists them, over [start, end]. Each price holds until
    the next record; the newest one before `start` is the price in force at the start. None without a price."""
    points = sorted(history)
    before = [p for p in points if p[0] <= start]
    inside = [p for p in points if start < p[0] <= end]
    steps = ([(start, before[-1][1])] if before else []) + inside
    if not steps:
        return None
    total = weighted = squares = 0.0
    for (at, price), nxt in zip(steps, [*steps[1:], (end, 0.0)], strict=True):
        span = max(0.0, nxt[0] - at)
        total += span
        weighted += span * price
        squares += span * price * price
    if total <= 0 or weighted <= 0:
        return Volatility(0.0, 0, len(steps))
    mean = weighted / total
    var = max(0.0, squares / total - mean * mean)
    changes = sum(1 for a, b in itertools.pairwise(steps) if a[1] != b[1])
    return Volatility(math.sqrt(var) / mean, changes, len(steps))


def from_score(score: float, observed_at: float | None, target: int | None = None) -> SpotRisk:
    of = f" for {target} instances" if target else ""
    return SpotRisk(hazard_from_score(score), SOURCE_SCORE, f"placement score {score:g}/10{of}", observed_at)


def from_volatility(v: Volatility, observed_at: float | None) -> SpotRisk:
    score = score_from_volatility(v)
    return SpotRisk(hazard_from_score(score), SOURCE_VOLATILITY,
                    f"price cv {v.cv:.3f}, {v.changes} changes in 7 d (as score {score:.1f})", observed_at)


def documented_default(spec: CloudSpec) -> SpotRisk | None:
    """The risk a cloud's documented daily preemption rate implies, None when its spec documents none."""
    daily = spec.spot_daily_preemption
    if daily is None:
        return None
    return SpotRisk(-math.log(1.0 - daily) / 24.0, f"{spec.name}:{DOCUMENTED_DEFAULT}",
                    f"no {spec.title} interruption API; documented {daily:.0%}/day assumed")


UNKNOWN = SpotRisk(HAZARD_WORST, SOURCE_UNKNOWN, "no signal: priced at the worst score (1/10)")


def gang_interruption_per_hour(risk: SpotRisk, nodes: int) -> float:
    """P(at least one of `nodes` members is reclaimed within an hour)."""
    return float(factor(risk.hazard_per_hour, nodes, 1.0, 1.0)) - 1.0


def risk_factor(risk: SpotRisk, nodes: int, rework: Rework = Rework(), weight: float = 1.0) -> float:
    """The multiplier on a spot gang's $/h: 1 + weight x P(interrupted in an hour) x rework hours."""
    return float(factor(risk.hazard_per_hour, nodes, rework.hours, weight))


def factor(hazard: Num, nodes: Num, rework_h: float, weight: float) -> Num:
    """`risk_factor` on plain numbers or element-wise on arrays (the placement context prices every node at
    once): 1 + weight x (1 - exp(-nodes x hazard)) x rework hours."""
    import numpy as np

    return 1.0 + weight * -np.expm1(-np.maximum(nodes, 0) * hazard) * rework_h  # type: ignore[no-any-return]


def adjusted_usd_per_hour(usd_per_hour: float, risk: SpotRisk, nodes: int, rework: Rework = Rework(),
                          weight: float = 1.0) -> float:
    """Expected $ per useful hour of a spot gang: the one function the plan and the placement cost term use."""
    return usd_per_hour * risk_factor(risk, nodes, rework, weight)


def resolve(provider: str, score: SpotRisk | None = None, volatility_risk: SpotRisk | None = None) -> SpotRisk:
    """The risk of one spot offering: a placement score, else the price volatility, else the provider's
    documented default (its cloud spec's; GCP), else UNKNOWN (the worst score, never zero)."""
    if score is not None:
        return score
    if volatility_risk is not None:
        return volatility_risk
    spec = clouds.get(provider)
    documented = documented_default(spec) if spec is not None else None
    return documented if documented is not None else UNKNOWN
