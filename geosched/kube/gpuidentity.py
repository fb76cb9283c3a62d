"""A GPU node's model, and the label that pins it: the one resolver of GPU identity for the inventory (and so
`snapshot export --from-clusters`, `submit` and the in-cluster scheduler, which all read nodes through it), the
renderer and Kueue's ResourceFlavors. Pure.

What a node says about its GPU, most direct first (`IDENTITY_LABELS`):

1. `nvidia.com/gpu.product`: NVIDIA GPU feature discovery reads it from the driver (the GPU operator installs it;
   github.com/NVIDIA/k8s-device-plugin, docs/gpu-feature-discovery);
2. `cloud.google.com/gke-accelerator`: GKE sets the accelerator type of the node pool on its nodes, and is all a
   GKE GPU node carries without the GPU operator, GKE's default (cloud.google.com/kubernetes-engine/docs/how-to/gpus);
3. `node.kubernetes.io/instance-type`: every cloud sets it; the catalog says which GPU that machine type has.

The first that names a known model decides, with one refinement: where the catalog sells one chip as two models
(H100 on a3-highgpu and H100-MEGA on a3-megagpu: the same `NVIDIA-H100-80GB-HBM3`, a different network), a
later source naming the variant of the same part says which.

Pinning (`pin`): a gang's pods are held to its model by the first identity label that every placed node carries
and whose placed values no node of another model carries, with the placed nodes' own values. So a GKE cluster
without GFD is pinned on `cloud.google.com/gke-accelerator` (pinning `nvidia.com/gpu.product` there would select
nothing, and pinning nothing would admit its L4 nodes), an EKS cluster without GFD on the instance types, and H100
beside H100-MEGA on the accelerator rather than on the product both share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from geosched.core import catalog
from geosched.core.gpus import model_from_gke_accelerator, model_from_product, part
from geosched.kube import keys

IDENTITY_LABELS = (keys.GPU_PRODUCT, keys.GKE_ACCELERATOR, keys.INSTANCE_TYPE)


@dataclass(frozen=True, slots=True)
class Pin:
    """The node label that holds a gang's pods to its GPU model, and the values its placed nodes carry."""

    key: str
    values: tuple[str, ...]


@cache
def _instance_gpus() -> Mapping[tuple[str, str], str]:
    # A machine type's GPU is the same in every zone that sells it.
    return {(o.provider, o.instance_type): o.gpu for o in catalog.offerings() if o.gpus > 0}


@cache
def _instance_gpu_counts() -> Mapping[tuple[str, str], int]:
    # The most any offering of the type has: a machine type sold with more than one GPU count (none is today) must
    # never make whole GPUs look shared.
    counts: dict[tuple[str, str], int] = {}
    for o in catalog.offerings():
        key = (o.provider, o.instance_type)
        counts[key] = max(counts.get(key, 0), o.gpus)
    return {key: n for key, n in counts.items() if n > 0}


def more_than_built(provider: str, instance_type: str, allocatable: int) -> str | None:
    """Why `allocatable` `nvidia.com/gpu` on a machine the catalog says has fewer GPUs are not whole GPUs, None when
    they may be. The NVIDIA device plugin advertises each time-sliced or MPS replica and each MIG slice as one
    `nvidia.com/gpu`, and only GPU feature discovery's labels say so (`not_whole`); where GFD does not run, the count
    is all that tells: Bottlerocket's NVIDIA variants run the device plugin with time-slicing, MPS or MIG from their
    own settings (settings.kubelet-device-plugins.nvidia: device-sharing-strategy, time-slicing.replicas,
    device-partitioning-strategy; bottlerocket.dev), and the device plugin's Helm chart deploys GFD only when asked
    (gfd.enabled). Fewer than built is whole GPUs still: the device plugin leaves out a GPU it finds unhealthy."""
    built = _instance_gpu_counts().get((provider, instance_type))
    if built is None or allocatable <= built:
        return None
    return (f"{allocatable} allocatable {keys.GPU} on a {instance_type}, which has {built} GPUs: shared replicas or "
            "MIG slices the device plugin advertises without GPU feature discovery's labels, not whole GPUs")


def catalog_model(provider: str, instance_type: str) -> str | None:
    """The GPU model the catalog says `instance_type` of `provider` has; None for a type it does not sell."""
    return _instance_gpus().get((provider, instance_type))


def label_model(key: str, value: str, provider: str) -> str | None:
    """The model one identity label's value names, None when it names no known model."""
    if not value:
        return None
    if key == keys.GPU_PRODUCT:
        return model_from_product(value)
    if key == keys.GKE_ACCELERATOR:
        return model_from_gke_accelerator(value)
    if key == keys.INSTANCE_TYPE:
        return catalog_model(provider, value)
    return None


def not_whole(labels: Mapping[str, str]) -> str | None:
    """Why the node's `nvidia.com/gpu` are not whole GPUs (MIG slices, time-sliced or MPS replicas), None when they
    are. Such a node is no capacity for a training gang: each worker would get a slice of a GPU, and its count
    (56 slices of a p4d's 8 A100s) would be read as GPUs. Checked before the model: a MIG product names no model,
    and the instance type behind it would name the whole GPU."""
    product = labels.get(keys.GPU_PRODUCT, "")
    tokens = product.upper().replace("_", "-").split("-")
    # Not `nvidia.com/mig.strategy` alone: the GPU operator labels every GPU node with its strategy (`single` by
    # default), MIG enabled or not; under `single` with MIG on, GFD renames the product `...-MIG-<profile>`.
    if "MIG" in tokens:
        return f"MIG slices, not whole GPUs ({keys.GPU_PRODUCT}={product or '(none)'})"
    if partition := labels.get(keys.GKE_GPU_PARTITION):
        return f"MIG slices, not whole GPUs ({keys.GKE_GPU_PARTITION}={partition})"
    replicas = labels.get(keys.GPU_REPLICAS, "")
    if tokens[-1] == "SHARED" or (replicas.isdigit() and int(replicas) > 1):
        return f"shared GPUs, not whole ones ({keys.GPU_PRODUCT}={product or '(none)'}, {keys.GPU_REPLICAS}=" \
               f"{replicas or '(none)'})"
    for key in (keys.GPU_SHARING_STRATEGY, keys.GKE_GPU_SHARING):
        if (strategy := labels.get(key)) and strategy != "none":
            return f"shared GPUs, not whole ones ({key}={strategy})"
    return None


def model_of(labels: Mapping[str, str], provider: str) -> str | None:
    """The GPU model of a node with `labels` (of `provider`: aws, gcp, ...), None when no label names one."""
    named = [m for key in IDENTITY_LABELS if (m := label_model(key, labels.get(key, ""), provider)) is not None]
    if not named:
        return None
    model = named[0]
    chip = part(model).product
    for later in named[1:]:
        if later != model and chip is not None and part(later).product == chip:
            return later
    return model


def pin(placed: Sequence[Mapping[str, str]], others: Sequence[Mapping[str, str]]) -> Pin | None:
    """The label and values holding pods to the placed nodes' model: `placed` are the placed nodes' labels,
    `others` the labels of the nodes of other GPU models the pods could otherwise reach. None when no identity label
    is carried by every placed node (a fleet described without labels: nothing is pinned that no node carries).
    Should no such label set them apart from every other model's, the first carried by all still narrows."""
    carried = [key for key in IDENTITY_LABELS if placed and all(labels.get(key) for labels in placed)]
    pins = [Pin(key, tuple(sorted({labels[key] for labels in placed}))) for key in carried]
    apart = (p for p in pins if not any(labels.get(p.key) in p.values for labels in others))
    return next(apart, pins[0] if pins else None)
