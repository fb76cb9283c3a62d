"""EmulatedCluster: one KubeEmulator served over real HTTP on 127.0.0.1, in its own thread and event loop, with a
synchronous Python API for seeding state, injecting faults and reading the request log.

The official `kubernetes` client is synchronous, so the server cannot share the test's thread. Every call below
runs on the server's loop (`call`), so test-side writes are serialised with HTTP writes and get resourceVersions
and watch events like any other write.
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import aiohttp.web

from .catalog import ResourceSpec, spec_from_crd
from .emulator import KubeEmulator
from .errors import ApiError
from .faults import FaultRule, RequestRecord
from .store import APPLY, MERGE, Obj, Store

T = TypeVar("T")

LOOPBACK = "127.0.0.1"
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")

REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
GPU = "nvidia.com/gpu"
HOSTNAME = "kubernetes.io/hostname"


def node_manifest(name: str, *, region: str, zone: str, instance_type: str | None = None,
                  gpu_product: str | None = None, gpus: int = 0, cpu: str = "96", memory: str = "1Ti",
                  labels: Mapping[str, str] | None = None, unschedulable: bool = False, ready: bool = True,
                  taints: Sequence[Mapping[str, Any]] = (), ephemeral_storage: str = "500Gi") -> Obj:
    """A Node as the kubelet, cloud provider and NVIDIA GPU feature discovery would register it."""
    uid = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{zone}.{name}"))
    node_labels = {HOSTNAME: name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", REGION: region,
                   ZONE: zone}
    if instance_type:
        node_labels[INSTANCE_TYPE] = instance_type
    if gpu_product:
        node_labels[GPU_PRODUCT] = gpu_product
    if gpus:
        node_labels[GPU_COUNT] = str(gpus)
    node_labels.update(labels or {})
    resources = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": ephemeral_storage}
    if gpus:
        resources[GPU] = str(gpus)
    spec: Obj = {"providerID": f"kubeemu://{zone}/{name}"}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    return {
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": node_labels}, "spec": spec,
        "status": {
            "capacity": dict(resources), "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}],
            "addresses": [{"type": "Hostname", "address": name}],
            # Every field: the client's models require them all.
            "nodeInfo": {"architecture": "amd64", "bootID": uid, "containerRuntimeVersion": "containerd://2.0.0",
                         "kernelVersion": "6.8.0", "kubeProxyVersion": "", "kubeletVersion": "v1.33.0",
                         "machineID": uid.replace("-", ""), "operatingSystem": "linux",
                         "osImage": "Ubuntu 24.04 LTS", "systemUUID": uid},
        },
    }


def pod_manifest(name: str, namespace: str = "default", *, node_name: str | None = None,
                 scheduler_name: str | None = None, phase: str | None = None, gpus: int = 0,
                 labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None,
                 image: str = "registry.k8s.io/pause:3.10", scheduling_gates: Sequence[str] = ()) -> Obj:
    container: Obj = {"name": "main", "image": image}
    if gpus:
        container["resources"] = {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus)}}
    spec: Obj = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if scheduling_gates:
        spec["schedulingGates"] = [{"name": g} for g in scheduling_gates]
    metadata: Obj = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    pod: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    if phase:
        pod["status"] = {"phase": phase}
    return pod


class EmulatedCluster:
    """One emulated API server. Use as a context manager, or start()/stop()."""

    def __init__(self, name: str = "cluster-a", *, token: str | None = None, event_window: int = 10_000,
                 namespaces: Sequence[str] = DEFAULT_NAMESPACES, port: int = 0) -> None:
        self.name = name
        self.token = token
        self.event_window = event_window
        self.namespaces = tuple(namespaces)
        self.port = port
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._emulator: KubeEmulator | None = None

    # ---- lifecycle -------------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def emulator(self) -> KubeEmulator:
        if self._emulator is None:
            raise RuntimeError(f"{self.name} is not started")
        return self._emulator

    @property
    def store(self) -> Store:
        return self.emulator.store

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError(f"{self.name} is already started")
        self._thread = threading.Thread(target=self._run, name=f"kubeemu-{self.name}", daemon=True)
        self._thread.start()
        # The first start in a process imports the emulator's catalog in this thread: 9.6 s measured on the shared
        # 2-core machine at load 15-18 (0.02 s once warm), so 10 s made the first test of a run fail at random.
        if not self._ready.wait(60):
            raise RuntimeError(f"{self.name}: the emulator did not start within 60 s")
        if self._startup_error is not None:
            raise RuntimeError(f"{self.name}: the emulator failed to start") from self._startup_error
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None or self._stop is None:
            return
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(15)
        self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as e:
            self._startup_error = e
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        emulator = KubeEmulator(cluster_name=self.name, token=self.token, event_window=self.event_window)
        async with emulator:
            # Not kmock.Server: its aiohttp resolver interception is process-wide and must be exited LIFO, which
            # several servers in several threads cannot promise. A plain aiohttp server is all we need.
            server = aiohttp.web.Server(emulator, handler_cancellation=True)
            runner = aiohttp.web.ServerRunner(server, shutdown_timeout=1.0)
            await runner.setup()
            site = aiohttp.web.TCPSite(runner, LOOPBACK, self.port)
            await site.start()
            self.port = int(runner.addresses[0][1])
            ns_spec, _ = emulator.catalog.parse("v1/namespaces")
            for ns in self.namespaces:
                emulator.store.create(ns_spec, "v1", None, {"metadata": {"name": ns}})
            self._emulator = emulator
            self._ready.set()
            try:
                await self._stop.wait()
            finally:
                emulator.shutdown()
                await runner.cleanup()

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = 10.0, **kwargs: Any) -> T:
        """Run `fn(*args, **kwargs)` on the server's loop thread and return its result (or raise its error)."""
        if self._loop is None or self._emulator is None:
            raise RuntimeError(f"{self.name} is not started")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as e:
                future.set_exception(e)

        self._loop.call_soon_threadsafe(run)
        return future.result(timeout)

    # ---- objects (server-side, no HTTP; same semantics as the API) -------------------------------------------

    def _resolve(self, resource: str) -> tuple[ResourceSpec, str]:
        return self.emulator.catalog.parse(resource)

    def _resolve_obj(self, obj: Mapping[str, Any]) -> tuple[ResourceSpec, str, str | None]:
        spec = self.emulator.catalog.by_kind(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        if spec is None:
            raise KeyError(f"{obj.get('apiVersion')}/{obj.get('kind')} is not served")
        namespace = (obj.get("metadata") or {}).get("namespace") or ("default" if spec.namespaced else None)
        return spec, str(obj["apiVersion"]).rpartition("/")[2], namespace

    def create(self, obj: Mapping[str, Any], *, keep_status: bool = True) -> Obj:
        """Create as a POST would, except that the status given is kept (seeding Running pods, Ready nodes)."""
        spec, version, namespace = self._resolve_obj(obj)
        return self.call(self.store.create, spec, version, namespace, dict(obj), keep_status=keep_status)

    def apply(self, obj: Mapping[str, Any], *, field_manager: str = "kubeemu", force: bool = True) -> Obj:
        spec, version, namespace = self._resolve_obj(obj)
        name = str(obj["metadata"]["name"])
        result, _ = self.call(self.store.patch, spec, version, namespace, name, APPLY, dict(obj),
                              field_manager=field_manager, force=force)
        return result

    def get(self, resource: str, name: str, namespace: str | None = None) -> Obj | None:
        spec, version = self._resolve(resource)
        try:
            return self.call(self.store.get, spec, version, namespace, name)
        except ApiError as e:
            if e.code == 404:
                return None
            raise

    def list(self, resource: str, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> builtins.list[Obj]:
        spec, version = self._resolve(resource)
        listed = self.call(self.store.list_objects, spec, version, namespace, label_selector=label_selector,
                           field_selector=field_selector)
        return list(listed["items"])

    def set_status(self, resource: str, name: str, status: Mapping[str, Any], namespace: str | None = None) -> Obj:
        """Merge `status` into the object's status, as a controller or kubelet would (a merge patch on /status)."""
        spec, version = self._resolve(resource)
        result, _ = self.call(self.store.patch, spec, version, namespace, name, MERGE, {"status": dict(status)},
                              subresource="status" if spec.has_status else None)
        return result

    def delete(self, resource: str, name: str, namespace: str | None = None) -> None:
        spec, version = self._resolve(resource)
        self.call(self.store.delete, spec, version, namespace, name)

    def add_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> Obj:
        return self.create({"apiVersion": "v1", "kind": "Namespace",
                            "metadata": {"name": name, "labels": dict(labels or {})}})

    def add_node(self, name: str, **kw: Any) -> Obj:
        """`node_manifest(name, **kw)` created in this cluster."""
        return self.create(node_manifest(name, **kw))

    def add_pod(self, name: str, namespace: str = "default", **kw: Any) -> Obj:
        """`pod_manifest(name, namespace, **kw)` created in this cluster (status kept: phase=Running works)."""
        return self.create(pod_manifest(name, namespace, **kw))

    def register(self, spec: ResourceSpec) -> None:
        self.call(self.emulator.declare, spec)

    def register_crd(self, crd: Mapping[str, Any]) -> ResourceSpec:
        spec = spec_from_crd(crd)
        self.register(spec)
        return spec

    # ---- faults, log, watches ---------------------------------------------------------------------------------

    def inject(self, status: int | None = None, *, times: int | None = 1, method: str | None = None,
               path: str | re.Pattern[str] | None = None, hang: float = 0.0, retry_after: int | None = None,
               watch: bool | None = None, message: str | None = None) -> FaultRule:
        """Fail the next `times` requests matching method and path (a regex searched in the URL path). 429 sends
        Retry-After: 1 unless `retry_after` says otherwise. `hang` sleeps first; with no status, only sleeps."""
        if status is None and not hang:
            raise ValueError("a fault needs a status, a hang, or both")
        pattern = re.compile(path) if isinstance(path, str) else path
        return self.emulator.faults.add(FaultRule(status, times, method, pattern, hang, retry_after, watch, message))

    def clear_faults(self) -> None:
        self.emulator.faults.clear()

    @property
    def requests(self) -> builtins.list[RequestRecord]:
        return self.emulator.log.snapshot()

    def count(self, method: str | None = None, path: str | re.Pattern[str] | None = None, *,
              watch: bool | None = None, faulted: bool | None = None) -> int:
        return self.emulator.log.count(method, path, watch=watch, faulted=faulted)

    def clear_requests(self) -> None:
        self.emulator.log.clear()

    @property
    def resource_version(self) -> int:
        return self.call(lambda: self.store.rv)

    def watch_count(self, plural: str | None = None) -> int:
        return self.call(lambda: sum(1 for w in self.store.watchers_of(plural) if not w.dropped))

    def wait_for_watches(self, n: int = 1, plural: str | None = None, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while self.watch_count(plural) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: {self.watch_count(plural)} open watches on {plural or 'anything'}, "
                                   f"wanted {n}")
            time.sleep(0.01)  # real sleep: polling the emulator's open watches

    def drop_watches(self, plural: str | None = None) -> int:
        """Close the open watch streams (of one resource plural, or all); returns how many were closed."""
        return self.call(self.emulator.drop_watches, plural)

    def compact(self, upto: int | None = None) -> int:
        """Forget watch history up to `upto` (default: the current resourceVersion); older RVs then get 410."""
        return self.call(self.store.compact, upto)

    def bookmark(self) -> int:
        return self.call(self.emulator.bookmark)

    @property
    def server_errors(self) -> builtins.list[BaseException]:
        return list(self.emulator.server_errors)
