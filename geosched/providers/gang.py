"""Gang launch, zone first: try the plan's zones in order until one holds every node of the gang.

For each candidate (provider, zone, instance type, market) in the plan:

1. journal an attempt, pre-check quota, journal one `intent` row per node, then launch all N nodes there;
2. wait until all N run; a node that dies on the way makes a partial gang, which is rolled back;
3. on failure, `failover.blocks_for` says what the error class rules out (zone, region, provider) and for
   how long; refusals with a TTL go to the store so the next run skips them too. Throttling and 5xx are
   retried in place (`retry.py`). Every zone has its own deadline, so a hanging zone costs at most that.

With `parallel` K > 1, K zones are tried at once; the first complete gang wins and the others are rolled
back (or cancelled before they launch). At the end, open intents (stalled launches) are reconciled, and
the attempt log in the store says what was tried, in which order, and why each failed.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace

from geosched.core import catalog
from geosched.core.errors import InputError
from geosched.core.models import Node, Offering
from geosched.core.retry import RetryPolicy
from geosched.providers import journal, lifecycle
from geosched.providers.base import (
    GANG_NAME_RE,
    Budget,
    CapacityError,
    DeclaresInventory,
    Instance,
    InstanceState,
    LaunchSpec,
    PriceObservation,
    Provider,
    ProviderError,
    RateError,
    StallError,
    TransientError,
    launch_names,
)
from geosched.providers.failover import Ttls, blocks_for, first_block
from geosched.providers.journal import AttemptRecord
from geosched.providers.lifecycle import LifecycleSettings
from geosched.providers.plan import Block, Candidate, Coverage, GangRequest, Plan, build_plan
from geosched.providers.refresh import record_prices
from geosched.providers.registry import CLOUDS
from geosched.providers.retry import OnRetry, call
from geosched.providers.sources import planning_offerings, planning_regions, planning_risks
from geosched.providers.terraform import NetworkConfig, check_owner
from geosched.store.db import Store

# The provisioning log (geosched/providers/provlog.py): every decision of a provision, for the file a user attaches.
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProvisionSettings:
    zone_timeout_s: float = 600.0
    call_timeout_s: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    parallel: int = 1
    ttls: Ttls = field(default_factory=Ttls)
    poll_s: float = 2.0
    quota_precheck: bool = True
    lifecycle: LifecycleSettings = field(default_factory=LifecycleSettings)
    ssh_public_key: str | None = None
    ssh_user: str = "geosched"
    # The Terraform network the providers launch into (the same config their settings carry): zones it does
    # not cover are no candidates, and its owner must be this store's.
    network: NetworkConfig | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """Progress for people: `kind` is plan, skip, start, retry, launched, failed or cancelled."""

    kind: str
    seq: int | None
    candidate: Candidate | None
    message: str = ""
    error_kind: str | None = None


Observer = Callable[[Event], None]


def logged(observer: Observer | None) -> Observer:
    """`observer`, with each event also written to the provisioning log: the zones planned and skipped, the zone
    tried, each retry, the error that failed a zone (and so the hop to the next), the launch."""

    def emit(event: Event) -> None:
        c = event.candidate
        where = f"#{event.seq} {c.label}" if c is not None else "gang"
        level = logging.WARNING if event.kind in ("failed", "retry") else logging.INFO
        log.log(level, "%s: %s: %s", where, event.kind, event.message)  # a failure's message starts with its kind
        if observer is not None:
            observer(event)

    return emit


@dataclass(frozen=True)
class ProvisionResult:
    gang: str
    state: str
    candidate: Candidate | None
    nodes: tuple[Node, ...]
    attempts: tuple[AttemptRecord, ...]
    api_calls: int
    elapsed_s: float
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.state == "ready"


@dataclass(frozen=True, slots=True)
class _Outcome:
    attempt: AttemptRecord
    candidate: Candidate
    ok: bool
    error: ProviderError | None = None
    calls: int = 0


def new_gang_name() -> str:
    return f"gang-{secrets.token_hex(4)}"


def check_gang_name(name: str) -> str:
    if not GANG_NAME_RE.match(name):
        raise InputError("--name", "", f"gang names are lower case letters, digits and '-', starting with a letter, "
                         f"at most 40 characters; got {name!r}")
    return name


def coverage(network: NetworkConfig | None) -> Coverage | None:
    """What the plan needs of a network config: the subnet of every zone it built, for the clouds."""
    if network is None:
        return None
    subnets: dict[tuple[str, str], str] = {}
    for provider, _region, zone in network.zones():
        net = network.for_zone(provider, zone)
        subnet = net.subnet_for(zone) if net is not None else None
        if subnet is not None:
            subnets[(provider, zone)] = subnet
    return Coverage(network.source, subnets, frozenset(CLOUDS))


def check_network(network: NetworkConfig | None, store: Store, providers: Mapping[str, Provider]) -> None:
    """Before any API call: the network's owner tag must be this store's owner id (InputError otherwise)."""
    if network is not None:
        check_owner(network, journal.owner(store), [p for p in providers if p in CLOUDS])


def plan_gang(request: GangRequest, providers: Mapping[str, Provider], store: Store | None,
              offerings: Sequence[Offering] | None = None, now: float | None = None,
              network: NetworkConfig | None = None) -> Plan:
    """The ordered plan, without any launch call (dry run): offerings from the refreshed or shipped catalog,
    minus what the store remembers as unavailable and, with a network, minus the zones it does not cover."""
    offers = list(offerings) if offerings is not None else planning_offerings(store, providers)
    offers = [o for o in offers if o.provider in providers]
    blocks = journal.active_blocks(store, now) if store is not None else []
    return build_plan(request, offers, planning_regions(providers, offers), catalog.gpu_power(), blocks,
                      coverage(network), planning_risks(store, {o.provider for o in offers}))


def remember_inventories(store: Store, providers: Mapping[str, Provider]) -> None:
    """Before leasing from an inventory, keep it in the store (journal before acting): the store's fleet, the
    ledger, reports and probes then know where each leased machine is and how to reach it without the file."""
    for provider in providers.values():
        if isinstance(provider, DeclaresInventory):
            inventory = provider.declared_inventory()
            if inventory is not None:
                store.save_inventory(inventory)


def provision(request: GangRequest, providers: Mapping[str, Provider], store: Store,
              settings: ProvisionSettings = ProvisionSettings(), *, gang: str | None = None,
              observer: Observer | None = None, offerings: Sequence[Offering] | None = None) -> ProvisionResult:
    """Launch a gang of `request.nodes` nodes in one zone, failing over zone -> region -> provider."""
    started = time.monotonic()
    name = check_gang_name(gang) if gang else new_gang_name()
    if journal.gang_record(store, name) is not None:
        raise InputError("--name", "", f"gang {name!r} exists in {store.path} (use --resume to continue it)")
    check_network(settings.network, store, providers)
    journal.create_gang(store, name, journal.owner(store), request)
    log.info("gang %s: %d x %s:%d, %s, providers %s, regions %s", name, request.nodes, request.gpu,
             request.gpus_per_node, request.pricing.value, ",".join(request.providers) or "all",
             ",".join(request.regions) or "all")
    return _run(store, providers, name, request, settings, logged(observer), offerings, started)


def resume(gang: str, providers: Mapping[str, Provider], store: Store,
           settings: ProvisionSettings = ProvisionSettings(), *, observer: Observer | None = None,
           offerings: Sequence[Offering] | None = None) -> ProvisionResult:
    """Continue a gang after a crash: reconcile (adopting an attempt whose nodes are all up, terminating
    the rest), then, if the gang is still incomplete, go on with the failover where the plan stands."""
    started = time.monotonic()
    record = journal.gang_record(store, gang)
    if record is None or record.request is None:
        raise InputError("--resume", "", f"no gang {gang!r} in the store")
    check_network(settings.network, store, providers)
    observer = logged(observer)
    log.info("gang %s: resuming (state %s)", gang, record.state)
    if record.state in ("terminating", "terminated"):
        result = lifecycle.down(store, providers, gang, settings.lifecycle)
        return _result(store, gang, None, result.api_calls, started, "gang was being taken down; finished that")
    request = record.request
    # Keep what is up in one attempt (its zone), even short of the gang: filling it up beats starting over.
    report = lifecycle.settle(store, providers, gang, "keep", settings.lifecycle, request.nodes,
                              keep_partial=True)
    journal.close_interrupted(store, gang, report.keeper)
    calls = report.api_calls
    if report.keeper is not None and report.alive_in_keeper == request.nodes:
        journal.set_gang(store, gang, "ready", attempt=report.keeper, message="adopted at resume")
        candidate = _candidate_of(store, report.keeper)
        return _result(store, gang, candidate, calls, started, "complete after reconcile")
    if report.keeper is not None and report.alive_in_keeper > 0:
        filled, fill_calls = _fill(store, providers, gang, report.keeper, request, settings, observer, offerings)
        calls += fill_calls
        if filled is not None:
            message = (f"filled up: {request.nodes - report.alive_in_keeper} new of {request.nodes} x "
                       f"{filled.instance_type} in {filled.provider}/{filled.zone}")
            return _result(store, gang, filled, calls, started, message)
    # Nothing to keep, or the zone cannot fill the gang up: let the survivors go and launch anew.
    journal.set_gang(store, gang, "provisioning", message="resumed")
    calls += lifecycle.reconcile(store, providers, gang, "keep", settings.lifecycle, request.nodes).api_calls
    return _run(store, providers, gang, request, settings, observer, offerings, started, calls)


def _fill(store: Store, providers: Mapping[str, Provider], gang: str, keeper: int, request: GangRequest,
          settings: ProvisionSettings, observer: Observer | None, offerings: Sequence[Offering] | None
          ) -> tuple[Candidate | None, int]:
    """Launch the machines a partial gang lacks in the zone its survivors are in (one more attempt there); on
    success the survivors join that attempt, which the gang keeps. None when the zone is no candidate now
    (blocked, no offering) or the launch fails (its own machines are rolled back, the survivors stay)."""
    kept = journal.attempt(store, keeper)
    survivors = journal.instances(store, attempt_id=keeper, states=("launched",))
    if kept is None or not survivors or kept.provider not in providers:
        return None, 0
    missing = replace(request, nodes=request.nodes - len(survivors))
    plan = plan_gang(missing, providers, store, offerings, network=settings.network)
    same = next((c for c in plan.candidates if (c.provider, c.zone, c.instance_type, c.pricing) ==
                 (kept.provider, kept.zone, kept.instance_type, kept.pricing)), None)
    if same is None:
        return None, 0
    journal.set_gang(store, gang, "provisioning", message=f"filling up {missing.nodes} machine(s) in {kept.zone}")
    outcome = _attempt(store, providers[kept.provider], gang, journal.owner(store), same, missing, settings,
                       observer or (lambda _event: None), None)
    if not outcome.ok:
        return None, outcome.calls
    journal.move_to_attempt(store, (r.id for r in survivors), outcome.attempt.id)
    journal.set_gang(store, gang, "ready", attempt=outcome.attempt.id, message="filled up at resume")
    record_prices(store, [_launch_price(same)])
    whole = replace(same, usd_per_hour=same.node_usd_per_hour * request.nodes)
    return whole, outcome.calls


def _run(store: Store, providers: Mapping[str, Provider], gang: str, request: GangRequest,
         settings: ProvisionSettings, observer: Observer | None, offerings: Sequence[Offering] | None,
         started: float, calls: int = 0) -> ProvisionResult:
    emit = observer or (lambda _event: None)
    remember_inventories(store, providers)
    plan = plan_gang(request, providers, store, offerings, network=settings.network)
    emit(Event("plan", None, None, f"{len(plan.candidates)} candidates, {len(plan.skipped)} remembered as "
                                   "unavailable"))
    for skipped in plan.skipped:
        a = journal.start_attempt(store, gang, skipped.candidate, "skipped", skipped.reason)
        emit(Event("skip", a.seq, skipped.candidate, skipped.reason))
    owner = journal.owner(store)
    runner = _Runner(store, providers, gang, owner, request, settings, emit)
    winner = runner.run(plan.candidates)
    calls += runner.calls
    if winner is not None:
        journal.set_gang(store, gang, "ready", attempt=winner.attempt.id)
        c = winner.candidate
        record_prices(store, [_launch_price(c)])
        message = f"{request.nodes} x {c.instance_type} in {c.provider}/{c.zone} ({c.pricing.value})"
    else:
        message = "no zone could hold the gang: " + (runner.last_error or "no candidate offerings match the request")
        journal.set_gang(store, gang, "failed", message=message)
    if journal.instances(store, gang=gang, states=("intent", "terminating")):
        report = lifecycle.reconcile(store, providers, gang, "keep", settings.lifecycle, request.nodes)
        calls += report.api_calls
    return _result(store, gang, winner.candidate if winner else None, calls, started, message)


def _result(store: Store, gang: str, candidate: Candidate | None, calls: int, started: float,
            message: str) -> ProvisionResult:
    record = journal.gang_record(store, gang)
    attempts = tuple(journal.attempts(store, gang))
    return ProvisionResult(gang=gang, state=record.state if record else "unknown", candidate=candidate,
                           nodes=lifecycle.fleet_nodes(store, gang), attempts=attempts, api_calls=calls,
                           elapsed_s=time.monotonic() - started, message=message)


def _candidate_of(store: Store, attempt_id: int) -> Candidate | None:
    a = journal.attempt(store, attempt_id)
    if a is None:
        return None
    rows = journal.instances(store, attempt_id=attempt_id)
    gpu, gpus = (rows[0].gpu, rows[0].gpus) if rows else ("", 0)
    node_price = rows[0].usd_per_hour if rows and rows[0].usd_per_hour is not None else 0.0
    return Candidate(a.provider, a.region, a.zone, a.instance_type, gpu, gpus, 0.0, a.pricing, node_price,
                     a.usd_per_hour or 0.0, a.gco2e_per_hour)


def _launch_price(c: Candidate) -> PriceObservation:
    return PriceObservation(c.provider, c.instance_type, c.region, c.zone, c.pricing, c.node_usd_per_hour,
                            time.time(), "launch")


class _Runner:
    """One failover run over a plan; keeps the run's blocks and the last error."""

    def __init__(self, store: Store, providers: Mapping[str, Provider], gang: str, owner: str,
                 request: GangRequest, settings: ProvisionSettings, emit: Observer) -> None:
        self.store = store
        self.providers = providers
        self.gang = gang
        self.owner = owner
        self.request = request
        self.settings = settings
        self.emit = emit
        self.blocks: list[Block] = []
        self.last_error: str | None = None
        self.calls = 0
        self._lock = threading.Lock()

    def run(self, candidates: Sequence[Candidate]) -> _Outcome | None:
        if self.settings.parallel <= 1:
            for c in candidates:
                if self._skip_if_blocked(self.store, c):
                    continue
                outcome = _attempt(self.store, self.providers[c.provider], self.gang, self.owner, c, self.request,
                                   self.settings, self.emit, None)
                self._account(outcome)
                if outcome.ok:
                    return outcome
            return None
        return self._run_parallel(candidates)

    def _skip_if_blocked(self, store: Store, c: Candidate) -> bool:
        with self._lock:
            block = first_block(self.blocks, c, self.request.nodes)
        if block is None:
            return False
        reason = f"{block.kind} ({block.scope}) in this run: {block.reason}"
        a = journal.start_attempt(store, self.gang, c, "skipped", reason)
        self.emit(Event("skip", a.seq, c, reason, block.kind))
        return True

    def _account(self, outcome: _Outcome) -> None:
        with self._lock:
            self.calls += outcome.calls
            if outcome.error is not None:
                new = blocks_for(outcome.error, outcome.candidate, self.request.nodes, self.settings.ttls)
                self.blocks.extend(new)
                self.last_error = f"{outcome.candidate.label}: {outcome.error.kind}: {outcome.error}"
            else:
                new = ()
        journal.remember(self.store, new)

    def _run_parallel(self, candidates: Sequence[Candidate]) -> _Outcome | None:
        cancel = threading.Event()
        pending = list(candidates)
        winner: _Outcome | None = None
        with ThreadPoolExecutor(self.settings.parallel, thread_name_prefix="geosched-zone") as pool:
            running: dict[Future[_Outcome], Candidate] = {}
            while True:
                while pending and len(running) < self.settings.parallel and not cancel.is_set():
                    c = pending.pop(0)
                    if self._skip_if_blocked(self.store, c):
                        continue
                    running[pool.submit(self._worker, c, cancel)] = c
                if not running:
                    return winner
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    running.pop(future)
                    outcome = future.result()
                    if outcome.ok and winner is None:
                        winner = outcome
                        cancel.set()
                        self._account(outcome)
                    elif outcome.ok:
                        # A second complete gang finished in the same instant: it is not needed.
                        self.calls += outcome.calls + _rollback(self.store, self.providers[outcome.candidate.provider],
                                                                outcome.attempt, self.settings)
                        journal.finish_attempt(self.store, outcome.attempt.id, "cancelled",
                                               message="another zone completed the gang first")
                    else:
                        self._account(outcome)

    def _worker(self, c: Candidate, cancel: threading.Event) -> _Outcome:
        # SQLite connections belong to one thread: each worker journals through its own.
        with Store(self.store.home) as store:
            return _attempt(store, self.providers[c.provider], self.gang, self.owner, c, self.request, self.settings,
                            self.emit, cancel)


def _attempt(store: Store, provider: Provider, gang: str, owner: str, c: Candidate, request: GangRequest,
             settings: ProvisionSettings, emit: Observer, cancel: threading.Event | None) -> _Outcome:
    a = journal.start_attempt(store, gang, c)
    emit(Event("start", a.seq, c, f"{request.nodes} x {c.instance_type} in {c.zone}"))
    budget = Budget(settings.zone_timeout_s, settings.call_timeout_s)
    retries = 0

    def on_retry(error: ProviderError, delay: float) -> None:
        nonlocal retries
        retries += 1
        emit(Event("retry", a.seq, c, f"{error.kind}: retrying in {delay:.1f} s", error.kind))

    names = launch_names(gang, a.seq, request.nodes)
    spec = LaunchSpec(gang=gang, token=a.token, owner=owner, region=c.region, zone=c.zone,
                      instance_type=c.instance_type, gpu=c.gpu, gpus=c.gpus, vcpus=c.vcpus, pricing=c.pricing,
                      names=names, ssh_public_key=settings.ssh_public_key, ssh_user=settings.ssh_user)
    intents_written = False
    try:
        if settings.quota_precheck:
            call(lambda: provider.check_quota(spec, budget), budget, settings.retry, on_retry)
        if cancel is not None and cancel.is_set():
            journal.finish_attempt(store, a.id, "cancelled", message="another zone completed the gang first",
                                   api_calls=budget.calls, retries=retries)
            emit(Event("cancelled", a.seq, c, "another zone completed the gang first"))
            return _Outcome(a, c, False, None, budget.calls)
        journal.intend(store, a, names, c.gpu, c.gpus, c.node_usd_per_hour)
        intents_written = True
        launched = call(lambda: provider.launch(spec, budget), budget, settings.retry, on_retry)
        log.info("#%d %s: launch returned %s", a.seq, c.label, _ids(launched))
        journal.record_instances(store, gang, a.id, launched)
        running = _wait_running(provider, spec, launched, budget, settings, on_retry)
        log.info("#%d %s: running %s", a.seq, c.label, _ids(running))
        journal.record_instances(store, gang, a.id, running)
    except ProviderError as error:
        calls = budget.calls
        if error.launched:
            journal.record_instances(store, gang, a.id, error.launched)
        calls += _rollback(store, provider, a, settings)
        if intents_written and not _outcome_unknown(error):
            # A definite refusal created nothing beyond what `launched` listed.
            journal.mark(store, (r.id for r in journal.instances(store, attempt_id=a.id, states=("intent",))),
                         "terminated", "launch refused")
        rolled = any(r.state == "terminated" and r.provider_id for r in journal.instances(store, attempt_id=a.id))
        journal.finish_attempt(store, a.id, "rolled-back" if rolled else "failed", error, api_calls=calls,
                               retries=retries)
        emit(Event("failed", a.seq, c, f"{error.kind}: {error}", error.kind))
        return _Outcome(a, c, False, error, calls)
    if cancel is not None and cancel.is_set():
        calls = budget.calls + _rollback(store, provider, a, settings)
        journal.finish_attempt(store, a.id, "cancelled", message="another zone completed the gang first; rolled back",
                               api_calls=calls, retries=retries)
        emit(Event("cancelled", a.seq, c, "another zone completed the gang first; rolled back"))
        return _Outcome(a, c, False, None, calls)
    journal.finish_attempt(store, a.id, "launched", api_calls=budget.calls, retries=retries)
    emit(Event("launched", a.seq, c, f"{len(running)} nodes running in {c.zone}"))
    return _Outcome(a, c, True, None, budget.calls)


def _outcome_unknown(error: ProviderError) -> bool:
    """After these, the launch may have happened server-side: leave intents open for reconciliation."""
    return isinstance(error, StallError | TransientError | RateError)


def _wait_running(provider: Provider, spec: LaunchSpec, launched: Sequence[Instance], budget: Budget,
                  settings: ProvisionSettings, on_retry: OnRetry) -> tuple[Instance, ...]:
    """Poll until all nodes of the attempt run. A node that is gone or stopped makes a partial gang."""
    current = tuple(launched)
    first = True
    while True:
        mine = [i for i in current if i.token == spec.token]
        dead = [i for i in mine if i.state in (InstanceState.GONE, InstanceState.STOPPED)]
        alive = [i for i in mine if i.state.exists]
        if dead:
            raise CapacityError(f"{len(dead)} of {spec.count} nodes died while starting", code="PartialGang",
                                launched=alive)
        if len(mine) >= spec.count and all(i.state is InstanceState.RUNNING for i in mine):
            return tuple(mine)
        if budget.remaining() <= settings.poll_s:
            running = len([i for i in mine if i.state is InstanceState.RUNNING])
            raise StallError(f"{running} of {spec.count} nodes running at the zone deadline", code="StartTimeout",
                             launched=alive)
        if not first:
            time.sleep(settings.poll_s)
        first = False
        try:
            current = call(lambda: provider.describe(spec.gang, (spec.region,), budget), budget, settings.retry,
                           on_retry)
        except ProviderError as error:
            raise error.with_launched(alive) from None


def _rollback(store: Store, provider: Provider, a: AttemptRecord, settings: ProvisionSettings) -> int:
    """Terminate what an attempt created (its own budget: the zone's may be spent). Returns API calls."""
    rows = journal.instances(store, attempt_id=a.id, states=("launched", "terminating"))
    if not rows:
        return 0
    log.info("#%d %s/%s: rolling back %s", a.seq, a.provider, a.zone, ", ".join(r.provider_id or r.name for r in rows))
    budget = Budget(settings.lifecycle.budget_s, settings.lifecycle.call_timeout_s)
    lifecycle.terminate_rows(store, {provider.name: provider}, rows, settings.lifecycle, budget, "rollback")
    return budget.calls


def _ids(instances: Sequence[Instance]) -> str:
    return ", ".join(f"{i.provider_id} ({i.state})" for i in instances) or "none"
