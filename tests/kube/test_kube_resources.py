"""Resource fit (issue 21 item 3): what a pod asks of its node and what a node has left, and the scheduler's
decision on them, on real-shaped nodes and pods.

Shapes and sources:
- Nodes: tests/realkube/nodes.py (EKS p5.48xlarge and GKE a3-highgpu-8g, capacity and allocatable as documented,
  labels from tests/kubeapi/real_nodes.py).
- EFA on p5.48xlarge: 32 EFA interfaces, advertised by the EFA device plugin as `vpc.amazonaws.com/efa: 32`, and the
  training pod asks for all 32 (docs.aws.amazon.com/eks/latest/userguide/node-efa.html; p5 network cards:
  docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html).
- Init and sidecar containers: the worked example of kubernetes.io/docs/concepts/workloads/pods/init-containers/
  ("Resource sharing within containers") and of .../sidecar-containers/ (sidecars' requests add up).
- Pod overhead: kubernetes.io/docs/concepts/scheduling-eviction/pod-overhead/ (a Kata RuntimeClass, 250m, 120Mi).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from geosched.kube.inventory import nodes_from_kube
from geosched.kube.objpath import At
from geosched.kube.resources import allocatable, pod_requests, room, shortfall
from geosched.kube.scheduler.decide import Decision, Refusal, decide
from geosched.kube.scheduler.gangs import Gang
from geosched.kube.scheduler.loop import build_view, with_bound
from geosched.kube.scheduler.pods import PodInfo, pod_info
from tests.kubeapi.real_nodes import eks_node
from tests.realkube.nodes import kwok

EFA = "vpc.amazonaws.com/efa"
GiB = 2**30


def p5(ip: str, *, efa: int | None = 32) -> dict[str, Any]:
    node = kwok(eks_node(ip, region="us-east-1", zone="us-east-1a", zone_id="use1-az4", instance_type="p5.48xlarge",
                         product="NVIDIA-H100-80GB-HBM3", instance_id=f"i-0{ip.replace('.', '')}",
                         nodegroup="p5-training"))
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    for field in ("capacity", "allocatable"):  # without the EFA device plugin, no EFA is advertised
        node["status"][field].pop(EFA, None)
        if efa is not None:
            node["status"][field][EFA] = str(efa)
    return node


def spec(**resources: Any) -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "x", "resources": resources}]}


def worker(name: str, index: int, *, requests: dict[str, str] | None = None, node: str | None = None,
           gpus: int = 8, efa: int | None = None) -> PodInfo:
    limits: dict[str, Any] = {"nvidia.com/gpu": str(gpus)}
    if efa:
        limits[EFA] = str(efa)
    body = spec(limits=limits, **({"requests": requests} if requests else {}))
    body["nodeName"] = node
    meta = {"name": f"{name}-{index}", "namespace": "ml", "uid": f"{name}-{index}",
            "labels": {"scheduling.x-k8s.io/pod-group": name},
            "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}}
    return pod_info({"metadata": meta, "spec": body, "status": {"phase": "Running" if node else "Pending"}})


def gang(name: str, pods: list[PodInfo], bound: list[PodInfo] | None = None) -> Gang:
    return Gang(key=pods[0].gang, pending=tuple(pods), bound=tuple(bound or ()), size=len(pods) + len(bound or ()))


def test_init_containers_count_as_kubernetes_documents() -> None:
    # The docs' example: two init containers (the largest is the init request), app containers summed.
    body = {
        "initContainers": [{"name": "i1", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
                           {"name": "i2", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}}],
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "2Gi"}}},
                       {"name": "b", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
    }
    assert pod_requests(At(body, "pod")) == {"cpu": 2000, "memory": 4 * GiB, "pods": 1}


def test_sidecars_add_to_the_app_and_to_the_init_containers_after_them() -> None:
    body = {
        "initContainers": [
            {"name": "log", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            {"name": "setup", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}},
        ],
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}],
        # RuntimeClass overhead, set by admission, counts on top.
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }
    # app 1 + sidecar 0.5 = 1.5 cpu; setup runs beside the sidecar: 3.5 cpu, the larger; plus 250m overhead.
    assert pod_requests(At(body, "pod")) == {"cpu": 3750, "memory": 3 * GiB + 120 * 2**20, "pods": 1}


def test_pod_level_requests_replace_the_containers_sum_for_cpu_and_memory() -> None:
    body = {**spec(requests={"cpu": "1", "memory": "1Gi", "ephemeral-storage": "10Gi"}),
            "resources": {"requests": {"cpu": "4", "memory": "8Gi"}}}
    assert pod_requests(At(body, "pod")) == {"cpu": 4000, "memory": 8 * GiB, "ephemeral-storage": 10 * GiB, "pods": 1}


def test_a_nodes_room_is_allocatable_less_its_bound_pods() -> None:
    node = p5("10.0.1.10")
    left = room(allocatable(At(node, "node")), [pod_requests(At(spec(requests={"memory": "1Ti"}), "pod"))])
    assert left["memory"] == 2055139968 * 1024 - 2**40
    assert left["pods"] == 109
    assert shortfall(left, {"memory": 2**40, "pods": 1}) == "memory"
    assert shortfall(left, {"memory": 2**39, "pods": 1, EFA: 32}) is None
    assert shortfall(left, {"hugepages-2Mi": 2**21}) == "hugepages-2Mi"  # a node without it has none


def test_a_worker_asking_more_memory_than_a_p5_has_is_refused_and_says_why() -> None:
    view = build_view([p5("10.0.1.10"), p5("10.0.1.11")], "eks", None)
    assert view is not None
    refused = decide(gang("huge", [worker("huge", 0, requests={"memory": "4Ti"})]), view)
    assert isinstance(refused, Refusal)
    assert "memory" in refused.reason, refused.reason
    fits = decide(gang("fits", [worker("fits", 0, requests={"memory": "1Ti"})]), view)
    assert isinstance(fits, Decision)


def test_efa_is_counted_and_a_node_without_efa_holds_no_efa_worker() -> None:
    view = build_view([p5("10.0.1.10", efa=None), p5("10.0.1.11")], "eks", None)
    assert view is not None
    decision = decide(gang("nccl", [worker("nccl", 0, efa=32)]), view)
    assert isinstance(decision, Decision)
    assert [b.node for b in decision.binds] == ["ip-10-0-1-11.ec2.internal"]
    # Its EFA devices held by a bound pod, the second node has none left for another.
    busy = with_bound(view, [worker("other", 0, efa=32, gpus=0, node="ip-10-0-1-11.ec2.internal")])
    assert isinstance(decide(gang("nccl2", [worker("nccl2", 0, efa=32)]), busy), Refusal)


def test_bound_pods_memory_and_pod_slots_are_taken_from_the_room() -> None:
    nodes = [p5("10.0.1.10"), p5("10.0.1.11")]
    view = build_view(nodes, "eks", None)
    assert view is not None
    # 4 GPUs each, 1.5 TiB each: by GPUs both would fit one node; by memory, one per node.
    pods = [worker("half", i, requests={"memory": "1536Gi"}, gpus=4) for i in range(2)]
    decision = decide(gang("half", pods), view)
    assert isinstance(decision, Decision)
    assert len({b.node for b in decision.binds}) == 2
    # A node whose 110 pod slots are taken (by CPU-only pods) takes no worker, though its GPUs are free.
    first = str(nodes[0]["metadata"]["name"])
    daemon = pod_info({"metadata": {"name": "d", "namespace": "kube-system", "uid": "d"},
                       "spec": {**spec(requests={"cpu": "1m"}), "nodeName": first},
                       "status": {"phase": "Running"}})
    crowded = with_bound(view, [dataclasses.replace(daemon, uid=f"d{i}") for i in range(110)])
    decision = decide(gang("one", [worker("one", 0)]), crowded)
    assert isinstance(decision, Decision)
    assert [b.node for b in decision.binds] == [str(nodes[1]["metadata"]["name"])]


def test_a_launcher_goes_where_room_is_left_after_the_workers() -> None:
    view = build_view([p5("10.0.1.10"), p5("10.0.1.11")], "eks", None)
    assert view is not None
    work = worker("mpi", 0, requests={"cpu": "187"})  # the p5 allocates 187.33 cores
    launcher = pod_info({"metadata": {"name": "mpi-launcher", "namespace": "ml", "uid": "l",
                                      "labels": {"scheduling.x-k8s.io/pod-group": "mpi"}},
                         "spec": spec(requests={"cpu": "2"}), "status": {"phase": "Pending"}})
    decision = decide(Gang(key=work.gang, pending=(work, launcher), bound=(), size=2), view)
    assert isinstance(decision, Decision)
    placed = {b.pod.name: b.node for b in decision.binds}
    assert placed["mpi-launcher"] != placed["mpi-0"]


def test_the_inventory_offers_no_gpu_on_a_node_whose_pod_slots_are_all_taken() -> None:
    nodes = [p5("10.0.1.10"), p5("10.0.1.11")]
    first = str(nodes[0]["metadata"]["name"])
    # 110 pods (allocatable pods of the node): DaemonSet and CPU-only pods, none asking for a GPU.
    daemons = [{"metadata": {"name": f"d{i}", "namespace": "kube-system"},
                "spec": {**spec(requests={"cpu": "1m"}), "nodeName": first}, "status": {"phase": "Running"}}
               for i in range(110)]
    free = {n.name: n.gpus_free for n in nodes_from_kube(nodes, daemons, "eks").nodes}
    assert free == {first: 0, str(nodes[1]["metadata"]["name"]): 8}
    finished = [{**d, "status": {"phase": "Succeeded"}} for d in daemons]  # finished pods hold no slot
    assert {n.gpus_free for n in nodes_from_kube(nodes, finished, "eks").nodes} == {8}
