"""Placing every job of the tree on one snapshot, over the previous render. Pure: values in, values out.

Stable (geosched/stable.py): a job the previous render placed keeps its cluster, zones and nodes while they
still fit on the snapshot minus the other kept jobs; the other jobs (new, edited so that their nodes no longer
hold them, or whose nodes left or filled up) are then placed in order of key on what is left. So adding,
changing or deleting one job never moves another, and the same inputs over the same previous tree always give
the same decisions. In a fresh directory there is nothing to keep: every job is placed in order of key. With
`rebalance`, a kept job moves when the policy's choice beats its kept total by the minimum gain. Only nodes of
clusters named in the cluster config count as free: the tree can deliver a gang to no other cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from geosched.gitops.load import JobSpec, TreeInputs
from geosched.kube.config import ClusterConfig
from geosched.models import Placement, Rejection
from geosched.policies import PlacementContext
from geosched.policies.context import IntArray
from geosched.stable import Current, Fate, Rebalance, Request, place_all

CLUSTERS_DIR = "clusters"


@dataclass(frozen=True)
class Placed:
    spec: JobSpec
    placement: Placement
    cluster: ClusterConfig
    namespace: str
    fate: Fate = Fate.NEW
    note: str = "new"

    @property
    def path(self) -> str:
        return manifest_path(self.cluster.name, self.namespace, self.spec.name)


@dataclass(frozen=True)
class Unplaced:
    spec: JobSpec
    reasons: tuple[Rejection, ...]
    note: str = "does not fit"


Outcome = Placed | Unplaced


def manifest_path(cluster: str, namespace: str, job: str) -> str:
    return f"{CLUSTERS_DIR}/{cluster}/{namespace}/{job}.yaml"


def plan(inputs: TreeInputs, previous: Mapping[str, Current] | None = None,
         rebalance: Rebalance | None = None) -> tuple[Outcome, ...]:
    ctx = PlacementContext(inputs.fleet, inputs.network, inputs.carbon)
    config = inputs.config
    previous = previous or {}
    requests = [Request(spec.key, spec.input.job, previous.get(spec.key)) for spec in inputs.jobs]

    def deliverable(placement: Placement) -> str | None:
        # Only possible with a policy that ignores free GPUs; say so rather than guess.
        if placement.cluster in inputs.clusters:
            return None
        return f"placed on {placement.cluster!r}, which the cluster config does not name"

    decisions = place_all(requests, ctx, initial_free(ctx, inputs.clusters), policy=config.policy,
                          weights=config.weights, rebalance=rebalance, usable=deliverable)
    out: list[Outcome] = []
    for spec, d in zip(inputs.jobs, decisions, strict=True):
        if isinstance(d.result, Placement):
            cluster = inputs.clusters[d.result.cluster or ""]
            out.append(Placed(spec, d.result, cluster, namespace_of(spec, cluster), d.fate, d.note))
        else:
            out.append(Unplaced(spec, d.result.reasons, d.note))
    return tuple(out)


def initial_free(ctx: PlacementContext, clusters: Mapping[str, ClusterConfig]) -> IntArray:
    member = np.array([c in clusters for c in ctx.cluster_names], dtype=bool)
    out: IntArray = np.where(member[ctx.cluster_of], ctx.gpus_free, 0)
    return out


def namespace_of(spec: JobSpec, cluster: ClusterConfig) -> str:
    # The same rule as geosched.kube.render: the job's own namespace, else the cluster's, else default.
    return spec.input.namespace or cluster.namespace or "default"
