"""Placing every job of the tree, one after another, on one snapshot. Pure: values in, values out.

Jobs are placed in a fixed order (by name), each on the free GPUs the jobs before it left, so the same inputs
always give the same decisions. Only nodes of clusters named in the cluster config count as free: the tree
can deliver a gang to no other cluster.

Stability: when the policy puts a job on the same cluster and zones as the previous render did, the job keeps
its previous nodes if they are still free and score no worse. Otherwise removing one job would hand its nodes
to the next job in the same zone, and that one's to the next, rewriting every later manifest for nothing.
Rendering a tree over itself therefore changes nothing; in a fresh directory there is nothing to keep.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from geosched import policies
from geosched.gitops.load import JobSpec, TreeInputs
from geosched.kube.config import ClusterConfig
from geosched.models import Assignment, Placement, Rejection
from geosched.policies import PlacementContext, job_view
from geosched.policies.context import IntArray
from geosched.policies.scoring import evaluate

CLUSTERS_DIR = "clusters"


@dataclass(frozen=True)
class Placed:
    spec: JobSpec
    placement: Placement
    cluster: ClusterConfig
    namespace: str

    @property
    def path(self) -> str:
        return manifest_path(self.cluster.name, self.namespace, self.spec.name)


@dataclass(frozen=True)
class Before:
    """Where the previous render put a job."""

    cluster: str
    zones: tuple[str, ...]
    assignments: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Unplaced:
    spec: JobSpec
    reasons: tuple[Rejection, ...]


Outcome = Placed | Unplaced


def manifest_path(cluster: str, namespace: str, job: str) -> str:
    return f"{CLUSTERS_DIR}/{cluster}/{namespace}/{job}.yaml"


def plan(inputs: TreeInputs, previous: Mapping[str, Before] | None = None) -> tuple[Outcome, ...]:
    ctx = PlacementContext(inputs.fleet, inputs.network)
    free = initial_free(ctx, inputs.clusters)
    config = inputs.config
    position = {name: i for i, name in enumerate(ctx.names)}
    out: list[Outcome] = []
    for spec in inputs.jobs:
        here = ctx.with_free(free)
        result = policies.place(spec.input.job, here, config.policy, config.weights)
        before = (previous or {}).get(spec.key)
        if isinstance(result, Placement) and before is not None:
            result = keep_nodes(result, before, here, position)
        if not isinstance(result, Placement):
            out.append(Unplaced(spec, result.reasons))
            continue
        cluster = inputs.clusters.get(result.cluster or "")
        if cluster is None:  # only possible with a policy that ignores free GPUs; say so rather than guess
            out.append(Unplaced(spec, (Rejection("cluster", f"placed on {result.cluster!r}, which the cluster "
                                                 "config does not name"),)))
            continue
        free = take(position, free, result)
        out.append(Placed(spec, result, cluster, namespace_of(spec, cluster)))
    return tuple(out)


def keep_nodes(result: Placement, before: Before, ctx: PlacementContext, position: Mapping[str, int]) -> Placement:
    """The previous nodes instead of the policy's, when the decision is the same cluster and zones, they are
    still free and their score is no worse (so only ties and better are kept; see the module doc)."""
    mine = tuple((a.node, a.workers) for a in result.assignments)
    if mine == before.assignments or (before.cluster, before.zones) != (result.cluster, result.zones):
        return result
    if any(name not in position for name, _ in before.assignments):
        return result
    nodes = np.array([position[name] for name, _ in before.assignments], dtype=np.int64)
    workers = np.array([count for _, count in before.assignments], dtype=np.int64)
    view = job_view(ctx, result.job, result.weights)
    if (int(workers.sum()) != result.job.workers or np.unique(nodes).size != nodes.size
            or not bool(view.eligible[nodes].all()) or bool((view.capacity[nodes] < workers).any())
            or tuple(sorted({ctx.zone_names[z] for z in ctx.zone_of[nodes]})) != result.zones):
        return result
    score = evaluate(view, nodes, workers)
    if score.total > result.score.total + 1e-9 * max(1.0, abs(result.score.total)):
        return result
    kept = tuple(Assignment(node=name, zone=ctx.zone_names[ctx.zone_of[position[name]]], workers=count)
                 for name, count in sorted(before.assignments))
    return replace(result, assignments=kept, score=score)


def initial_free(ctx: PlacementContext, clusters: Mapping[str, ClusterConfig]) -> IntArray:
    member = np.array([c in clusters for c in ctx.cluster_names], dtype=bool)
    out: IntArray = np.where(member[ctx.cluster_of], ctx.gpus_free, 0)
    return out


def take(position: Mapping[str, int], free: IntArray, placement: Placement) -> IntArray:
    """The free GPUs after this gang took its nodes (a new array: earlier contexts stay as they were)."""
    after = free.copy()
    for a in placement.assignments:
        after[position[a.node]] -= a.workers * placement.job.gpus_per_worker
    return after


def namespace_of(spec: JobSpec, cluster: ClusterConfig) -> str:
    # The same rule as geosched.kube.render: the job's own namespace, else the cluster's, else default.
    return spec.input.namespace or cluster.namespace or "default"
