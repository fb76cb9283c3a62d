"""`up --provisioning-class` applied: the gang's ProvisioningRequest zone by zone, until the autoscaler provisions one.

For each zone of the plan the cluster holds (best first, as for a node group), in the machine path's journal
(`prov_gangs`, `prov_attempts`: `geosched status GANG` shows them):
1. journal an attempt, render the job pinned to the zone (kube/provreq.py) and apply it: only when none of what
   step 3 would delete exists yet (`provwatch.already_there`), else one line and nothing applied. Before the first
   apply, the zone's row (`prov_requests`, providers/provreqs.py) is journalled as an intent naming the cluster,
   namespace and objects, so a process killed from then on leaves `geosched down GANG` what to delete;
2. watch the gang's request (kube/provwatch.py) until it is Provisioned, ends Failed / CapacityRevoked /
   BookingExpired, or the deadline passes;
3. Provisioned: the attempt is `launched` and the run ends. Otherwise the job and what was applied for it are
   deleted and waited for (Kueue's request goes with the job's Workload; without Kueue the request and its
   PodTemplates are deleted), the attempt is `rolled-back`, and `failover.blocks_for` says what the refusal rules
   out, exactly as for a node group: a terminal condition is a `CapacityError` of the zone (remembered for the
   capacity TTL), the deadline a `StallError` (this run). Then the next zone.
Kueue would retry a failed request itself, in the same zone (its ProvisioningRequestConfig's retryStrategy);
geosched withdraws the job instead, because the zone is the choice that failed.

Provisioned, the gang is `ready` and holds the nodes the autoscaler made for it: `up` waits until the request's
pods are bound, and charges the nodes they run on that came up for the request in the usage ledger
(providers/provreqs.py, kube/provnodes.py), idle time included, as a node group's are. `geosched down GANG`
(providers/provreqdown.py) deletes the job (and, without Kueue, the request and its PodTemplates), waits until the
autoscaler has removed those nodes and closes their rows as it sees each gone. A gang no zone provisioned ends
`terminated`; the attempts stay as the record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geosched.core.errors import GeoschedError, one_line
from geosched.kube import provreq, provwatch
from geosched.kube.client import KUBE_RETRY, Kube, with_retries
from geosched.kube.submit import Applied, apply_object
from geosched.providers import journal, provreqdown, provreqs
from geosched.providers.base import CapacityError, ProviderError, StallError
from geosched.providers.failover import blocks_for, first_block
from geosched.providers.journal import AttemptRecord
from geosched.providers.plan import Block, Candidate, GangRequest
from geosched.store.db import Store


class NoZoneProvisioned(GeoschedError):
    """Every zone's request failed or timed out (exit 1); nothing of them is left in the cluster."""


@dataclass(frozen=True, slots=True)
class Zone:
    candidate: Candidate
    where: str  # the zone as the messages name it (EKS: its name and ID; several clusters: and the cluster)
    render: Callable[[], list[dict[str, Any]]]  # the job pinned to this zone, and what goes beside it
    cluster: str
    context: str  # the kubeconfig context of `cluster`
    namespace: str
    # Of the rendered objects, the job file's other documents (provreq.kept): applied, never withdrawn.
    kept: frozenset[tuple[str, str, str]] = frozenset()
    kubeconfig: str | None = None  # the file `context` is in (None: the default), kept for `down`


@dataclass(frozen=True, slots=True)
class Settings:
    timeout_s: float = 3600.0  # the autoscaler's own wait per zone (GKE's flex-start can take far longer)
    withdraw_s: float = 120.0
    # How long the Provisioned request's pods may take to be bound before their nodes are charged: cluster-autoscaler
    # books the request's nodes for 10 minutes (its FAQ, "ProvisioningRequest"), after which they may be scaled away.
    bind_s: float = 600.0
    poll_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True, slots=True)
class Queued:
    zone: Zone
    state: provwatch.RequestState
    applied: tuple[Applied, ...]
    manifests: tuple[dict[str, Any], ...]


def queue_across(store: Store, zones: Sequence[Zone], *, open_kube: Callable[[Zone], Kube], gang: str,
                 request: GangRequest, settings: Settings = Settings(),
                 say: Callable[[str], None] = lambda _line: None) -> Queued:
    """Apply the gang zone by zone (the zones of several clusters one cluster after the other, as `zones` lists
    them) until one zone's request is Provisioned (see the module's docstring); `open_kube` connects to a zone's
    cluster. `NoZoneProvisioned` names every zone and why; an API error propagates after the zone's objects are
    withdrawn."""
    journal.create_gang(store, gang, journal.owner(store), request, provisioning_request=True)
    blocks: list[Block] = []
    failures: list[str] = []
    for zone in zones:
        c = zone.candidate
        block = first_block(blocks, c, request.nodes)
        if block is not None:
            journal.start_attempt(store, gang, c, "skipped", block.reason)
            continue
        a = journal.start_attempt(store, gang, c)
        try:
            with open_kube(zone) as kube:
                state, applied, manifests, intent, seen = _ask(store, kube, zone, a, gang, settings, say)
                if state is not None and not state.failed:
                    # The intent row becomes the request's first: a process killed between these writes leaves a
                    # gang `down` reaches into its cluster for by this row (review finding).
                    row = provreqs.provisioned(store, intent.id, sorted(seen | set(intent.requests)))
                    journal.finish_attempt(store, a.id, "launched", message=state.line())
                    journal.set_gang(store, gang, "ready", attempt=a.id, message=f"{state.line()} in {c.zone} of "
                                     f"cluster {zone.cluster}; `geosched down {gang}` deletes the job (the "
                                     "autoscaler then removes its nodes) and ends the nodes' charge once they are "
                                     "gone")
                    say(f"#{a.seq} {zone.where}: {state.line()}")
                    _charge(store, kube, zone, a, row, request, settings, say)
                    return Queued(zone, state, tuple(applied), tuple(manifests))
        except BaseException as exc:
            _close(store, gang, a.id, exc)
            raise
        error: ProviderError = (CapacityError(state.line(), code=state.condition) if state is not None else
                                StallError(f"no outcome of the ProvisioningRequest after {settings.timeout_s:g} s"))
        journal.finish_attempt(store, a.id, "rolled-back", error,
                               message=f"{error.message}; withdrawn from the cluster")
        new = list(blocks_for(error, c, request.nodes))
        blocks.extend(new)
        journal.remember(store, new)
        failures.append(f"{zone.where}: {error.message}")
        say(f"#{a.seq} {zone.where}: {error.message}; withdrawn, trying the next zone")
    named = ", ".join(dict.fromkeys(z.cluster for z in zones))
    message = (f"no zone of cluster{'s' if ',' in named else ''} {named} provisioned {request.nodes} x "
               f"{request.gpu}:{request.gpus_per_node}"
               + (": " + "; ".join(failures) if failures else ": every zone was ruled out") + "; nothing of the job "
               "or its requests is left in the cluster" + _kept_note(zones))
    journal.set_gang(store, gang, "terminated", message=message)
    raise NoZoneProvisioned(message)


def _ask(store: Store, kube: Kube, zone: Zone, a: AttemptRecord, gang: str, settings: Settings,
         say: Callable[[str], None]) -> tuple[provwatch.RequestState | None, list[Applied], list[dict[str, Any]],
                                              provreqs.RequestRecord, set[str]]:
    """Apply one zone's objects and watch its request: the outcome (None: the deadline), what was applied, the
    manifests, the zone's journal row (an intent, written before the first apply) and the names of the requests
    seen; withdrawn from the cluster (and the row `deleted`) unless Provisioned. Where the zone's objects may be
    left (a Ctrl-C, a withdrawal that failed), the row stays an intent and the gang `failed`: `geosched down GANG`
    deletes them."""
    c, namespace = zone.candidate, zone.namespace
    manifests = zone.render()
    # What a refusal withdraws, and so what must be new before it is applied: all but the file's other documents.
    ours = [m for m in manifests if provreq.identity(m) not in zone.kept]
    for m in ours:  # whose they are: `down` of another gang's row of the same names must not take them (rev36b)
        if m["kind"] not in provwatch.QUEUE_KINDS:
            m.setdefault("metadata", {}).setdefault("annotations", {})[provreqdown.GANG_ANNOTATION] = gang
    name = next((str(m["metadata"]["name"]) for m in manifests if m["kind"] == "ProvisioningRequest"), None)
    job = provreq.job_of(manifests)
    seen: set[str] = set()
    where = f"{job['kind']} {job['metadata']['name']} in namespace {namespace} of cluster {zone.cluster}"
    # Kueue's request goes with the job's Workload; a request of geosched's own is deleted by name.
    how = f"`geosched down {gang}` withdraws it"

    def find() -> list[Any]:
        found = provwatch.find_requests(kube, namespace, job, name)
        seen.update(str(r["metadata"]["name"]) for r in found)
        return found

    try:
        there = provwatch.already_there(kube, ours, namespace=namespace)
    except Exception:
        _nothing_applied(store, a, gang, zone, "the cluster could not be asked")
        raise
    if there:
        # Checked before anything is applied, because a refused zone's objects are deleted (see already_there).
        message = (f"{kube.name}: {', '.join(there[:4])}{' and more' if len(there) > 4 else ''} already in namespace "
                   f"{namespace} (an earlier run's or someone else's): what is applied for a zone is deleted when "
                   "the zone refuses, so only new objects are applied; delete them or rename the job")
        _nothing_applied(store, a, gang, zone, message)
        raise provwatch.AlreadyThere(message)
    # The intent, before the first apply: a process killed from here on leaves `down` the cluster, namespace and
    # objects to delete (and, with Kueue, the job to find its requests by).
    intent = _intend(store, zone, a, manifests, name)
    say(f"#{a.seq} {zone.where}: asking the autoscaler for the gang's {c.instance_type} nodes")
    try:
        applied = _apply(kube, manifests, namespace)
        state = provwatch.wait_outcome(find, timeout_s=settings.timeout_s, poll_s=settings.poll_s,
                                       clock=settings.clock, sleep=settings.sleep)
    except KeyboardInterrupt:
        # Stopping the watch is not withdrawing the gang: queued provisioning may take hours, and the request keeps
        # its place in the queue. Said, journalled, and left to the user: `down` withdraws it by the intent row.
        journal.finish_attempt(store, a.id, "cancelled", message=f"interrupted; {where} stays queued")
        journal.set_gang(store, gang, "failed", message=f"interrupted while {zone.where} was asked: {where} "
                         f"stays queued there; {how}")
        say(f"interrupted: {where} stays queued in {zone.where}; {how}")
        raise
    except Exception as exc:
        try:
            _withdraw(kube, ours, seen, namespace, settings)
            provreqs.mark_deleted(store, intent.id)
            note, after = "withdrawn", "terminated"
        except Exception:  # the cluster that could not be asked may not take a delete either: the first error says
            note = (f"withdrawing it failed too: {job['kind']} {job['metadata']['name']} in {namespace} may be "
                    f"left; {how}")
            after = "failed"
        # geosched's own one-line errors say what happened (a request deleted by someone else); others are the API's
        why = str(exc) if isinstance(exc, GeoschedError) else "the cluster could not be asked"
        journal.finish_attempt(store, a.id, "rolled-back", message=f"{why}; {note}")
        journal.set_gang(store, gang, after, message=f"asking cluster {zone.cluster} failed in {c.zone}"
                         + ("" if after == "terminated" else f": {where} may be left; {how}"))
        raise
    if state is None or state.failed:
        try:
            _withdraw(kube, ours, seen, namespace, settings)
            provreqs.mark_deleted(store, intent.id)
        except BaseException as exc:
            # Stopped halfway (Ctrl-C, or the API refusing a delete or keeping an object past the deadline): the
            # zone's objects may be partly left, and the caller journals only a finished withdrawal.
            interrupted = isinstance(exc, KeyboardInterrupt)
            lead = "interrupted while withdrawing it" if interrupted else "withdrawing it failed"
            answer = state.line() if state is not None else "no outcome of the ProvisioningRequest"
            journal.finish_attempt(store, a.id, "cancelled" if interrupted else "failed",
                                   message=f"{answer}; {lead}: {where} may be left; {how}")
            journal.set_gang(store, gang, "failed", message=f"{lead} from {zone.where}: {where} may be left; "
                             f"{how}")
            if interrupted:  # an error is its own line; an interrupt is said here
                say(f"interrupted while withdrawing from {zone.where}: {where} may be left; {how}")
            raise
    return state, applied, manifests, intent, seen


def _intend(store: Store, zone: Zone, a: AttemptRecord, manifests: Sequence[dict[str, Any]],
            request: str | None) -> provreqs.RequestRecord:
    """Journal what is about to be applied for the zone (what `down` deletes: as a refusal withdraws it, the job
    file's other documents and Kueue's queue objects left out; the queue objects apart) and the request geosched
    renders itself (`request`, without Kueue)."""
    objects = [provreqs.ObjectRef(str(m["apiVersion"]), str(m["kind"]), str(m["metadata"]["name"]),
                                  str((m.get("metadata") or {}).get("namespace") or zone.namespace))
               for m in manifests if provreq.identity(m) not in zone.kept and m["kind"] not in provwatch.QUEUE_KINDS]
    # Kueue's queue objects: cluster-scoped but the LocalQueue, which is in the job's namespace.
    queue = [provreqs.ObjectRef(str(m["apiVersion"]), str(m["kind"]), str(m["metadata"]["name"]),
                                zone.namespace if m["kind"] == "LocalQueue" else None)
             for m in manifests if m["kind"] in provwatch.QUEUE_KINDS]
    return provreqs.intend(store, a.gang, a.id, cluster=zone.cluster, context=zone.context,
                           kubeconfig=zone.kubeconfig, namespace=zone.namespace, objects=objects,
                           requests=() if request is None else (request,), queue=queue)


def _charge(store: Store, kube: Kube, zone: Zone, a: AttemptRecord, row: provreqs.RequestRecord,
            request: GangRequest, settings: Settings, say: Callable[[str], None]) -> int:
    """Open a ledger row for each node the autoscaler made for the request (kube/provnodes.py says which), once the
    request's pods are bound or `settings.bind_s` has passed; how many. The job is applied and admitted by now, so a
    cluster that cannot be read here fails nothing: it is said, and those nodes go uncharged."""
    try:
        # The one rule of which nodes are the gang's, and from when (`down` uses it for a run stopped here).
        got = provreqdown.charge_bound(store, kube, row, a, request, row.requests, timeout_s=settings.bind_s,
                                       poll_s=settings.poll_s, clock=settings.clock, sleep=settings.sleep)
    except KeyboardInterrupt:
        say(f"interrupted while the gang's nodes were looked for: the gang is up in {zone.where}; `geosched down "
            f"{a.gang}` charges its nodes from their registration and deletes its job")
        raise
    except Exception as exc:
        why = str(exc) if isinstance(exc, GeoschedError) else type(exc).__name__
        say(f"#{a.seq} {zone.where}: the gang's nodes could not be read ({one_line(why)}): `geosched down {a.gang}` "
            "charges them from their registration")
        return 0
    bound, older = got.bound, got.older
    line = (f"#{a.seq} {zone.where}: {got.charged} node(s) the autoscaler made for the gang charged from their "
            f"registration until `geosched down {a.gang}` sees them gone")
    if older:
        line += f"; {older} node(s) there before the request not charged (not made for it)"
    if bound.bound < bound.expected:
        line += (f"; {bound.expected - bound.bound} of {bound.expected} pods not bound after {settings.bind_s:g} s: "
                 "the nodes they may take are not charged")
    say(line)
    return got.charged


def _apply(kube: Kube, manifests: Sequence[dict[str, Any]], namespace: str) -> list[Applied]:
    """Server-side apply each manifest in order, the ClusterQueue as `provreq.raised_queue` says: left as it is
    while its quota holds the gang's (reported `unchanged`), raised taking the quota fields over (`force`: they may
    be the cluster owner's, and a lower value is never applied)."""
    applied: list[Applied] = []
    for m in manifests:
        force = False
        if m["kind"] == "ClusterQueue":
            live = _live(kube, m)
            raised = provreq.raised_queue(m, live)
            if raised is None:
                assert live is not None
                applied.append(Applied(str(m["apiVersion"]), "ClusterQueue", str(m["metadata"]["name"]), None,
                                       "unchanged", str(live["metadata"].get("resourceVersion", ""))))
                continue
            m, force = raised, live is not None
        applied.append(apply_object(kube, m, default_namespace=namespace, retry=KUBE_RETRY, force=force))
    return applied


def _live(kube: Kube, obj: Mapping[str, Any]) -> Any:
    """`obj` (cluster-scoped) as the cluster holds it now, None if it does not (nor its kind: apply then says so)."""
    resource = with_retries(lambda: kube.resource(str(obj["apiVersion"]), str(obj["kind"])), KUBE_RETRY)
    if resource is None:
        return None
    path = resource.path(None, str(obj["metadata"]["name"]))
    return with_retries(lambda: kube.get(path), KUBE_RETRY)


def _kept_note(zones: Sequence[Zone]) -> str:
    kept = sorted({k for z in zones for k in z.kept}, key=lambda k: (k[1], k[2]))
    if not kept:
        return ""
    named = ", ".join(f"{kind} {name}" for _, kind, name in kept[:4]) + (" and more" if len(kept) > 4 else "")
    return f" (the job file's other documents stay applied: {named})"


def _close(store: Store, gang: str, attempt_id: int, exc: BaseException) -> None:
    """An attempt a stop left `started` (Ctrl-C or an error where `_ask` journals nothing: connecting, the first
    reads) is closed, and its gang `terminated`, so the journal never shows a run that is not running."""
    record = journal.attempt(store, attempt_id)
    if record is None or record.outcome != "started":
        return
    interrupted = isinstance(exc, KeyboardInterrupt)
    why = "interrupted" if interrupted else f"stopped by an error: {one_line(str(exc)) or type(exc).__name__}"
    journal.finish_attempt(store, attempt_id, "cancelled" if interrupted else "failed", message=why)
    gang_now = journal.gang_record(store, gang)
    if gang_now is not None and gang_now.state == "provisioning":
        # Stopped between the zone's intent and its first apply: nothing may be there, but `down` makes sure.
        left = bool(provreqs.open_requests(store, gang))
        journal.set_gang(store, gang, "failed" if left else "terminated",
                         message=f"{why} while zone {record.zone} was asked"
                         + (f"; `geosched down {gang}` deletes what may have been applied" if left else ""))


def _nothing_applied(store: Store, a: AttemptRecord, gang: str, zone: Zone, why: str) -> None:
    journal.finish_attempt(store, a.id, "failed", message=f"{why}; nothing applied")
    journal.set_gang(store, gang, "terminated", message=f"{why}; nothing applied in {zone.where}")


def _withdraw(kube: Kube, manifests: Sequence[dict[str, Any]], seen: set[str], namespace: str,
              settings: Settings) -> None:
    # Kueue's requests were seen by name; without Kueue the rendered one is among the manifests already.
    made = set(seen) - {str(m["metadata"]["name"]) for m in manifests if m["kind"] == "ProvisioningRequest"}
    provwatch.withdraw(kube, manifests, sorted(made), namespace=namespace, timeout_s=settings.withdraw_s,
                       poll_s=min(settings.poll_s, 1.0), clock=settings.clock, sleep=settings.sleep)

