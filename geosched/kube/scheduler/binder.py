"""Bind a decided gang through the pods/binding subresource, all or nothing, and release what must not stay.

A binding cannot be undone: the API has no unbind, and the kubelet starts a bound pod at once. So the gang is
decided whole in memory first (the role coscheduling's Permit stage plays: no pod of a group passes Permit until
the whole group has been assumed) and only then bound pod by pod:

- a transient failure (429, 5xx, a dropped connection) is retried in place; a retry answered 409 "already
  assigned to node N" with N our node means the earlier attempt went through, and counts as bound;
- a bind that still fails (the pod was deleted, is gated, was bound elsewhere, the server keeps failing) or the
  loss of leadership stops the gang, and the pods of the gang bound so far are *released*: marked with the
  `DisruptionTarget` condition (as kube-scheduler marks a pod it preempts) and deleted with a UID precondition,
  so their controller (Job, JobSet, training operator) creates them again, pending, and the gang is retried
  whole after a backoff. A Job that must not count this as a failure ignores `DisruptionTarget` in its
  podFailurePolicy, as it does for preemption. A bare pod (no controller) is deleted all the same: a half-bound
  gang would hold its GPUs forever.

Each binding carries the annotations `geosched.io/gang` and `geosched.io/zones`; the API server copies a
Binding's annotations onto the pod, so a bound pod says who placed it and why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

from kubernetes.client.exceptions import ApiException

from geosched.core.retry import RetryPolicy
from geosched.kube.client import (
    PODS,
    STRATEGIC_PATCH,
    Kube,
    api_message,
    describe,
    status_of,
    with_retries,
)
from geosched.kube.scheduler.decide import Bind, Decision
from geosched.kube.scheduler.pods import GANG_NOTE, PodInfo

log = logging.getLogger(__name__)
ZONES_NOTE = "geosched.io/zones"
RELEASE_REASON = "GeoschedGangRollback"


@dataclass(frozen=True)
class BindResult:
    bound: tuple[Bind, ...]
    failed: Bind | None = None
    error: str | None = None
    released: tuple[PodInfo, ...] = ()
    release_errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.failed is None and self.error is None


class BindFailed(Exception):
    pass


def bind_gang(kube: Kube, decision: Decision, *, leading: Callable[[], bool], retry: RetryPolicy,
              on_bound: Callable[[Bind], None] | None = None) -> BindResult:
    notes = {GANG_NOTE: str(decision.gang.key), ZONES_NOTE: ",".join(decision.zones)}
    done: list[Bind] = []
    for bind in decision.binds:
        if not leading():
            error = "lost leadership while binding"
            return _rolled_back(kube, done, bind, error, retry)
        try:
            bind_pod(kube, bind, notes, retry)
        except Exception as exc:  # every failure of a bind ends the gang the same way: release what was bound
            error = describe(exc) if not isinstance(exc, BindFailed) else str(exc)
            if _bound_anyway(kube, bind):
                done.append(bind)
            return _rolled_back(kube, done, bind, error, retry)
        done.append(bind)
        if on_bound is not None:
            on_bound(bind)
    return BindResult(tuple(done))


def bind_pod(kube: Kube, bind: Bind, annotations: Mapping[str, str], retry: RetryPolicy) -> None:
    pod = bind.pod
    body = {"apiVersion": "v1", "kind": "Binding",
            # The UID makes the bind a precondition on this very pod, not a namesake its controller made later.
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
                         "annotations": dict(annotations)},
            "target": {"apiVersion": "v1", "kind": "Node", "name": bind.node}}

    def attempt() -> None:
        try:
            kube.request("POST", PODS.path(pod.namespace, pod.name, "binding"), body=body)
        except ApiException as exc:
            if exc.status == 409 and f'"{bind.node}"' in api_message(exc):
                return  # an earlier attempt bound it to our node and its answer was lost
            raise

    with_retries(attempt, retry)


def _bound_anyway(kube: Kube, bind: Bind) -> bool:
    """After a failed bind, whether the pod is on our node all the same (a timeout after the server acted)."""
    try:
        found = kube.get(PODS.path(bind.pod.namespace, bind.pod.name))
    except Exception:
        return False
    spec = (found or {}).get("spec") or {}
    uid = ((found or {}).get("metadata") or {}).get("uid")
    return uid == bind.pod.uid and spec.get("nodeName") == bind.node


def _rolled_back(kube: Kube, done: Sequence[Bind], failed: Bind, error: str, retry: RetryPolicy) -> BindResult:
    pods = [b.pod for b in done]
    errors = release(kube, pods, f"gang {failed.pod.gang} could not be bound whole: {error}", retry)
    return BindResult(tuple(done), failed, error, tuple(pods), tuple(errors))


def release(kube: Kube, pods: Sequence[PodInfo], message: str, retry: RetryPolicy) -> list[str]:
    """Mark and delete pods so their controllers recreate them pending. Returns what could not be released."""
    errors: list[str] = []
    for pod in pods:
        try:
            with_retries(partial(_mark, kube, pod, message), retry)
        except Exception as exc:  # the mark only informs the controller; the delete is what matters
            if status_of(exc) != 404:
                log.warning("release %s: condition not set: %s", pod.key, describe(exc))
        try:
            with_retries(partial(_delete, kube, pod), retry)
        except Exception as exc:
            if status_of(exc) not in (404, 409):  # gone already, or already replaced by its controller
                errors.append(f"{pod.key}: {describe(exc)}")
    return errors


def _mark(kube: Kube, pod: PodInfo, message: str) -> None:
    condition = {"type": "DisruptionTarget", "status": "True", "reason": RELEASE_REASON, "message": message[:1000],
                 "lastTransitionTime": _now()}
    kube.request("PATCH", PODS.path(pod.namespace, pod.name, "status"), body={"status": {"conditions": [condition]}},
                 content_type=STRATEGIC_PATCH)


def _delete(kube: Kube, pod: PodInfo) -> None:
    kube.request("DELETE", PODS.path(pod.namespace, pod.name), body={"preconditions": {"uid": pod.uid}})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
