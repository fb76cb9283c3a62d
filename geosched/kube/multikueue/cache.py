"""The manager's Kueue objects as the dispatcher last saw them, kept by the scheduler's reflectors (a
`reflector.Sink`): list, then watch; a fresh list replaces a kind wholesale."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from geosched.kube.client import Json

WORKLOADS, QUEUES, CHECKS, CONFIGS, CLUSTERS = "workloads", "clusterqueues", "admissionchecks", \
    "multikueueconfigs", "multikueueclusters"
KINDS = {WORKLOADS: "Workload", QUEUES: "ClusterQueue", CHECKS: "AdmissionCheck", CONFIGS: "MultiKueueConfig",
         CLUSTERS: "MultiKueueCluster"}


class ManagerCache:
    """The manager's Kueue objects, kept by reflectors (a `reflector.Sink`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.changed = threading.Event()
        self._objects: dict[str, dict[tuple[str, str], Json]] = {k: {} for k in KINDS}
        self.synced: set[str] = set()

    @staticmethod
    def _key(obj: Json) -> tuple[str, str]:
        meta = obj.get("metadata") or {}
        return str(meta.get("namespace") or ""), str(meta.get("name") or "")

    def replace(self, kind: str, items: Iterable[Json]) -> None:
        with self._lock:
            self._objects[kind] = {self._key(o): o for o in items}
            self.synced.add(kind)
        self.changed.set()

    def apply(self, kind: str, event: str, obj: Json) -> None:
        with self._lock:
            if event == "DELETED":
                self._objects[kind].pop(self._key(obj), None)
            else:
                self._objects[kind][self._key(obj)] = obj
        self.changed.set()

    def items(self, kind: str) -> list[Json]:
        with self._lock:
            return list(self._objects[kind].values())
