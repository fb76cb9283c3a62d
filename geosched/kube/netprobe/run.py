"""Measure the network between nodes of a cluster without SSH: pods pinned to them (pods.py), run in three waves.

1. a peer pod on every node (`iperf3 -s`), waited for until it runs and has a pod IP;
2. an echo client on every source node of the plan (geosched/probes/plan.py, the SSH probes' planner: full mesh up
   to 12 nodes, else rings and representatives), pinging its destinations' pod IPs; waited for until it ended;
3. a throughput client per representative pair (one per zone pair), after every echo client ended.

Each client's log (`GET .../pods/NAME/log`, or the injected `logs` source) is parsed by the probes' own parsers into
the probes' `RunReport`, which `probes.aggregate` turns into `LinkStats` exactly as for a run over SSH. Every pod
this run created is deleted when it ends, whatever happened (a failure, the deadline, an exception), by name and
then by the run's label (a create whose answer was lost). What the pods need of the API, and nothing more
(deploy/netprobe/rbac.yaml): pods create, get, list, delete and pods/log get, in the probe's namespace.

A pod that cannot start (its image cannot be pulled, the node refuses it) or does not end by the deadline is a
failure of the pairs it served; the run still reports what the other pods measured.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geosched.core.models import NetworkView, pair_key
from geosched.kube.client import PODS, Kube
from geosched.kube.netprobe import pods as probe_pods
from geosched.kube.netprobe.pods import ECHO, RUN_LABEL, THROUGHPUT, ProbeSettings
from geosched.kube.tolerations import Toleration
from geosched.probes.aggregate import to_samples
from geosched.probes.failures import Failure, FailureKind
from geosched.probes.plan import PlanNode, make_plan
from geosched.probes.results import EchoResult, RunReport, ThroughputResult
from geosched.probes.settings import PlanKind
from geosched.store.db import Sample

# Container states that will not get better by waiting (Kubernetes docs, "Debug Pods": image pull and config errors).
STUCK = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError",
                   "CreateContainerError", "ErrImageNeverPull"})
LOG_LIMIT = 1 << 20  # bytes of a client's log read: a full-mesh client's outputs are a few kB per peer

DEFAULTS = ProbeSettings()
Logs = Callable[[Kube, str, Mapping[str, Any]], str]


def api_logs(kube: Kube, namespace: str, pod: Mapping[str, Any]) -> str:
    """The client container's log as the kubelet kept it (pods/log, text)."""
    name = str(pod["metadata"]["name"])
    return kube.read_text(f"/api/v1/namespaces/{namespace}/pods/{name}/log",
                          query={"container": "probe", "limitBytes": LOG_LIMIT})


@dataclass(frozen=True)
class ClusterProbe:
    report: RunReport
    run: str
    created: int  # pods created
    leftover: tuple[str, ...] = ()  # pods that could not be deleted (named for the user)


def zone_of(node: Mapping[str, Any]) -> str:
    """The zone a node is in as the fleet names it: AWS's zone ID where the node carries it, else its zone."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return str(labels.get("topology.k8s.aws/zone-id") or labels.get("topology.kubernetes.io/zone") or "")


def probe_nodes(kube: Kube, nodes: Mapping[str, str], *, namespace: str, tolerations: Sequence[Toleration] = (),
                settings: ProbeSettings = DEFAULTS, timeout_s: float = 300.0, poll_s: float = 2.0,
                logs: Logs | None = None, run: str | None = None, clock: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], None] = time.sleep) -> ClusterProbe:
    """Measure the links between `nodes` (node name -> zone) over the pod network; every pod deleted at the end.
    `logs` reads a client's log (default: the API's pods/log, `api_logs`)."""
    run = run or secrets.token_hex(4)
    logs = logs or api_logs
    names = sorted(nodes)
    plan = make_plan([PlanNode(n, nodes[n]) for n in names], PlanKind.AUTO)
    started_at, start = time.time(), clock()
    deadline = start + timeout_s
    wave = _Wave(kube, namespace, run, settings, tolerations, clock, sleep, poll_s, deadline)
    echoes: list[EchoResult] = []
    throughputs: list[ThroughputResult] = []
    failures: list[Failure] = []
    try:
        index = {n: i for i, n in enumerate(names)}
        peers = wave.start([probe_pods.peer_pod(run, index[n], n, tolerations, settings, namespace) for n in names])
        ready = wave.wait(peers, _running_with_ip)
        address = {probe_pods.node_of(p): str(p["status"]["podIP"]) for p in ready.values()}
        failures += [Failure(probe_pods.node_of(p), why.kind, why.reason) for p, why in wave.failed(peers, ready)]
        for kind, pairs in ((ECHO, plan.echo_pairs), (THROUGHPUT, plan.throughput_pairs)):
            e, t, f = _clients(wave, kind, pairs, address, index, logs)
            echoes += e
            throughputs += t
            failures += f
    finally:
        leftover = wave.cleanup()
    report = RunReport(plan=plan, started_at=started_at, wall_s=clock() - start, echoes=tuple(echoes),
                       throughputs=tuple(throughputs), failures=tuple(failures))
    return ClusterProbe(report, run, wave.count, leftover)


def _clients(wave: _Wave, kind: str, pairs: Sequence[tuple[str, str]], address: Mapping[str, str],
             index: Mapping[str, int], logs: Logs) -> tuple[list[EchoResult], list[ThroughputResult], list[Failure]]:
    """One wave of clients: one pod per source node, its tests in plan order; pairs whose peer has no address are
    failures of that pair (`skipped`)."""
    failures: list[Failure] = []
    tests: dict[str, list[tuple[str, str, list[str]]]] = {}
    for src, dst in pairs:
        if src not in address or dst not in address:
            missing = src if src not in address else dst
            failures.append(Failure(f"{src}->{dst}", FailureKind.SKIPPED, f"{kind}: no peer pod runs on {missing}"))
            continue
        command = (probe_pods.echo_command if kind == ECHO else probe_pods.throughput_command)(address[dst],
                                                                                              wave.settings)
        tests.setdefault(src, []).append((kind, dst, command))
    if not tests:
        return [], [], failures
    made = wave.start([probe_pods.client_pod(wave.run, kind, index[src], src, t, wave.tolerations, wave.settings,
                                             wave.namespace) for src, t in sorted(tests.items())])
    ended = wave.wait(made, _ended)
    echoes: list[EchoResult] = []
    throughputs: list[ThroughputResult] = []
    for name, pod in ended.items():
        src = probe_pods.node_of(pod)
        planned = [(k, dst) for k, dst, _ in tests[src]]
        try:
            text = logs(wave.kube, wave.namespace, pod)
        except Exception as exc:  # any failure to read is this pod's failure, said per pair
            failures += [Failure(f"{src}->{dst}", FailureKind.PROBE, f"{k}: reading {name}'s log: "
                                 f"{type(exc).__name__}") for k, dst in planned]
            continue
        e, t, f = probe_pods.results(src, text, planned)
        echoes += e
        throughputs += t
        failures += f
    for pod, why in wave.failed(made, ended):
        src = probe_pods.node_of(pod)
        failures += [Failure(f"{src}->{dst}", why.kind, f"{k}: {why.reason}") for k, dst, _ in tests[src]]
    return echoes, throughputs, failures


@dataclass(frozen=True, slots=True)
class _Why:
    kind: FailureKind
    reason: str


class _Wave:
    """Creates pods, waits for them, remembers every name it created for the cleanup."""

    def __init__(self, kube: Kube, namespace: str, run: str, settings: ProbeSettings,
                 tolerations: Sequence[Toleration], clock: Callable[[], float], sleep: Callable[[float], None],
                 poll_s: float, deadline: float) -> None:
        self.kube, self.namespace, self.run, self.settings = kube, namespace, run, settings
        self.tolerations, self.clock, self.sleep = tolerations, clock, sleep
        self.poll_s, self.deadline = poll_s, deadline
        self.created: list[str] = []
        self.count = 0
        self.last: dict[str, dict[str, Any]] = {}  # each pod as last seen

    def start(self, manifests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        for m in manifests:
            name = m["metadata"]["name"]
            self.created.append(name)  # before the call: a create whose answer is lost is still cleaned up
            self.kube.request("POST", PODS.path(self.namespace), body=m)
            self.count += 1
        return list(manifests)

    def wait(self, pods: Sequence[dict[str, Any]], done: Callable[[Mapping[str, Any]], bool]) -> dict[str, Any]:
        """The pods that reached `done` before the deadline (or before they got stuck), by name."""
        wanted = {p["metadata"]["name"] for p in pods}
        while True:
            found, _ = self.kube.list_all(PODS.path(self.namespace), label_selector=f"{RUN_LABEL}={self.run}")
            for p in found:
                if p["metadata"]["name"] in wanted:
                    self.last[p["metadata"]["name"]] = p
            reached = {n: self.last[n] for n in wanted if n in self.last and done(self.last[n])}
            open_ = [n for n in wanted if n not in reached and _stuck(self.last.get(n)) is None]
            if not open_ or self.clock() >= self.deadline:
                return reached
            self.sleep(max(0.0, min(self.poll_s, self.deadline - self.clock())))

    def failed(self, pods: Sequence[dict[str, Any]], reached: Mapping[str, Any]) -> list[tuple[dict[str, Any], _Why]]:
        out = []
        for p in pods:
            name = p["metadata"]["name"]
            if name in reached:
                continue
            seen = self.last.get(name)
            stuck = _stuck(seen)
            if stuck is not None:
                out.append((p, _Why(FailureKind.PROBE, f"pod {name} {stuck}")))
            else:
                phase = ((seen or {}).get("status") or {}).get("phase", "not found")
                out.append((p, _Why(FailureKind.DEADLINE, f"pod {name} still {phase} at the probe's deadline")))
        return out

    def cleanup(self) -> tuple[str, ...]:
        """Delete every pod of the run: the names created, then anything else carrying the run's label."""
        left: list[str] = []
        names = list(dict.fromkeys(self.created))
        try:
            found, _ = self.kube.list_all(PODS.path(self.namespace), label_selector=f"{RUN_LABEL}={self.run}")
            names += [p["metadata"]["name"] for p in found if p["metadata"]["name"] not in names]
        except Exception:  # the names created are still deleted below
            pass
        for name in names:
            try:
                self.kube.request("DELETE", f"{PODS.path(self.namespace)}/{name}", body={"gracePeriodSeconds": 0})
            except Exception as exc:  # a pod already gone is deleted; anything else is named
                if getattr(exc, "status", None) != 404:
                    left.append(name)
        return tuple(left)


def _running_with_ip(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and bool(status.get("podIP"))


def _ended(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _stuck(pod: Mapping[str, Any] | None) -> str | None:
    """Why a pod will not start by waiting, from its container status; None while it may."""
    for c in ((pod or {}).get("status") or {}).get("containerStatuses") or []:
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK:
            message = " ".join(str(waiting.get("message") or "").split())[:160]
            return f"{waiting['reason']}" + (f": {message}" if message else "")
    return None


def to_view(report: RunReport, zones: Mapping[str, str], taken_at: float | None = None) -> tuple[NetworkView,
                                                                                              list[Sample]]:
    """The run as the placement reads it (the same aggregation as a run over SSH: probes/aggregate.py), and the
    samples for `Store.add_samples`."""
    node_samples, zone_samples = to_samples(report, zones, time.time() if taken_at is None else taken_at)
    view = NetworkView(zone_links={pair_key(s.a, s.b): s.link for s in zone_samples},
                       node_links={pair_key(s.a, s.b): s.link for s in node_samples})
    return view, [*node_samples, *zone_samples]
