# The client's models make every field Optional and its API methods declare model bodies (dicts work: pydantic
# validates them), and kubernetes.watch is unannotated; asserting through that would be noise.
# mypy: disable-error-code="no-untyped-call,union-attr,arg-type,index"
"""The Kubernetes API emulator (tests/kubeemu) against the unmodified official `kubernetes` client.

Every client here is built from the generated kubeconfig only (`new_client_from_config(config_file, context)`),
and talks real HTTP to 127.0.0.1. Each test proves one capability geosched relies on.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kmock
import kubernetes
import pydantic
import pytest
import urllib3
from kubernetes.client import ApiClient, CoordinationV1Api, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException

try:
    from tests.kubeemu import EmulatedCluster, MultiCluster, pod_manifest
except ModuleNotFoundError:  # pytest started without the repo root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.kubeemu import EmulatedCluster, MultiCluster, pod_manifest

pytestmark = pytest.mark.integration

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
APPLY = "application/apply-patch+yaml"


# --------------------------------------------------------------------------
# fixtures and helpers
# --------------------------------------------------------------------------


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[MultiCluster]:
    with MultiCluster(3, directory=tmp_path) as mc:
        yield mc
        # An exception inside the emulator must fail the test, not pass for an API error.
        for cluster in mc:
            assert cluster.server_errors == [], cluster.server_errors


@pytest.fixture
def cluster(clusters: MultiCluster) -> EmulatedCluster:
    return clusters["cluster-a"]


@pytest.fixture
def api(clusters: MultiCluster) -> Iterator[ApiClient]:
    client = clusters.api_client("cluster-a")
    yield client
    client.close()


@pytest.fixture
def core(api: ApiClient) -> CoreV1Api:
    return CoreV1Api(api)


@pytest.fixture
def custom(api: ApiClient) -> CustomObjectsApi:
    return CustomObjectsApi(api)


def _pod(name: str, **kw: Any) -> dict[str, Any]:
    return pod_manifest(name, **kw)


def _configmap(name: str, data: dict[str, str], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}}, "data": data}


def _status(fn: Callable[[], object]) -> int:
    with pytest.raises(ApiException) as info:
        fn()
    return int(info.value.status)


class WatchThread:
    """`kubernetes.watch.Watch().stream(...)` consumed on a thread, so the test can write while it watches."""

    def __init__(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.watch = kubernetes.watch.Watch()
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn, args, kwargs), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            for event in self.watch.stream(fn, *args, **kwargs):
                self.events.put(event)
        except Exception as e:
            self.error = e
        finally:
            self.events.put(None)

    def next(self, timeout: float = 5.0) -> dict[str, Any]:
        event = self.events.get(timeout=timeout)
        assert event is not None, f"the watch ended: {self.error!r}"
        return event

    def ended(self, timeout: float = 5.0) -> bool:
        return self.events.get(timeout=timeout) is None

    def stop(self) -> None:
        self.watch.stop()
        self.thread.join(5)


# --------------------------------------------------------------------------
# 3 clusters, one kubeconfig
# --------------------------------------------------------------------------


def test_one_kubeconfig_names_every_cluster_and_each_context_reaches_only_its_own(clusters: MultiCluster) -> None:
    contexts, current = kubernetes.config.list_kube_config_contexts(config_file=str(clusters.kubeconfig))
    assert [c["name"] for c in contexts] == ["cluster-a", "cluster-b", "cluster-c"]
    assert current["name"] == "cluster-a"

    regions = {"cluster-a": "us-east1", "cluster-b": "europe-west4", "cluster-c": "asia-southeast1"}
    for name, region in regions.items():
        clusters[name].add_node(f"{name}-gpu-0", region=region, zone=f"{region}-a", gpus=8, gpu_product=H100,
                                instance_type="a3-highgpu-8g")

    for name, region in regions.items():
        with clusters.api_client(name) as client:
            nodes = CoreV1Api(client).list_node().items
        assert [n.metadata.name for n in nodes] == [f"{name}-gpu-0"]
        assert nodes[0].metadata.labels["topology.kubernetes.io/region"] == region
        # The kubeconfig's per-cluster token went to that cluster and nowhere else.
        assert {r.token for r in clusters[name].requests} == {clusters[name].token}

    # cluster-a's credentials at cluster-b's address are refused, not served.
    request = urllib.request.Request(f"{clusters['cluster-b'].url}/api/v1/nodes",
                                     headers={"Authorization": f"Bearer {clusters['cluster-a'].token}"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 401


# --------------------------------------------------------------------------
# CRUD and selectors
# --------------------------------------------------------------------------


def test_nodes_filtered_by_topology_and_gpu_labels(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    cluster.add_node("h100-a", region="us-east1", zone="us-east1-b", instance_type="a3-highgpu-8g",
                     gpu_product=H100, gpus=8)
    cluster.add_node("h100-b", region="us-east1", zone="us-east1-c", instance_type="a3-highgpu-8g",
                     gpu_product=H100, gpus=8, unschedulable=True)
    cluster.add_node("a100-a", region="us-central1", zone="us-central1-a", instance_type="a2-ultragpu-8g",
                     gpu_product=A100, gpus=8)
    cluster.add_node("cpu-a", region="us-central1", zone="us-central1-a", instance_type="n2-standard-32")

    def names(**kw: Any) -> list[str]:
        return [str(n.metadata.name) for n in core.list_node(**kw).items]

    assert names(label_selector=f"nvidia.com/gpu.product={H100}") == ["h100-a", "h100-b"]
    assert names(label_selector="topology.kubernetes.io/region=us-central1,nvidia.com/gpu.product") == ["a100-a"]
    assert names(label_selector="!nvidia.com/gpu.product") == ["cpu-a"]
    assert names(label_selector="topology.kubernetes.io/zone in (us-east1-c,us-central1-a)") == [
        "a100-a", "cpu-a", "h100-b"]
    assert names(label_selector=f"nvidia.com/gpu.product notin ({H100})") == ["a100-a", "cpu-a"]
    assert names(label_selector="nvidia.com/gpu.count>4,topology.kubernetes.io/region!=us-central1") == [
        "h100-a", "h100-b"]
    assert names(field_selector="spec.unschedulable!=true") == ["a100-a", "cpu-a", "h100-a"]
    assert names(field_selector="metadata.name=cpu-a") == ["cpu-a"]

    node = core.read_node("h100-a")
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.metadata.labels["node.kubernetes.io/instance-type"] == "a3-highgpu-8g"
    assert node.metadata.resource_version and node.metadata.uid

    assert _status(lambda: core.list_node(label_selector="bad key!")) == 400
    assert _status(lambda: core.list_node(field_selector="status.phase=Running")) == 400  # not a node field
    assert _status(lambda: core.read_node("nope")) == 404


def test_pods_by_scheduler_node_and_phase_and_status_writes(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    cluster.add_node("n1", region="us-east1", zone="us-east1-b", gpus=8, gpu_product=H100)
    core.create_namespaced_pod("default", _pod("gang-0", scheduler_name="geosched", labels={"gang": "g1"}))
    core.create_namespaced_pod("default", _pod("gang-1", scheduler_name="geosched", labels={"gang": "g1"},
                                               gpus=8))
    core.create_namespaced_pod("default", _pod("other", labels={"gang": "g2"}))
    cluster.add_pod("running", node_name="n1", phase="Running", scheduler_name="geosched")

    def names(**kw: Any) -> list[str]:
        return [str(p.metadata.name) for p in core.list_namespaced_pod("default", **kw).items]

    # The query an in-cluster scheduler runs: its own pods, not yet bound.
    assert names(field_selector="spec.schedulerName=geosched,spec.nodeName=") == ["gang-0", "gang-1"]
    assert names(field_selector="spec.nodeName=n1") == ["running"]
    assert names(field_selector="status.phase=Pending", label_selector="gang=g1") == ["gang-0", "gang-1"]
    assert names(field_selector="status.phase!=Pending") == ["running"]
    assert [p.metadata.name for p in core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1").items] == [
        "running"]
    assert core.read_namespaced_pod("other", "default").spec.scheduler_name == "default-scheduler"  # defaulted
    assert _status(lambda: core.list_namespaced_pod("default", field_selector="spec.containers=x")) == 400

    # Status goes through the status subresource; a status in a create or a spec write is ignored.
    created = core.create_namespaced_pod("default", _pod("sneaky", phase="Running"))
    assert created.status.phase == "Pending"
    pod = core.read_namespaced_pod("gang-0", "default")
    pod.status.phase = "Running"
    replaced = core.replace_namespaced_pod_status("gang-0", "default", pod)
    assert replaced.status.phase == "Running"
    assert int(replaced.metadata.resource_version) > int(pod.metadata.resource_version)
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}
    core.patch_namespaced_pod_status("gang-1", "default", {"status": {"conditions": [condition]}})
    core.patch_namespaced_pod_status("gang-1", "default", {"status": {"conditions": [
        {"type": "Ready", "status": "False"}]}})
    conditions = {c.type: c.status for c in core.read_namespaced_pod("gang-1", "default").status.conditions}
    assert conditions == {"PodScheduled": "False", "Ready": "False"}  # strategic merge keyed on type

    # Pod spec is immutable apart from images and a few fields: nodeName is set through binding only.
    assert _status(lambda: core.patch_namespaced_pod("gang-1", "default", {"spec": {"nodeName": "n1"}})) == 422
    patched = core.patch_namespaced_pod("gang-1", "default", {"metadata": {"labels": {"placed": "no"}}})
    assert patched.metadata.labels == {"gang": "g1", "placed": "no"}


def test_namespaces_and_configmaps_crud(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    assert {n.metadata.name for n in core.list_namespace().items} >= {"default", "kube-system"}
    assert _status(lambda: core.create_namespaced_config_map("team-a", _configmap("x", {}))) == 404  # no namespace
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert core.read_namespace("team-a").status.phase == "Active"

    created = core.create_namespaced_config_map("team-a", _configmap("placement", {"zone": "a"}, {"app": "gs"}))
    assert created.metadata.namespace == "team-a" and created.metadata.creation_timestamp is not None
    assert _status(lambda: core.create_namespaced_config_map("team-a", _configmap("placement", {}))) == 409
    assert _status(lambda: core.create_namespaced_config_map("team-a", _configmap("Bad_Name", {}))) == 422

    cm = core.read_namespaced_config_map("placement", "team-a")
    cm.data["zone"] = "b"
    replaced = core.replace_namespaced_config_map("placement", "team-a", cm)
    assert replaced.data == {"zone": "b"}
    merged = core.patch_namespaced_config_map("placement", "team-a", {"data": {"region": "r1", "zone": None}})
    assert merged.data == {"region": "r1"}
    json_patched = core.patch_namespaced_config_map(
        "placement", "team-a", [{"op": "add", "path": "/data/gpus", "value": "8"}])
    assert json_patched.data == {"region": "r1", "gpus": "8"}
    assert [c.metadata.name for c in core.list_namespaced_config_map("team-a", label_selector="app=gs").items] == [
        "placement"]

    # kmock's object array keeps every stored version for assertions: create, replace, 2 patches.
    history = cluster.emulator.objects["v1/configmaps", "team-a", "placement"].history
    assert [dict(v or {}).get("data") for v in history] == [
        {"zone": "a"}, {"zone": "b"}, {"region": "r1"}, {"region": "r1", "gpus": "8"}]

    core.delete_namespaced_config_map("placement", "team-a")
    assert _status(lambda: core.read_namespaced_config_map("placement", "team-a")) == 404

    dry = core.create_namespaced_config_map("team-a", _configmap("dry", {}), dry_run="All")
    assert dry.metadata.name == "dry"
    assert _status(lambda: core.read_namespaced_config_map("dry", "team-a")) == 404
    generated = core.create_namespaced_config_map("team-a", {"metadata": {"generateName": "gang-"}, "data": {}})
    assert generated.metadata.name.startswith("gang-") and len(generated.metadata.name) == len("gang-") + 5
    core.delete_collection_namespaced_config_map("team-a", label_selector="!app")
    assert core.list_namespaced_config_map("team-a").items == []
    core.create_namespaced_config_map("team-a", _configmap("leftover", {}))
    core.delete_namespace("team-a")
    assert _status(lambda: core.read_namespaced_config_map("leftover", "team-a")) == 404


def test_list_pages_with_limit_and_continue(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    for i in range(7):
        cluster.add_pod(f"p{i}")
    first = core.list_namespaced_pod("default", limit=3)
    assert [p.metadata.name for p in first.items] == ["p0", "p1", "p2"]
    assert first.metadata.remaining_item_count == 4
    second = core.list_namespaced_pod("default", limit=3, _continue=first.metadata._continue)
    third = core.list_namespaced_pod("default", limit=3, _continue=second.metadata._continue)
    assert [p.metadata.name for p in second.items + third.items] == ["p3", "p4", "p5", "p6"]
    assert third.metadata._continue is None
    # A continue token from before a compaction has expired, as after etcd compaction.
    cluster.add_pod("p7")
    cluster.compact()
    assert _status(lambda: core.list_namespaced_pod("default", limit=3, _continue=first.metadata._continue)) == 410


def test_finalizers_hold_deletion_until_removed(core: CoreV1Api) -> None:
    cm = _configmap("held", {})
    cm["metadata"]["finalizers"] = ["geosched.io/cleanup"]
    core.create_namespaced_config_map("default", cm)
    core.delete_namespaced_config_map("held", "default")
    still = core.read_namespaced_config_map("held", "default")
    assert still.metadata.deletion_timestamp is not None
    core.patch_namespaced_config_map("held", "default", {"metadata": {"finalizers": None}})
    assert _status(lambda: core.read_namespaced_config_map("held", "default")) == 404


# --------------------------------------------------------------------------
# resourceVersion, optimistic concurrency, leases
# --------------------------------------------------------------------------


def test_resource_version_moves_on_every_write_and_stale_writes_conflict(cluster: EmulatedCluster,
                                                                        core: CoreV1Api) -> None:
    a = core.create_namespaced_config_map("default", _configmap("cm", {"k": "1"}))
    b = core.patch_namespaced_config_map("cm", "default", {"data": {"k": "2"}})
    assert int(b.metadata.resource_version) == int(a.metadata.resource_version) + 1
    assert core.list_namespaced_config_map("default").metadata.resource_version == b.metadata.resource_version
    assert cluster.resource_version == int(b.metadata.resource_version)

    # A write that changes nothing is not a write.
    same = core.patch_namespaced_config_map("cm", "default", {"data": {"k": "2"}})
    assert same.metadata.resource_version == b.metadata.resource_version

    stale = a  # still carries the first resourceVersion
    stale.data = {"k": "stale"}
    assert _status(lambda: core.replace_namespaced_config_map("cm", "default", stale)) == 409
    stale_patch = {"metadata": {"resourceVersion": a.metadata.resource_version}, "data": {"k": "3"}}
    assert _status(lambda: core.patch_namespaced_config_map("cm", "default", stale_patch)) == 409
    precondition = {"preconditions": {"resourceVersion": a.metadata.resource_version}}
    assert _status(lambda: core.delete_namespaced_config_map("cm", "default", body=precondition)) == 409
    assert core.read_namespaced_config_map("cm", "default").data == {"k": "2"}


def test_lease_leader_election_conflicts(clusters: MultiCluster, api: ApiClient) -> None:
    leases = CoordinationV1Api(api)
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "geosched-scheduler", "namespace": "kube-system"},
             "spec": {"holderIdentity": "replica-1", "leaseDurationSeconds": 15}}
    leases.create_namespaced_lease("kube-system", lease)
    assert _status(lambda: leases.create_namespaced_lease("kube-system", lease)) == 409

    # Two replicas read the same version; the first renewal wins, the second is a 409.
    seen_by_1 = leases.read_namespaced_lease("geosched-scheduler", "kube-system")
    seen_by_2 = leases.read_namespaced_lease("geosched-scheduler", "kube-system")
    seen_by_1.spec.lease_transitions = 1
    renewed = leases.replace_namespaced_lease("geosched-scheduler", "kube-system", seen_by_1)
    assert int(renewed.metadata.resource_version) > int(seen_by_1.metadata.resource_version)
    seen_by_2.spec.holder_identity = "replica-2"
    with pytest.raises(ApiException) as info:
        leases.replace_namespaced_lease("geosched-scheduler", "kube-system", seen_by_2)
    assert info.value.status == 409
    assert "the object has been modified" in str(info.value.body)

    # Leases refuse unconditional updates (422) and may be created by PUT (201), as in the API server.
    blind = leases.read_namespaced_lease("geosched-scheduler", "kube-system")
    blind.metadata.resource_version = None
    assert _status(lambda: leases.replace_namespaced_lease("geosched-scheduler", "kube-system", blind)) == 422
    lease["metadata"]["name"] = "created-by-put"
    leases.replace_namespaced_lease("created-by-put", "kube-system", kubernetes.client.V1Lease.from_dict(lease))
    assert clusters["cluster-a"].requests[-1].status == 201


# --------------------------------------------------------------------------
# pods/binding
# --------------------------------------------------------------------------


def test_binding_sets_node_name_and_double_binding_is_a_conflict(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    cluster.add_node("n1", region="us-east1", zone="us-east1-b", gpus=8, gpu_product=H100)
    core.create_namespaced_pod("default", _pod("worker-0", scheduler_name="geosched"))
    binding = {"apiVersion": "v1", "kind": "Binding",
               "metadata": {"name": "worker-0", "annotations": {"geosched.io/placement": "p-1"}},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}

    # The API server answers a binding with a Status, which the client cannot read as the V1Binding it declares
    # (kubernetes-client/python#547): bind with _preload_content=False, as against a real cluster.
    response: Any = core.create_namespaced_pod_binding("worker-0", "default", binding, _preload_content=False)
    assert response.status == 201
    pod = core.read_namespaced_pod("worker-0", "default")
    assert pod.spec.node_name == "n1"
    assert pod.metadata.annotations == {"geosched.io/placement": "p-1"}
    assert [(c.type, c.status) for c in pod.status.conditions] == [("PodScheduled", "True")]

    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod_binding("worker-0", "default", binding, _preload_content=False)
    assert info.value.status == 409
    assert 'pod worker-0 is already assigned to node \\"n1\\"' in str(info.value.body)

    # The default call does bind, then fails to parse the answer.
    core.create_namespaced_pod("default", _pod("worker-1", scheduler_name="geosched"))
    binding["metadata"] = {"name": "worker-1"}
    with pytest.raises(pydantic.ValidationError):
        core.create_namespaced_pod_binding("worker-1", "default", binding)
    assert core.read_namespaced_pod("worker-1", "default").spec.node_name == "n1"

    binding["metadata"] = {"name": "gone"}
    assert _status(lambda: core.create_namespaced_pod_binding("gone", "default", binding,
                                                              _preload_content=False)) == 404
    assert _status(lambda: core.create_namespaced_pod_binding("worker-0", "default", binding,
                                                              _preload_content=False)) == 400  # name mismatch
    core.create_namespaced_pod("default", _pod("gated", scheduling_gates=["geosched.io/quota"]))
    binding["metadata"] = {"name": "gated"}
    assert _status(lambda: core.create_namespaced_pod_binding("gated", "default", binding,
                                                              _preload_content=False)) == 409
    # The legacy collection endpoint does the same.
    core.create_namespaced_pod("default", _pod("worker-2"))
    binding["metadata"] = {"name": "worker-2"}
    core.create_namespaced_binding("default", binding, _preload_content=False)
    assert core.read_namespaced_pod("worker-2", "default").spec.node_name == "n1"


# --------------------------------------------------------------------------
# server-side apply
# --------------------------------------------------------------------------


def test_server_side_apply_create_merge_remove_and_conflict(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    def apply(body: dict[str, Any], manager: str = "geosched", force: bool | None = None) -> Any:
        return core.patch_namespaced_config_map("plan", "default", body, field_manager=manager, force=force,
                                                _content_type=APPLY)

    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plan", "labels": {"owner": "gs"}},
              "data": {"zone": "us-east1-b", "gpus": "16"}}
    created = apply(config)
    assert cluster.requests[-1].status == 201 and created.data == {"zone": "us-east1-b", "gpus": "16"}
    assert created.metadata.managed_fields[0].manager == "geosched"
    assert created.metadata.managed_fields[0].operation == "Apply"

    again = apply(config)  # idempotent: same object, same resourceVersion
    assert again.metadata.resource_version == created.metadata.resource_version

    core.patch_namespaced_config_map("plan", "default", {"data": {"note": "by hand"}})  # not an applier
    updated = apply({**config, "data": {"zone": "us-east1-c"}})
    assert updated.data == {"zone": "us-east1-c", "note": "by hand"}  # gpus was dropped by its manager

    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plan"}, "data": {"zone": "eu-west4-a"}}
    with pytest.raises(ApiException) as info:
        apply(other, manager="karmada")
    assert info.value.status == 409 and 'conflict with \\"geosched\\": .data.zone' in str(info.value.body)
    forced = apply(other, manager="karmada", force=True)
    assert forced.data["zone"] == "eu-west4-a"
    assert {m.manager for m in forced.metadata.managed_fields} == {"geosched", "karmada"}

    assert _status(lambda: core.patch_namespaced_config_map("plan", "default", config, _content_type=APPLY)) == 400
    # POST of an existing name is a 409, whoever applied it.
    assert _status(lambda: core.create_namespaced_config_map("default", config)) == 409


def test_server_side_apply_stamps_the_appliers_time_when_it_changed_something(core: CoreV1Api) -> None:
    # As the server's managedFieldsUpdater.Apply: the applier's entry gets a new time when the apply changed the
    # object, keeps it on a no-op, and a manager whose field was forced away keeps its own time.
    def apply(data: dict[str, str], manager: str = "geosched", force: bool | None = None) -> Any:
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "round"}, "data": data}
        return core.patch_namespaced_config_map("round", "default", body, field_manager=manager, force=force,
                                                _content_type=APPLY)

    def times(obj: Any) -> dict[str, Any]:
        return {m.manager: m.time for m in obj.metadata.managed_fields}

    apply({"kueue": "a", "queue": "q"}, manager="kueue")
    first = apply({"names": "w1"})
    time.sleep(1.05)  # the server records whole seconds
    assert times(apply({"names": "w1"})) == times(first)  # no-op
    second = apply({"names": "w1,w2"})  # the same field, a new value
    assert times(second)["geosched"] > times(first)["geosched"]
    assert times(second)["kueue"] == times(first)["kueue"]
    time.sleep(1.05)  # real sleep: the server records whole seconds
    forced = apply({"names": "w1,w2", "kueue": "b"}, force=True)
    assert times(forced)["kueue"] == times(first)["kueue"] and times(forced)["geosched"] > times(second)["geosched"]


def test_server_side_apply_of_a_custom_resource(custom: CustomObjectsApi) -> None:
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "train", "namespace": "default"},
              "spec": {"replicatedJobs": [{"name": "workers", "replicas": 4}]}}
    args = ("jobset.x-k8s.io", "v1alpha2", "default", "jobsets", "train")
    # An apply that creates answers 201, which CustomObjectsApi's patch does not declare (only 200): the client
    # returns None, as it does against a real API server. Read the object back instead.
    assert custom.patch_namespaced_custom_object(*args, jobset, field_manager="geosched", _content_type=APPLY) is None
    first = custom.get_namespaced_custom_object(*args)
    jobset["spec"]["suspend"] = True
    second = custom.patch_namespaced_custom_object(*args, jobset, field_manager="geosched", _content_type=APPLY)
    assert first["metadata"]["generation"] == 1 and second["metadata"]["generation"] == 2
    assert second["spec"] == {"replicatedJobs": [{"name": "workers", "replicas": 4}], "suspend": True}


# --------------------------------------------------------------------------
# custom resources through CustomObjectsApi
# --------------------------------------------------------------------------

CUSTOM_RESOURCES = [
    ("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True),
    ("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", True),
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", True),
    ("kueue.x-k8s.io", "v1beta1", "topologies", "Topology", False),
    ("kueue.x-k8s.io", "v1beta1", "resourceflavors", "ResourceFlavor", False),
    ("kueue.x-k8s.io", "v1beta1", "localqueues", "LocalQueue", True),
    ("kueue.x-k8s.io", "v1beta1", "clusterqueues", "ClusterQueue", False),
    ("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", True),
    ("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True),
    ("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True),
    ("networktopology.diktyo.x-k8s.io", "v1alpha1", "networktopologies", "NetworkTopology", True),
    ("policy.karmada.io", "v1alpha1", "propagationpolicies", "PropagationPolicy", True),
]


@pytest.mark.parametrize(("group", "version", "plural", "kind", "namespaced"), CUSTOM_RESOURCES,
                         ids=[f"{p}.{g}" for g, _v, p, _k, _n in CUSTOM_RESOURCES])
def test_custom_resource_crud(custom: CustomObjectsApi, group: str, version: str, plural: str, kind: str,
                              namespaced: bool) -> None:
    body = {"apiVersion": f"{group}/{version}", "kind": kind,
            "metadata": {"name": "geo-1", "labels": {"geosched.io/gang": "g1"}}, "spec": {"minMember": 4}}
    ns_args: tuple[str, ...] = ("default",) if namespaced else ()

    def call(verb: str, *args: Any, **kw: Any) -> Any:
        scope = "namespaced" if namespaced else "cluster"
        verb, _, suffix = verb.partition("_")
        method = f"{verb}_{scope}_custom_object" + (f"_{suffix}" if suffix else "")
        return getattr(custom, method)(group, version, *ns_args, plural, *args, **kw)

    created = call("create", body)
    assert created["metadata"]["uid"] and created["metadata"]["resourceVersion"]
    assert ("namespace" in created["metadata"]) == namespaced
    assert _status(lambda: call("create", body)) == 409
    assert call("get", "geo-1")["spec"] == {"minMember": 4}
    assert [o["metadata"]["name"] for o in call("list", label_selector="geosched.io/gang=g1")["items"]] == ["geo-1"]
    assert call("list", label_selector="geosched.io/gang=g2")["items"] == []

    patched = call("patch", "geo-1", {"spec": {"minMember": 8}})  # merge patch: the client's default for CRs
    assert patched["spec"] == {"minMember": 8}
    # Custom resources do not speak strategic merge patch.
    assert _status(lambda: call("patch", "geo-1", {"spec": {}},
                                _content_type="application/strategic-merge-patch+json")) == 415

    has_status = plural not in {"topologies", "resourceflavors", "podgroups", "networktopologies",
                                "propagationpolicies"} or group == "scheduling.x-k8s.io"
    if has_status:
        with_status = call("patch_status", "geo-1", {"status": {"phase": "Admitted"}})
        assert with_status["status"] == {"phase": "Admitted"}
        assert with_status["metadata"]["generation"] == patched["metadata"]["generation"]  # status: no bump
        ignored = call("patch", "geo-1", {"status": {"phase": "Hacked"}})
        assert ignored["status"] == {"phase": "Admitted"}

    stale = {**call("get", "geo-1"), "spec": {"minMember": 1}}
    call("replace", "geo-1", stale)
    assert _status(lambda: call("replace", "geo-1", stale)) == 409  # stale resourceVersion now
    call("delete", "geo-1")
    assert _status(lambda: call("get", "geo-1")) == 404


def test_kueue_objects_are_shared_between_served_versions(custom: CustomObjectsApi) -> None:
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "gpu"}, "spec": {}})
    as_v1beta2 = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "gpu")
    assert as_v1beta2["apiVersion"] == "kueue.x-k8s.io/v1beta2"


def test_discovery_and_dynamic_client(api: ApiClient, custom: CustomObjectsApi) -> None:
    groups = {g.name: g for g in kubernetes.client.ApisApi(api).get_api_versions().groups}
    assert {"jobset.x-k8s.io", "kueue.x-k8s.io", "coordination.k8s.io", "policy.karmada.io"} <= set(groups)
    assert groups["kueue.x-k8s.io"].preferred_version.version == "v1beta2"

    dynamic = kubernetes.dynamic.DynamicClient(api)
    workloads = dynamic.resources.get(api_version="kueue.x-k8s.io/v1beta2", kind="Workload")
    assert workloads.namespaced
    workloads.create(namespace="default", body={"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                                                "metadata": {"name": "w1"}, "spec": {}})
    assert [w.metadata.name for w in workloads.get(namespace="default").items] == ["w1"]


def test_a_crd_created_through_the_api_is_served(api: ApiClient, custom: CustomObjectsApi) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gangs.geosched.io"},
           "spec": {"group": "geosched.io", "scope": "Namespaced",
                    "names": {"plural": "gangs", "singular": "gang", "kind": "Gang"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object"}},
                                  "subresources": {"status": {}}}]}}
    created = kubernetes.client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    assert {c.type for c in created.status.conditions} == {"NamesAccepted", "Established"}
    custom.create_namespaced_custom_object("geosched.io", "v1", "default", "gangs", {
        "apiVersion": "geosched.io/v1", "kind": "Gang", "metadata": {"name": "g1"}, "spec": {"size": 4}})
    assert custom.get_namespaced_custom_object("geosched.io", "v1", "default", "gangs", "g1")["spec"] == {"size": 4}


# --------------------------------------------------------------------------
# watches
# --------------------------------------------------------------------------


def test_watch_streams_added_modified_deleted_with_selectors(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    watch = WatchThread(core.list_namespaced_pod, "default", label_selector="gang=g1")
    try:
        cluster.wait_for_watches(1, "pods")
        core.create_namespaced_pod("default", _pod("p1", labels={"gang": "g1"}))
        core.create_namespaced_pod("default", _pod("noise", labels={"gang": "g2"}))
        core.patch_namespaced_pod("p1", "default", {"metadata": {"annotations": {"a": "1"}}})
        core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"gang": "g9"}}})  # leaves the selector
        core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"gang": "g1"}}})  # comes back
        core.delete_namespaced_pod("p1", "default")
        events = [watch.next() for _ in range(5)]
    finally:
        watch.stop()
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p1"), ("ADDED", "p1"), ("DELETED", "p1")]
    versions = [int(e["object"].metadata.resource_version) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == 5


def test_watch_from_a_resource_version_replays_what_followed(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    cluster.add_pod("before")
    since = core.list_namespaced_pod("default").metadata.resource_version
    core.create_namespaced_pod("default", _pod("after"))
    core.delete_namespaced_pod("before", "default")
    w = kubernetes.watch.Watch()
    events = [(e["type"], e["object"].metadata.name)
              for e in w.stream(core.list_namespaced_pod, "default", resource_version=since, timeout_seconds=1)]
    assert events == [("ADDED", "after"), ("DELETED", "before")]
    # Without a resourceVersion a watch starts with the current state as ADDED events.
    w = kubernetes.watch.Watch()
    assert [(e["type"], e["object"].metadata.name)
            for e in w.stream(core.list_namespaced_pod, "default", timeout_seconds=1)] == [("ADDED", "after")]


def test_a_dropped_watch_is_resumed_by_the_client_from_its_last_resource_version(cluster: EmulatedCluster,
                                                                                core: CoreV1Api) -> None:
    watch = WatchThread(core.list_namespaced_pod, "default")
    try:
        cluster.wait_for_watches(1, "pods")
        core.create_namespaced_pod("default", _pod("p1"))
        first = watch.next()
        assert cluster.drop_watches("pods") == 1
        cluster.wait_for_watches(1, "pods")  # the client reconnected on its own
        core.create_namespaced_pod("default", _pod("p2"))
        second = watch.next()
    finally:
        watch.stop()
    assert (first["type"], first["object"].metadata.name) == ("ADDED", "p1")
    assert (second["type"], second["object"].metadata.name) == ("ADDED", "p2")  # p1 not replayed
    watches = [r for r in cluster.requests if r.watch]
    assert len(watches) == 2
    assert "resourceVersion" not in watches[0].query
    assert watches[1].query["resourceVersion"] == first["object"].metadata.resource_version


def test_a_dropped_watch_ends_a_stream_that_has_timeout_seconds(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    watch = WatchThread(core.list_namespaced_pod, "default", timeout_seconds=30)
    cluster.wait_for_watches(1, "pods")
    started = time.monotonic()
    cluster.drop_watches()
    assert watch.ended() and watch.error is None
    assert time.monotonic() - started < 5


def test_bookmarks_move_the_clients_resource_version(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    watch = WatchThread(core.list_namespaced_pod, "default", allow_watch_bookmarks=True)
    try:
        cluster.wait_for_watches(1, "pods")
        cluster.add_namespace("elsewhere")  # moves the resourceVersion without touching pods in "default"
        assert cluster.bookmark() == 1
        event = watch.next()
    finally:
        watch.stop()
    assert event["type"] == "BOOKMARK"
    assert watch.watch.resource_version == str(cluster.resource_version)


def test_a_too_old_resource_version_is_410_gone(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    cluster.add_pod("p1")
    old = core.list_namespaced_pod("default").metadata.resource_version
    cluster.add_pod("p2")
    cluster.compact()
    with pytest.raises(ApiException) as info:
        list(kubernetes.watch.Watch().stream(core.list_namespaced_pod, "default", resource_version=old,
                                             timeout_seconds=5))
    assert info.value.status == 410
    assert "too old resource version" in str(info.value.reason)
    # Without timeout_seconds the client retries once on 410, then gives up the same way.
    cluster.clear_requests()
    with pytest.raises(ApiException) as info:
        list(kubernetes.watch.Watch().stream(core.list_namespaced_pod, "default", resource_version=old))
    assert info.value.status == 410
    assert cluster.count("GET", watch=True) == 2
    # A fresh resourceVersion still watches fine.
    fresh = core.list_namespaced_pod("default").metadata.resource_version
    assert list(kubernetes.watch.Watch().stream(core.list_namespaced_pod, "default", resource_version=fresh,
                                                timeout_seconds=1)) == []


# --------------------------------------------------------------------------
# fault injection
# --------------------------------------------------------------------------


@pytest.mark.parametrize("status", [409, 429, 500, 503])
def test_injected_errors_surface_as_api_exceptions(cluster: EmulatedCluster, core: CoreV1Api, status: int) -> None:
    cluster.inject(status, method="POST", path=r"/pods$")
    with pytest.raises(ApiException) as info:
        core.create_namespaced_pod("default", _pod("p1"))
    assert info.value.status == status
    if status == 429:
        assert info.value.headers["Retry-After"] == "1"
    # One-shot: the next call goes through and nothing was written by the failed one.
    assert core.create_namespaced_pod("default", _pod("p1")).metadata.name == "p1"
    assert cluster.count("POST", r"/pods$") == 2 and cluster.count(faulted=True) == 1


def test_urllib3_retries_reads_that_carry_retry_after(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    # urllib3's default Retry(3) honours Retry-After on 413/429/503 for idempotent methods: the client never
    # sees one such answer to a GET...
    cluster.inject(429, method="GET", path=r"/nodes$", retry_after=0)
    assert core.list_node().items == []
    assert cluster.count("GET", r"/nodes$") == 2
    # ...and it gives up after three retries, handing the fourth answer to the client as an ApiException.
    cluster.clear_requests()
    cluster.inject(503, method="GET", path=r"/nodes$", retry_after=0, times=4)
    assert _status(core.list_node) == 503
    assert cluster.count("GET", r"/nodes$") == 4
    # Without Retry-After there is no retry: a 503 or 500 surfaces at once.
    cluster.inject(503, method="GET", path=r"/nodes$")
    assert _status(core.list_node) == 503
    cluster.inject(500, method="GET", path=r"/nodes$", times=None)
    assert _status(core.list_node) == 500
    assert _status(core.list_node) == 500
    cluster.clear_faults()
    assert core.list_node().items == []


def test_hanging_requests_time_out_in_the_client(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    cluster.inject(hang=3, method="POST", path=r"/configmaps$")
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.create_namespaced_config_map("default", _configmap("slow", {}), _request_timeout=0.5)
    assert time.monotonic() - started < 2
    # A hung GET is retried by urllib3 (read errors on idempotent methods), so one hang costs only latency.
    cluster.inject(hang=3, method="GET", path=r"/configmaps$")
    assert core.list_namespaced_config_map("default", _request_timeout=0.5).items == []
    assert cluster.count("GET", r"/configmaps$") == 2
    # A hang with a status answers late with that status.
    cluster.inject(504, hang=0.2, method="GET")
    assert _status(lambda: core.read_namespace("default")) == 504


def test_a_failing_watch_request_raises(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    cluster.inject(500, watch=True)
    with pytest.raises(ApiException) as info:
        list(kubernetes.watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=1))
    assert info.value.status == 500


# --------------------------------------------------------------------------
# kmock underneath
# --------------------------------------------------------------------------


def test_kmock_reactions_still_take_precedence(cluster: EmulatedCluster, core: CoreV1Api) -> None:
    emulator = cluster.emulator
    canned = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "canned", "namespace": "default"},
              "data": {"from": "kmock"}}
    cluster.call(lambda: emulator["get /api/v1/namespaces/default/configmaps/canned"] << canned)
    assert core.read_namespaced_config_map("canned", "default").data == {"from": "kmock"}
    assert len(emulator[kmock.resource("v1/configmaps")]) == 1
