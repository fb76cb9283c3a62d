"""Watch a gang's ProvisioningRequest until the autoscaler has made its nodes, refused, or run out of time; and take
what was applied for it out of the cluster again, so the next zone can be asked.

The conditions, as the autoscaler's API defines them (kubernetes/autoscaler cluster-autoscaler/apis/
provisioningrequest/autoscaling.x-k8s.io/v1 types.go, `ProvisioningRequestStatus.Conditions`, metav1.Condition;
written by cluster-autoscaler/provisioningrequest/conditions/conditions.go `AddOrUpdateCondition`):
- `Provisioned` True: every requested node was created and registered (reason CapacityIsProvisioned, or
  CapacityIsFound for check-capacity); False while it is still trying;
- `Failed` True: the nodes cannot be had (its reason and message say why: CapacityIsNotFound with the class's
  `noRetry`, Expired past `ValidUntilSeconds`, FailedToBookCapacity, ...). Terminal;
- `CapacityRevoked` True: the resources it had are no longer valid. Terminal (Provisioned may still read True);
- `BookingExpired` True: it was Provisioned and the booking lapsed before pods took the nodes (CA books them for
  10 minutes). Terminal: the nodes may be scaled away.
- `Provisioned` True with reason `PartialCapacityIsFound`: check-capacity with `partialCapacityCheck: bookPartial`
  booked only what fits. A refusal for a gang, which needs every node.
Kueue reads the same conditions in its ProvisioningRequest admission check (sigs.k8s.io/kueue v0.17.0
pkg/controller/admissionchecks/provisioning/controller.go: Failed or CapacityRevoked -> the check Retry (a new
request, same zone, after its backoff) or Rejected; BookingExpired before admission -> Retry; Provisioned -> Ready).
geosched reads them to move the gang to another zone instead of asking the same one again.

Which requests are the gang's: without Kueue the one rendered beside the job (its name is known); through Kueue
the ones Kueue made for the job's Workload (Kueue names them `<workload>-<check>-<attempt>` and sets the Workload as
their controller owner; the Workload's owner is the job), found by those owner references.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from geosched.core.errors import GeoschedError
from geosched.kube import provreq
from geosched.kube.backends.kueue import API_VERSION as KUEUE_API
from geosched.kube.client import FIELD_MANAGER, Kube, describe, status_of, with_retries

REQUESTS = "/apis/autoscaling.x-k8s.io/v1/namespaces/{ns}/provisioningrequests"
WORKLOADS = f"/apis/{KUEUE_API}/namespaces/{{ns}}/workloads"
# The terminal conditions, in the order they are read: a revoked or expired request may still say Provisioned.
FAILED, REVOKED, EXPIRED, PROVISIONED = "Failed", "CapacityRevoked", "BookingExpired", "Provisioned"
TERMINAL = (FAILED, REVOKED, EXPIRED)
# Provisioned True with this reason is cluster-autoscaler's check-capacity class with `partialCapacityCheck:
# bookPartial` booking what fits when not every pod does (provisioningrequest/checkcapacity,
# conditions.PartialCapacityIsFoundReason): a gang needs every node, so for geosched it is the zone refusing.
PARTIAL = "PartialCapacityIsFound"
# Kueue's queue objects stay when a zone's request is withdrawn: they name no zone and the next zone uses them.
QUEUE_KINDS = frozenset({"ResourceFlavor", "ProvisioningRequestConfig", "AdmissionCheck", "ClusterQueue",
                         "LocalQueue"})


class WithdrawFailed(GeoschedError):
    """What was applied for one zone's request did not leave the cluster in time (an environment failure)."""


class WatchFailed(GeoschedError):
    """The API server refused a read of the gang's objects, or kept failing it (an environment failure)."""


class RequestGone(GeoschedError):
    """The gang's request (without Kueue) or its job (through Kueue) was deleted by someone else while watched."""


class AlreadyThere(GeoschedError):
    """An object geosched would apply for a zone, and delete when the zone refuses, exists before it is applied."""


@dataclass(frozen=True, slots=True)
class RequestState:
    name: str
    condition: str  # Provisioned, Failed, CapacityRevoked, BookingExpired, or "" while pending
    reason: str = ""
    message: str = ""

    @property
    def failed(self) -> bool:
        return self.condition in TERMINAL or self.condition == PARTIAL

    def line(self) -> str:
        said = ": ".join(x for x in (self.reason, self.message) if x)
        return f"ProvisioningRequest {self.name} {self.condition or 'pending'}" + (f" ({said})" if said else "")


def request_state(request: Mapping[str, Any]) -> RequestState:
    """What one ProvisioningRequest (the API's JSON) says: its first terminal condition that is True, else
    Provisioned when that is True, else pending. Pure."""
    meta, status = request.get("metadata"), request.get("status")
    name = str(meta.get("name", "?")) if isinstance(meta, Mapping) else "?"
    listed = status.get("conditions") if isinstance(status, Mapping) else None
    # The first condition of a type counts, as apimeta.FindStatusCondition reads them (k8s.io/apimachinery
    # pkg/api/meta/conditions.go), which cluster-autoscaler and Kueue both use: the API server keeps the types
    # unique (listType=map), but an answer that repeats one must not read otherwise here than there.
    conditions: dict[str, Mapping[str, Any]] = {}
    for c in listed if isinstance(listed, list) else []:
        if isinstance(c, Mapping):
            conditions.setdefault(str(c.get("type")), c)
    for kind in (*TERMINAL, PROVISIONED):
        found = conditions.get(kind)
        if found is not None and found.get("status") == "True":
            reason = str(found.get("reason") or "")
            return RequestState(name, PARTIAL if kind == PROVISIONED and reason == PARTIAL else kind, reason,
                                str(found.get("message") or "")[:300])
    return RequestState(name, "")


def outcome(states: Sequence[RequestState]) -> RequestState | None:
    """The gang's outcome from its requests' states: the first failed one, else Provisioned once every request
    is (at least one existing), else None (still pending). Pure."""
    failed = next((s for s in states if s.failed), None)
    if failed is not None:
        return failed
    if states and all(s.condition == PROVISIONED for s in states):
        return states[0]
    return None


def _owned_by(obj: Mapping[str, Any], uids: set[str]) -> bool:
    return any(str(r.get("uid")) in uids for r in ((obj.get("metadata") or {}).get("ownerReferences") or []))


def find_requests(kube: Kube, namespace: str, job: Mapping[str, Any], request_name: str | None) -> list[Any]:
    """The gang's ProvisioningRequests now: `request_name` (rendered without Kueue), else those owned by the
    Workloads Kueue made for `job` (the applied object)."""
    path = REQUESTS.format(ns=namespace)
    # Both are applied before the watch starts, so their absence is someone else's delete, not a request not made
    # yet: waiting would run out the zone's whole deadline (an hour) and then ask the next zone for what was
    # withdrawn on purpose. `RequestGone`, one line.
    if request_name is not None:
        found = asked(kube, f"reading ProvisioningRequest {request_name} in namespace {namespace}",
                       lambda: kube.get(f"{path}/{request_name}"), WatchFailed)
        if found is None:
            raise RequestGone(f"{kube.name}: ProvisioningRequest {request_name} in namespace {namespace} was "
                              "deleted while it was watched")
        return [found]
    what = f"{job['kind']} {job['metadata']['name']} in namespace {namespace}"
    resource = asked(kube, f"reading {what}", lambda: kube.resource(str(job["apiVersion"]), str(job["kind"])),
                      WatchFailed)
    if resource is None:
        return []
    live = asked(kube, f"reading {what}", lambda: kube.get(resource.path(namespace, str(job["metadata"]["name"]))),
                  WatchFailed)
    if live is None:
        raise RequestGone(f"{kube.name}: {job['kind']} {job['metadata']['name']} in namespace {namespace} was "
                          "deleted while its ProvisioningRequest was watched")
    job_uid = {str(live["metadata"].get("uid"))}
    listed = asked(kube, f"listing Kueue's Workloads in namespace {namespace}",
                    lambda: kube.list_all(WORKLOADS.format(ns=namespace))[0], WatchFailed)
    workloads = {str(w["metadata"].get("uid")) for w in listed if _owned_by(w, job_uid)}
    if not workloads:
        return []
    requests = asked(kube, f"listing ProvisioningRequests in namespace {namespace}", lambda: kube.list_all(path)[0],
                      WatchFailed)
    return [r for r in requests if _owned_by(r, workloads)]


def wait_outcome(find: Callable[[], list[Any]], *, timeout_s: float, poll_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> RequestState | None:
    """Poll the gang's requests until they are Provisioned or one ends terminally; None when the deadline passes
    first. The API's own errors (`find`'s one line, after its retries) propagate."""
    start = clock()
    while True:
        done = outcome([request_state(r) for r in find()])
        if done is not None:
            return done
        waited = clock() - start
        if waited >= timeout_s:
            return None
        sleep(min(poll_s, max(0.0, timeout_s - waited)))


def withdraw(kube: Kube, manifests: Sequence[Mapping[str, Any]], requests: Sequence[str], *, namespace: str,
             timeout_s: float, poll_s: float = 1.0, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> None:
    """Delete what was applied for one zone but Kueue's queue objects (the job and its companions, without Kueue
    the PodTemplates and the request), in reverse order, and wait until they and `requests` (the ones Kueue made:
    its garbage collector deletes them with the Workload) are gone: the next zone's job has the same name, and a
    request left behind would still make nodes. `WithdrawFailed` (one line) past the deadline."""
    paths: list[str] = []
    for path in _withdrawn(kube, manifests, namespace):
        paths.append(path)
        asked(kube, f"deleting {_named(path)}", partial(_delete, kube, path), WithdrawFailed)
    paths += [f"{REQUESTS.format(ns=namespace)}/{name}" for name in requests]
    start = clock()
    while True:
        left = [_named(p) for p in paths if asked(kube, f"reading {_named(p)}", partial(kube.get, p),
                                                   WithdrawFailed) is not None]
        if not left:
            return
        waited = clock() - start
        if waited >= timeout_s:
            raise WithdrawFailed(f"{kube.name}: still there {timeout_s:g} s after deleting: {', '.join(left[:3])}"
                                 + (f" and {len(left) - 3} more" if len(left) > 3 else ""))
        sleep(min(poll_s, max(0.0, timeout_s - waited)))


def already_there(kube: Kube, manifests: Sequence[Mapping[str, Any]], *, namespace: str) -> list[str]:
    """The objects `withdraw` would delete that exist before `manifests` are applied (as `jobs/train`): an earlier
    run's job (running, or queued after an interrupted watch) or someone else's object of the same name. Applied
    over, a request's old conditions would be read as this zone's answer (its spec is immutable, so the apply leaves
    it and its status as they were), and a refusal would delete what geosched did not create."""
    return [_named(p) for p in reversed(_withdrawn(kube, manifests, namespace))
            if asked(kube, f"reading {_named(p)}", partial(kube.get, p), WatchFailed) is not None]


def _withdrawn(kube: Kube, manifests: Sequence[Mapping[str, Any]], namespace: str) -> list[str]:
    """The API paths of what `withdraw` deletes: every object of `manifests` but Kueue's queue objects, last
    first."""
    paths: list[str] = []
    for obj in reversed(manifests):
        if obj["kind"] in QUEUE_KINDS:
            continue
        resource = kube.resource(str(obj["apiVersion"]), str(obj["kind"]))
        if resource is None:
            continue
        meta = obj.get("metadata") or {}
        paths.append(resource.path(str(meta.get("namespace") or namespace) if resource.namespaced else None,
                                   str(meta["name"])))
    return paths


def _named(path: str) -> str:
    return path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1]


def _delete(kube: Kube, path: str) -> None:
    try:
        # Background: the Job's pods and Kueue's Workload (and through it Kueue's request) go with it.
        kube.request("DELETE", path, query={"propagationPolicy": "Background"})
    except Exception as exc:
        if status_of(exc) != 404:
            raise


T = TypeVar("T")


def asked(kube: Kube, what: str, call: Callable[[], T], failure: type[GeoschedError]) -> T:
    """One request of the watch or the withdrawal, asked again while it fails transiently (429 after its
    Retry-After, 5xx, a dropped connection: the client's `with_retries`), since one blip would otherwise end an
    hour's wait and give up the request's place in the autoscaler's queue; what still fails is `failure`, one line
    naming the cluster, what was asked and the server's answer (the client's exception is no line of its own)."""
    try:
        return with_retries(call)
    except GeoschedError:
        raise
    except Exception as exc:
        raise failure(f"{kube.name}: {what}: {describe(exc)}") from None


# Kueue's queue objects of a gang, the order they are removed in: users before what they use (a LocalQueue names its
# ClusterQueue, which names its flavor and check; the check names its config).
QUEUE_ORDER = ("LocalQueue", "ClusterQueue", "AdmissionCheck", "ProvisioningRequestConfig", "ResourceFlavor")
# Before stop 34 every gang's queue objects had this one name (the LocalQueue in the gang's namespace).
LEGACY_QUEUE = provreq.DEFAULT_NAME


def owned(obj: Mapping[str, Any]) -> bool:
    """Whether geosched alone made and keeps `obj`: every managedFields entry is geosched's field manager's, but a
    controller's (`_controllers`: its status, its finalizers).
    A cluster owner's `kubectl create`, `edit`, `apply` or `patch` adds an entry of its own manager, and then the
    object is the owner's too: geosched never deletes it. An object without managedFields (a server that keeps
    none) is not known to be geosched's."""
    entries = [e for e in (obj.get("metadata") or {}).get("managedFields") or [] if isinstance(e, Mapping)]
    return any(e.get("manager") == FIELD_MANAGER for e in entries) and all(
        e.get("manager") == FIELD_MANAGER or _controllers(e) for e in entries)


def _controllers(entry: Mapping[str, Any]) -> bool:
    """A managedFields entry a controller writes, not an owner's edit: the status subresource, or nothing but
    finalizers (Kueue v0.17.0 adds `kueue.x-k8s.io/resource-in-use` to the ClusterQueues, flavors and admission
    checks it uses, as manager `kueue`, seen on the real control plane)."""
    if entry.get("subresource"):
        return True
    fields = entry.get("fieldsV1")
    if not isinstance(fields, Mapping) or set(fields) != {"f:metadata"}:
        return False
    meta = fields.get("f:metadata")
    return isinstance(meta, Mapping) and set(meta) <= {"f:finalizers"}


def legacy_queue(namespace: str) -> list[tuple[str, str, str, str | None]]:
    """The pre-stop-34 queue objects a gang of `namespace` used: (apiVersion, kind, name, namespace)."""
    return [(KUEUE_API, kind, LEGACY_QUEUE, namespace if kind == "LocalQueue" else None) for kind in QUEUE_ORDER]


def remove_queue(kube: Kube, refs: Sequence[tuple[str, str, str, str | None]]) -> tuple[list[str], str | None]:
    """Delete one set of a gang's queue objects (`refs`: (apiVersion, kind, name, namespace)), all or none: what
    was deleted, or why nothing (or not all) was. Kept when any of them is not geosched's alone (`owned`: the owner
    changed or made it, so the set is the owner's queue now, and deleting its flavor or check would break it), or
    when a Workload in the LocalQueue's namespace still queues on it (another gang, maybe of another store). When a
    LocalQueue of another namespace points at the ClusterQueue, only this namespace's LocalQueue may go. Objects
    already gone are passed over. Kueue's finalizers hold a ClusterQueue or flavor still in use until it is not."""
    found: list[tuple[str, Any]] = []
    for api_version, kind, name, namespace in sorted(refs, key=lambda r: QUEUE_ORDER.index(r[1])):
        resource = asked(kube, f"reading {kind} {name}", partial(kube.resource, api_version, kind), WatchFailed)
        if resource is None:
            continue
        path = resource.path(namespace if resource.namespaced else None, name)
        obj = asked(kube, f"reading {kind} {name}", partial(kube.get, path), WatchFailed)
        if obj is not None:
            found.append((path, obj))
    if not found:
        return [], None
    named = [f"{o['kind']} {o['metadata']['name']}" for _, o in found]
    theirs = next((o for _, o in found if not owned(o)), None)
    if theirs is not None:
        managers = sorted({str(e.get("manager")) for e in theirs["metadata"].get("managedFields") or []
                           if isinstance(e, Mapping) and not e.get("subresource")} - {FIELD_MANAGER})
        who = f"{theirs['kind']} {theirs['metadata']['name']}"
        return [], (f"{who} was made or changed by {', '.join(managers) or 'another manager'}: kept, with "
                    f"{', '.join(named)}, as the owner's queue")
    shared = _shared(kube, found)
    if shared is not None:
        # The ClusterQueue is cluster-wide: another namespace's LocalQueue still points at it (the pre-stop-34 set
        # was one ClusterQueue for every namespace), so it and what it uses stay; this namespace's LocalQueue may go.
        found = [(path, o) for path, o in found if o["kind"] == "LocalQueue"]
        named = [f"{o['kind']} {o['metadata']['name']}" for _, o in found]
    local = next((o for _, o in found if o["kind"] == "LocalQueue"), None)
    if local is not None:
        namespace = str(local["metadata"].get("namespace"))
        workloads = asked(kube, f"listing Kueue's Workloads in namespace {namespace}",
                          lambda: kube.list_all(WORKLOADS.format(ns=namespace))[0], WatchFailed)
        # One being deleted (the gang's own, its job just deleted: Kueue holds it by a finalizer) uses nothing.
        using = [str(w["metadata"]["name"]) for w in workloads
                 if (w.get("spec") or {}).get("queueName") == local["metadata"]["name"]
                 and not w["metadata"].get("deletionTimestamp")]
        if using:
            return [], f"Workload {using[0]} in namespace {namespace} queues on {', '.join(named)}: kept"
    for path, _ in found:
        asked(kube, f"deleting {_named(path)}", partial(_delete, kube, path), WithdrawFailed)
    return named, shared


def _shared(kube: Kube, found: Sequence[tuple[str, Any]]) -> str | None:
    """Why the set's ClusterQueue (and the check, config and flavor it names) must stay: a LocalQueue outside the
    set points at it (listed in every namespace); None when nothing else uses it or the set has no ClusterQueue."""
    queue = next((o for _, o in found if o["kind"] == "ClusterQueue"), None)
    if queue is None:
        return None
    name = queue["metadata"]["name"]
    ours = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for _, o in found if o["kind"] == "LocalQueue"}
    resource = asked(kube, "reading LocalQueue", partial(kube.resource, KUEUE_API, "LocalQueue"), WatchFailed)
    if resource is None:
        return None
    queues = asked(kube, "listing Kueue's LocalQueues in every namespace",
                   lambda: kube.list_all(resource.path())[0], WatchFailed)
    other = next((q["metadata"] for q in queues if (q.get("spec") or {}).get("clusterQueue") == name
                  and (q["metadata"].get("namespace"), q["metadata"]["name"]) not in ours
                  and not q["metadata"].get("deletionTimestamp")), None)
    if other is None:
        return None
    return (f"ClusterQueue {name} kept, with what it names: LocalQueue {other['name']} in namespace "
            f"{other.get('namespace')} points at it")
