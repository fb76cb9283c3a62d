"""List, then watch from the list's resourceVersion, into the cache; list again whenever the watch ends.

client-go's reflector re-lists only on errors and resumes a watch that timed out; here every end of a stream
(the server's timeout, a dropped connection, a 410 Expired) leads to a fresh list. A stream ending early cannot
be told from a drop by what the client sees, and a list is always correct, so the simpler rule is also the safe
one; with `watch_timeout_s` of 300 s it costs one list per resource per five minutes.

A resource the cluster does not serve (a PodGroup CRD that is not installed) is looked for again every
`absent_retry_s`. Any other failure backs off exponentially (0.5 s doubling to 30 s: RECONNECT, on the one retry
policy of geosched.core.retry) and lists again. An API server
that cannot be reached at all fails every reflector of the cluster at once: they share one `Outage`, one backoff
whose every step is said in one line naming the cluster's context and the cause (not once per resource, and not
urllib3's own retry lines, which `geosched.console.logs` keeps off stderr), and the recovery in one more.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import urllib3
from kubernetes.client.exceptions import ApiException

from geosched.core.retry import RetryPolicy
from geosched.kube.client import Json, Kube, describe

log = logging.getLogger(__name__)

# The reconnect schedule: a list that failed, and a cluster's outage, wait 0.5 s doubling to 30 s (without jitter:
# one scheduler per cluster, and an outage's reflectors are meant to retry together). Only `delay` is used: the loop
# keeps trying for as long as it runs, so `attempts` does not apply.
RECONNECT = RetryPolicy(initial_s=0.5, max_s=30.0)


class Sink(Protocol):
    """Where a reflector puts what it sees (the scheduler's ClusterCache, the dispatcher's ManagerCache)."""

    def replace(self, kind: str, items: Iterable[Json]) -> None: ...

    def apply(self, kind: str, event: str, obj: Json) -> None: ...


def unreachable(exc: BaseException) -> bool:
    """No answer from the API server at all (refused, reset, timed out, TLS, DNS), as opposed to an answer."""
    return isinstance(exc, urllib3.exceptions.HTTPError | OSError) and not isinstance(exc, ApiException)


class _Ended(enum.Enum):
    """How a watch ended: at its timeout or the stop (listed again at once), by an ERROR event after it had
    delivered changes (routine: history compacted), or by one before any (a server that may answer every watch so)."""

    QUIETLY = "quietly"
    ERROR_AFTER_EVENTS = "error after events"
    ERROR_FIRST = "error first"


class _Unreachable(Exception):
    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Outage:
    """A cluster's API server unreachable, as all its reflectors find it: one backoff (`initial_s` doubling to
    `max_s`), each step logged once. Each reflector that fails waits until the current step ends; the first to fail
    after that starts the next step (and says so), so the reflectors retry together and the log has one line per
    step, however many resources the cluster's reflectors list."""

    def __init__(self, name: str, *, policy: RetryPolicy = RECONNECT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.policy = policy
        self.clock = clock
        self.delay = 0.0
        self.since: float | None = None  # when the outage began; None while reachable
        self.until = float("-inf")  # when the current step's wait ends
        self.steps = 0  # every step, of every outage so far
        self.retries = 0  # the steps of this outage
        self._lock = threading.Lock()

    @classmethod
    def of(cls, kube: Kube) -> Outage:
        """The cluster named as its lines name it: by kubeconfig context, or in-cluster."""
        return cls(kube.name if kube.name == "in-cluster" else f"context {kube.name}")

    def failed(self, exc: BaseException) -> float:
        """Seconds to wait before trying again."""
        with self._lock:
            now = self.clock()
            if now >= self.until:
                self.retries = 1 if self.since is None else self.retries + 1
                self.delay = self.policy.delay(self.retries)
                if self.since is None:
                    self.since = now
                self.until = now + self.delay
                self.steps += 1
                log.warning("%s: cannot reach the API server (%s); trying again in %.1fs", self.name,
                            describe(exc), self.delay)
            return max(0.0, self.until - now)

    def reached(self) -> None:
        with self._lock:
            if self.since is not None:
                log.warning("%s: the API server answers again, after %.0fs", self.name, self.clock() - self.since)
            self.since, self.delay, self.until, self.retries = None, 0.0, float("-inf"), 0


class Reflector:
    def __init__(self, kube: Kube, kind: str, path: str, cache: Sink, stop: threading.Event, *,
                 field_selector: str | None = None, label_selector: str | None = None, watch_timeout_s: int = 300,
                 optional: bool = False, absent_retry_s: float = 60.0, outage: Outage | None = None) -> None:
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
        self.outage = outage or Outage.of(kube)
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
        failures = 0  # lists that failed in a row (not for want of the server: that is the outage's count)
        while not self.stop.is_set():
            try:
                ended = self._list_and_watch()
                failures = 0 if ended is not _Ended.ERROR_FIRST else failures + 1
                if ended is not _Ended.QUIETLY:
                    # A watch ended by an ERROR event (410 Expired, 504 "Too large resource version") is listed again
                    # after RECONNECT's wait, as client-go's reflector waits on its backoff manager: at once, an
                    # API server answering every watch so (a watch cache behind the list's resourceVersion,
                    # kubernetes/kubernetes#91073) had every reflector LIST in a tight loop (attack5). A routine
                    # 410 after events waits the first step only (0.5 s).
                    self.stop.wait(RECONNECT.delay(max(1, failures)))
            except ApiException as exc:
                if exc.status == 404 and self.optional:
                    self.cache.replace(self.kind, [])
                    self.synced.set()
                    self.stop.wait(self.absent_retry_s)
                    continue
                failures += 1
                self._list_failed(exc, failures)
            except Exception as exc:  # the watch thread must outlive any one failure
                if self.stop.is_set():
                    return
                if isinstance(exc, _Unreachable):
                    self.stop.wait(self.outage.failed(exc.cause))
                    continue
                failures += 1
                self._list_failed(exc, failures)

    def _list_failed(self, exc: BaseException, failures: int) -> None:
        delay = RECONNECT.delay(failures)
        log.warning("%s %s: %s; listing again in %.1fs", self.kube.name, self.kind, describe(exc), delay)
        self.stop.wait(delay)

    def _list_and_watch(self) -> _Ended:
        try:
            items, version = self.kube.list_all(self.path, label_selector=self.label_selector,
                                                field_selector=self.field_selector)
        except Exception as exc:
            # A list that gets no answer is the server down; a watch that drops is routine (listed again at once).
            if unreachable(exc):
                raise _Unreachable(exc) from exc
            raise
        self.lists += 1
        self.outage.reached()
        self.cache.replace(self.kind, items)
        self.synced.set()
        seen = False
        for event in self.kube.watch(self.path, resource_version=version, label_selector=self.label_selector,
                                     field_selector=self.field_selector, timeout_s=self.watch_timeout_s,
                                     on_open=self._opened):
            if self.stop.is_set():
                return _Ended.QUIETLY
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                # 410 Expired (the resourceVersion was compacted) or another server error: list again.
                log.info("%s %s: watch error %s; listing again", self.kube.name, self.kind, obj.get("code"))
                return _Ended.ERROR_AFTER_EVENTS if seen else _Ended.ERROR_FIRST
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                seen = True
                self.cache.apply(self.kind, str(kind), obj)
        self._response = None
        return _Ended.QUIETLY

    def _opened(self, response: Any) -> None:
        self._response = response
        if self.stop.is_set():
            self.interrupt()
