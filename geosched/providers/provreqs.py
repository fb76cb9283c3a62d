"""The store table of ProvisioningRequest gangs (`prov_requests`): what `up --provisioning-class` applies for a gang
in a zone, and the nodes the cluster's autoscaler made for it, which the usage ledger charges until they are gone.
Every function is one transaction.

A row's states: `intent` before the zone's first apply (the cluster, namespace and the objects about to be applied,
so a process killed anywhere after it leaves `down` what to delete), `provisioned` once the request is Provisioned
(with the names of the requests seen), `deleted` once what was applied is out of the cluster (a refused zone's
withdrawal, or `down`) and no node it charged is left.

The gang and its attempts live in the machine path's tables (`providers.journal`), as a node group's do; a gang is a
ProvisioningRequest gang when it has rows here.

Why geosched charges nodes it did not create: the request is geosched's, and the autoscaler makes the nodes because
of it (cluster-autoscaler's best-effort-atomic-scale-up, GKE's Dynamic Workload Scheduler for queued-provisioning);
they are billed from their launch to their deletion whether the gang's pods run on them or not, exactly as a node
group's. No label ties a node to a request (cluster-autoscaler names none; GKE labels the nodes of a
queued-provisioning pool `cloud.google.com/gke-queued=true`, not by request), so the nodes are found through the
gang's pods: Kueue annotates each pod it admits through a request with that request's name
(`autoscaling.x-k8s.io/consume-provisioning-request`, sigs.k8s.io/kueue v0.17.0
pkg/controller/admissionchecks/provisioning/constants.go), as geosched does itself without Kueue (kube/provreq.py
`render_request`), and kube-scheduler binds each to a node (`spec.nodeName`). Of those nodes, the ones created
at or after the request are the request's (an older node was there before it: the autoscaler did not make it;
check-capacity makes none at all) (kube/provnodes.py).

The ledger rows (`geosched.store.usage`, one per node): kind node, source provider, the gang's cluster, `job` the
job's name (as `up` names a node group's rows, so a report by job shows the nodes' cost, idle time included, as the
job's), `ref` the node's uid; provider, region and zone of the attempt that asked (the catalog's keys, the zone the
job was pinned to), instance type and market from the node's labels (`node.kubernetes.io/instance-type`;
`kube.nodeprice.market`), GPUs from its capacity. Each opens at the node's `creationTimestamp`, when it registered
with the cluster (late by the machine's boot, a minute or two: the cloud bills from the instance's start), and
closes when `down` (or a later `down` of the same gang) sees the node gone, at that look (late by up to the
time between looks).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from geosched.store import usage
from geosched.store.db import Store

_COLUMNS = ("id, gang, attempt, cluster, context, kubeconfig, namespace, objects, requests, nodes, queue, state, "
            "created_at, updated_at")


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """One object geosched applied for the gang (`down` deletes it): the job, its companions, and without Kueue the
    request and its PodTemplates. Kueue's queue objects and the job file's other documents are not among them."""

    api_version: str
    kind: str
    name: str
    namespace: str | None

    def manifest(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name}
        if self.namespace is not None:
            meta["namespace"] = self.namespace
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": meta}


@dataclass(frozen=True, slots=True)
class ChargedNode:
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class RequestRecord:
    id: int
    gang: str
    attempt: int
    cluster: str
    context: str
    kubeconfig: str | None
    namespace: str
    objects: tuple[ObjectRef, ...]
    requests: tuple[str, ...]
    nodes: tuple[ChargedNode, ...]
    queue: tuple[ObjectRef, ...]  # Kueue's objects applied for the gang (none without Kueue)
    state: str
    created_at: float
    updated_at: float


OPEN_STATES = ("intent", "provisioned")  # rows that may still stand for objects (or charged nodes) in a cluster


def intend(store: Store, gang: str, attempt: int, *, cluster: str, context: str, kubeconfig: str | None,
           namespace: str, objects: Sequence[ObjectRef], requests: Sequence[str] = (),
           queue: Sequence[ObjectRef] = ()) -> RequestRecord:
    """Journal what is about to be applied for a gang in one zone, before the first apply: `requests` the request
    geosched renders itself (without Kueue; Kueue's are named by Kueue, found by `down` through the job)."""
    return _insert(store, gang, attempt, "intent", cluster=cluster, context=context, kubeconfig=kubeconfig,
                   namespace=namespace, objects=objects, requests=requests, queue=queue)


def provisioned(store: Store, row_id: int, requests: Sequence[str]) -> RequestRecord:
    """The row's request was Provisioned: `requests` the names of the requests seen (Kueue's included)."""
    with store.transaction() as db:
        db.execute("UPDATE prov_requests SET state = 'provisioned', requests = ?, updated_at = ? WHERE id = ?",
                   (json.dumps(sorted(set(requests))), time.time(), row_id))
    found = request(store, row_id)
    assert found is not None
    return found


def record(store: Store, gang: str, attempt: int, *, cluster: str, context: str, kubeconfig: str | None,
           namespace: str, objects: Sequence[ObjectRef], requests: Sequence[str],
           queue: Sequence[ObjectRef] = ()) -> RequestRecord:
    """Journal a gang's Provisioned request in one write (a row as `intend` then `provisioned` leave it)."""
    return _insert(store, gang, attempt, "provisioned", cluster=cluster, context=context, kubeconfig=kubeconfig,
                   namespace=namespace, objects=objects, requests=requests, queue=queue)


def _insert(store: Store, gang: str, attempt: int, state: str, *, cluster: str, context: str,
            kubeconfig: str | None, namespace: str, objects: Sequence[ObjectRef], requests: Sequence[str],
            queue: Sequence[ObjectRef]) -> RequestRecord:
    now = time.time()
    with store.transaction() as db:
        cur = db.execute(
            "INSERT INTO prov_requests (gang, attempt, cluster, context, kubeconfig, namespace, objects, requests, "
            "queue, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (gang, attempt, cluster, context, kubeconfig, namespace, _refs(objects), json.dumps(list(requests)),
             _refs(queue), state, now, now))
        row_id = int(cur.lastrowid or 0)
    found = request(store, row_id)
    assert found is not None
    return found


def charge(store: Store, row_id: int, nodes: Sequence[tuple[usage.Usage, float]]) -> int:
    """Open a ledger row for each (node, its start) the autoscaler made for the request, and keep the node on the
    request's row, in one transaction; returns how many rows were opened. Idempotent: a node charged already (same
    uid) keeps its row."""
    opened = 0
    with store.transaction() as db:
        row = db.execute(f"SELECT {_COLUMNS} FROM prov_requests WHERE id = ?", (row_id,)).fetchone()
        if row is None:
            return 0
        kept = list(_record(row).nodes)
        known = {n.uid for n in kept}
        for node, start in nodes:
            if node.ref is None or node.ref in known:
                continue
            usage.open_in(db, node, start)
            kept.append(ChargedNode(node.name, node.ref))
            known.add(node.ref)
            opened += 1
        db.execute("UPDATE prov_requests SET nodes = ?, updated_at = ? WHERE id = ?",
                   (json.dumps([[n.name, n.uid] for n in kept]), time.time(), row_id))
    return opened


def open_nodes(store: Store, row: RequestRecord) -> list[ChargedNode]:
    """The request's nodes still charged (their ledger row open)."""
    return [n for n in row.nodes
            if usage.is_open(store.db, usage.Kind.NODE, n.name, usage.Source.PROVIDER, n.uid)]


def close_nodes(store: Store, nodes: Sequence[ChargedNode], end: float) -> int:
    """Close the ledger rows of `nodes` (seen gone) at `end`; returns how many were open."""
    with store.transaction() as db:
        return sum(usage.close_in(db, usage.Kind.NODE, n.name, usage.Source.PROVIDER, n.uid, end) for n in nodes)


def mark_deleted(store: Store, row_id: int) -> None:
    with store.transaction() as db:
        db.execute("UPDATE prov_requests SET state = 'deleted', updated_at = ? WHERE id = ?", (time.time(), row_id))


def request(store: Store, row_id: int) -> RequestRecord | None:
    row = store.db.execute(f"SELECT {_COLUMNS} FROM prov_requests WHERE id = ?", (row_id,)).fetchone()
    return _record(row) if row else None


def requests_of(store: Store, gang: str) -> list[RequestRecord]:
    return [_record(r) for r in store.db.execute(f"SELECT {_COLUMNS} FROM prov_requests WHERE gang = ? ORDER BY id",
                                                 (gang,))]


def queue_in_use(store: Store, row: RequestRecord) -> list[str]:
    """The other gangs of this store, not taken down, whose request went through one of `row`'s queue objects (same
    cluster, kind and name)."""
    mine = {(o.kind, o.name) for o in row.queue}
    return sorted({r.gang for r in map(_record, store.db.execute(
        f"SELECT {_COLUMNS} FROM prov_requests WHERE state != 'deleted' AND gang != ? AND cluster = ?",
        (row.gang, row.cluster))) if mine & {(o.kind, o.name) for o in r.queue}})


def open_requests(store: Store, gang: str) -> list[RequestRecord]:
    """The gang's rows that may still stand for something in a cluster (`intent`, `provisioned`)."""
    return [r for r in requests_of(store, gang) if r.state in OPEN_STATES]


def is_request_gang(store: Store, gang: str) -> bool:
    """A gang with a row here, or whose own row says it is queued through a ProvisioningRequest (a process killed
    after journalling the gang but before its first intent has no row here: `down` must not take it for a machine
    gang, and ask a cloud's machine API for it)."""
    found = store.db.execute(
        "SELECT 1 FROM prov_requests WHERE gang = ? UNION ALL SELECT 1 FROM prov_gangs WHERE gang = ? AND "
        "json_extract(request, '$.provisioning_request') = 1 LIMIT 1", (gang, gang))
    return found.fetchone() is not None


def _record(row: tuple[Any, ...]) -> RequestRecord:
    return RequestRecord(
        id=row[0], gang=row[1], attempt=row[2], cluster=row[3], context=row[4], kubeconfig=row[5], namespace=row[6],
        objects=_objects(row[7]),
        requests=tuple(str(r) for r in json.loads(row[8])),
        nodes=tuple(ChargedNode(str(n), str(u)) for n, u in json.loads(row[9])),
        queue=_objects(row[10]), state=row[11], created_at=row[12], updated_at=row[13])


def _refs(objects: Sequence[ObjectRef]) -> str:
    return json.dumps([[o.api_version, o.kind, o.name, o.namespace] for o in objects])


def _objects(text: str) -> tuple[ObjectRef, ...]:
    return tuple(ObjectRef(str(a), str(k), str(n), None if ns is None else str(ns)) for a, k, n, ns in json.loads(text))
