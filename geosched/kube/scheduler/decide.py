"""One gang, one decision: which node each pending pod binds to, or why none. Pure: a snapshot in, a value out.

The snapshot (`View`) is one cluster's placement context (`geosched.policies.PlacementContext`), the free GPUs of
each node at that instant, and each node's labels and taints. A decision:

1. The gang's GPU pods must all ask for the same number of GPUs (a gang is `workers x gpus_per_worker`).
2. Nodes any GPU pod of the gang cannot use (nodeSelector, required node affinity, taints) are given no free
   GPUs for this gang: `PlacementContext.with_free`, so the policy sees only nodes that suit every worker.
3. `geosched.policies.place` places the workers, whole gang or nothing. When members of the gang are already
   bound (a crash part way, or a restarted member of a running gang), the rest is placed in their zones.
4. Pods are matched to placed nodes in rank order (indexed pods by index), so rank 0 gets the best node.
   GPU-less members (a launcher) go to a placed node, else to another ready node in the placed zones, that
   suits them.
5. When nothing fits and members are already bound, those that geosched bound and that are not running yet
   are named for release, so the gang is placed whole next time rather than left half bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from geosched import policies
from geosched.kube.scheduler.gangs import Gang
from geosched.kube.scheduler.pods import PodInfo, Requirements, Taint, fits
from geosched.models import Job, NoFit, Placement, Weights
from geosched.policies.context import BoolArray, IntArray, PlacementContext


@dataclass(frozen=True, slots=True)
class Bind:
    pod: PodInfo
    node: str


@dataclass(frozen=True)
class Decision:
    gang: Gang
    binds: tuple[Bind, ...]
    zones: tuple[str, ...]
    placement: Placement | None


@dataclass(frozen=True)
class Refusal:
    gang: Gang
    reason: str
    release: tuple[PodInfo, ...] = ()


@dataclass
class View:
    """One cluster at one instant. `masks` memoises node masks per requirement set (same inputs, same mask)."""

    ctx: PlacementContext
    free: IntArray
    labels: Sequence[Mapping[str, str]]
    taints: Sequence[Sequence[Taint]]
    masks: dict[Requirements, BoolArray] = field(default_factory=dict)
    index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.index:
            self.index = {name: i for i, name in enumerate(self.ctx.names)}

    def mask(self, req: Requirements) -> BoolArray:
        found = self.masks.get(req)
        if found is None:
            if not req.selector and not req.terms and not any(self.taints):  # tolerations alone limit nothing
                found = np.ones(len(self.labels), dtype=bool)
            else:
                found = np.fromiter((fits(req, labels, taints) for labels, taints in zip(self.labels, self.taints,
                                                                                       strict=True)),
                                    dtype=bool, count=len(self.labels))
            self.masks[req] = found
        return found

    def zone_of(self, node: str) -> str | None:
        i = self.index.get(node)
        return self.ctx.zone_names[int(self.ctx.zone_of[i])] if i is not None else None


def decide(gang: Gang, view: View, policy: str = policies.DEFAULT_POLICY,
           weights: Weights | None = None) -> Decision | Refusal:
    workers = [p for p in gang.pending if p.gpus > 0]
    helpers = [p for p in gang.pending if p.gpus == 0]
    sizes = {p.gpus for p in (*workers, *gang.bound) if p.gpus > 0}
    if not sizes:
        return Refusal(gang, "the gang asks for no GPU; geosched places GPU gangs (use another scheduler)")
    if len(sizes) > 1:
        return Refusal(gang, f"the gang's pods ask for different GPU counts ({', '.join(map(str, sorted(sizes)))}); "
                       "a gang is workers x the same GPUs each")
    bound_zones = tuple(sorted({z for p in gang.bound if p.node and (z := view.zone_of(p.node)) is not None}))
    placement: Placement | None = None
    binds: list[Bind] = []
    zones = bound_zones
    if workers:
        mask = np.ones(len(view.labels), dtype=bool)
        for req in {p.requirements for p in workers}:
            mask &= view.mask(req)
        job = Job(name=str(gang.key), workers=len(workers), gpus_per_worker=sizes.pop(), zones=bound_zones,
                  namespace=gang.key.namespace)
        # The binding needs the decision and, on NoFit, its reasons; not every candidate explained.
        result = policies.place(job, view.ctx.with_free(np.where(mask, view.free, 0)), policy, weights,
                                explain=False)
        if isinstance(result, NoFit):
            return Refusal(gang, _no_fit(result, gang), releasable(gang))
        placement = result
        zones = tuple(sorted(set(result.zones) | set(bound_zones)))
        slots = [a.node for a in result.assignments for _ in range(a.workers)]
        binds = [Bind(pod, node) for pod, node in zip(workers, slots, strict=True)]
    for helper in helpers:
        node = _helper_node(helper, [b.node for b in binds], zones, view)
        if node is None:
            return Refusal(gang, f"no ready node in zone(s) {', '.join(zones)} suits {helper.key}",
                           releasable(gang))
        binds.append(Bind(helper, node))
    return Decision(gang, tuple(binds), zones, placement)


def releasable(gang: Gang) -> tuple[PodInfo, ...]:
    """Bound members geosched bound that have not started: safe to release. Running members are never touched."""
    return tuple(p for p in gang.bound if p.ours and p.phase == "Pending")


def consume(view: View, decision: Decision) -> View:
    """The view after the decision's pods are bound (same context, fewer free GPUs)."""
    free = view.free.copy()
    for bind in decision.binds:
        free[view.index[bind.node]] -= bind.pod.gpus
    return View(view.ctx, free, view.labels, view.taints, view.masks, view.index)


def _helper_node(pod: PodInfo, placed: Sequence[str], zones: Sequence[str], view: View) -> str | None:
    mask = view.mask(pod.requirements)
    for name in placed:
        if mask[view.index[name]]:
            return name
    wanted = {i for i, z in enumerate(view.ctx.zone_names) if z in zones}
    for i, name in enumerate(view.ctx.names):
        if mask[i] and view.ctx.ready[i] and int(view.ctx.zone_of[i]) in wanted:
            return name
    return None


def _no_fit(result: NoFit, gang: Gang) -> str:
    where = f" in zone(s) {', '.join(result.job.zones)} of its bound members" if result.job.zones else ""
    reasons = "; ".join(f"{r.subject}: {r.reason}" for r in result.reasons[:3])
    return (f"no fit for {result.job.workers} x {result.job.gpus_per_worker} GPUs{where}"
            + (f" ({reasons})" if reasons else ""))
