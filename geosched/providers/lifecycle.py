"""After the fact: reconcile the journal with what the providers report, take gangs down, sweep up machines
nobody recorded, and show provisioned machines as fleet nodes.

Reconcile is what makes a crash harmless. Every instance a provider reports under a gang's tag ends up in
the journal (matched to its intent row, or adopted); rows whose machine is gone are closed; intent rows
whose launch never produced anything are closed once they are older than the settle time (a stalled
request can still land until then); and every live machine outside the attempt the gang keeps is
terminated, journalled as `terminating` before the call and `terminated` after.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal

from geosched.core.models import Node, NodeState, Pricing
from geosched.core.retry import RetryPolicy
from geosched.files.inventory import ProbeTargets, SshTarget, jump_hosts_of, merged_targets
from geosched.providers import journal
from geosched.providers.base import (
    INVENTORY_PROVIDERS,
    Budget,
    Instance,
    InstanceState,
    Provider,
    ProviderError,
    ReportsHostKeys,
)
from geosched.providers.journal import InstanceRecord
from geosched.providers.retry import call
from geosched.store import usage
from geosched.store.db import Store

log = logging.getLogger(__name__)  # the provisioning log (geosched/providers/provlog.py): teardowns

# keep: terminate what the gang does not keep; down: keep nothing; observe: only bring the journal (and the usage
# ledger) in line with what the providers report, terminating nothing (`status --refresh`).
Mode = Literal["keep", "down", "observe"]


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    settle_s: float = 120.0
    poll_s: float = 1.0
    budget_s: float = 300.0
    call_timeout_s: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(frozen=True, slots=True)
class ReconcileReport:
    gang: str
    found: int = 0
    terminated: int = 0
    pending: int = 0
    keeper: int | None = None
    alive_in_keeper: int = 0
    api_calls: int = 0
    errors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DownResult:
    gang: str
    known: bool
    terminated: int
    state: str
    api_calls: int
    errors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SweepResult:
    orphans: tuple[Instance, ...]
    foreign: tuple[Instance, ...]
    reconciled: tuple[str, ...]
    terminated: int
    api_calls: int
    errors: tuple[str, ...] = ()


def as_instance(row: InstanceRecord) -> Instance:
    return Instance(provider=row.provider, provider_id=row.provider_id or row.name, name=row.name, region=row.region,
                    zone=row.zone, instance_type=row.instance_type, state=InstanceState.RUNNING, gang=row.gang,
                    index=row.idx, addresses=row.addresses, pricing=row.pricing)


def terminate_rows(store: Store, providers: Mapping[str, Provider], rows: Sequence[InstanceRecord],
                   settings: LifecycleSettings, budget: Budget, note: str) -> tuple[int, list[str]]:
    """Journal `terminating`, call terminate, journal `terminated`. A failed call leaves rows `terminating`
    for the next reconcile."""
    done, errors = 0, []
    by_provider: dict[str, list[InstanceRecord]] = {}
    for row in rows:
        by_provider.setdefault(row.provider, []).append(row)
    for name, group in by_provider.items():
        provider = providers.get(name)
        if provider is None:
            errors.append(f"{name}: provider not configured; {len(group)} instance(s) left to terminate")
            continue
        journal.mark(store, (r.id for r in group), "terminating", note)
        targets = [as_instance(r) for r in group]
        ids = ", ".join(r.provider_id or r.name for r in group)
        log.info("%s: terminating %s (%s)", name, ids, note)
        try:
            call(partial(provider.terminate, targets, budget), budget, settings.retry)
        except ProviderError as exc:
            log.warning("%s: terminate failed [%s]: %s; left for the next reconcile: %s", name, exc.kind, exc, ids)
            errors.append(f"{name}: terminate failed: {exc.kind}: {exc}")
            continue
        log.info("%s: terminated %s", name, ids)
        journal.mark(store, (r.id for r in group), "terminated")
        done += len(group)
    return done, errors


def reconcile(store: Store, providers: Mapping[str, Provider], gang: str, mode: Mode,
              settings: LifecycleSettings = LifecycleSettings(), nodes: int | None = None, *,
              keep_partial: bool = False) -> ReconcileReport:
    """Bring the journal in line with the providers for one gang, then terminate what the gang does not
    keep. In `keep` mode the gang keeps its chosen attempt, or (after a crash mid-launch) an attempt whose
    machines are all there, or with `keep_partial` the attempt with the most machines up (a resume fills it up);
    in `down` mode it keeps nothing."""
    budget = Budget(settings.budget_s, settings.call_timeout_s)
    record = journal.gang_record(store, gang)
    if record is None:
        return ReconcileReport(gang)
    attempts = {a.token: a for a in journal.attempts(store, gang)}
    rows = journal.instances(store, gang=gang)
    involved: dict[str, set[str]] = {}
    for a in attempts.values():
        if a.outcome != "skipped":
            involved.setdefault(a.provider, set()).add(a.region)
    for r in rows:
        involved.setdefault(r.provider, set()).add(r.region)
    errors: list[str] = []
    described: set[str] = set()
    found_count = 0
    for name, regions in sorted(involved.items()):
        provider = providers.get(name)
        if provider is None:
            errors.append(f"{name}: provider not configured; its instances were not checked")
            continue
        try:
            found = call(partial(provider.describe, gang, sorted(regions), budget), budget, settings.retry)
        except ProviderError as exc:
            errors.append(f"{name}: describe failed: {exc.kind}: {exc}")
            continue
        described.add(name)
        found_count += len(found)
        by_attempt: dict[int | None, list[Instance]] = {}
        for inst in found:
            owner_attempt = attempts.get(inst.token or "")
            by_attempt.setdefault(owner_attempt.id if owner_attempt else None, []).append(inst)
        for attempt_id, group in by_attempt.items():
            journal.record_instances(store, gang, attempt_id, group)
        seen = {(i.provider, i.provider_id) for i in found}
        gone = [r.id for r in journal.instances(store, gang=gang, states=("launched", "terminating"))
                if r.provider == name and r.provider_id is not None and (r.provider, r.provider_id) not in seen]
        journal.mark(store, gone, "terminated", "not found at reconcile")
    now = time.time()
    stale = [r.id for r in journal.instances(store, gang=gang, states=("intent",))
             if r.provider in described and now - r.created_at >= settings.settle_s]
    journal.mark(store, stale, "terminated", "never appeared")
    pending = len([r for r in journal.instances(store, gang=gang, states=("intent",))])

    keeper = _keeper(store, gang, mode, nodes, keep_partial)
    alive = journal.instances(store, gang=gang, states=("launched", "terminating"))
    doomed = [] if mode == "observe" else [r for r in alive if keeper is None or r.attempt != keeper
                                           or r.state == "terminating"]
    terminated, term_errors = terminate_rows(store, providers, doomed, settings, budget,
                                             "reconcile" if mode == "keep" else "down")
    errors.extend(term_errors)
    kept = len([r for r in alive if keeper is not None and r.attempt == keeper and r.state == "launched"])
    return ReconcileReport(gang, found_count, terminated, pending, keeper, kept, budget.calls, tuple(errors))


def _keeper(store: Store, gang: str, mode: Mode, nodes: int | None, partial: bool = False) -> int | None:
    if mode == "down":
        return None
    record = journal.gang_record(store, gang)
    if record is None or record.state in ("terminating", "terminated"):
        return None
    if record.state == "ready" and record.attempt is not None:
        return record.attempt
    want = nodes if nodes is not None else (record.request.nodes if record.request else None)
    if want is None:
        return None
    alive: dict[int, int] = {}
    for r in journal.instances(store, gang=gang, states=("launched",)):
        if r.attempt is not None:
            alive[r.attempt] = alive.get(r.attempt, 0) + 1
    complete = [a for a, n in alive.items() if n == want]
    if complete:
        return max(complete)
    if partial and alive:
        return max(alive, key=lambda a: (alive[a], a))
    return None


def settle(store: Store, providers: Mapping[str, Provider], gang: str, mode: Mode,
           settings: LifecycleSettings, nodes: int | None = None, *, keep_partial: bool = False
           ) -> ReconcileReport:
    """Reconcile until no intent is left open: a launch request that stalled may still create machines until
    `settle_s` after its intent was written, so wait that long for them (and terminate them) at most."""
    calls = 0
    while True:
        report = reconcile(store, providers, gang, mode, settings, nodes, keep_partial=keep_partial)
        calls += report.api_calls
        if report.pending == 0 or report.errors:
            return _with_calls(report, calls)
        open_intents = journal.instances(store, gang=gang, states=("intent",))
        wait = min(r.created_at for r in open_intents) + settings.settle_s - time.time()
        time.sleep(max(0.05, min(settings.poll_s, wait)))


def _with_calls(report: ReconcileReport, calls: int) -> ReconcileReport:
    return ReconcileReport(report.gang, report.found, report.terminated, report.pending, report.keeper,
                           report.alive_in_keeper, calls, report.errors)


def down(store: Store, providers: Mapping[str, Provider], gang: str,
         settings: LifecycleSettings = LifecycleSettings()) -> DownResult:
    """Terminate every machine of a gang, including ones a crashed or stalled launch left behind."""
    record = journal.gang_record(store, gang)
    if record is None:
        return DownResult(gang, False, 0, "unknown", 0)
    journal.set_gang(store, gang, "terminating", message="down requested")
    report = settle(store, providers, gang, "down", settings)
    journal.close_interrupted(store, gang)
    left = journal.instances(store, gang=gang, states=journal.OPEN_STATES)
    state = "terminated" if not left and not report.errors else "terminating"
    journal.set_gang(store, gang, state, message="; ".join(report.errors) or None)
    return DownResult(gang, True, report.terminated, state, report.api_calls, report.errors)


def sweep(store: Store, providers: Mapping[str, Provider], *, regions: Mapping[str, Sequence[str]] | None = None,
          terminate: bool = False, any_owner: bool = False,
          settings: LifecycleSettings = LifecycleSettings()) -> SweepResult:
    """Find live instances tagged geosched-* that the store has no record of. Instances of gangs the store
    knows are reconciled into their gang instead. With `terminate`, orphans of this store's owner (of any
    owner with `any_owner`) are journalled under a sweep record and terminated."""
    me = journal.owner(store)
    budget = Budget(settings.budget_s, settings.call_timeout_s)
    orphans: list[Instance] = []
    foreign: list[Instance] = []
    strays: set[str] = set()
    errors: list[str] = []
    for name, provider in sorted(providers.items()):
        wanted = tuple((regions or {}).get(name, ()))
        try:
            found = call(partial(provider.describe, None, wanted, budget), budget, settings.retry)
        except ProviderError as exc:
            errors.append(f"{name}: describe failed: {exc.kind}: {exc}")
            continue
        known = journal.known_ids(store, name)
        for inst in found:
            if not inst.state.exists or inst.provider_id in known:
                continue
            if inst.gang and journal.gang_record(store, inst.gang) is not None:
                strays.add(inst.gang)
            elif inst.owner == me or any_owner:
                orphans.append(inst)
            else:
                foreign.append(inst)
    reconciled: list[str] = []
    terminated = 0
    calls = 0
    if terminate:
        for gang in sorted(strays):
            report = reconcile(store, providers, gang, "keep", settings)
            calls += report.api_calls
            errors.extend(report.errors)
            reconciled.append(gang)
        if orphans:
            record = f"sweep-{secrets.token_hex(4)}"
            journal.create_gang(store, record, me, None)
            journal.set_gang(store, record, "terminating", message="instances found by sweep")
            for inst in orphans:
                journal.record_instances(store, record, None, [inst], gpu="?", gpus=0)
            rows = journal.instances(store, gang=record, states=("launched",))
            terminated, term_errors = terminate_rows(store, providers, rows, settings, budget, "sweep")
            errors.extend(term_errors)
            journal.set_gang(store, record, "terminated" if not term_errors else "terminating")
    listed = tuple(reconciled) if terminate else tuple(sorted(strays))
    return SweepResult(tuple(orphans), tuple(foreign), listed, terminated, budget.calls + calls, tuple(errors))


GANG_LABEL = "geosched.io/gang"


def fleet_nodes(store: Store, gang: str | None = None) -> tuple[Node, ...]:
    """Provisioned machines that are up, as fleet nodes: one identity, `provider_id` the provider's id.

    A machine that is not a Kubernetes node carries no Kubernetes labels, so none is made up (an AWS zone's name
    on a node differs per account; the GPU product label comes from GPU feature discovery): it carries only its
    gang. When it joins a cluster, the cluster's node record brings the labels (`kube.inventory.merge_launched`)."""
    rows = journal.instances(store, gang=gang, states=("launched",))
    ready = {g.gang for g in journal.gangs(store, ("ready",))}
    out = []
    for r in rows:
        if r.gang not in ready:
            continue
        labels = {GANG_LABEL: r.gang}
        out.append(Node(
            name=r.name, provider=r.provider, region=r.region, zone=r.zone, instance_type=r.instance_type, gpu=r.gpu,
            gpus=r.gpus, gpus_free=r.gpus,
            price_ondemand=r.usd_per_hour if r.pricing is Pricing.ON_DEMAND else None,
            price_spot=r.usd_per_hour if r.pricing is Pricing.SPOT else None,
            addresses=r.addresses, labels=labels, state=NodeState.READY, provider_id=r.provider_id))
    return tuple(out)


def probe_targets(store: Store, gang: str | None, user: str, key: Path | None) -> ProbeTargets:
    """The store's machines as SSH targets: every machine of the kept inventories (leased or not) with its pinned
    host key, and the provisioned cloud machines that are up (`user` and private `key` as they were launched
    with; their host keys come from the store's known_hosts when a run pinned them). With `gang`, that gang's
    machines only; inventory jump hosts stay reachable. `unpinned` names the targets with no host key here: they
    are reached only with --trust-on-first-use or a known_hosts entry, never silently."""
    inventories = store.inventories()
    inventory_targets = merged_targets(inventories)
    with_gpus = {name for inv in inventories if inv.fleet is not None for name in inv.fleet.by_name}
    rows = journal.instances(store, gang=gang, states=("launched",))
    ready = {g.gang for g in journal.gangs(store, ("ready",))}
    rows = [r for r in rows if r.gang in ready]
    probe: dict[str, SshTarget] = {}
    if gang is None:
        probe.update((name, t) for name, t in inventory_targets.items() if name in with_gpus)
    for r in rows:
        leased = inventory_targets.get(r.provider_id or "") if r.provider in INVENTORY_PROVIDERS else None
        if leased is not None:
            probe[leased.name] = leased
        elif r.addresses:
            # The operator reaches a cloud machine at its public address (the last one a provider reports); its
            # peers measure the private network the gang trains on (the first).
            probe[r.name] = SshTarget(name=r.name, address=r.addresses[-1], zone=r.zone, region=r.region,
                                      provider=r.provider, user=user, key=key, peer_address=r.addresses[0])
    jumps = jump_hosts_of(tuple(probe.values()), inventory_targets)
    unpinned = tuple(sorted(name for name, t in probe.items() if t.host_key is None))
    return ProbeTargets(tuple(probe[k] for k in sorted(probe)), jumps, unpinned)


@dataclass(frozen=True, slots=True)
class GangHealth:
    """A gang as the providers report it now: how many of its machines are up, which were lost and how."""

    gang: str
    state: str
    wanted: int
    up: int
    lost: tuple[str, ...]
    errors: tuple[str, ...]
    advice: str | None

    @property
    def degraded(self) -> bool:
        return self.state == "ready" and self.up < self.wanted


def refresh(store: Store, providers: Mapping[str, Provider], gangs: Sequence[str],
            settings: LifecycleSettings = LifecycleSettings()) -> list[GangHealth]:
    """Read the providers for each gang and bring the journal and the usage ledger in line (machines preempted
    or deleted behind geosched's back are closed at the time the provider reports), terminating nothing."""
    out = []
    for gang in gangs:
        record = journal.gang_record(store, gang)
        if record is None:
            continue
        before = {r.id for r in billed(store, gang, record.attempt)}
        report = reconcile(store, providers, gang, "observe", settings)
        launched = billed(store, gang, record.attempt)
        lost = tuple(sorted(r.name for r in journal.instances(store, gang=gang)
                            if r.id in before and r not in launched))
        wanted = record.request.nodes if record.request else len(launched)
        advice = None
        if record.state == "ready" and len(launched) < wanted:
            advice = (f"{wanted - len(launched)} of {wanted} machines are gone: `geosched provision --resume {gang}` "
                      f"refills the gang, `geosched down {gang}` ends it")
        out.append(GangHealth(gang, record.state, wanted, len(launched), lost, report.errors, advice))
    return out


def billed(store: Store, gang: str, attempt: int | None = None) -> list[InstanceRecord]:
    """The gang's machines that are up: launched and billed. A machine the provider reports stopped (a GCE spot
    preemption with action STOP) is still there to delete, but its ledger interval closed when it stopped."""
    return [r for r in journal.instances(store, gang=gang, states=("launched",))
            if r.provider_id is not None and (attempt is None or r.attempt == attempt)
            and usage.is_open(store.db, usage.Kind.NODE, r.name, usage.Source.PROVIDER, r.provider_id)]


HostKeyLines = dict[str, tuple[str, ...]]


def reported_host_keys(store: Store, providers: Mapping[str, Provider], names: Sequence[str],
                       settings: LifecycleSettings = LifecycleSettings()) -> tuple[HostKeyLines, list[str]]:
    """The host keys each provisioned machine in `names` reports over its cloud's API (see `ReportsHostKeys`),
    and what could not be read. Keys read so come over an authenticated channel: pinning them is not trust on
    first use."""
    budget = Budget(settings.budget_s, settings.call_timeout_s)
    wanted = set(names)
    found: HostKeyLines = {}
    errors: list[str] = []
    for row in journal.instances(store, states=("launched",)):
        provider = providers.get(row.provider)
        if row.name not in wanted or not isinstance(provider, ReportsHostKeys) or row.provider_id is None:
            continue
        try:
            keys = call(partial(provider.host_keys, as_instance(row), budget), budget, settings.retry)
        except ProviderError as exc:
            errors.append(f"{row.name}: host keys unreadable: {exc.kind}: {exc}")
            continue
        if keys:
            found[row.name] = keys
    return found, errors
