"""Worker clusters ranked for one gang by the placement policy. Pure: a placement context in, a ranking out.

The context holds every worker cluster's nodes at once (one `PlacementContext`, nodes tagged with their
MultiKueueCluster's name), so the score's references (the median $/GPU-h and gCO2e/GPU-h of eligible nodes
of all the clusters read, the ideal step time) are the same for every cluster and scores compare across
clusters. The job's view is built once (`policies.job_view`); each cluster is then the same view with the
other clusters' nodes made ineligible, given to the registered policy. A cluster holds the gang when the
policy places it there; one whose free slots (free GPUs // GPUs per worker, on eligible nodes) are fewer than
the workers is refused without asking the policy.

Order: for `zone-first`, its own ranking of candidates (one region before several, fewer zones, then the
score); for every other policy, the score. Ties: cheaper per hour, then the cluster name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from geosched.models import Job, NoFit, Placement, Weights
from geosched.policies import PlacementContext, job_view
from geosched.policies.base import registry
from geosched.policies.context import IntArray

ZONE_FIRST = "zone-first"


@dataclass(frozen=True)
class Ranking:
    """Placements of the gang on the clusters that hold it, best first; why each other cluster does not."""

    job: Job
    fits: tuple[Placement, ...]
    refused: tuple[tuple[str, str], ...]

    def cluster_names(self) -> list[str]:
        return [p.cluster or "" for p in self.fits]


def rank(job: Job, ctx: PlacementContext, clusters: Sequence[str], *, policy: str = ZONE_FIRST,
         weights: Weights | None = None) -> Ranking:
    fn = registry()[policy]
    index = {c: i for i, c in enumerate(ctx.cluster_names)}
    known = [c for c in clusters if c in index]
    refused: list[tuple[str, str]] = [(c, "no GPU node read from it") for c in clusters if c not in index]
    fits: list[Placement] = []
    if known:
        view = job_view(ctx, job, weights or Weights(), explain=False)
        room = np.bincount(ctx.cluster_of, weights=view.capacity, minlength=len(ctx.cluster_names))
        for cluster in known:
            if room[index[cluster]] < job.workers:  # cannot hold it whatever the policy: no need to ask
                refused.append((cluster, f"the largest pool holds {int(room[index[cluster]])} of {job.workers} "
                                         f"workers"))
                continue
            mine = ctx.cluster_of == index[cluster]
            outcome = fn(replace(view, eligible=view.eligible & mine, capacity=np.where(mine, view.capacity, 0)))
            if isinstance(outcome, Placement):
                fits.append(outcome)
            else:
                refused.append((cluster, _why(outcome)))
    fits.sort(key=_order(policy))
    return Ranking(job, tuple(fits), tuple(refused))


def _order(policy: str) -> Callable[[Placement], tuple[int, int, float, float, str]]:
    def key(p: Placement) -> tuple[int, int, float, float, str]:
        if policy == ZONE_FIRST:
            return (int(len(p.regions) > 1), len(p.zones), p.score.total, p.score.usd_per_hour, p.cluster or "")
        return (0, 0, p.score.total, p.score.usd_per_hour, p.cluster or "")
    return key


def _why(nofit: NoFit) -> str:
    reason = nofit.reasons[0].reason if nofit.reasons else "does not hold the gang"
    # The policy names its pool "(GPU, cluster C)"; the cluster is already the subject here.
    return reason.split(", cluster ")[0] + (")" if ", cluster " in reason else "")


def taken(ctx: PlacementContext, placement: Placement, index: Mapping[str, int]) -> IntArray:
    """Free GPUs of the context once `placement` holds its nodes (for the next gang of the same pass)."""
    free = ctx.gpus_free.copy()
    g = placement.job.gpus_per_worker
    for a in placement.assignments:
        i = index[a.node]
        free[i] = max(0, int(free[i]) - a.workers * g)
    return free
