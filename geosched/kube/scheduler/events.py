"""Kubernetes Events on pods (Scheduled, FailedScheduling, ...) and Workloads, sent from a thread of their own.

Events are for people (`kubectl describe pod`, `kubectl describe workload`); they must never slow or stop a
decision. So, as client-go's EventBroadcaster does (tools/record/event.go: a bounded queue, `maxQueuedEvents`
1000, events dropped with a log line when it is full, sent by a goroutine of their own), they go through a bounded
queue, are built and sent by a thread of their own, best effort, and are dropped (counted) when the queue is full
or the server refuses them. The caller only enqueues what the Event says: no object, no syscall, nothing that
waits. Names are client-go's (`makeEvent`: the object's name, a dot, the time in nanoseconds in hex).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from datetime import UTC, datetime

from geosched.kube.client import EVENTS, Json, Kube, describe
from geosched.kube.scheduler.pods import PodInfo

log = logging.getLogger(__name__)
COMPONENT = "geosched"


class EventSink:
    def __init__(self, kube: Kube, identity: str, *, capacity: int = 1000) -> None:
        self.kube = kube
        self.identity = identity
        self.sent = 0
        self.dropped = 0
        self._queue: queue.Queue[tuple[Json, str, str, bool, int] | None] = queue.Queue(capacity)
        self._closing_at = float("inf")
        self._thread = threading.Thread(target=self._run, name=f"events-{kube.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float = 2.0) -> None:
        """Send what is queued for up to `timeout`, then drop the rest (stopping must not wait on Events)."""
        self._closing_at = time.monotonic() + timeout
        with contextlib.suppress(queue.Full):  # a full queue is drained by the thread, which then ends
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)

    def emit(self, pod: PodInfo, reason: str, message: str, *, warning: bool = False) -> None:
        self.emit_about({"apiVersion": "v1", "kind": "Pod", "name": pod.name, "namespace": pod.namespace,
                         "uid": pod.uid}, reason, message, warning=warning)

    def emit_about(self, involved: Json, reason: str, message: str, *, warning: bool = False) -> None:
        """An Event on any namespaced object (`involved`: apiVersion, kind, name, namespace, uid)."""
        try:
            self._queue.put_nowait((involved, reason, message, warning, time.time_ns()))
        except queue.Full:
            self.dropped += 1

    def event(self, involved: Json, reason: str, message: str, warning: bool, at_ns: int) -> Json:
        now = datetime.fromtimestamp(at_ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{involved['name']}.{at_ns:x}", "namespace": involved["namespace"]},
            "involvedObject": dict(involved),
            "reason": reason, "message": message[:1024], "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
            "reportingInstance": self.identity[:128], "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }

    def _run(self) -> None:
        while (queued := self._queue.get()) is not None:
            if time.monotonic() > self._closing_at:
                self.dropped += 1
                continue
            event = self.event(*queued)
            namespace = str(event["metadata"]["namespace"])
            try:
                self.kube.request("POST", EVENTS.path(namespace), body=event, timeout=10.0)
                self.sent += 1
            except Exception as exc:  # best effort: an event lost is a line missing from `describe`
                self.dropped += 1
                log.debug("event %s dropped: %s", event["reason"], describe(exc))
