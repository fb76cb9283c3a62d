"""What the scheduler knows of its cluster, kept current by the reflectors and read by the loop.

Like kube-scheduler's cache, it *assumes*: a pod the scheduler has just bound counts on its node at once, before
the watch reports it, so the next gang cannot take the same GPUs. An assumption ends when the watch confirms
the pod on a node, or is dropped after `assume_ttl_s` (the bind's answer was lost and the pod never showed up).

Only changes that matter to placement bump `nodes_version` (labels, taints, allocatable resources, readiness,
cordon): a kubelet heartbeat does not rebuild the placement context.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from geosched.kube.client import Json
from geosched.kube.scheduler.pods import PodInfo, pod_info

PENDING = "pending"
BOUND = "bound"
NODES = "nodes"
PODGROUPS = "pod-group"
VOLCANO_GROUPS = "volcano"


@dataclass(frozen=True)
class Snapshot:
    nodes_version: int
    capacity_version: int
    nodes: tuple[Json, ...]
    pending: tuple[PodInfo, ...]
    bound: tuple[PodInfo, ...]
    podgroups: Mapping[tuple[str, str, str], int]


class ClusterCache:
    def __init__(self, *, assume_ttl_s: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self.changed = threading.Event()
        self._nodes: dict[str, Json] = {}
        self._node_facts: dict[str, Any] = {}
        self._pending: dict[str, PodInfo] = {}
        self._bound: dict[str, PodInfo] = {}
        self._groups: dict[tuple[str, str, str], int] = {}
        self._assumed: dict[str, tuple[PodInfo, float]] = {}
        self.nodes_version = 0
        self.capacity_version = 0
        self.assume_ttl_s = assume_ttl_s
        self._clock = clock

    # ---- fed by the reflectors ----

    def replace(self, kind: str, items: Iterable[Json]) -> None:
        """A fresh list: everything of that kind is exactly this now."""
        with self._lock:
            if kind == NODES:
                self._nodes = {}
                self._node_facts = {}
                for obj in items:
                    self._set_node(obj)
                self.nodes_version += 1
                self.capacity_version += 1
            elif kind in (PENDING, BOUND):
                target: dict[str, PodInfo] = {}
                for obj in items:
                    pod = pod_info(obj)
                    target[pod.uid] = pod
                if kind == PENDING:
                    self._pending = {u: p for u, p in target.items() if u not in self._assumed}
                else:
                    self._bound = target
                    self._confirm(target.values())
                    self.capacity_version += 1
            else:
                self._groups = {k: v for k, v in self._groups.items() if k[0] != kind}
                for obj in items:
                    self._set_group(kind, obj)
        self.changed.set()

    def apply(self, kind: str, event: str, obj: Json) -> None:
        """One watch event (ADDED, MODIFIED, DELETED)."""
        with self._lock:
            if kind == NODES:
                self._node_event(event, obj)
            elif kind == PENDING:
                pod = pod_info(obj)
                if event == "DELETED" or pod.node is not None:
                    self._pending.pop(pod.uid, None)
                elif pod.uid not in self._assumed:
                    self._pending[pod.uid] = pod
            elif kind == BOUND:
                pod = pod_info(obj)
                if event == "DELETED":
                    if self._bound.pop(pod.uid, None) is not None:
                        self.capacity_version += 1
                    self._assumed.pop(pod.uid, None)
                else:
                    self._bound[pod.uid] = pod
                    self._confirm((pod,))
            elif event == "DELETED":
                self._groups.pop(_group_key(kind, obj), None)
            else:
                self._set_group(kind, obj)
        self.changed.set()

    def _node_event(self, event: str, obj: Json) -> None:
        name = str(obj["metadata"]["name"])
        if event == "DELETED":
            if self._nodes.pop(name, None) is not None:
                self._node_facts.pop(name, None)
                self.nodes_version += 1
                self.capacity_version += 1
            return
        before = self._node_facts.get(name)
        self._set_node(obj)
        if self._node_facts[name] != before:
            self.nodes_version += 1
            self.capacity_version += 1

    def _set_node(self, obj: Json) -> None:
        name = str(obj["metadata"]["name"])
        self._nodes[name] = obj
        self._node_facts[name] = _placement_facts(obj)

    def _set_group(self, kind: str, obj: Json) -> None:
        size = (obj.get("spec") or {}).get("minMember")
        self._groups[_group_key(kind, obj)] = int(size) if isinstance(size, int) and size > 0 else 1

    def _confirm(self, pods: Iterable[PodInfo]) -> None:
        for pod in pods:
            self._assumed.pop(pod.uid, None)

    # ---- used by the scheduling loop ----

    def assume(self, pod: PodInfo, node: str) -> None:
        with self._lock:
            self._pending.pop(pod.uid, None)
            if pod.uid not in self._bound:
                placed = dataclasses.replace(pod, node=node, ours=True)
                self._assumed[pod.uid] = (placed, self._clock() + self.assume_ttl_s)

    def forget(self, pods: Iterable[PodInfo]) -> None:
        """Pods released or deleted: they neither wait nor hold GPUs any more."""
        with self._lock:
            for pod in pods:
                self._pending.pop(pod.uid, None)
                self._assumed.pop(pod.uid, None)
                if self._bound.pop(pod.uid, None) is not None:
                    self.capacity_version += 1

    def clear_assumed(self) -> None:
        with self._lock:
            self._assumed.clear()

    def snapshot(self) -> Snapshot:
        with self._lock:
            now = self._clock()
            expired = [uid for uid, (_, deadline) in self._assumed.items() if deadline < now]
            for uid in expired:
                del self._assumed[uid]
            if expired:
                self.capacity_version += 1
            bound = {**self._bound, **{uid: pod for uid, (pod, _) in self._assumed.items()}}
            return Snapshot(self.nodes_version, self.capacity_version, tuple(self._nodes.values()),
                            tuple(self._pending.values()), tuple(bound.values()), dict(self._groups))


def _group_key(kind: str, obj: Json) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return kind, str(meta.get("namespace") or "default"), str(meta.get("name"))


def _placement_facts(node: Json) -> Any:
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    return (tuple(sorted((meta.get("labels") or {}).items())), repr(spec.get("taints")), spec.get("unschedulable"),
            repr(sorted((status.get("allocatable") or {}).items())), ready, spec.get("providerID"))
