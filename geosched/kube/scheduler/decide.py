"""One gang, one decision: which node each pending pod binds to, or why none. Pure: a snapshot in, a value out.

The snapshot (`View`) is one cluster's placement context (`geosched.policies.PlacementContext`), the free GPUs of
each node at that instant, each node's room for everything else (cpu, memory, ephemeral storage, pod slots,
extended resources: allocatable minus what bound pods request, `geosched.kube.resources`), and each node's labels
and taints. A decision:

1. The gang's GPU pods must all ask for the same number of GPUs (a gang is `workers x gpus_per_worker`).
2. Nodes any GPU pod of the gang cannot use (nodeSelector, required node affinity, taints) are given no free
   GPUs for this gang: `PlacementContext.with_free`, so the policy sees only nodes that suit every worker.
   A node offers the gang only the GPUs of the workers its room holds besides (the largest request of any worker,
   per resource), so no worker is bound where NodeResourcesFit or the kubelet would refuse it.
3. `geosched.policies.place` places the workers, whole gang or nothing. When members of the gang are already
   bound (a crash part way, or a restarted member of a running gang), the rest is placed in their zones.
4. Pods are matched to placed nodes in rank order (indexed pods by index), so rank 0 gets the best node.
   GPU-less members (a launcher) go to a placed node, else to another ready node in the placed zones, that
   suits them and has room for them after the workers.
5. When nothing fits and members are already bound, those that geosched bound and that are not running yet
   are named for release, so the gang is placed whole next time rather than left half bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from geosched import policies
from geosched.core.models import Job, NoFit, Placement, Weights
from geosched.grid.forecast import GridHistory
from geosched.kube import keys, resources
from geosched.kube.scheduler.gangs import Gang
from geosched.kube.scheduler.pods import PodInfo, Requirements, fits
from geosched.kube.tolerations import Taint
from geosched.policies import timeshift
from geosched.policies.context import BoolArray, IntArray, PlacementContext
from geosched.policies.patience import Waiting

# GPUs are counted in View.free, by the placement policy; the rooms hold everything else.
GPU_ONLY = frozenset({keys.GPU})


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
    late: str | None = None
    """Bound although its deadline cannot be kept any more (`timeshift.deadline_note`): said on its pods."""


@dataclass(frozen=True)
class Refusal:
    gang: Gang
    reason: str
    release: tuple[PodInfo, ...] = ()
    held_until: float | None = None  # a flexible gang waiting for the start hour it chose (Unix seconds)


@dataclass
class View:
    """One cluster at one instant. `masks` memoises node masks per requirement set (same inputs, same mask)."""

    ctx: PlacementContext
    free: IntArray
    labels: Sequence[Mapping[str, str]]
    taints: Sequence[Sequence[Taint]]
    masks: dict[Requirements, BoolArray] = field(default_factory=dict)
    index: dict[str, int] = field(default_factory=dict)
    # Per resource other than GPUs, each node's room (resources.node_rooms); None: not counted (a caller that
    # knows GPUs only).
    rooms: dict[str, IntArray] | None = None

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

    def workers_held(self, requests: Mapping[str, int]) -> IntArray | None:
        """How many pods asking `requests` each node's room holds besides GPUs; None: no limit."""
        if self.rooms is None:
            return None
        return resources.fit_counts(self.rooms, requests, len(self.labels), skip=GPU_ONLY)

    def short_of(self, node: int, requests: Mapping[str, int]) -> str | None:
        """The first resource (besides GPUs) node `node` has too little of for one pod asking `requests`."""
        if self.rooms is None:
            return None
        left = {r: int(a[node]) for r, a in self.rooms.items()}
        return resources.shortfall(left, {r: v for r, v in requests.items() if r not in GPU_ONLY})

    def zone_of(self, node: str) -> str | None:
        i = self.index.get(node)
        return self.ctx.zone_names[int(self.ctx.zone_of[i])] if i is not None else None


def decide(gang: Gang, view: View, policy: str = policies.DEFAULT_POLICY,
           weights: Weights | None = None, grid: GridHistory | None = None, now: float | None = None,
           min_saving: float = timeshift.MIN_SAVING) -> Decision | Refusal:
    """With `grid` and `now` (Unix seconds), a gang whose pods declare slack (geosched.kube.flex) is not bound
    before the start hour the time-shift decision chooses (a rolling decision: asked again each retry), and is
    placed on the predicted grid of its run; past its latest start it is placed at once, as any gang. `min_saving`:
    the bar a later start must clear (`timeshift.RESHIFT_SAVING` once the hour it was held for has come)."""
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
    late: str | None = None
    if workers:
        mask = np.ones(len(view.labels), dtype=bool)
        for req in {p.requirements for p in workers}:
            mask &= view.mask(req)
        job = Job(name=str(gang.key), workers=len(workers), gpus_per_worker=next(iter(sizes)), zones=bound_zones,
                  namespace=gang.key.namespace)
        errors = [p.schedule_error for p in workers if p.schedule_error]
        if errors:
            return Refusal(gang, errors[0])
        schedule = next((p.schedule for p in workers if p.schedule is not None), None)
        if schedule is not None and now is not None:
            late = timeshift.deadline_note(replace(job, schedule=schedule), now)
        gpus_per_worker = job.gpus_per_worker
        largest = _largest(workers)
        free = np.where(mask, view.free, 0)
        held = view.workers_held(largest)
        if held is not None:
            free = np.minimum(free, held * gpus_per_worker)
        seen = view.ctx.with_free(free)
        if schedule is not None and grid is not None and now is not None and not gang.bound:
            # The binding needs the decision and, on NoFit, its reasons; not every candidate explained.
            result, shift = timeshift.place_in_time(replace(job, schedule=schedule), seen, grid, now, policy,
                                                    weights, explain=False, submitted=_submitted(gang, now),
                                                    min_saving=min_saving)
            if shift is not None and isinstance(result, Placement) and shift.start > now:
                return Refusal(gang, held_reason(shift), held_until=shift.start)
        else:
            # Patience (policies/patience.py), counted from the pods' creationTimestamp: more than the gang has
            # waited for a healthy ring, so never a longer wait than the rule allows.
            waiting = None if now is None else Waiting(now - _submitted(gang, now),
                                                       schedule.runtime_s if schedule is not None else None)
            result = policies.place(job, seen, policy, weights, explain=False, waiting=waiting)
        if isinstance(result, NoFit):
            return Refusal(gang, _no_fit(result, gang) + _short(view, mask, gpus_per_worker, largest),
                           releasable(gang))
        placement = result
        zones = tuple(sorted(set(result.zones) | set(bound_zones)))
        slots = [a.node for a in result.assignments for _ in range(a.workers)]
        binds = [Bind(pod, node) for pod, node in zip(workers, slots, strict=True)]
    for helper in helpers:
        node = _helper_node(helper, binds, zones, view)
        if node is None:
            return Refusal(gang, f"no ready node in zone(s) {', '.join(zones)} suits {helper.key}",
                           releasable(gang))
        binds.append(Bind(helper, node))
    return Decision(gang, tuple(binds), zones, placement, late)


def held_reason(shift: timeshift.Shift) -> str:
    """Why a flexible gang is not bound yet, said on its pods."""
    saving = "" if shift.saving_kgco2e is None else f", {shift.saving_kgco2e:.3f} kgCO2e less than starting now"
    return (f"held for a greener grid: starts at {timeshift.when_text(shift.start)} in "
            f"{', '.join(shift.placement.zones) if isinstance(shift.placement, Placement) else '-'} (latest start "
            f"{timeshift.when_text(shift.window.latest)}){saving}")


def _submitted(gang: Gang, now: float) -> float:
    """When the gang was submitted: its oldest pod's creationTimestamp (what start-within counts from)."""
    times = []
    for pod in gang.pending:
        try:
            times.append(datetime.fromisoformat(pod.created.replace("Z", "+00:00")).timestamp())
        except ValueError:
            continue
    return min(times, default=now)


def releasable(gang: Gang) -> tuple[PodInfo, ...]:
    """Bound members geosched bound that have not started: safe to release. Running members are never touched."""
    return tuple(p for p in gang.bound if p.ours and p.phase == "Pending")


def consume(view: View, decision: Decision) -> View:
    """The view after the decision's pods are bound (same context, fewer free GPUs, less room)."""
    return _after(view, decision.binds)


def _after(view: View, binds: Sequence[Bind]) -> View:
    free = view.free.copy()
    rooms = {r: a.copy() for r, a in view.rooms.items()} if view.rooms is not None else None
    for bind in binds:
        i = view.index[bind.node]
        free[i] -= bind.pod.gpus
        if rooms is not None:
            for resource, value in bind.pod.requests:
                if resource in rooms:
                    rooms[resource][i] -= value
    return View(view.ctx, free, view.labels, view.taints, view.masks, view.index, rooms)


def _helper_node(pod: PodInfo, binds: Sequence[Bind], zones: Sequence[str], view: View) -> str | None:
    """A node for a GPU-less member: suits it and has room for it after what this decision already binds."""
    mask = view.mask(pod.requirements)
    held = _after(view, binds).workers_held(dict(pod.requests))
    if held is not None:
        mask = mask & (held > 0)
    for name in dict.fromkeys(b.node for b in binds):
        if mask[view.index[name]]:
            return name
    wanted = {i for i, z in enumerate(view.ctx.zone_names) if z in zones}
    for i, name in enumerate(view.ctx.names):
        if mask[i] and view.ctx.ready[i] and int(view.ctx.zone_of[i]) in wanted:
            return name
    return None


def _largest(pods: Sequence[PodInfo]) -> dict[str, int]:
    """Per resource, the most any of the pods asks: what every worker's node must hold."""
    out: dict[str, int] = {}
    for pod in pods:
        for resource, value in pod.requests:
            out[resource] = max(out.get(resource, 0), value)
    return out


def _short(view: View, mask: BoolArray, gpus_per_worker: int, largest: Mapping[str, int]) -> str:
    """Why nodes with the GPUs still hold no worker: the resource they lack, if that is the reason."""
    held = view.workers_held(largest)
    if held is None:
        return ""
    blocked = np.flatnonzero(mask & (view.free >= gpus_per_worker) & (held == 0))
    if not len(blocked):
        return ""
    lacking = sorted({r for i in blocked if (r := view.short_of(int(i), largest)) is not None})
    return (f"; {len(blocked)} node(s) with the GPUs free lack room for a worker's "
            f"{', '.join(lacking) or 'requests'} (allocatable minus what bound pods request)")


def _no_fit(result: NoFit, gang: Gang) -> str:
    if result.waiting:  # not "no fit": a place exists, on links far slower than a healthy ring's
        return "; ".join(r.reason for r in result.reasons)
    where = f" in zone(s) {', '.join(result.job.zones)} of its bound members" if result.job.zones else ""
    reasons = "; ".join(f"{r.subject}: {r.reason}" for r in result.reasons[:3])
    return (f"no fit for {result.job.workers} x {result.job.gpus_per_worker} GPUs{where}"
            + (f" ({reasons})" if reasons else ""))
