"""The scheduler's I/O loop: reflectors fill the cache, the leader turns ready gangs into bindings.

Each cycle (woken by a change in the cache, or when a backoff ends):

1. snapshot the cache; rebuild the placement context only when nodes or the network view changed, and compute
   free GPUs and each node's room for cpu, memory, storage, pod slots and extended resources from the bound pods
   (including the ones this scheduler just bound, assumed);
2. group pending pods into gangs (`gangs.group`), fetching a batch Job owner's size once when needed;
3. for each ready gang not in backoff, in priority then FIFO order: `decide`, then `bind_gang`; a gang that does
   not fit, or whose binding failed and was released, backs off (doubling, capped: `requeue.Requeue`); a gang that
   did not fit is tried again early when capacity changes (a pod ended, a node came).

Only the leader binds, and it checks its lease before every binding; followers keep their caches warm.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from geosched import policies
from geosched.core.models import NetworkView
from geosched.core.retry import RetryPolicy
from geosched.grid.carbon import GridInput, grid_history
from geosched.grid.forecast import GridHistory
from geosched.kube import kinds as job_kinds
from geosched.kube import resources
from geosched.kube.client import NODES, PODS, Json, Kube, Resource, describe
from geosched.kube.cluster_inventory import fleet_from_nodes, network_for
from geosched.kube.inventory import nodes_from_kube
from geosched.kube.objpath import At
from geosched.kube.scheduler import cache as kinds
from geosched.kube.scheduler.binder import bind_gang, release
from geosched.kube.scheduler.cache import ClusterCache, Snapshot
from geosched.kube.scheduler.decide import Decision, Refusal, View, consume, decide
from geosched.kube.scheduler.events import EventSink
from geosched.kube.scheduler.gangs import PRESENT, group
from geosched.kube.scheduler.lease import LeaderElector
from geosched.kube.scheduler.network import NetworkSource, no_network
from geosched.kube.scheduler.pods import GangKey, PodInfo, node_labels
from geosched.kube.scheduler.reflector import Outage, Reflector
from geosched.kube.scheduler.requeue import Requeue
from geosched.kube.scheduler.settings import SchedulerSettings
from geosched.kube.tolerations import node_taints
from geosched.policies.timeshift import MIN_SAVING, RESHIFT_SAVING

log = logging.getLogger(__name__)
LIVE = "status.phase!=Succeeded,status.phase!=Failed"
OWNER_TTL_S = 30.0
NETWORK_EVERY_S = 30.0


@dataclass
class Stats:
    cycles: int = 0
    gangs_bound: int = 0
    pods_bound: int = 0
    single_zone_gangs: int = 0
    refusals: int = 0
    rollbacks: int = 0
    pods_released: int = 0
    leader_transitions: int = 0
    decide_s: float = 0.0  # time spent deciding (the pure core) and binding (the API), for profiling
    bind_s: float = 0.0
    lists: dict[str, int] = field(default_factory=dict)


class Scheduler:
    def __init__(self, kube: Kube, settings: SchedulerSettings | None = None, *, network: NetworkSource = no_network,
                 identity: str | None = None, retry: RetryPolicy | None = None, events: bool = True,
                 grid: GridInput | None = None, wall: Callable[[], float] = time.time) -> None:
        """`grid`: hourly carbon (`--carbon-hourly`): gangs whose pods declare slack wait for their start hour
        (geosched.kube.flex); `wall`: the clock those hours are read on."""
        self.kube = kube
        self.grid, self.wall = grid, wall
        self._history: tuple[int, GridHistory] | None = None
        self._starts: dict[GangKey, float] = {}  # a held gang -> the start hour it was held for
        self.settings = settings or SchedulerSettings()
        self.network = network
        self.identity = identity or f"{socket.gethostname()}_{uuid.uuid4()}"
        self.retry = retry or RetryPolicy(attempts=4, initial_s=0.1, max_s=2.0)
        self.stop = threading.Event()
        self.cache = ClusterCache()
        self.stats = Stats()
        self.elector = (LeaderElector(kube, self.settings.leader_election, self.identity)
                        if self.settings.leader_election.enabled else None)
        self.events = EventSink(kube, self.identity) if events else None
        self.requeue = Requeue(RetryPolicy(initial_s=self.settings.backoff_initial_s,
                                           max_s=self.settings.backoff_max_s))
        self._owners: dict[str, tuple[int, float]] = {}
        self._reasons: dict[GangKey, str] = {}
        self._view: View | None = None
        self._view_key: tuple[int, int] | None = None
        self._network_view: NetworkView | None = None
        self._network_at = float("-inf")
        self._was_leading = False
        self.reflectors = self._reflectors()

    def _reflectors(self) -> list[Reflector]:
        s = self.settings
        namespace = s.namespaces[0] if len(s.namespaces) == 1 else None

        outage = Outage.of(self.kube)  # one backoff, one line per step, when the API server cannot be reached

        def reflector(kind: str, path: str, selector: str | None = None, optional: bool = False) -> Reflector:
            return Reflector(self.kube, kind, path, self.cache, self.stop, field_selector=selector,
                             watch_timeout_s=s.watch_timeout_s, optional=optional, outage=outage)

        return [
            reflector(kinds.NODES, NODES.path()),
            reflector(kinds.PENDING, PODS.path(namespace),
                      f"spec.schedulerName={s.scheduler_name},spec.nodeName=,{LIVE}"),
            reflector(kinds.BOUND, PODS.path(), f"spec.nodeName!=,{LIVE}"),
            reflector(kinds.PODGROUPS, "/apis/scheduling.x-k8s.io/v1alpha1/podgroups", optional=True),
            reflector(kinds.VOLCANO_GROUPS, "/apis/scheduling.volcano.sh/v1beta1/podgroups", optional=True),
        ]

    # ---- lifecycle ----

    def leading(self) -> bool:
        return self.elector.leading() if self.elector is not None else not self.stop.is_set()

    def run(self, stop: threading.Event | None = None, *, release_on_stop: bool = True) -> Stats:
        """Schedule until `stop` (or `self.stop`) is set. Returns what was done."""
        if stop is not None:
            threading.Thread(target=_link, args=(stop, self.stop), daemon=True).start()
        for r in self.reflectors:
            r.start()
        if self.events is not None:
            self.events.start()
        lease_thread = None
        if self.elector is not None:
            lease_thread = threading.Thread(target=self.elector.run, args=(self.stop,),
                                            kwargs={"release_on_stop": release_on_stop},
                                            name=f"lease-{self.kube.name}", daemon=True)
            lease_thread.start()
        try:
            while not self.stop.is_set():
                self.cache.changed.wait(self._sleep_s())
                self.cache.changed.clear()
                self.stop.wait(0.02)  # let a burst of watch events land before deciding
                self._tick()
        finally:
            self.stop.set()
            for r in self.reflectors:
                r.join(2.0)
            if lease_thread is not None:
                lease_thread.join(self.settings.leader_election.renew_deadline_s)
            if self.events is not None:
                self.events.close()
            self.stats.lists = {r.kind: r.lists for r in self.reflectors}
            if self.elector is not None:
                self.stats.leader_transitions = self.elector.transitions
        return self.stats

    def _tick(self) -> None:
        leading = self.leading()
        if leading != self._was_leading:
            # A new leader trusts only what it has seen confirmed, not what it assumed in an earlier term.
            self.cache.clear_assumed()
            self._was_leading = leading
        if not leading or not all(r.synced.is_set() for r in self.reflectors):
            return
        try:
            self.cycle()
        except Exception as exc:  # one bad cycle (a server hiccup) must not end the scheduler
            log.warning("%s: cycle failed: %s", self.kube.name, describe(exc))

    def _sleep_s(self) -> float:
        now = time.monotonic()
        soonest = self.requeue.soonest()
        if soonest is None:
            soonest = now + 1.0
        return float(min(1.0, max(0.01, soonest - now)))

    # ---- one cycle ----

    def cycle(self) -> None:
        self.stats.cycles += 1
        snap = self.cache.snapshot()
        view = self._view_for(snap)
        if view is None:
            return
        wanted = set(self.settings.namespaces)
        pending = [p for p in snap.pending if not wanted or p.namespace in wanted]
        now = time.monotonic()
        gangs = group(pending, snap.bound, snap.podgroups, self._owner_sizes(pending, now))
        # What is kept per gang lives only while the gang is pending: deleted gangs' entries were kept for ever.
        live = {g.key for g in gangs}
        self.requeue.keep(live)
        for kept in (self._reasons, self._starts):
            for key in [k for k in kept if k not in live]:
                del kept[key]
        for gang in gangs:
            if not gang.ready or self.requeue.waiting(gang.key, now, snap.capacity_version):
                continue
            if not self.leading():
                return
            started = time.perf_counter()
            wall = self.wall()
            chosen = self._starts.get(gang.key)
            bar = RESHIFT_SAVING if chosen is not None and wall >= chosen else MIN_SAVING
            decision = decide(gang, view, self.settings.policy, self.settings.weights, self._grid(view), wall, bar)
            if isinstance(decision, Refusal) and decision.held_until is not None:
                self._starts[gang.key] = decision.held_until
            self.stats.decide_s += time.perf_counter() - started
            if isinstance(decision, Refusal):
                self._refused(decision, snap.capacity_version)
                continue
            if self._bind(decision):
                view = consume(view, decision)

    def _grid(self, view: View) -> GridHistory | None:
        """The grid for the cluster's regions, built again when its fleet is."""
        if self.grid is None:
            return None
        if self._history is None or self._history[0] != id(view.ctx.fleet):
            self._history = (id(view.ctx.fleet), grid_history(view.ctx.fleet, self.grid))
        return self._history[1]

    def _view_for(self, snap: Snapshot) -> View | None:
        now = time.monotonic()
        if now - self._network_at >= NETWORK_EVERY_S or self._view is None:
            try:
                latest = self.network()
            except Exception as exc:  # keep placing on the last view rather than stop
                log.warning("network view: %s", describe(exc))
                latest = self._network_view
            self._network_at = now
            if latest is not self._network_view:
                self._network_view = latest
                self._view_key = None
        key = (snap.nodes_version, id(self._network_view))
        if self._view is None or key != self._view_key:
            self._view = self._build_view(snap)
            self._view_key = key
        if self._view is None:
            return None
        return with_bound(self._view, snap.bound)

    def _build_view(self, snap: Snapshot) -> View | None:
        return build_view(snap.nodes, self.kube.name, self._network_view)

    def _owner_sizes(self, pending: list[PodInfo], now: float) -> dict[str, int]:
        """Gang sizes of controller owners, by UID: what a job kind that owns its pods says of them
        (`JobKind.owned_pods_gang`: a batch Job's min(parallelism, completions)), fetched once per OWNER_TTL_S;
        other kinds count the pods that exist."""
        sizes: dict[str, int] = {}
        # An entry past its lifetime is fetched again if its owner still has pods pending; dropped here, the cache
        # holds only owners seen in the last OWNER_TTL_S, not every Job since the scheduler started (attack5).
        for uid in [u for u, (_, at) in self._owners.items() if now - at >= OWNER_TTL_S]:
            del self._owners[uid]
        for pod in pending:
            owner = pod.owner
            if owner is None or pod.gang.source != "owner" or owner.uid in sizes:
                continue
            cached = self._owners.get(owner.uid)
            if cached is not None and now - cached[1] < OWNER_TTL_S:
                sizes[owner.uid] = cached[0]
                continue
            kind = job_kinds.lookup(owner.api_version, owner.kind)
            if kind is None or not kind.owns_pods:
                size = PRESENT
            else:
                resource = Resource(kind.api_version, kind.kind, kind.plural, True)
                try:
                    job = self.kube.get(resource.path(pod.namespace, owner.name))
                except Exception as exc:  # unknown this cycle: the gang waits
                    log.warning("owner %s/%s: %s", pod.namespace, owner.name, describe(exc))
                    continue
                found = kind.owned_pods_gang(job) if job is not None else None
                size = found if found is not None else PRESENT
            self._owners[owner.uid] = (size, now)
            sizes[owner.uid] = size
        return sizes

    def _refused(self, refusal: Refusal, capacity_version: int) -> None:
        gang = refusal.gang
        self.stats.refusals += 1
        if refusal.release:
            errors = release(self.kube, refusal.release, f"gang {gang.key} cannot be completed: {refusal.reason}",
                             self.retry)
            self.cache.forget(refusal.release)
            self.stats.pods_released += len(refusal.release)
            for error in errors:
                log.warning("release: %s", error)
        self.requeue.failed(gang.key, capacity_version)
        if self._reasons.get(gang.key) != refusal.reason:
            self._reasons[gang.key] = refusal.reason
            log.info("%s: gang %s not placed: %s", self.kube.name, gang.key, refusal.reason)
            self._event(gang.pending, "FailedScheduling", f"gang {gang.key}: {refusal.reason}", warning=True)

    def _bind(self, decision: Decision) -> bool:
        gang = decision.gang
        started = time.perf_counter()
        result = bind_gang(self.kube, decision, leading=self.leading, retry=self.retry,
                           on_bound=lambda b: self.cache.assume(b.pod, b.node))
        self.stats.bind_s += time.perf_counter() - started
        if result.ok:
            self.requeue.placed(gang.key)
            self._reasons.pop(gang.key, None)
            self.stats.gangs_bound += 1
            self.stats.pods_bound += len(result.bound)
            self.stats.single_zone_gangs += len(decision.zones) == 1
            zones = ", ".join(decision.zones)
            for b in result.bound:
                self._event((b.pod,), "Scheduled", f"Successfully assigned {b.pod.key} to {b.node} "
                            f"(gang {gang.key}, zone {zones})")
            if decision.late is not None:
                log.warning("%s: gang %s: %s", self.kube.name, gang.key, decision.late)
                self._event(tuple(b.pod for b in result.bound), "DeadlineMissed", f"gang {gang.key}: {decision.late}",
                            warning=True)
            return True
        self.cache.forget(result.released)
        self.stats.rollbacks += 1
        self.stats.pods_released += len(result.released)
        log.warning("%s: gang %s rolled back after %d of %d bindings: %s", self.kube.name, gang.key,
                    len(result.bound), len(decision.binds), result.error)
        for error in result.release_errors:
            log.warning("release: %s", error)
        self.requeue.failed(gang.key, None)
        self._event(gang.pending, "FailedScheduling", f"gang {gang.key}: binding failed ({result.error}); "
                    f"{len(result.released)} bound pod(s) released, retrying the whole gang", warning=True)
        return False

    def _event(self, pods: tuple[PodInfo, ...], reason: str, message: str, *, warning: bool = False) -> None:
        if self.events is not None:
            for pod in pods:
                self.events.emit(pod, reason, message, warning=warning)


def build_view(nodes: Sequence[Json], cluster: str, network: NetworkView | None) -> View | None:
    """The placement context of a cluster's nodes, each node's labels, taints and allocatable room; None when no
    node has GPUs."""
    inventory = nodes_from_kube(nodes, (), cluster)
    if not inventory.nodes:
        return None
    fleet, _, _ = fleet_from_nodes(inventory.nodes)
    ctx = policies.PlacementContext(fleet, network_for(fleet, network))
    raw = {str(n["metadata"]["name"]): n for n in nodes}
    labels = [node_labels(raw[n.name]) for n in fleet.nodes]
    taints = [node_taints(raw[n.name]) for n in fleet.nodes]
    rooms = resources.node_rooms([resources.allocatable(At(raw[n.name], "node")) for n in fleet.nodes])
    return View(ctx, ctx.gpus_free.copy(), labels, taints, rooms=rooms)


def with_bound(base: View, bound: Iterable[PodInfo]) -> View:
    """`base` less what the bound pods hold: GPUs from the free count, everything else from the rooms.
    NotReady and cordoned nodes offer no GPU."""
    used = np.zeros(len(base.ctx.names), dtype=np.int64)
    rooms = {r: a.copy() for r, a in base.rooms.items()} if base.rooms is not None else None
    for pod in bound:
        i = base.index.get(pod.node or "")
        if i is None:
            continue
        used[i] += pod.gpus
        for resource, value in pod.requests:
            if rooms is not None and resource in rooms:
                rooms[resource][i] -= value
    free = np.where(base.ctx.ready, np.maximum(base.ctx.gpus_total - used, 0), 0).astype(np.int64)
    return View(base.ctx, free, base.labels, base.taints, base.masks, base.index, rooms)


def run(context: str | None, *, kubeconfig: Path | None = None, in_cluster: bool = False,
        settings: SchedulerSettings | None = None, network: NetworkSource = no_network,
        stop: threading.Event | None = None, identity: str | None = None, release_on_stop: bool = True,
        events: bool = True, grid: GridInput | None = None) -> Stats:
    """Run the scheduler for one cluster (a kubeconfig context, or in-cluster) until `stop` is set."""
    kube = Kube.open(context, kubeconfig, in_cluster=in_cluster)
    try:
        scheduler = Scheduler(kube, settings, network=network, identity=identity, events=events, grid=grid)
        return scheduler.run(stop, release_on_stop=release_on_stop)
    finally:
        kube.close()


def _link(outer: threading.Event, inner: threading.Event) -> None:
    # Setting the caller's event stops the scheduler's own, which every thread of it waits on.
    while not inner.is_set():
        if outer.wait(0.2):
            inner.set()
            return

