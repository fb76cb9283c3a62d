"""The candidates of a placement, ranked for a picture: the chosen one first, then the others by total score
(lower is better), each split into its weighted terms. Pure: models in, values out."""

from __future__ import annotations

from dataclasses import dataclass

from geosched.core.models import Placement, Score, Weights

TERMS = ("network", "cost", "carbon")
SHOWN = 15


@dataclass(frozen=True, slots=True)
class RankedCandidate:
    rank: int
    chosen: bool
    zones: tuple[str, ...]
    cluster: str | None
    terms: tuple[float, float, float]  # weight x normalised term, in TERMS order; they sum to the total
    total: float
    step_ms: float
    usd_per_hour: float

    @property
    def label(self) -> str:
        return f"{self.rank}. {', '.join(self.zones)} · {self.cluster or 'no cluster'}"


def weighted_terms(score: Score, weights: Weights) -> tuple[float, float, float]:
    return (weights.network * score.network, weights.cost * score.cost, weights.carbon * score.carbon)


def ranked(placement: Placement, shown: int = SHOWN) -> tuple[list[RankedCandidate], int]:
    """The first `shown` candidates (0: all), chosen first, and how many there are in all."""
    others = sorted(placement.alternatives, key=lambda c: c.score.total)
    entries = [(placement.zones, placement.cluster, placement.score), *((c.zones, c.cluster, c.score) for c in others)]
    out = [RankedCandidate(rank=i + 1, chosen=i == 0, zones=zones, cluster=cluster,
                           terms=weighted_terms(score, placement.weights), total=score.total, step_ms=score.step_ms,
                           usd_per_hour=score.usd_per_hour)
           for i, (zones, cluster, score) in enumerate(entries[:shown or None])]
    return out, len(entries)
