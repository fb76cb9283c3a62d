"""`geosched down GANG` of a gang `up --provisioning-class` queued (cli/provfailover.py): delete what geosched applied
for it and end the charge of the nodes the autoscaler made for it once they are gone (providers/provreqs.py); and
the rule that says which nodes those are (`charge_bound`), which `up` uses too.

Here rather than beside the queueing loop because `down` (providers/cli.py) calls it, and the providers may use the
kube adapter but not the CLI package.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from geosched.core.errors import GeoschedError, one_line
from geosched.kube import kinds, provnodes, provwatch
from geosched.kube.client import FIELD_MANAGER, Kube
from geosched.kube.kinds.base import when
from geosched.providers import journal, provreqs
from geosched.providers.journal import AttemptRecord
from geosched.providers.plan import GangRequest
from geosched.store.db import Store


@dataclass(frozen=True, slots=True)
class DownSettings:
    withdraw_s: float = 120.0  # the deleted objects' deadline, as a refused zone's withdrawal (cli/provfailover.py)
    # How long `down` waits for the nodes to be gone once the job is deleted: cluster-autoscaler removes a node
    # unneeded for --scale-down-unneeded-time (10 minutes by default, its FAQ), so a little over that.
    release_s: float = 720.0
    poll_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True, slots=True)
class Down:
    """What `down` of a ProvisioningRequest gang did: `state` terminated once every object is deleted and every
    charged node seen gone, else terminating (`errors` say what is left)."""

    state: str
    deleted: int  # objects geosched applied that were deleted (or found gone)
    closed: int  # ledger rows of nodes closed
    errors: tuple[str, ...]
    queue: tuple[str, ...] = ()  # what was done with its Kueue queue objects and what else to say, a line each


def connect(row: provreqs.RequestRecord) -> Kube:
    """The cluster of a request as `up` reached it: its context, in the kubeconfig `up` read (None: the default)."""
    return Kube.open(row.context, None if row.kubeconfig is None else Path(row.kubeconfig), name=row.cluster)


def take_down(store: Store, gang: str, open_kube: Callable[[provreqs.RequestRecord], Kube] = connect, *,
              settings: DownSettings = DownSettings()) -> Down:
    """`geosched down GANG` of a gang `up --provisioning-class` queued: for each of its rows not deleted (`intent`:
    what a run was about to apply, or applied and was stopped before the request was Provisioned; `provisioned`),
    charge the nodes the request's pods run on when the run recorded none (`charge_bound`, one look: its bind wait
    was cut short), delete what geosched applied for it (the job and its companions; without Kueue the request and
    its PodTemplates; Kueue's request goes with the job's Workload) of those objects that carry geosched's field
    manager (an object of that name someone else made, where the run was stopped before its apply, is left), wait
    until they and the requests are gone, then until the nodes charged for the request are gone (the autoscaler
    removes them once unneeded), closing each node's ledger row at the look that saw it gone.
    Nodes still there after `settings.release_s` stay charged and the gang `terminating`: `down` again closes them.
    A node of the same name with another uid is a new node: the charged one is gone. Attempts a killed run left
    `started` are closed."""
    before = journal.gang_record(store, gang)
    journal.set_gang(store, gang, "terminating")
    for a in journal.attempts(store, gang):
        if a.outcome == "started":
            journal.finish_attempt(store, a.id, "cancelled", message="its run stopped before it finished (killed); "
                                   "`down` took the gang down")
    deleted = closed = 0
    errors: list[str] = []
    queue: list[str] = []
    notes: list[str] = []
    rows = provreqs.requests_of(store, gang)
    queues: set[tuple[str, frozenset[provreqs.ObjectRef]]] = set()  # the queue sets seen to (cluster, refs)
    for row in rows:
        if row.state == "deleted":
            continue
        try:
            with open_kube(row) as kube:
                live = _live(kube, row)
                mine = [o for o in row.objects if live.get(o) is not None and _marked(live[o], row.gang)]
                theirs = [o for o in row.objects if live.get(o) is not None and not _marked(live[o], row.gang)]
                requests = _requests(kube, row, live, theirs)
                if not row.nodes and requests:
                    opened = _charge_missed(store, kube, row, requests)
                    if opened:
                        notes.append(f"{opened} node(s) the gang's pods run on in cluster {row.cluster} charged "
                                     "from their registration (its run was stopped before it charged them)")
                provwatch.withdraw(kube, [o.manifest() for o in mine], requests, namespace=row.namespace,
                                   timeout_s=settings.withdraw_s, poll_s=min(settings.poll_s, 1.0),
                                   clock=settings.clock, sleep=settings.sleep)
                deleted += len(row.objects) - len(theirs)
                _workloads_gone(kube, row, [live[o] for o in mine if kinds.lookup(o.api_version, o.kind)], settings)
                if theirs:
                    notes.append(f"{', '.join(f'{o.kind} {o.name}' for o in theirs[:3])} in namespace "
                                 f"{row.namespace} of cluster {row.cluster} left: not applied by geosched")
                queue += _remove_queue(store, kube, row)
                queues.add((row.cluster, frozenset(row.queue)))
                current = provreqs.request(store, row.id)
                closed += _wait_gone(store, kube, current if current is not None else row, settings)
        except Exception as exc:
            why = (str(exc) if isinstance(exc, GeoschedError) else
                   f"the cluster could not be asked ({type(exc).__name__})")
            errors.append(f"cluster {row.cluster}: {one_line(why)}")
            continue
        current = provreqs.request(store, row.id)
        left = provreqs.open_nodes(store, current) if current is not None else []
        if left:
            named = ", ".join(n.name for n in left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
            errors.append(f"node(s) {named} still in cluster {row.cluster} {settings.release_s:g} s after the job "
                          "was deleted: charged until they are gone (the autoscaler removes a node once unneeded, "
                          f"cluster-autoscaler after --scale-down-unneeded-time); run `geosched down {gang}` again")
            continue
        provreqs.mark_deleted(store, row.id)
    if before is None or before.state != "terminated":
        # Kueue's queue objects a refused zone's row applied: that row is `deleted` once the zone is withdrawn, and a
        # run killed before the next zone's row was written leaves no open row naming them (found by
        # tests/providers/test_provreq_kill_steps.py). Not for a gang ended already (its `up` failed in every zone:
        # the queue objects stay for the next gang, as `up` says) nor once `down` has finished it.
        for row in rows:
            if row.state != "deleted" or not row.queue or (row.cluster, frozenset(row.queue)) in queues:
                continue
            queues.add((row.cluster, frozenset(row.queue)))
            try:
                with open_kube(row) as kube:
                    queue += _remove_queue(store, kube, row)
            except Exception as exc:
                why = (str(exc) if isinstance(exc, GeoschedError) else
                       f"the cluster could not be asked ({type(exc).__name__})")
                errors.append(f"cluster {row.cluster}: {one_line(why)}")
    state = "terminating" if errors else "terminated"
    journal.set_gang(store, gang, state, message="; ".join(errors) if errors else
                     f"the job and its requests deleted; {closed} node(s) the autoscaler made seen gone")
    return Down(state, deleted, closed, tuple(errors), tuple(queue + notes))


def _live(kube: Kube, row: provreqs.RequestRecord) -> dict[provreqs.ObjectRef, Any]:
    """The row's objects as the cluster holds them now (None: not there, or its kind not served)."""
    found: dict[provreqs.ObjectRef, Any] = {}
    for o in row.objects:
        resource = provwatch.asked(kube, f"reading {o.kind} {o.name}",
                                   partial(kube.resource, o.api_version, o.kind), provwatch.WatchFailed)
        if resource is None:
            found[o] = None
            continue
        path = resource.path((o.namespace or row.namespace) if resource.namespaced else None, o.name)
        found[o] = provwatch.asked(kube, f"reading {o.kind} {o.name}", partial(kube.get, path),
                                   provwatch.WatchFailed)
    return found


def _workloads_gone(kube: Kube, row: provreqs.RequestRecord, jobs: Sequence[Mapping[str, Any]],
                    settings: DownSettings) -> None:
    """Wait until the Workloads Kueue made for the deleted `jobs` are gone or being deleted (the garbage collector
    deletes them after the job, a moment later): until then one still queues on the gang's LocalQueue, and
    `_remove_queue` would keep the queue objects. Past `settings.withdraw_s` they are left to `_remove_queue`'s own
    check."""
    uids = {str((j.get("metadata") or {}).get("uid")) for j in jobs}
    if not row.queue or not uids:
        return
    path = provwatch.WORKLOADS.format(ns=row.namespace)
    start = settings.clock()
    while True:
        listed = provwatch.asked(kube, f"listing Kueue's Workloads in namespace {row.namespace}",
                                 lambda: kube.list_all(path)[0], provwatch.WatchFailed)
        # One being deleted (Kueue's finalizer holds it a moment) queues on nothing: `remove_queue` passes it over.
        if not any(uids & {str(r.get("uid")) for r in (w.get("metadata") or {}).get("ownerReferences") or []}
                   and not (w.get("metadata") or {}).get("deletionTimestamp") for w in listed):
            return
        waited = settings.clock() - start
        if waited >= settings.withdraw_s:
            return
        settings.sleep(min(settings.poll_s, 1.0, max(0.0, settings.withdraw_s - waited)))


GANG_ANNOTATION = "geosched.io/gang"


def _marked(obj: Mapping[str, Any], gang: str) -> bool:
    """geosched's mark on an object of `gang`: an entry of its field manager (every apply of geosched's is
    server-side, as that manager) and, on objects applied since the annotation exists, `geosched.io/gang` naming
    this gang: another gang of geosched's of the same job name (applied after this row's run was killed, or after
    its objects were deleted by hand) carries the same field manager and must be left."""
    meta = obj.get("metadata") or {}
    owner = (meta.get("annotations") or {}).get(GANG_ANNOTATION)
    return (owner is None or owner == gang) and any(
        isinstance(e, Mapping) and e.get("manager") == FIELD_MANAGER for e in meta.get("managedFields") or [])


def _requests(kube: Kube, row: provreqs.RequestRecord, live: Mapping[provreqs.ObjectRef, Any],
              theirs: Sequence[provreqs.ObjectRef]) -> list[str]:
    """The gang's requests `down` waits to be gone: the row's (an `intent` row has only the one geosched renders
    without Kueue) and, while the row is an intent, those Kueue made for its job (found through the job, as the
    watch finds them); not one of someone else's."""
    names = set(row.requests)
    job = next((o for o in row.objects if kinds.lookup(o.api_version, o.kind) is not None), None)
    if row.state == "intent" and job is not None and live.get(job) is not None and job not in theirs and not any(
            o.kind == "ProvisioningRequest" for o in row.objects):
        try:
            found = provwatch.find_requests(kube, row.namespace, live[job], None)
        except provwatch.RequestGone:  # deleted between the two reads: Kueue's requests go with it
            found = []
        names |= {str(r["metadata"]["name"]) for r in found}
    return sorted(names - {o.name for o in theirs if o.kind == "ProvisioningRequest"})


def _charge_missed(store: Store, kube: Kube, row: provreqs.RequestRecord, requests: Sequence[str]) -> int:
    """A row with no node recorded: its run was stopped (Ctrl-C, a read error, killed) before or while it waited for
    the request's pods to be bound. Charged here by the same rule (`charge_bound`, one look, before the job and its
    pods are deleted): the nodes they are bound to that came up for the request, from their registration."""
    a = journal.attempt(store, row.attempt)
    gang = journal.gang_record(store, row.gang)
    if a is None:
        return 0
    return charge_bound(store, kube, row, a, gang.request if gang is not None else None, requests,
                        timeout_s=0.0).charged


@dataclass(frozen=True, slots=True)
class Charged:
    charged: int  # ledger rows opened (nodes made for the request)
    older: int  # nodes the pods are bound to that were there before the request: not charged
    bound: provnodes.Bound


def charge_bound(store: Store, kube: Kube, row: provreqs.RequestRecord, a: AttemptRecord,
                 request: GangRequest | None, requests: Sequence[str], *, timeout_s: float, poll_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> Charged:
    """Which nodes a ProvisioningRequest gang is charged for, and from when: the one rule, used where `up` waits
    for the request's pods to be bound (cli/provfailover.py, `timeout_s` its bind wait) and by `down` for a row with
    no node recorded (`timeout_s` 0: one look). The nodes `requests`' pods are bound to that registered at or after
    the request's creation (on the API server's clock, as the nodes' are; else the attempt's start), each charged
    from its `creationTimestamp` (providers/provreqs.py says why, kube/provnodes.py how they are found). The
    cluster's read errors propagate."""
    job = next((o.name for o in row.objects if kinds.lookup(o.api_version, o.kind) is not None), row.gang)
    asked = provnodes.requests_now(kube, row.namespace, requests)
    created = [t for t in (when((r.get("metadata") or {}).get("creationTimestamp")) for r in asked) if t is not None]
    since = min(created) if created else a.started_at
    expected = provnodes.expected_pods(asked) or (request.nodes if request is not None else 0)
    bound = provnodes.wait_bound(kube, row.namespace, requests, expected, timeout_s=timeout_s, poll_s=poll_s,
                                 clock=clock, sleep=sleep)
    nodes = provnodes.nodes_now(kube, bound.nodes)
    charged = [u for n in nodes.values() if n is not None and provnodes.made_for(n, since)
               for u in [provnodes.node_usage(n, job=job, provider=a.provider, region=a.region, zone=a.zone,
                                              cluster=row.cluster, gpu=request.gpu if request is not None else "",
                                              gpus=request.gpus_per_node if request is not None else 0,
                                              instance_type=a.instance_type)] if u is not None]
    opened = provreqs.charge(store, row.id, charged)
    older = sum(1 for n in nodes.values() if n is not None and not provnodes.made_for(n, since))
    return Charged(opened, older, bound)


def _remove_queue(store: Store, kube: Kube, row: provreqs.RequestRecord) -> list[str]:
    """Remove the Kueue queue objects geosched applied for the gang (`provwatch.remove_queue`: only objects geosched
    alone made and kept, only while no Workload queues on them) unless another gang of this store, not taken down,
    went through them; and the pre-stop-34 `geosched-provisioning` objects of the gang's namespace on the same
    terms. What was done, a line each (nothing where there was nothing)."""
    lines: list[str] = []
    if row.queue:
        others = provreqs.queue_in_use(store, row)
        if others:
            lines.append(f"Kueue's queue objects of {row.cluster} kept: gang {others[0]} uses them")
        else:
            lines += _said(row.cluster, provwatch.remove_queue(
                kube, [(o.api_version, o.kind, o.name, o.namespace) for o in row.queue]))
    lines += _said(row.cluster, provwatch.remove_queue(kube, provwatch.legacy_queue(row.namespace)))
    return lines


def _said(cluster: str, outcome: tuple[list[str], str | None]) -> list[str]:
    removed, kept = outcome
    lines = [f"removed from {cluster} (geosched made them, no gang queues on them): {', '.join(removed)}"] \
        if removed else []
    return lines + ([f"{cluster}: {kept}"] if kept else [])


def _wait_gone(store: Store, kube: Kube, row: provreqs.RequestRecord, settings: DownSettings) -> int:
    """Poll the request's charged nodes until each is gone, closing its row at the look that saw it; how many were
    closed. Stops at `settings.release_s`."""
    start, closed = settings.clock(), 0
    while True:
        left = provreqs.open_nodes(store, row)
        if not left:
            return closed
        seen = provnodes.nodes_now(kube, [n.name for n in left])
        gone = [n for n in left if seen.get(n.name) is None
                or str((seen[n.name].get("metadata") or {}).get("uid")) != n.uid]
        closed += provreqs.close_nodes(store, gone, time.time())
        waited = settings.clock() - start
        if len(gone) == len(left) or waited >= settings.release_s:
            return closed
        settings.sleep(min(settings.poll_s, max(0.0, settings.release_s - waited)))
