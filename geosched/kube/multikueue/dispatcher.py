"""The dispatcher: Workloads in the manager cluster in, `.status.nominatedClusterNames` out.

Each pass (woken by a change the watches saw, or when a nomination round ends):

1. Only the leader acts (the scheduler's Lease election), and only while Kueue's Configuration names this
   dispatcher (`multiKueue.dispatcherName`); otherwise AllAtOnce or Incremental would be nominating too.
2. The worker clusters are the MultiKueueClusters; their nodes are read in the background (`workers`), and a
   cluster unreachable for longer than its staleness limit is left out. The placement context over all fresh
   clusters is rebuilt when a reading or the network view changes.
3. Every Workload that is up for nomination (`kueue.skip_reason`), oldest first: its PodSets become a gang
   (`kueue.workload_gang`), the clusters of its MultiKueueConfig are ranked (`rank.rank`), and the best
   `nominate` are written. The gang's GPUs are then held on the first nominated cluster's nodes until the
   Workload is admitted (clusterName set) or goes, so the next Workload of the pass is not sent to the same
   capacity.
4. A Workload nominated `renominate_after_s` ago and still not admitted gets the next best cluster added (as
   Kueue's Incremental dispatcher adds clusters: the earlier ones keep their chance). Nothing of a round lives
   only in memory: the clusters tried are the Workload's `nominatedClusterNames` (each apply keeps the earlier
   ones), and a round begun before this replica led (another leader, a restart) is counted from the time the
   API server recorded for the field manager's last status apply (`kueue.nominated_at`). Kueue applies status
   under the same manager (`kueue-admission`), so a later write of its own makes the round look younger: a
   re-nomination can come late by that much, never early (clock skew aside: README).
5. Once `.status.clusterName` is set the Workload is never written again.

Every decision is an Event on the Workload (reason Nominated, Renominated or NotNominated, with every term of
the winning score, the runners-up and the clusters left out; Waiting when zone-first's patience holds a gang whose
best worker would run it more than 3x slower than a healthy ring, policies/patience.py; Held for a greener hour)
and, with a recorder, a placement in the store.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from kubernetes.client.exceptions import ApiException

from geosched import policies
from geosched.console import render
from geosched.core.errors import GeoschedError, InputError
from geosched.core.models import Job, NetworkView, Placement
from geosched.files.gate import parse_yaml
from geosched.grid.carbon import GridInput, grid_history
from geosched.grid.forecast import GridHistory
from geosched.kube.client import APPLY_PATCH, Json, Kube, Resource, describe
from geosched.kube.cluster_inventory import ClusterReading, build_fleet, network_for
from geosched.kube.inventory import pod_request, quantity
from geosched.kube.multikueue import kueue
from geosched.kube.multikueue.cache import CHECKS, CLUSTERS, CONFIGS, KINDS, QUEUES, WORKLOADS, ManagerCache
from geosched.kube.multikueue.metrics import Metrics
from geosched.kube.multikueue.rank import Ranking, rank, taken
from geosched.kube.multikueue.settings import DispatcherSettings
from geosched.kube.multikueue.workers import Workers
from geosched.kube.objpath import At
from geosched.kube.queues import served_version
from geosched.kube.scheduler.decide import View, held_reason
from geosched.kube.scheduler.events import EventSink
from geosched.kube.scheduler.lease import LeaderElector
from geosched.kube.scheduler.network import NetworkSource, no_network
from geosched.kube.scheduler.pods import node_labels
from geosched.kube.scheduler.reflector import Outage, Reflector
from geosched.kube.tolerations import node_taints
from geosched.policies import PlacementContext, patience, timeshift
from geosched.policies.context import FloatArray, IntArray
from geosched.policies.patience import Waiting

log = logging.getLogger(__name__)
CONFIGMAPS = Resource("v1", "ConfigMap", "configmaps", True)
NETWORK_EVERY_S = 30.0
WRITERS = 4
@dataclass
class _Round:
    started: float
    nominated: tuple[str, ...]


@dataclass(frozen=True)
class _Write:
    item: kueue.Pending
    reason: str  # Nominated | Renominated
    nominated: tuple[str, ...]
    best: Placement
    message: str
    held: bool
    started: float
    sent: float
    future: Future[Any]


@dataclass
class _Context:
    ctx: PlacementContext
    index: dict[str, int]
    base_free: IntArray
    nodes: View  # the nodes' labels and taints, and node masks per requirement set (the scheduler's)
    base_room: FloatArray  # per node and kueue.NEEDS: allocatable less what bound pods request
    room: FloatArray = field(init=False)  # the same less what held gangs will ask

    def __post_init__(self) -> None:
        self.room = self.base_room.copy()


class Dispatcher:
    def __init__(self, manager: Kube, settings: DispatcherSettings | None = None, *,
                 network: NetworkSource = no_network, identity: str | None = None,
                 clock: Callable[[], float] = time.monotonic, events: bool = True,
                 recorder: Callable[[Sequence[Placement]], object] | None = None, metrics: Metrics | None = None,
                 api_version: str | None = None, wall: Callable[[], datetime] = lambda: datetime.now(UTC),
                 grid: GridInput | None = None) -> None:
        """`grid`: hourly carbon: a Workload whose pod templates declare slack is nominated at the start hour it
        chooses (never after its latest start), on the grid its run is predicted to see."""
        self.manager = manager
        self.grid = grid
        self._history: tuple[int, GridHistory] | None = None
        self._starts: dict[str, float] = {}  # Workload uid -> the start hour it was held for
        self.settings = s = settings or DispatcherSettings()
        self.network = network
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.clock = clock
        self.wall = wall  # compared with the API server's managedFields times (NTP keeps the two close)
        self.recorder = recorder
        self.metrics = metrics or Metrics()
        self.stop = threading.Event()
        self.cache = ManagerCache()
        self.workers = Workers(manager, s.kueue_namespace, refresh_s=s.refresh_s, stale_after_s=s.stale_after_s,
                               clock=clock)
        self.elector = LeaderElector(manager, s.leader_election, self.identity) if s.leader_election.enabled \
            else None
        self.events = EventSink(manager, self.identity) if events else None
        if self.events is not None:
            sink = self.events
            self.metrics.events_dropped = lambda: sink.dropped
        self._api_version = api_version
        self._rounds: dict[str, _Round] = {}
        self._held: dict[str, Placement] = {}  # Workload uid -> the placement its GPUs are held for
        self._held_needs: dict[str, tuple[float, ...]] = {}  # Workload uid -> its CPU and memory per worker
        self._said: dict[str, str] = {}  # Workload uid -> the last NotNominated message (said once)
        self._context: _Context | None = None
        self._context_key: tuple[int, int] | None = None
        self._left_out: dict[str, str] = {}
        self._network_view: NetworkView | None = None
        self._network_at = float("-inf")
        self._configured: tuple[float, str | None] = (float("-inf"), None)
        self._decided: list[Placement] = []  # this pass's decisions, recorded together at its end
        # Status writes in flight while the next Workload is decided (an API server's round trip each).
        self._writer = ThreadPoolExecutor(max_workers=WRITERS, thread_name_prefix="nominate")

    # ---- where things are ----

    @property
    def api_version(self) -> str:
        """The Kueue API version the manager serves (v1beta2 first)."""
        if self._api_version is None:
            self._api_version = served_version(self.manager, "Workload")
            if self._api_version is None:
                raise InputError(f"context {self.manager.name}", "kueue.x-k8s.io",
                                 "the cluster serves no Kueue Workload API (is Kueue installed?)")
        return self._api_version

    def path(self, kind: str, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        return Resource(self.api_version, KINDS[kind], kind, kind == WORKLOADS).path(namespace, name, subresource)

    def leading(self) -> bool:
        return self.elector.leading() if self.elector is not None else not self.stop.is_set()

    # ---- lifecycle ----

    def load(self) -> None:
        """One list of every kind (a single pass, or a test driving passes by hand)."""
        for kind in KINDS:
            items, _ = self.manager.list_all(self.path(kind))
            self.cache.replace(kind, items)

    def __enter__(self) -> Dispatcher:
        if self.events is not None:
            self.events.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._writer.shutdown(wait=True)
        if self.events is not None:
            self.events.close()
        self.workers.close()

    def run_once(self) -> tuple[str, ...]:
        """`--once`: one pass holding the Lease (when leader election is on), so it never writes beside a running
        replica. Raises GeoschedError when another replica holds it."""
        if self.elector is not None and not self.elector.try_acquire_or_renew():
            raise GeoschedError(f"another dispatcher holds the Lease {self.settings.leader_election.namespace}/"
                                f"{self.settings.leader_election.name}; nothing done")
        try:
            return self.pass_once()
        finally:
            if self.elector is not None:
                self.elector.release()

    def pass_once(self) -> tuple[str, ...]:
        """List everything, read every worker cluster that is due, one pass (`--once`, and tests that drive
        passes by hand). Returns the Workloads written."""
        self.load()
        self.workers.poll(self.cluster_objects(), block=True)
        return self.dispatch()

    def run(self, stop: threading.Event | None = None, *, release_on_stop: bool = True) -> None:
        """Watch and dispatch until `stop` (or `self.stop`) is set. Use inside `with dispatcher:`."""
        if stop is not None:
            threading.Thread(target=_link, args=(stop, self.stop), daemon=True).start()
        outage = Outage.of(self.manager)  # one backoff, one line per step, when the manager cannot be reached
        reflectors = [Reflector(self.manager, kind, self.path(kind), self.cache, self.stop, outage=outage)
                      for kind in KINDS]
        for r in reflectors:
            r.start()
        lease = None
        if self.elector is not None:
            lease = threading.Thread(target=self.elector.run, args=(self.stop,),
                                     kwargs={"release_on_stop": release_on_stop}, daemon=True,
                                     name=f"lease-{self.manager.name}")
            lease.start()
        try:
            while not self.stop.is_set():
                self.cache.changed.wait(self._sleep_s())
                self.cache.changed.clear()
                self.stop.wait(0.02)  # let a burst of watch events land before a pass, as the scheduler does
                if not all(r.synced.is_set() for r in reflectors):
                    continue
                self.workers.poll(self.cluster_objects())
                try:
                    self.dispatch()
                except Exception as exc:  # one bad pass (a server hiccup) must not end the dispatcher
                    log.warning("dispatch pass failed: %s", describe(exc))
        finally:
            self.stop.set()
            for r in reflectors:
                r.join(2.0)
            if lease is not None:
                lease.join(self.settings.leader_election.renew_deadline_s)

    def _sleep_s(self) -> float:
        now = self.clock()
        due = [r.started + self.settings.renominate_after_s for r in self._rounds.values()]
        soonest = min(due, default=now + 1.0)
        return float(min(1.0, max(0.05, soonest - now)))

    # ---- one pass ----

    def dispatch(self) -> tuple[str, ...]:
        """One pass over the pending Workloads; the keys of those written."""
        self.metrics.stats.passes += 1
        if not self.leading() or self.workers.warming() or not self._kueue_names_us():
            return ()
        context = self._context_now()
        checks = kueue.multikueue_checks(self.cache.items(CHECKS))
        queues = {kueue.name_of(q): kueue.queue_checks(q) for q in self.cache.items(QUEUES)}
        configs = {kueue.name_of(c): [str(n) for n in (c.get("spec") or {}).get("clusters") or []]
                   for c in self.cache.items(CONFIGS)}
        inactive = self._inactive()
        pending: list[kueue.Pending] = []
        alive: set[str] = set()
        for wl in sorted(self.cache.items(WORKLOADS), key=_age):
            uid = str((wl.get("metadata") or {}).get("uid") or "")
            if kueue.skip_reason(wl, checks, queues) is None:
                pending.append(kueue.pending_of(wl, checks))
                alive.add(uid)
        self._forget(alive, context)
        inflight: deque[_Write] = deque()
        written: list[str] = []

        def settle_done(limit: int) -> None:
            # In order, so Events and records follow the decisions; blocking only while too many are in flight.
            while inflight and (len(inflight) > limit or inflight[0].future.done()):
                w = inflight.popleft()
                if self._settle(w, context):
                    written.append(w.item.key)

        try:
            for item in pending:
                if not self.leading():
                    break
                write = self._decide(item, configs, context, inactive)
                if write is not None:
                    inflight.append(write)
                settle_done(2 * WRITERS)
        finally:
            settle_done(0)
            if self.recorder is not None and self._decided:
                self.recorder(self._decided)
            self._decided = []
        return tuple(written)

    def _decide(self, item: kueue.Pending, configs: Mapping[str, list[str]], context: _Context | None,
                inactive: Mapping[str, str]) -> _Write | None:
        """Choose, hold the capacity, and start the write (the next Workload is decided while it is in flight)."""
        started = time.perf_counter()
        now = self.clock()
        s = self.settings
        current = self._rounds.get(item.uid)
        if item.nominated:
            if current is None or current.nominated != item.nominated:
                # Nominated before this replica saw it (a restart, another leader): the round began when the API
                # server says the nomination was applied.
                current = self._rounds[item.uid] = _Round(self._round_start(item, now), item.nominated)
            if now - current.started < s.renominate_after_s:
                return None
        if item.config not in configs:
            self._refuse(item, f"MultiKueueConfig {item.config} not found", started)
            return None
        try:
            job = kueue.workload_gang(item.obj)
        except InputError as exc:
            self._refuse(item, f"not a gang geosched can place: {exc}", started, outcome="not_a_gang")
            return None
        left_out = {**self._left_out, **inactive}
        candidates = [c for c in configs[item.config] if c not in left_out]
        unusable: dict[str, str] = {}
        needs = kueue.worker_needs(item.obj)
        if context is None:
            ranking = Ranking(job, (), ())
        else:
            usable, unusable = self._usable(dict(item.obj), context, job.gpus_per_worker, needs)
            if job.flexible and self.grid is not None and not item.nominated:
                waiting, usable = self._when(item, job, usable)
                if waiting is not None:
                    self.metrics.decided("held", time.perf_counter() - started)
                    if self._said.get(item.uid) != waiting:
                        self._said[item.uid] = waiting
                        self._event(item, "Held", waiting)
                    return None
            # Exact for the clusters written (the best `nominate`, or one more than already nominated); the rest
            # only as far as their bounds say they cannot be among them.
            need = len(item.nominated) + 1 if item.nominated else s.nominate
            ranking = rank(job, usable, candidates, policy=s.policy, weights=s.weights, need=need)
            if ranking.fits and not item.nominated:
                waits = self._patience(item, job, ranking.fits[0], usable)
                if waits is not None:
                    self.metrics.decided("waiting", time.perf_counter() - started)
                    if self._said.get(item.uid) != waits:
                        self._said[item.uid] = waits
                        self._event(item, "Waiting", waits)
                    return None
        # Said with the clusters left out; a cluster with such nodes is still ranked on its others.
        notes = {c: f"left out, {reason}" for c, reason in left_out.items()}
        notes.update((c, said) for c, said in unusable.items() if c not in left_out)
        order = ranking.cluster_names()
        if item.nominated:
            fresh = [c for c in order if c not in item.nominated][:1]
            if not fresh:
                self._rounds[item.uid] = _Round(now, item.nominated)  # asked again after the next timeout
                self._refuse(item, "no other cluster holds the gang", started, ranking, notes,
                             configs[item.config])
                return None
            nominated = (*item.nominated, *fresh)[:kueue.MAX_NOMINATED]
            reason, best = "Renominated", next(p for p in ranking.fits if p.cluster == fresh[0])
        else:
            if not order:
                self._refuse(item, "no worker cluster holds the gang", started, ranking, notes,
                             configs[item.config])
                return None
            nominated = tuple(order[:s.nominate])
            reason, best = "Nominated", ranking.fits[0]
            late = timeshift.deadline_note(job, self.wall().timestamp())
            if late is not None:  # said once, at its first nomination: a renomination is the same late start
                log.warning("workload %s: %s", item.key, late)
                self._event(item, "DeadlineMissed", late, warning=True)
        if not self.leading():
            return None
        # Held now, so the next Workload of this pass sees it taken; given back if the write fails.
        self._rounds[item.uid] = _Round(now, nominated)
        held = not item.nominated and context is not None
        if held and context is not None:
            self._hold(item.uid, best, needs, context)
        future = self._writer.submit(
            _timed, self.manager.request, "PATCH", self.path(WORKLOADS, item.namespace, item.name, "status"),
            query={"fieldManager": s.field_manager, "force": True},
            body=kueue.nomination_apply(item.obj, nominated, s.field_manager, self.api_version),
            content_type=APPLY_PATCH)
        message = _message(nominated, best, ranking, notes, configs[item.config])
        return _Write(item, reason, nominated, best, message, held, started, time.perf_counter(), future)

    def _patience(self, item: kueue.Pending, job: Job, best: Placement, usable: PlacementContext) -> str | None:
        """Why the Workload is not nominated yet, when zone-first's patience (policies/patience.py) says its gang
        waits for a healthy ring: its best worker's placement is more than 3x slower than the gang on every worker
        with all GPUs free. Counted from the Workload's creationTimestamp (an over-statement of the wait, so never
        a longer wait than the rule allows); its runtime is its pod templates' declared one, if any."""
        now = self.wall().timestamp()
        s = self.settings
        refusal = patience.check(best, usable, s.policy, s.weights,
                                 Waiting(now - _created(item, now), job.schedule.runtime_s if job.schedule else None),
                                 policies.placer(s.policy, s.weights))
        return None if refusal is None else f"{best.cluster}: {refusal.reasons[0].reason}"

    def _when(self, item: kueue.Pending, job: Job, usable: PlacementContext) -> tuple[str | None, PlacementContext]:
        """A flexible Workload (its pod templates declare slack, geosched.kube.flex): why it waits for a later hour,
        or the context to rank clusters on, at the grid its run is predicted to see from now. Rolling: asked again
        on each pass until its hour; past its latest start it is nominated as any Workload."""
        assert self.grid is not None
        if self._history is None or self._history[0] != id(usable.fleet):
            self._history = (id(usable.fleet), grid_history(usable.fleet, self.grid))
        now = self.wall().timestamp()
        submitted = _created(item, now)
        chosen = self._starts.get(item.uid)
        bar = timeshift.RESHIFT_SAVING if chosen is not None and now >= chosen else timeshift.MIN_SAVING
        placed, shift = timeshift.place_in_time(job, usable, self._history[1], now, self.settings.policy,
                                                self.settings.weights, explain=False, submitted=submitted,
                                                min_saving=bar)
        if shift is None:
            return None, usable
        if isinstance(placed, Placement) and shift.start > now:
            self._starts[item.uid] = shift.start
            return held_reason(shift), usable
        return None, usable.with_grid(shift.means[0])

    def _settle(self, w: _Write, context: _Context | None) -> bool:
        """The write's outcome: Event, record and metrics when it landed; the hold given back when not."""
        try:
            answer, done_at = w.future.result()
        except Exception as exc:
            if isinstance(exc, ApiException) and exc.status == 409:
                self.metrics.decided("conflict")  # changed since read (admitted, evicted): the watch brings it
            else:
                self.metrics.decided("error")
                log.warning("workload %s: %s", w.item.key, describe(exc))
            self._rounds.pop(w.item.uid, None)
            self._held_needs.pop(w.item.uid, None)
            if w.held and self._held.pop(w.item.uid, None) is not None and context is not None:
                self._reapply(context)
            return False
        if isinstance(answer, dict):
            self.cache.apply(WORKLOADS, "MODIFIED", answer)
        self._said.pop(w.item.uid, None)
        self._event(w.item, w.reason, w.message)
        self._decided.append(w.best)
        self.metrics.decided(w.reason.lower(), done_at - w.started, w.sent - w.started)
        log.info("%s %s: %s", w.reason.lower(), w.item.key, ", ".join(w.nominated))
        return True

    def _refuse(self, item: kueue.Pending, why: str, started: float, ranking: Ranking | None = None,
                notes: Mapping[str, str] | None = None, candidates: Iterable[str] = (),
                outcome: str = "no_fit") -> None:
        parts = [why]
        if ranking is not None:
            parts += [f"{c}: {reason}" for c, reason in sorted(ranking.refused)]
        parts += [f"{c}: {note}" for c, note in sorted((notes or {}).items()) if c in candidates]
        message = "; ".join(parts)
        self.metrics.decided(outcome, time.perf_counter() - started)
        if self._said.get(item.uid) != message:
            self._said[item.uid] = message
            self._event(item, "NotNominated", message, warning=True)
            log.info("not nominated %s: %s", item.key, message)

    def _event(self, item: kueue.Pending, reason: str, message: str, *, warning: bool = False) -> None:
        if self.events is None:
            return
        involved = {"apiVersion": item.obj.get("apiVersion") or self.api_version, "kind": "Workload",
                    "name": item.name, "namespace": item.namespace, "uid": item.uid}
        self.events.emit_about(involved, reason, message, warning=warning)

    # ---- state kept between passes ----

    def _round_start(self, item: kueue.Pending, now: float) -> float:
        """On this replica's clock, when the Workload's current nominations were applied: `now` less the age of
        the managedFields time (whole seconds, so up to 1 s more is assumed; never in the future); `now` when the
        API server does not say."""
        at = kueue.nominated_at(item.obj, self.settings.field_manager)
        if at is None:
            return now
        return now - max(0.0, (self.wall() - at).total_seconds() - 1.0)

    def _forget(self, alive: set[str], context: _Context | None) -> None:
        """Rounds and held GPUs of Workloads no longer pending (admitted, finished, gone) end here."""
        for uid in set(self._rounds) - alive:
            del self._rounds[uid]
        for uid in set(self._said) - alive:
            del self._said[uid]
        gone = set(self._held) - alive
        for uid in gone:
            del self._held[uid]
            self._held_needs.pop(uid, None)
        if gone and context is not None:
            self._reapply(context)

    def _hold(self, uid: str, placement: Placement, needs: Sequence[float], context: _Context) -> None:
        self._held[uid] = placement
        self._held_needs[uid] = tuple(needs)
        self._take(context, placement, needs)

    def _reapply(self, context: _Context) -> None:
        context.ctx = context.ctx.with_free(context.base_free.copy())
        context.room = context.base_room.copy()
        for uid, placement in self._held.items():
            self._take(context, placement, self._held_needs.get(uid, ()))

    @staticmethod
    def _take(context: _Context, placement: Placement, needs: Sequence[float]) -> None:
        """The held gang's GPUs, CPU and memory off its nodes (for the next gangs of the pass)."""
        if all(a.node in context.index for a in placement.assignments):
            context.ctx = context.ctx.with_free(taken(context.ctx, placement, context.index))
            for a in placement.assignments:
                for k, need in enumerate(needs):
                    context.room[context.index[a.node], k] -= a.workers * need

    def cluster_objects(self) -> dict[str, Json]:
        return {kueue.name_of(c): c for c in self.cache.items(CLUSTERS)}

    def _inactive(self) -> dict[str, str]:
        """MultiKueueClusters Kueue itself reports inactive (condition Active=False)."""
        out = {}
        for c in self.cache.items(CLUSTERS):
            for cond in (c.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "Active" and cond.get("status") == "False":
                    out[kueue.name_of(c)] = f"Kueue reports it inactive ({cond.get('reason') or 'no reason'})"
        return out

    def _context_now(self) -> _Context | None:
        readings, left_out = self.workers.usable()
        network_changed = self._refresh_network()
        key = (self.workers.version, id(self._network_view))
        if key != self._context_key or network_changed or set(left_out) != set(self._left_out):
            self._context = self._build(readings)
            self._context_key = key
            if self._context is not None:
                self._reapply(self._context)
        self._left_out = left_out
        self.metrics.workers(len(readings), len(left_out))
        return self._context

    def _build(self, readings: Mapping[str, ClusterReading]) -> _Context | None:
        if not readings:
            return None
        # Every node, tainted or not: _usable masks each Workload's view by its own tolerations.
        view = build_fleet(readings.values(), skip_tainted=False)
        ctx = PlacementContext(view.fleet, network_for(view.fleet, self._network_view))
        raw = {(r.cluster, str((n.get("metadata") or {}).get("name"))): n for r in readings.values() for n in r.nodes}
        # build_fleet names a node "cluster/name" when two clusters have one of that name.
        mine = [raw[(n.cluster or "", n.name.removeprefix(f"{n.cluster}/"))] for n in view.fleet.nodes]
        nodes = View(ctx, ctx.gpus_free, [node_labels(n) for n in mine], [node_taints(n) for n in mine])
        asked: dict[tuple[str, str], list[float]] = {}
        for r in readings.values():
            for pod in r.pods:
                spec = At(pod, "pod").key("spec")
                used = asked.setdefault((r.cluster, str(spec.key("nodeName").value)), [0.0] * len(kueue.NEEDS))
                for k, need in enumerate(kueue.NEEDS):
                    used[k] += pod_request(spec, need)
        room = np.array([[_allocatable(node, need) for need in kueue.NEEDS] for node in mine], dtype=np.float64)
        room -= np.array([asked.get((n.cluster or "", n.name.removeprefix(f"{n.cluster}/")), [0.0] * len(kueue.NEEDS))
                          for n in view.fleet.nodes], dtype=np.float64).reshape(room.shape)
        return _Context(ctx, {n: i for i, n in enumerate(ctx.names)}, ctx.gpus_free.copy(), nodes, room)

    def _usable(self, wl: Json, context: _Context, gpus: int, needs: Sequence[float],
                ) -> tuple[PlacementContext, dict[str, str]]:
        """The context as this Workload's GPU pods see it, and what it leaves out per cluster: nodes they cannot
        use (an untolerated NoSchedule or NoExecute taint, a nodeSelector or required affinity they fail) hold no
        free GPU for it, and a node holds no more workers than its CPU and memory left have room for (`needs`,
        per worker, `gpus` GPUs each)."""
        ctx = context.ctx
        usable = np.ones(len(ctx.names), dtype=bool)
        for req in kueue.gpu_requirements(wl):
            usable &= context.nodes.mask(req)
        free = np.where(usable, ctx.gpus_free, 0)
        short = np.zeros(len(ctx.names), dtype=bool)
        for k, need in enumerate(needs):
            if need > 0:
                # Unknown allocatable is inf: clipped so the count stays an integer; it is no limit either way.
                fit = np.floor(np.clip(context.room[:, k] / need, 0.0, 1 << 30)).astype(np.int64)
                short |= (fit == 0) & (free >= gpus)
                free = np.minimum(free, fit * gpus)
        notes: dict[str, str] = {}
        for mask, why in ((~usable, "the pods cannot use them (taints, nodeSelector, required affinity)"),
                          (short, "no room left for a worker's CPU or memory")):
            counts = np.bincount(ctx.cluster_of[mask], minlength=len(ctx.cluster_names))
            for i, count in enumerate(counts.tolist()):
                if count:
                    cluster = str(ctx.cluster_names[i])
                    said = f"{count} of its nodes not counted: {why}"
                    notes[cluster] = f"{notes[cluster]}; {said}" if cluster in notes else said
        if not notes:
            return ctx, notes
        return ctx.with_free(free), notes

    def _refresh_network(self) -> bool:
        now = self.clock()
        if now - self._network_at < NETWORK_EVERY_S:
            return False
        self._network_at = now
        try:
            latest = self.network()
        except Exception as exc:  # keep deciding on the last view rather than stop
            log.warning("network view: %s", describe(exc))
            return False
        changed = latest is not self._network_view
        self._network_view = latest
        return changed

    def _kueue_names_us(self) -> bool:
        """Kueue's Configuration (its manager ConfigMap) names this dispatcher; read at most every refresh. While
        the manager does not answer, the last answer stands."""
        at, name = self._configured
        now = self.clock()
        if now - at < self.settings.refresh_s:
            return name == self.settings.dispatcher_name
        s = self.settings
        try:
            found = self.manager.get(CONFIGMAPS.path(s.kueue_namespace, s.kueue_configmap))
            name = _named(found)
        except Exception as exc:
            log.warning("Kueue configuration: %s", describe(exc))
        if name != s.dispatcher_name:
            log.warning("Kueue's configuration %s/%s names dispatcher %s, not %s: nominating nothing",
                        s.kueue_namespace, s.kueue_configmap, name or "(none: no such ConfigMap, or unreadable)",
                        s.dispatcher_name)
        self._configured = (now, name)
        return name == s.dispatcher_name


def _named(configmap: Json | None) -> str | None:
    """The dispatcher a Kueue manager ConfigMap names, None when there is none or it cannot be read."""
    if configmap is None:
        return None
    try:
        text = (configmap.get("data") or {}).get(kueue.KUEUE_CONFIG_KEY) or ""
        return kueue.dispatcher_of(parse_yaml(text, kueue.KUEUE_CONFIG_KEY) or {})  # bounded: no alias bombs
    except InputError:
        return None


def _allocatable(node: Json, resource: str) -> float:
    """A node's allocatable `resource`; unknown (not reported) is no limit."""
    found = quantity(((node.get("status") or {}).get("allocatable") or {}).get(resource))
    return float("inf") if found is None else found


def _timed(fn: Callable[..., Any], *args: Any, **kw: Any) -> tuple[Any, float]:
    """The answer, and when it came (a decision's latency ends when its write is answered)."""
    answer = fn(*args, **kw)
    return answer, time.perf_counter()


def _created(item: kueue.Pending, now: float) -> float:
    """The Workload's creationTimestamp (Unix seconds); `now` when it has none the clock can read."""
    created = str((item.obj.get("metadata") or {}).get("creationTimestamp") or "")
    try:
        return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return now


def _link(outer: threading.Event, inner: threading.Event) -> None:
    outer.wait()
    inner.set()


def _age(wl: Json) -> tuple[str, str, str]:
    meta = wl.get("metadata") or {}
    return str(meta.get("creationTimestamp") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _message(nominated: tuple[str, ...], best: Placement, ranking: Ranking, notes: Mapping[str, str],
             candidates: Iterable[str]) -> str:
    """What `kubectl describe workload` shows: the choice, every score term, the others, who was left out."""
    job, score = best.job, best.score
    parts = [f"nominated {', '.join(nominated)}; {best.cluster}: {job.workers} x {job.gpus_per_worker} GPUs in "
             f"{', '.join(best.zones)} by {best.policy}, {render.score_line(score, best.weights)}"]
    others = [f"{p.cluster} {p.score.total:.3f}" for p in ranking.fits if p is not best]
    others += [f"{c} not scored (cannot beat these: at least {bound:.3f})" for c, bound in ranking.unranked]
    if others:
        parts.append("others: " + ", ".join(others))
    parts += [f"{c}: {reason}" for c, reason in sorted(ranking.refused)]
    parts += [f"{c}: {note}" for c, note in sorted(notes.items()) if c in set(candidates)]
    return "; ".join(parts)


__all__ = ["Dispatcher"]
