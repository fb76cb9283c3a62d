"""Shared pieces of the live-API tests: seeding emulated clusters, running a scheduler on a thread, waiting.
(A uniquely named module rather than conftest, so another test folder's conftest cannot shadow it.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from geosched.kube import keys
from geosched.kube.client import Kube
from geosched.kube.scheduler import LeaderElection, Scheduler, SchedulerSettings, Stats
from tests.kubeemu import EmulatedCluster, MultiCluster, pod_manifest

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
REGIONS = {"cluster-a": "us-east1", "cluster-b": "europe-west4", "cluster-c": "asia-southeast1"}
# Short enough for tests, in client-go's proportions (15 / 10 / 2).
FAST_LEASE = LeaderElection(namespace="geosched-system", lease_duration_s=2.0, renew_deadline_s=1.4,
                            retry_period_s=0.25)


def wait_until(check: Callable[[], Any], timeout: float = 10.0, every: float = 0.05, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}")
        time.sleep(every)  # real sleep: polling a real API server (or the emulator) between checks


def add_nodes(cluster: EmulatedCluster, region: str, zones: str, per_zone: int, *, gpus: int = 8,
              product: str = H100, prefix: str | None = None, **kw: Any) -> list[str]:
    names = []
    for z in zones:
        for i in range(per_zone):
            name = f"{prefix or cluster.name}-{z}{i}"
            cluster.add_node(name, region=region, zone=f"{region}-{z}", gpus=gpus, gpu_product=product,
                             instance_type="a3-highgpu-8g", **kw)
            names.append(name)
    return names


def one_zone_fleet(clusters: MultiCluster, **kw: Any) -> MultiCluster:
    """Only cluster-b's zone europe-west4-b holds 4 x 8 GPUs in one zone; elsewhere a gang would be split.
    `kw`: the nodes' sizes (`node_manifest`)."""
    add_nodes(clusters["cluster-a"], REGIONS["cluster-a"], "ab", 2, **kw)
    add_nodes(clusters["cluster-b"], REGIONS["cluster-b"], "a", 2, **kw)
    add_nodes(clusters["cluster-b"], REGIONS["cluster-b"], "b", 4, **kw)
    add_nodes(clusters["cluster-c"], REGIONS["cluster-c"], "a", 3, **kw)
    return clusters


def pod_group(cluster: EmulatedCluster, name: str, size: int, *, namespace: str = "default") -> None:
    cluster.create({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                    "metadata": {"name": name, "namespace": namespace}, "spec": {"minMember": size}})


def gang_pod(name: str, group: str, *, gpus: int = 8, namespace: str = "default",
             extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    pod = pod_manifest(name, namespace, scheduler_name="geosched", gpus=gpus,
                       labels={keys.COSCHED_POD_GROUP: group})
    pod["metadata"].update(extra or {})
    return pod


def add_gang(cluster: EmulatedCluster, group: str, size: int, *, gpus: int = 8, pods: int | None = None,
             namespace: str = "default") -> list[str]:
    pod_group(cluster, group, size, namespace=namespace)
    names = [f"{group}-{i}" for i in range(size if pods is None else pods)]
    for name in names:
        cluster.create(gang_pod(name, group, gpus=gpus, namespace=namespace))
    return names


def nodes_of(cluster: EmulatedCluster, pods: list[str], namespace: str = "default") -> dict[str, str | None]:
    out = {}
    for name in pods:
        pod = cluster.get("v1/pods", name, namespace)
        out[name] = (pod or {}).get("spec", {}).get("nodeName")
    return out


def zone_of_node(cluster: EmulatedCluster, node: str) -> str:
    found = cluster.get("v1/nodes", node)
    assert found is not None, node
    return str(found["metadata"]["labels"][keys.ZONE])


def used_gpus(cluster: EmulatedCluster) -> dict[str, int]:
    used: dict[str, int] = {}
    for pod in cluster.list("v1/pods"):
        node = pod["spec"].get("nodeName")
        if node:
            limits = pod["spec"]["containers"][0].get("resources", {}).get("limits", {})
            used[node] = used.get(node, 0) + int(limits.get(keys.GPU, 0))
    return used


def settings(**kw: Any) -> SchedulerSettings:
    base: dict[str, Any] = {"leader_election": FAST_LEASE, "backoff_initial_s": 0.2, "backoff_max_s": 1.0}
    base.update(kw)
    return SchedulerSettings(**base)


class Running:
    """A Scheduler on its own thread, against one context of a MultiCluster."""

    def __init__(self, clusters: MultiCluster, context: str, config: SchedulerSettings, identity: str,
                 release_on_stop: bool = True) -> None:
        self.kube = Kube.open(context, clusters.kubeconfig)
        self.scheduler = Scheduler(self.kube, config, identity=identity)
        self.release_on_stop = release_on_stop
        self.result: Stats | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"scheduler-{identity}", daemon=True)

    def _run(self) -> None:
        try:
            self.result = self.scheduler.run(release_on_stop=self.release_on_stop)
        except BaseException as exc:
            self.error = exc

    @property
    def stats(self) -> Stats:
        return self.scheduler.stats

    def start(self) -> Running:
        self.thread.start()
        return self

    def stop(self) -> Stats:
        self.scheduler.stop.set()
        self.thread.join(15)
        self.kube.close()
        assert not self.thread.is_alive(), "the scheduler did not stop"
        assert self.error is None, self.error
        assert self.result is not None
        return self.result


@contextmanager
def scheduler(clusters: MultiCluster, context: str = "cluster-a", config: SchedulerSettings | None = None, *,
              identity: str = "replica-1") -> Iterator[Running]:
    running = Running(clusters, context, config or settings(), identity).start()
    try:
        yield running
    finally:
        running.stop()
