"""Issue 21 item 1: a node's GPU model, and the label a gang is pinned to it by, from what real nodes carry
(tests/kubeapi/real_nodes.py: the EKS, GKE and GPU feature discovery shapes, each from its documentation), on
every path that reads them: the inventory (and so snapshot export and submit), the renderer, and the in-cluster
scheduler, which binds the pods the renderer wrote."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from geosched import policies
from geosched.core.models import Job, Placement
from geosched.kube import affinity, gpuidentity, keys
from geosched.kube.cluster_inventory import fleet_from_nodes, network_for
from geosched.kube.config import Backend, ClusterConfig
from geosched.kube.inventory import nodes_from_kube
from geosched.kube.jobinput import JobInput
from geosched.kube.kinds import geosched_job
from geosched.kube.render import RenderOptions, render
from geosched.kube.scheduler.decide import Decision, View, decide
from geosched.kube.scheduler.gangs import PRESENT, group
from geosched.kube.scheduler.pods import node_labels, pod_info
from geosched.kube.tolerations import node_taints
from geosched.policies import PlacementContext
from tests.kubeapi.real_nodes import eks_node, gke_node

Obj = dict[str, Any]
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
GFD_PREFIXES = ("nvidia.com/",)


def without_gfd(node: Obj) -> Obj:
    """The node as it registers without the GPU operator: no GPU feature discovery label."""
    labels = node["metadata"]["labels"]
    for key in [k for k in labels if k.startswith(GFD_PREFIXES)]:
        del labels[key]
    return node


def gke(suffix: str, zone: str, instance: str, accelerator: str, *, product: str | None = None,
        gpus: int = 8) -> Obj:
    pool = instance.split("-")[0] + "-pool"
    return gke_node(f"gke-ml-central-{pool}-5c2f3a1b-{suffix}", project="ml-platform-prod", region="us-central1",
                    zone=zone, instance_type=instance, accelerator=accelerator, pool=pool, product=product, gpus=gpus)


def eks(ip: str, instance: str, product: str) -> Obj:
    return eks_node(ip, region="us-east-1", zone="us-east-1a", zone_id="use1-az6", instance_type=instance,
                    product=product, instance_id=f"i-0{ip.replace('.', '')}aa", nodegroup=instance.split(".")[0])


H100 = ("a3-highgpu-8g", "nvidia-h100-80gb")
L4 = ("g2-standard-48", "nvidia-l4")
MEGA = ("a3-megagpu-8g", "nvidia-h100-mega-80gb")


def gke_h100_and_l4(*, gfd: bool) -> list[Obj]:
    """One GKE zone with an H100 pool and an L4 pool, as us-central1-a offers both (a3-highgpu, g2-standard)."""
    return [gke("x7k2", "us-central1-a", *H100, product="NVIDIA-H100-80GB-HBM3" if gfd else None),
            gke("m4q9", "us-central1-a", *H100, product="NVIDIA-H100-80GB-HBM3" if gfd else None),
            gke("p3d5", "us-central1-a", *L4, gpus=4),
            gke("r8v1", "us-central1-a", *L4, gpus=4)]


# --- inventory ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("node", "model"), [
    # GKE's default: the accelerator label alone.
    (gke("a", "us-central1-a", *H100), "H100"),
    (gke("b", "us-central1-a", *L4, gpus=4), "L4"),
    # GFD names the chip both a3 families share; GKE's accelerator says which of the catalog's two it is, in a zone
    # the catalog does not list too (where the instance type's offering cannot say it).
    (gke("c", "us-central1-a", *MEGA, product="NVIDIA-H100-80GB-HBM3"), "H100-MEGA"),
    (gke("d", "europe-north1-z", *MEGA, product="NVIDIA-H100-80GB-HBM3"), "H100-MEGA"),
    # EKS without the GPU operator: the instance type's GPU, from the catalog.
    (without_gfd(eks("10.0.1.23", "p5.48xlarge", "NVIDIA-H100-80GB-HBM3")), "H100"),
    (without_gfd(eks("10.0.2.14", "p4d.24xlarge", "NVIDIA-A100-SXM4-40GB")), "A100"),
    # GFD reads the driver: it names the GPU before any catalog guess about the machine type.
    (eks("10.0.2.15", "p4d.24xlarge", "NVIDIA-H100-80GB-HBM3"), "H100"),
])
def test_the_inventory_names_the_model_the_node_says(node: Obj, model: str) -> None:
    inventory = nodes_from_kube([node], [], "c")
    assert [n.gpu for n in inventory.nodes] == [model], inventory.skipped


def test_a_node_no_label_names_is_left_out_with_every_label_it_carries() -> None:
    node = gke("e", "us-central1-a", "n1-custom-8", "nvidia-future-gpu")
    (rejection,) = nodes_from_kube([node], [], "c").skipped
    assert "unknown GPU model" in rejection.reason and "nvidia-future-gpu" in rejection.reason


def test_the_pin_is_the_first_identity_label_that_sets_the_model_apart() -> None:
    h100 = {keys.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3", keys.GKE_ACCELERATOR: "nvidia-h100-80gb",
            keys.INSTANCE_TYPE: "a3-highgpu-8g"}
    mega = {**h100, keys.GKE_ACCELERATOR: "nvidia-h100-mega-80gb", keys.INSTANCE_TYPE: "a3-megagpu-8g"}
    assert gpuidentity.pin([h100], []) == gpuidentity.Pin(keys.GPU_PRODUCT, ("NVIDIA-H100-80GB-HBM3",))
    assert gpuidentity.pin([h100], [mega]) == gpuidentity.Pin(keys.GKE_ACCELERATOR, ("nvidia-h100-80gb",))
    bare = {keys.INSTANCE_TYPE: "p5.48xlarge"}
    assert gpuidentity.pin([bare, h100], []) == gpuidentity.Pin(keys.INSTANCE_TYPE, ("a3-highgpu-8g", "p5.48xlarge"))
    assert gpuidentity.pin([{keys.HOSTNAME: "n"}], []) is None


# --- render -------------------------------------------------------------------------------------------------

def placed(kube_nodes: Sequence[Obj], gpu: str, workers: int, gpus: int) -> tuple[Placement, Any]:
    inventory = nodes_from_kube(kube_nodes, [], "gke")
    fleet, _, _ = fleet_from_nodes(inventory.nodes)
    job = Job(name="train", workers=workers, gpus_per_worker=gpus, gpu=gpu, namespace="ml", image="ghcr.io/x/t:1")
    result = policies.place(job, PlacementContext(fleet, network_for(fleet)))
    assert isinstance(result, Placement), result
    return result, fleet


def rendered_pod_spec(kube_nodes: Sequence[Obj], gpu: str, workers: int = 2, gpus: int = 8,
                      backend: Backend = Backend.NONE) -> tuple[Mapping[str, Any], Placement]:
    placement, fleet = placed(kube_nodes, gpu, workers, gpus)
    job = JobInput(kind=geosched_job.KIND, job=placement.job, source="train.yaml", original=None, pod_sets=())
    config = ClusterConfig(name="gke", context="gke", backend=backend, queue="q" if backend is Backend.KUEUE else None)
    manifests = render(job, placement, config, RenderOptions(now=NOW, nodes=fleet.by_name))
    (obj,) = [m for m in manifests if m["kind"] == "Job"]
    return obj["spec"]["template"]["spec"], placement


def admitted(spec: Mapping[str, Any], kube_nodes: Sequence[Obj]) -> set[str]:
    (constraint,) = affinity.node_constraints(spec)
    return {n["metadata"]["name"] for n in kube_nodes if affinity.admits(n["metadata"]["labels"], constraint)}


def names(kube_nodes: Sequence[Obj], instance: str) -> set[str]:
    return {n["metadata"]["name"] for n in kube_nodes
            if n["metadata"]["labels"][keys.INSTANCE_TYPE] == instance}


@pytest.mark.parametrize("gfd", [False, True])
def test_an_h100_gang_on_gke_selects_only_h100_nodes(gfd: bool) -> None:
    nodes = gke_h100_and_l4(gfd=gfd)
    spec, _ = rendered_pod_spec(nodes, "H100")
    assert admitted(spec, nodes) == names(nodes, "a3-highgpu-8g")


def test_h100_beside_h100_mega_is_pinned_by_the_accelerator_gfd_cannot_tell_apart() -> None:
    nodes = [gke("x7k2", "us-central1-a", *H100, product="NVIDIA-H100-80GB-HBM3"),
             gke("m4q9", "us-central1-a", *H100, product="NVIDIA-H100-80GB-HBM3"),
             gke("w1a2", "us-central1-a", *MEGA, product="NVIDIA-H100-80GB-HBM3"),
             gke("w3b4", "us-central1-a", *MEGA, product="NVIDIA-H100-80GB-HBM3")]
    for gpu, instance in (("H100", "a3-highgpu-8g"), ("H100-MEGA", "a3-megagpu-8g")):
        spec, _ = rendered_pod_spec(nodes, gpu)
        assert admitted(spec, nodes) == names(nodes, instance), gpu


def test_an_eks_gang_without_gfd_is_pinned_by_instance_type() -> None:
    nodes = [without_gfd(eks(ip, instance, product)) for ip, instance, product in (
        ("10.0.1.23", "p5.48xlarge", "NVIDIA-H100-80GB-HBM3"), ("10.0.1.57", "p5.48xlarge", "NVIDIA-H100-80GB-HBM3"),
        ("10.0.1.80", "p4d.24xlarge", "NVIDIA-A100-SXM4-40GB"), ("10.0.1.81", "p4d.24xlarge", "NVIDIA-A100-SXM4-40GB"))]
    spec, _ = rendered_pod_spec(nodes, "A100")
    assert admitted(spec, nodes) == names(nodes, "p4d.24xlarge")


# --- the in-cluster scheduler, binding the pods the renderer wrote --------------------------------------------

def scheduler_view(kube_nodes: Sequence[Obj]) -> View:
    """As the scheduler's loop builds it (loop.Scheduler._build_view) from the nodes its reflector listed."""
    inventory = nodes_from_kube(kube_nodes, (), "gke")
    fleet, _, _ = fleet_from_nodes(inventory.nodes)
    ctx = PlacementContext(fleet, network_for(fleet))
    raw = {n["metadata"]["name"]: n for n in kube_nodes}
    return View(ctx, ctx.gpus_free.copy(), [node_labels(raw[n.name]) for n in fleet.nodes],
                [node_taints(raw[n.name]) for n in fleet.nodes])


def test_the_scheduler_binds_the_rendered_h100_gang_to_h100_nodes_only() -> None:
    # 4 x 4 GPUs: each L4 node (4 GPUs, far cheaper) could hold a pod, were the pods not pinned to H100.
    nodes = gke_h100_and_l4(gfd=False)
    spec, _ = rendered_pod_spec(nodes, "H100", workers=4, gpus=4)
    pods = [pod_info({"metadata": {"name": f"train-{i}", "namespace": "ml", "uid": f"u{i}",
                                   "annotations": {"batch.kubernetes.io/job-completion-index": str(i)},
                                   "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train",
                                                        "uid": "j", "controller": True}]},
                      "spec": spec, "status": {"phase": "Pending"}}) for i in range(4)]
    (gang,) = group(pods, [], {}, {"j": PRESENT})
    view = scheduler_view(nodes)
    # The nodes the scheduler lets these pods use: its NodeAffinity reading of what the renderer pinned.
    usable = view.mask(pods[0].requirements)
    assert {name for name, ok in zip(view.ctx.names, usable, strict=True) if ok} == names(nodes, "a3-highgpu-8g")
    decision = decide(gang, view)
    assert isinstance(decision, Decision), decision
    assert {b.node for b in decision.binds} <= names(nodes, "a3-highgpu-8g")
