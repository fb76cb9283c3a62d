"""List, then watch from the list's resourceVersion, into the cache; list again whenever the watch ends.

client-go's reflector re-lists only on errors and resumes a watch that timed out; here every end of a stream
(the server's timeout, a dropped connection, a 410 Expired) leads to a fresh list. A stream ending early cannot
be told from a drop by what the client sees, and a list is always correct, so the simpler rule is also the safe
one; with `watch_timeout_s` of 300 s it costs one list per resource per five minutes.

A resource the cluster does not serve (a PodGroup CRD that is not installed) is looked for again every
`absent_retry_s`. Any other failure backs off exponentially (0.5 s doubling to 30 s) and lists again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable
from typing import Any, Protocol

from kubernetes.client.exceptions import ApiException

from geosched.kube.client import Json, Kube, describe

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Where a reflector puts what it sees (the scheduler's ClusterCache, the dispatcher's ManagerCache)."""

    def replace(self, kind: str, items: Iterable[Json]) -> None: ...

    def apply(self, kind: str, event: str, obj: Json) -> None: ...


class Reflector:
    def __init__(self, kube: Kube, kind: str, path: str, cache: Sink, stop: threading.Event, *,
                 field_selector: str | None = None, label_selector: str | None = None, watch_timeout_s: int = 300,
                 optional: bool = False, absent_retry_s: float = 60.0) -> None:
        self.kube = kube
        self.kind = kind
        self.path = path
        self.cache = cache
        self.stop = stop
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.watch_timeout_s = watch_timeout_s
        self.optional = optional
        self.absent_retry_s = absent_retry_s
        self.lists = 0
        self.synced = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=f"reflector-{kube.name}-{kind}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self.interrupt()
        self._thread.join(timeout)

    def interrupt(self) -> None:
        """End the open watch at once (the scheduler is stopping)."""
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):  # already closed: nothing to end
                response.shutdown()

    def _run(self) -> None:
        delay = 0.5
        while not self.stop.is_set():
            try:
                self._list_and_watch()
                delay = 0.5
            except ApiException as exc:
                if exc.status == 404 and self.optional:
                    self.cache.replace(self.kind, [])
                    self.synced.set()
                    self.stop.wait(self.absent_retry_s)
                    continue
                log.warning("%s %s: %s; listing again in %.1fs", self.kube.name, self.kind, describe(exc), delay)
                self.stop.wait(delay)
                delay = min(delay * 2, 30.0)
            except Exception as exc:  # the watch thread must outlive any one failure
                if self.stop.is_set():
                    return
                log.warning("%s %s: %s; listing again in %.1fs", self.kube.name, self.kind, describe(exc), delay)
                self.stop.wait(delay)
                delay = min(delay * 2, 30.0)

    def _list_and_watch(self) -> None:
        items, version = self.kube.list_all(self.path, label_selector=self.label_selector,
                                            field_selector=self.field_selector)
        self.lists += 1
        self.cache.replace(self.kind, items)
        self.synced.set()
        for event in self.kube.watch(self.path, resource_version=version, label_selector=self.label_selector,
                                     field_selector=self.field_selector, timeout_s=self.watch_timeout_s,
                                     on_open=self._opened):
            if self.stop.is_set():
                return
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                # 410 Expired (the resourceVersion was compacted) or another server error: list again.
                log.info("%s %s: watch error %s; listing again", self.kube.name, self.kind, obj.get("code"))
                return
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self.cache.apply(self.kind, str(kind), obj)
        self._response = None

    def _opened(self, response: Any) -> None:
        self._response = response
        if self.stop.is_set():
            self.interrupt()
