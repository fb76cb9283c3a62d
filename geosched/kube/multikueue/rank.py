"""Worker clusters ranked for one gang by the placement policy. Pure: a placement context in, a ranking out.

The context holds every worker cluster's nodes at once (one `PlacementContext`, nodes tagged with their
MultiKueueCluster's name), so the score's references (the median $/GPU-h and gCO2e/GPU-h of eligible nodes
of all the clusters read, the ideal step time) are the same for every cluster and scores compare across
clusters. The job's view is built once (`policies.job_view`); each cluster is then the same view with the
other clusters' nodes made ineligible, given to the registered policy. A cluster holds the gang when the
policy places it there; one whose free slots (free GPUs // GPUs per worker, on eligible nodes) are fewer than
the workers is refused without asking the policy.

Order: for `zone-first`, its own ranking of candidates (one region before several, fewer zones, then the
score), then its capacity-aware choice (`policies.capacity.keep_room`, issue 22): of the clusters whose placement
spans as many regions and zones within `CAPACITY_TOLERANCE` of the best total, the one left with the fewest free
workers goes first, so the roomier workers stay whole for larger gangs, as zone-first does between pools of one
fleet; for every other policy, the score. Ties: cheaper per hour, then the cluster name.

Bounded (`need`): a dispatcher writes the best one or few clusters, so only those must be exact. Each cluster
gets a lower bound of its order key first, from arrays alone (`_bounds`): its regions and zones (one zone only if
some zone of it has room for the whole gang), and a score no placement there can beat (the cheapest and cleanest
eligible GPU-hour, and the step time on the best link any hop there could have: zone pairs and measured node
pairs, no hop at all when one node holds the gang; `comm_ms` grows with RTT and loss and falls with throughput).
The policy runs on the clusters in order of their bounds and stops once the next bound (for zone-first, its score
deflated by the capacity band, so a cluster that could still win on room is ranked) is above the `need`-th
best key found: the clusters it skips cannot enter the first `need`, so those are the exhaustive ranking's, and
the skipped ones are listed with their bound (`unranked`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from geosched.core.comm import comm_ms
from geosched.core.models import Job, NoFit, Placement, Weights
from geosched.policies import PlacementContext, capacity, job_view
from geosched.policies.base import registry
from geosched.policies.context import IntArray, JobView

ZONE_FIRST = "zone-first"


@dataclass(frozen=True)
class Ranking:
    """Placements of the gang on the clusters that hold it, best first; why each other cluster does not."""

    job: Job
    fits: tuple[Placement, ...]
    refused: tuple[tuple[str, str], ...]
    # Clusters not given to the policy: their lower bound is above the `need`-th best (cluster, score bound).
    unranked: tuple[tuple[str, float], ...] = ()

    def cluster_names(self) -> list[str]:
        return [p.cluster or "" for p in self.fits]


def rank(job: Job, ctx: PlacementContext, clusters: Sequence[str], *, policy: str = ZONE_FIRST,
         weights: Weights | None = None, need: int | None = None) -> Ranking:
    """Every cluster ranked (`need` None), or exactly the best `need` and bounds for the rest."""
    fn = registry()[policy]
    index = {c: i for i, c in enumerate(ctx.cluster_names)}
    known = [c for c in clusters if c in index]
    refused: list[tuple[str, str]] = [(c, "no GPU node read from it") for c in clusters if c not in index]
    fits: list[Placement] = []
    unranked: list[tuple[str, float]] = []
    if known:
        view = job_view(ctx, job, weights or Weights(), explain=False)
        room = np.bincount(ctx.cluster_of, weights=view.capacity, minlength=len(ctx.cluster_names))
        roomy = []
        for cluster in known:
            if room[index[cluster]] < job.workers:  # cannot hold it whatever the policy: no need to ask
                refused.append((cluster, f"the largest pool holds {int(room[index[cluster]])} of {job.workers} "
                                         f"workers"))
            else:
                roomy.append(cluster)
        key = _order(policy)
        bounds = _bounds(view, [index[c] for c in roomy], policy) if need is not None else [None] * len(roomy)
        queue = sorted(zip(bounds, roomy, strict=True), key=lambda b: (b[0] or (0, 0, 0.0, 0.0), b[1]))
        for k, (low, cluster) in enumerate(queue):
            if low is not None and need is not None and len(fits) >= need:
                kth = sorted(key(p) for p in fits)[need - 1]
                if (*_within_room_band(low, policy), cluster) > kth:
                    unranked = [(c, b[2]) for b, c in queue[k:] if b is not None]
                    break
            mine = ctx.cluster_of == index[cluster]
            outcome = fn(replace(view, eligible=view.eligible & mine, capacity=np.where(mine, view.capacity, 0)))
            if isinstance(outcome, Placement):
                fits.append(outcome)
            else:
                refused.append((cluster, _why(outcome)))
    fits.sort(key=_order(policy))
    if policy == ZONE_FIRST and len(fits) > 1:
        # The capacity-aware choice zone-first makes inside one fleet, across worker clusters: of near-equal
        # placements, the cluster that keeps the fewest free workers (the roomier ones stay whole for larger gangs).
        left = np.array([room[index[p.cluster or ""]] - job.workers for p in fits], dtype=np.float64)
        order = capacity.keep_room(np.arange(len(fits)), np.array([p.score.total for p in fits]),
                                   np.array([len(p.zones) for p in fits]),
                                   np.array([int(len(p.regions) > 1) for p in fits]), left,
                                   np.array([p.score.usd_per_hour for p in fits]))
        fits = [fits[k] for k in order.tolist()]
    return Ranking(job, tuple(fits), tuple(sorted(refused)), tuple(unranked))


# Below a bound by this much (relative) is still "not above": sums taken in another order differ in the last bits.
SLACK = 1e-9


def _bounds(view: JobView, clusters: Sequence[int], policy: str) -> list[tuple[int, int, float, float]]:
    """Per cluster, a lower bound of `_order`'s key (less the name) for any placement of the gang there."""
    ctx, job, w = view.ctx, view.job, view.weights
    z, r = len(ctx.zone_names), len(ctx.region_keys)
    nodes = view.candidates
    of = ctx.cluster_of[nodes]
    cap = view.capacity[nodes]
    per_zone = np.bincount(of * z + ctx.zone_of[nodes], weights=cap, minlength=len(ctx.cluster_names) * z)
    per_region = np.bincount(of * r + ctx.region_of[nodes], weights=cap, minlength=len(ctx.cluster_names) * r)
    pair_rtt = ctx.pair_rtt95 if view.p95 else ctx.pair_rtt
    out = []
    for c in clusters:
        mine = nodes[of == c]
        one_zone = per_zone[c * z:(c + 1) * z].max() >= job.workers
        one_region = per_region[c * r:(c + 1) * r].max() >= job.workers
        if view.capacity[mine].max() >= job.workers:
            comm = 0.0  # one node holds the gang: no network hop
        else:
            zones = np.unique(ctx.zone_of[mine])
            # Every hop's link is a zone pair's, worsened by the nodes' own summaries, or a measured node pair's.
            links = ctx.zone_pairs
            best_rtt = links.best("rtt95" if view.p95 else "rtt", zones, zones)
            best_loss, best_tput = links.best("loss", zones, zones), links.best("tput", zones, zones)
            if ctx.pair_key.size:
                best_rtt = min(best_rtt, float(pair_rtt.min()))
                best_loss = min(best_loss, float(ctx.pair_loss.min()))
                best_tput = max(best_tput, float(ctx.pair_tput.max()))
            comm = comm_ms(job.workers, job.profile.message_mb, best_rtt, best_loss, best_tput)
        price, carbon = float(view.price_gpu[mine].min()), float(view.carbon_gpu[mine].min())
        score = (w.network * (job.profile.compute_ms + comm) / view.ideal_step_ms + w.cost * price / view.price_ref
                 + w.carbon * carbon / view.carbon_ref)
        usd = job.gpus * price
        placed = (int(not one_region), 1 if one_zone else 2) if policy == ZONE_FIRST else (0, 0)
        out.append((*placed, score - SLACK * abs(score), usd - SLACK * abs(usd)))
    return out


def _within_room_band(low: tuple[int, int, float, float], policy: str) -> tuple[int, int, float, float]:
    """A cluster's bound as the early stop must compare it: for zone-first, a cluster whose total is up to
    `capacity.CAPACITY_TOLERANCE` above the best may still win on room (`capacity.keep_room`), so its score bound
    is deflated by that much; skipping it is then still exact."""
    if policy != ZONE_FIRST:
        return low
    score = low[2]
    return (low[0], low[1], score / (1 + capacity.CAPACITY_TOLERANCE) if score > 0 else score, low[3])


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
