"""The worker clusters: reached through their MultiKueueClusters' kubeconfig Secrets, read in the background.

As Kueue does (pkg/controller/admissionchecks/multikueue/multikueuecluster.go): a MultiKueueCluster's
kubeconfig with locationType Secret is the key `kubeconfig` of the Secret named `location` in Kueue's
namespace. It is checked with Kueue's own rules for kubeconfigs from Secrets (validateKubeconfig: no
tokenFile, no insecure-skip-tls-verify, no certificate file paths, a server URL) plus no exec or auth-provider
plugin, since a Secret must not make the dispatcher run a program. `Path` kubeconfigs and ClusterProfiles are
not followed (the dispatcher does not share Kueue's filesystem); such clusters are left out, saying so.

Each cluster is read (nodes, and the bound pods that hold GPUs: `cluster_inventory.read_cluster`, the code
`geosched submit` uses) every `refresh_s`, on a thread pool, so a slow cluster never holds up a decision; only
a reading in which some object changed (its resourceVersion) counts as new. A failed read keeps the last good
one; a cluster whose last good reading is older than `stale_after_s` is left out of every decision until it
answers again, and the reason says since when.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from geosched.console import redact
from geosched.core.errors import InputError
from geosched.files.gate import parse_yaml
from geosched.kube import kubeconfig
from geosched.kube.client import Json, Kube, Resource, connect_config, describe, status_of
from geosched.kube.cluster_inventory import ClusterReading, read_cluster
from geosched.kube.multikueue.kueue import KUBECONFIG_KEY, kubeconfig_ref

log = logging.getLogger(__name__)
SECRETS = Resource("v1", "Secret", "secrets", True)


@dataclass
class _Worker:
    name: str
    source: tuple[str, str] | None = None  # (secret name, secret resourceVersion) the client was built from
    kube: Kube | None = None
    reading: ClusterReading | None = None
    read_at: float = float("-inf")
    started_at: float = float("-inf")
    error: str = "not read yet"
    seal: int = 0  # fingerprint of the reading: a refresh that changes nothing changes nothing
    pending: Future[ClusterReading] | None = field(default=None, repr=False)


class Workers:
    def __init__(self, manager: Kube, namespace: str, *, refresh_s: float = 30.0, stale_after_s: float = 120.0,
                 timeout_s: float = 20.0, clock: Callable[[], float] = time.monotonic, threads: int = 8) -> None:
        self.manager = manager
        self.namespace = namespace
        self.refresh_s = refresh_s
        self.stale_after_s = stale_after_s
        self.timeout_s = timeout_s
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="worker-read")
        self._workers: dict[str, _Worker] = {}
        self._lock = threading.Lock()
        self.version = 0  # bumped whenever a new reading arrives or a cluster goes or comes

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        for w in self._workers.values():
            if w.kube is not None:
                w.kube.close()

    # ---- keeping readings fresh ----

    def poll(self, clusters: Mapping[str, Json], *, block: bool = False) -> None:
        """Start the reads that are due (connecting anew when a kubeconfig Secret changed) and collect the
        finished ones. `block` waits for the started reads (a single pass, `--once`)."""
        now = self._clock()
        for gone in set(self._workers) - set(clusters):
            worker = self._workers.pop(gone)
            if worker.kube is not None:
                worker.kube.close()
            self.version += 1
        started: list[Future[ClusterReading]] = []
        for name, obj in clusters.items():
            worker = self._workers.setdefault(name, _Worker(name))
            if worker.pending is None and now - worker.started_at >= self.refresh_s:
                future = self._start(worker, obj, now)
                if future is not None:
                    started.append(future)
        if block and started:
            wait(started, timeout=self.timeout_s + 5.0)
        for worker in self._workers.values():
            self._collect(worker)

    def _start(self, worker: _Worker, obj: Json, now: float) -> Future[ClusterReading] | None:
        worker.started_at = now
        try:
            kube = self._connect(worker, obj)
        except InputError as exc:
            worker.error = exc.reason
            return None
        except Exception as exc:  # the manager could not be asked for the Secret: retried next time
            worker.error = f"kubeconfig Secret: {describe(exc)}"
            return None
        worker.pending = self._pool.submit(read_cluster, kube, worker.name)
        return worker.pending

    def _collect(self, worker: _Worker) -> None:
        future = worker.pending
        if future is None or not future.done():
            return
        worker.pending = None
        try:
            reading = future.result()
            worker.read_at = worker.started_at
            worker.error = ""
            seal = fingerprint(reading)
            if seal != worker.seal or worker.reading is None:
                # Only a change rebuilds the placement context (10,000 nodes take a second or two).
                worker.reading, worker.seal = reading, seal
                self.version += 1
        except Exception as exc:  # an unreachable cluster is that cluster's problem, never the dispatcher's
            worker.error = describe(exc)
            if status_of(exc) == 403:
                worker.error += " (MultiKueue's identity there must list nodes and pods: deploy/multikueue/worker)"
            log.warning("worker cluster %s: %s", worker.name, worker.error)

    def _connect(self, worker: _Worker, obj: Json) -> Kube:
        ref = kubeconfig_ref(obj)
        where = f"MultiKueueCluster {worker.name}"
        if ref is None:
            raise InputError(where, "spec", "no kubeconfig Secret (ClusterProfile clusters are not followed)")
        location, kind = ref
        if kind != "Secret":
            raise InputError(where, "spec.kubeConfig.locationType", f"{kind} kubeconfigs are not read (the "
                             "dispatcher does not share Kueue's filesystem); use a Secret")
        secret = self.manager.get(SECRETS.path(self.namespace, location))
        if secret is None:
            raise InputError(f"Secret {self.namespace}/{location}", "", "not found")
        version = str((secret.get("metadata") or {}).get("resourceVersion") or "")
        if worker.kube is not None and worker.source == (location, version):
            return worker.kube
        config = parse_kubeconfig(secret, f"Secret {self.namespace}/{location}")
        if worker.kube is not None:
            worker.kube.close()
        worker.kube = Kube(connect_config(config, f"Secret {self.namespace}/{location}"), worker.name,
                           timeout_s=self.timeout_s)
        worker.source = (location, version)
        return worker.kube

    # ---- what decisions may use ----

    def warming(self) -> bool:
        """Some cluster's first read has not ended yet: deciding now would leave it out for nothing."""
        return any(w.reading is None and (w.pending is not None or w.started_at == float("-inf"))
                   for w in self._workers.values())

    def usable(self) -> tuple[dict[str, ClusterReading], dict[str, str]]:
        """Readings fresh enough to decide on, and why each other cluster is left out."""
        now = self._clock()
        fresh: dict[str, ClusterReading] = {}
        out: dict[str, str] = {}
        for name, w in self._workers.items():
            age = now - w.read_at
            if w.reading is not None and age <= self.stale_after_s:
                fresh[name] = w.reading
            elif w.reading is None:
                out[name] = f"not read yet ({w.error})" if w.error else "not read yet"
            else:
                out[name] = (f"unreachable for {age:.0f}s, longer than its staleness limit of "
                             f"{self.stale_after_s:.0f}s ({w.error})")
        return fresh, out


def fingerprint(reading: ClusterReading) -> int:
    """What the API server says changed: every object's name (uid) and resourceVersion."""
    def seal(objects: tuple[Json, ...], key: str) -> frozenset[tuple[str, str]]:
        return frozenset((str((o.get("metadata") or {}).get(key)), str((o.get("metadata") or {}).get(
            "resourceVersion"))) for o in objects)
    return hash((seal(reading.nodes, "name"), seal(reading.pods, "uid")))


def parse_kubeconfig(secret: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The kubeconfig in a Secret's `kubeconfig` key, refused when it would read local files or run programs."""
    raw = (secret.get("data") or {}).get(KUBECONFIG_KEY)
    if not isinstance(raw, str):
        raise InputError(source, f"data.{KUBECONFIG_KEY}", "missing")
    try:
        config = parse_yaml(base64.b64decode(raw, validate=True).decode("utf-8"), source)  # bounded: no alias bombs
    except (binascii.Error, InputError, ValueError) as exc:
        raise InputError(source, f"data.{KUBECONFIG_KEY}", f"not a kubeconfig: {type(exc).__name__}") from None
    if not isinstance(config, dict):
        raise InputError(source, f"data.{KUBECONFIG_KEY}", "not a kubeconfig (expected a mapping)")
    redact.register(kubeconfig.credentials(config))
    try:
        kubeconfig.check(config, "")
    except InputError as exc:  # the same checks as a file's, named after the Secret's key
        raise InputError(source, f"data.{KUBECONFIG_KEY}: {exc.field}", exc.reason) from None
    for entry in config.get("users") or []:
        user = (entry or {}).get("user") or {}
        for key in ("tokenFile", "client-certificate", "client-key", "exec", "auth-provider"):
            if user.get(key):
                raise InputError(source, f"data.{KUBECONFIG_KEY}", f"user {str((entry or {}).get('name'))!r}: "
                                 f"{key} is not allowed (local files and plugins)")
    for entry in config.get("clusters") or []:
        cluster = (entry or {}).get("cluster") or {}
        if cluster.get("insecure-skip-tls-verify"):
            raise InputError(source, f"data.{KUBECONFIG_KEY}", "insecure-skip-tls-verify is not allowed")
        if cluster.get("certificate-authority"):
            raise InputError(source, f"data.{KUBECONFIG_KEY}", "certificate-authority file paths are not "
                             "allowed, use certificate-authority-data")
        if not cluster.get("server"):
            raise InputError(source, f"data.{KUBECONFIG_KEY}", "a cluster has no server URL")
    return config
