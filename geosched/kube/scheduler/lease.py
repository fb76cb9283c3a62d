"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection package does it.

- Every replica tries to acquire or renew every `retry_period_s` (2 s).
- A replica may take the lease when there is none, when it holds it, or when the holder has not changed the
  record for `lease_duration_s` (15 s) *as observed on this replica's own clock* (the time it last saw the
  record change, never the renewTime written by another machine, so clock skew does not matter).
- Every write carries the resourceVersion read just before, so of two replicas writing at once one gets 409
  and stays a follower: two replicas never both hold the lease.
- The leader counts as leader only until `renew_deadline_s` (10 s) after the start of its last successful
  renewal. That ends before anyone else may take over (lease duration > renew deadline), so an old leader has
  stopped binding before a new one starts, provided the two clocks run at about the same rate.
- On a clean stop the leader releases the lease (holder emptied), so a successor need not wait the full
  duration; a crashed leader is replaced after the lease duration.
- A Lease that cannot be read or written at all (its namespace does not exist, RBAC denies it) is a `LeaseError`
  naming that cause: only a 409 means another replica won the race.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes.client.exceptions import ApiException

from geosched.core.errors import GeoschedError
from geosched.kube.client import LEASES, Json, Kube, api_message, describe
from geosched.kube.scheduler.settings import LeaderElection

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    duration_s: float
    acquire_time: str | None
    renew_time: str | None
    transitions: int


def record_of(lease: Mapping[str, Any]) -> LeaseRecord:
    spec = lease.get("spec") or {}
    return LeaseRecord(str(spec.get("holderIdentity") or ""), float(spec.get("leaseDurationSeconds") or 0),
                       spec.get("acquireTime"), spec.get("renewTime"), int(spec.get("leaseTransitions") or 0))


def next_record(current: LeaseRecord | None, identity: str, now: str, duration_s: float) -> LeaseRecord:
    """The record this replica writes to acquire or renew."""
    ours = current is not None and current.holder == identity
    return LeaseRecord(
        holder=identity,
        duration_s=duration_s,
        acquire_time=current.acquire_time if ours and current is not None else now,
        renew_time=now,
        transitions=(current.transitions if ours else current.transitions + 1) if current is not None else 0,
    )


def spec_of(record: LeaseRecord) -> Json:
    return {"holderIdentity": record.holder, "leaseDurationSeconds": max(1, round(record.duration_s)),
            "acquireTime": record.acquire_time, "renewTime": record.renew_time,
            "leaseTransitions": record.transitions}


class LeaseError(GeoschedError):
    """The Lease cannot be read or written at all: nobody holds it, this replica may not (or cannot) take it."""


def lease_error(exc: ApiException, namespace: str, name: str) -> LeaseError | None:
    """What a failed Lease request means, when it is not a race (409) or a passing server hiccup (None)."""
    where = f"Lease {namespace}/{name}"
    if exc.status == 404:
        return LeaseError(f"cannot take the {where}: namespace {namespace} does not exist ({api_message(exc)}; "
                          "create it, or set the lease namespace: --lease-namespace or leader_election.namespace)")
    if exc.status in (401, 403):
        return LeaseError(f"cannot take the {where}: {exc.status} {api_message(exc)} (the identity needs get, "
                          f"create and update on leases in {namespace}: the Role in deploy/)")
    return None


def micro_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, kube: Kube, config: LeaderElection, identity: str, *,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.kube = kube
        self.config = config
        self.identity = identity
        self._clock = clock
        self._wall = wall
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._valid_until = float("-inf")
        self._lock = threading.Lock()
        self.transitions = 0  # times this replica became leader

    @property
    def path(self) -> str:
        return LEASES.path(self.config.namespace, self.config.name)

    def leading(self) -> bool:
        with self._lock:
            return self._clock() < self._valid_until

    def try_acquire_or_renew(self) -> bool:
        """True when this replica holds the lease now; False when another does (or won a race to it). Raises
        LeaseError when the Lease cannot be had at all (its namespace is missing, RBAC denies it)."""
        try:
            return self._acquire_or_renew()
        except ApiException as exc:
            error = lease_error(exc, self.config.namespace, self.config.name)
            if error is None:
                raise
            raise error from None

    def _acquire_or_renew(self) -> bool:
        started = self._clock()
        now = micro_time(self._wall())
        lease = self.kube.get(self.path)
        if lease is None:
            record = next_record(None, self.identity, now, self.config.lease_duration_s)
            body = {"apiVersion": LEASES.api_version, "kind": "Lease",
                    "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                    "spec": spec_of(record)}
            if not self._write("POST", LEASES.path(self.config.namespace), body):
                return False
            return self._won(record, started)
        current = record_of(lease)
        if current != self._observed:
            self._observed, self._observed_at = current, started
        held = bool(current.holder) and current.holder != self.identity
        if held and self._observed_at + current.duration_s > started:
            return False
        record = next_record(current, self.identity, now, self.config.lease_duration_s)
        body = {**lease, "spec": {**(lease.get("spec") or {}), **spec_of(record)}}
        if not self._write("PUT", self.path, body):
            return False
        return self._won(record, started)

    def _write(self, method: str, path: str, body: Json) -> bool:
        try:
            self.kube.request(method, path, body=body, timeout=self.config.renew_deadline_s)
        except ApiException as exc:
            if exc.status != 409:  # 409: another replica wrote first; anything else is the caller's to report
                raise
            return False
        return True

    def _won(self, record: LeaseRecord, started: float) -> bool:
        with self._lock:
            if self._clock() >= self._valid_until:
                self.transitions += 1
                log.info("%s became the leader (lease %s/%s)", self.identity, self.config.namespace,
                         self.config.name)
            self._observed, self._observed_at = record, started
            self._valid_until = started + self.config.renew_deadline_s
        return True

    def release(self) -> None:
        """Give the lease up now (a clean stop), so a successor need not wait out the duration."""
        if not self.leading():
            return
        with self._lock:
            self._valid_until = float("-inf")
        try:
            lease = self.kube.get(self.path)
            if lease is None or record_of(lease).holder != self.identity:
                return
            spec = {**(lease.get("spec") or {}), "holderIdentity": "", "leaseDurationSeconds": 1,
                    "renewTime": micro_time(self._wall())}
            self.kube.request("PUT", self.path, body={**lease, "spec": spec}, timeout=self.config.renew_deadline_s)
        except Exception as exc:  # the lease then simply expires
            log.warning("lease %s: release failed: %s", self.config.name, describe(exc))

    def run(self, stop: threading.Event, *, release_on_stop: bool = True) -> None:
        """Campaign and renew until `stop`; meant for its own thread."""
        said = ""
        while not stop.is_set():
            try:
                self.try_acquire_or_renew()
                said = ""
            except Exception as exc:  # an unreachable server: keep trying, leadership runs out on its own
                lasting = isinstance(exc, LeaseError)
                line = str(exc) if lasting else f"lease {self.config.name}: {describe(exc)}"
                if line != said:  # the cause once, not every retry period
                    log.log(logging.ERROR if lasting else logging.WARNING, "%s", line)
                    said = line
            stop.wait(self.config.retry_period_s)
        if release_on_stop:
            self.release()
