"""`karmada`: Karmada's Divided replica scheduling with dynamic weights by available replicas, across member
clusters, then the default Kubernetes scheduler inside each cluster, as platform teams run it.

The PropagationPolicy it stands for:

    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        dynamicWeight: AvailableReplicas

Follows karmada-io/karmada (commit f8fdd02d, Aug 2026):

1. Each member cluster's available replicas: how many workers its ready nodes' free GPUs hold, counted per
   node as the scheduler-estimator does (`pkg/estimator`); GPU model and the job's constraints as node filters.
2. `dynamicDivideReplicas` (`pkg/scheduler/core/division_algorithm.go`): if the clusters' available replicas
   together are fewer than the gang, unschedulable. Otherwise `SpreadReplicasByTargetClusters`
   (`pkg/util/helper/binding.go`) divides the gang with the available replicas as weights by the Webster
   method (`AllocateWebsterSeats`, `pkg/util/helper/webstermethod.go`): seat by seat, the cluster with the
   highest available / (2 x seats + 1) gets the next; ties to the cluster with fewer seats, then by name,
   ascending or descending by the parity of the FNV-1a hash of the object's UID (`tieBreakerByUID`; we hash
   the job name).
3. Inside each cluster its share is placed like `spread` (the default kube-scheduler: LeastAllocated and
   the default zone topology spread), measurement-blind.

So a gang is split across clusters, and regions, whenever more than one cluster has room: Karmada divides
replicas, it does not keep a gang together. The job's zone and region limits are honoured (a division that
breaks them is NoFit, as a spread constraint would make it unschedulable).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from geosched.core.models import NoFit, Placement, Rejection
from geosched.policies.base import limits_ok, no_capacity, placed, register
from geosched.policies.baselines import spread_fill
from geosched.policies.context import IntArray, JobView

NAME = "karmada"
FNV_OFFSET = 0x811C9DC5
FNV_PRIME = 0x01000193


def fnv1a_32(data: bytes) -> int:
    """Go's hash/fnv New32a, which `tieBreakerByUID` uses."""
    h = FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFF
    return h


def webster(seats: int, votes: dict[str, int], uid: str) -> dict[str, int]:
    """`AllocateWebsterSeats` with `tieBreakerByUID(uid)`: seats per party (clusters with no votes get none)."""
    rank = {name: i for i, name in enumerate(sorted(votes, reverse=fnv1a_32(uid.encode()) & 1 == 1))}
    given = dict.fromkeys(votes, 0)

    def priority(name: str) -> tuple[Fraction, int, int]:
        # Highest Votes/(2*Seats+1) first; ties: fewer seats, then the name order the UID picks.
        return (-Fraction(votes[name], 2 * given[name] + 1), given[name], rank[name])

    for _ in range(seats):
        given[min(given, key=priority)] += 1
    return {name: k for name, k in given.items() if k > 0}


@register(NAME, "Karmada Divided replicas weighted by available replicas, then the default scheduler")
def karmada(view: JobView) -> Placement | NoFit:
    cand = view.candidates
    if cand.size == 0:
        return no_capacity(view, NAME)
    ctx, job = view.ctx, view.job
    label = {c: name or f"cluster-{c}" for c, name in enumerate(ctx.cluster_names)}
    members = {label[c]: cand[ctx.cluster_of[cand] == c] for c in np.unique(ctx.cluster_of[cand]).tolist()}
    available = {name: int(view.capacity[nodes].sum()) for name, nodes in members.items()}
    if sum(available.values()) < job.workers:
        return no_capacity(view, NAME, [Rejection(
            "clusters", f"available replicas {sum(available.values())} are not enough to schedule {job.workers}")])
    shares = webster(job.workers, available, job.name)
    parts = [spread_fill(view, members[name], share) for name, share in sorted(shares.items())]
    nodes: IntArray = np.concatenate([n for n, _ in parts])
    workers: IntArray = np.concatenate([w for _, w in parts])
    problem = limits_ok(view, nodes)
    if problem:
        return no_capacity(view, NAME, [Rejection("division", problem)])
    return placed(view, NAME, nodes, workers)
