"""Placing every job of the tree on one snapshot, over the previous render. Pure: values in, values out.

Stable (geosched/policies/stable.py): a job the previous render placed keeps its cluster, zones and nodes while they
still fit on the snapshot minus the other kept jobs; the other jobs (new, edited so that their nodes no longer
hold them, or whose nodes left or filled up) are then placed in order of key on what is left. So adding,
changing or deleting one job never moves another, and the same inputs over the same previous tree always give
the same decisions. In a fresh directory there is nothing to keep: every job is placed in order of key. With
`rebalance`, a kept job moves when the policy's choice beats its kept total by the minimum gain. Only nodes of
clusters named in the cluster config count as free: the tree can deliver a gang to no other cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from geosched import policies
from geosched.core.models import Job, NoFit, Placement, Rejection, Weights
from geosched.gitops.load import JobSpec, TreeInputs
from geosched.kube import flex
from geosched.kube.config import ClusterConfig
from geosched.policies import PlacementContext, timeshift
from geosched.policies.context import IntArray, job_view
from geosched.policies.patience import Waiting
from geosched.policies.scoring import evaluate
from geosched.policies.stable import Current, Fate, Rebalance, Request, arrays, place_all

CLUSTERS_DIR = "clusters"


@dataclass(frozen=True)
class Placed:
    spec: JobSpec
    placement: Placement
    cluster: ClusterConfig
    namespace: str
    fate: Fate = Fate.NEW
    note: str = "new"
    start_at: float | None = None
    """A flexible job held until this time (Unix seconds): rendered suspended (`geosched.kube.flex.hold`)."""
    submitted_at: float | None = None
    """When it was first held: what its `start_within` counts from on later renders."""
    late: str | None = None
    """Decided at this render past the point where its deadline could be kept (`timeshift.deadline_note`)."""

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
         rebalance: Rebalance | None = None, when: float | None = None,
         held: Mapping[str, tuple[float, float]] | None = None) -> tuple[Outcome, ...]:
    """`when` (Unix seconds) and `inputs.grid`: a flexible job (Kubernetes annotations or `schedule:`) still waiting
    for its start (`held`: the previous render held it until then, from when it was first held, and that time has
    not come; or it is new) is
    decided again, start and placement together (`geosched.policies.timeshift`): a rolling decision, until its
    hour comes. A held job whose hour has come is kept where it was, released; any other job as always."""
    ctx = PlacementContext(inputs.fleet, inputs.network, inputs.carbon)
    config = inputs.config
    previous = previous or {}
    held = held or {}
    waiting = {spec.key for spec in inputs.jobs if spec.input.job.flexible and inputs.grid is not None
               and when is not None and (spec.key not in previous or held.get(spec.key, (-1.0, 0.0))[0] > when)}
    requests = [Request(spec.key, spec.input.job, None if spec.key in waiting else previous.get(spec.key))
                for spec in inputs.jobs]
    starts: dict[str, tuple[float, float]] = {}

    def decide(job: Job, at: PlacementContext) -> Placement | NoFit:
        spec = next((s for s in inputs.jobs if s.input.job is job), None)
        key = spec.key if spec is not None else None
        if key not in waiting or when is None:
            return policies.place(job, at, config.policy, config.weights, waiting=patience_of(spec, when))
        submitted = held[key][1] if key in held else when
        result, shift = timeshift.place_in_time(job, at, inputs.grid, when, config.policy, config.weights,
                                                submitted=submitted)
        if shift is not None and isinstance(result, Placement) and shift.start > when:
            starts[key] = (shift.start, submitted)
        return result


    def deliverable(placement: Placement) -> str | None:
        # Only possible with a policy that ignores free GPUs; say so rather than guess.
        if placement.cluster in inputs.clusters:
            return None
        return f"placed on {placement.cluster!r}, which the cluster config does not name"

    free = initial_free(ctx, inputs.clusters)
    decisions = place_all(requests, ctx, free, policy=config.policy,
                          weights=config.weights, rebalance=rebalance, usable=deliverable, decide=decide)
    alone = ctx.with_free(free)
    position = {name: i for i, name in enumerate(ctx.names)}
    out: list[Outcome] = []
    for spec, d in zip(inputs.jobs, decisions, strict=True):
        if isinstance(d.result, Placement):
            cluster = inputs.clusters[d.result.cluster or ""]
            start, submitted = starts.get(spec.key, (None, None))
            note = d.note if start is None else f"{d.note}; held until {flex.stamp(start)} for a greener grid"
            # Only a job decided now: a kept one was placed by an earlier render, when its deadline may have held.
            late = None if when is None or d.fate is Fate.KEPT else timeshift.deadline_note(spec.input.job, when)
            note = note if late is None else f"{note}; {late}"
            # A job decided for another hour keeps that hour's score; it is decided again on every render.
            placement = d.result if start is not None else scored_alone(d.result, alone, config.weights, position)
            out.append(Placed(spec, placement, cluster, namespace_of(spec, cluster), d.fate, note, start, submitted,
                              late))
        else:
            out.append(Unplaced(spec, d.result.reasons, "waiting for a healthy ring" if d.result.waiting else d.note))
    return tuple(out)


def patience_of(spec: JobSpec | None, when: float | None) -> Waiting | None:
    """How long a job has waited at a render at `when`: from the `geosched.io/submitted-at` its manifest carries
    (zone-first's patience, policies/patience.py). None, so no patience, when the render's time or the submission
    is unknown (a render without `--at` or `at:` runs at the epoch): a render that refused free capacity without
    knowing the wait would refuse it on every render."""
    if spec is None or when is None or when <= 0:
        return None
    submitted = flex.submitted_of(spec.input.original, spec.source)
    if submitted is None or submitted > when:
        return None
    schedule = spec.input.job.schedule
    return Waiting(when - submitted, schedule.runtime_s if schedule is not None else None)


def scored_alone(placement: Placement, alone: PlacementContext, weights: Weights,
                 position: Mapping[str, int]) -> Placement:
    """The placement's score on the snapshot as if the tree's other jobs were not there (issue 23 item 1).

    The terms are normalised by the median price and carbon (and the best link) of the nodes free enough for
    the job, so a score taken on what the other jobs leave depends on the order they were decided in: a new
    job scored after the kept ones would score differently on the next render, kept among them, and `check`
    right after `render` would fail. Scored alone, a job's score depends on its nodes and the snapshot only:
    adding, changing or deleting another job rewrites nothing of it, and every render is a fixed point."""
    nodes, workers = arrays(placement, position)
    return replace(placement, score=evaluate(job_view(alone, placement.job, weights, explain=False), nodes, workers))


def initial_free(ctx: PlacementContext, clusters: Mapping[str, ClusterConfig]) -> IntArray:
    member = np.array([c in clusters for c in ctx.cluster_names], dtype=bool)
    out: IntArray = np.where(member[ctx.cluster_of], ctx.gpus_free, 0)
    return out


def namespace_of(spec: JobSpec, cluster: ClusterConfig) -> str:
    # The same rule as geosched.kube.render: the job's own namespace, else the cluster's, else default.
    return spec.input.namespace or cluster.namespace or "default"
