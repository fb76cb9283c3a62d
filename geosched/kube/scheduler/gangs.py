"""Pending pods grouped into gangs, and which gangs are whole enough to place. Pure.

A gang's size (the pods it needs before any is bound, minMember in PodGroup terms):

- a coscheduling or Volcano PodGroup: its `spec.minMember` (unknown until the PodGroup is seen);
- a controller owner: what the caller found for it (`owner_sizes`, by owner UID): a batch Job's
  min(parallelism, completions); `PRESENT` for owners of other kinds, meaning the pods that exist;
- a pod alone: 1.

A gang is ready when its pending and already bound members reach that size. Pods with scheduling gates or
being deleted are not counted. Ready gangs are served by priority, then oldest pod first (FIFO), so a large
gang is not starved by a stream of small ones arriving later (it is still skipped while it does not fit).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from geosched.kube.scheduler.pods import GangKey, PodInfo

PRESENT = -1  # owner_sizes value: the owner's kind says nothing of its size; take the pods that exist


@dataclass(frozen=True)
class Gang:
    key: GangKey
    pending: tuple[PodInfo, ...]
    bound: tuple[PodInfo, ...]
    size: int | None

    @property
    def ready(self) -> bool:
        return bool(self.pending) and self.size is not None and len(self.pending) + len(self.bound) >= self.size

    @property
    def waiting_for(self) -> str:
        if self.size is None:
            return "the gang's size (its PodGroup or owner has not been seen)"
        return f"{self.size - len(self.pending) - len(self.bound)} more pod(s) of {self.size}"

    @property
    def priority(self) -> int:
        return max((p.priority for p in self.pending), default=0)

    @property
    def oldest(self) -> str:
        return min((p.created for p in self.pending), default="")


def group(pending: Iterable[PodInfo], bound: Iterable[PodInfo], podgroups: Mapping[tuple[str, str, str], int],
          owner_sizes: Mapping[str, int]) -> list[Gang]:
    """Every gang with at least one pending pod, ready or not, in serving order."""
    waiting: dict[GangKey, list[PodInfo]] = {}
    for pod in pending:
        if not pod.gated and not pod.deleting and pod.node is None:
            waiting.setdefault(pod.gang, []).append(pod)
    placed: dict[GangKey, list[PodInfo]] = {}
    for pod in bound:
        if pod.gang in waiting and not pod.deleting:
            placed.setdefault(pod.gang, []).append(pod)
    gangs = []
    for key, pods in waiting.items():
        pods.sort(key=_order)
        members = placed.get(key, [])
        size = gang_size(key, pods, len(members), podgroups, owner_sizes)
        gangs.append(Gang(key, tuple(pods), tuple(sorted(members, key=_order)), size))
    gangs.sort(key=lambda g: (-g.priority, g.oldest, str(g.key)))
    return gangs


def gang_size(key: GangKey, pending: list[PodInfo], bound: int, podgroups: Mapping[tuple[str, str, str], int],
              owner_sizes: Mapping[str, int]) -> int | None:
    if key.source in ("pod-group", "volcano"):
        return podgroups.get((key.source, key.namespace, key.name))
    if key.source == "owner":
        owner = pending[0].owner
        size = owner_sizes.get(owner.uid) if owner is not None else PRESENT
        if size == PRESENT:
            return len(pending) + bound
        return size
    return 1


def _order(pod: PodInfo) -> tuple[int, int, str]:
    # Rank order: indexed pods by index (rank 0 first), then by name.
    return (0 if pod.index is not None else 1, pod.index or 0, pod.name)
