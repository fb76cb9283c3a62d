"""The nodes of the real clusters, shaped as EKS and GKE register GPU nodes on day one, for kwok to run.

Labels and providerIDs come from tests/kubeapi/real_nodes.py (hand-written from what the platforms document,
never from geosched's own label code; its docstring cites each source). Added here, each from its source:

- Capacity and allocatable of the machine types: a3-highgpu-8g 208 vCPU, 1872 GB, 8 H100 80GB; g2-standard-48
  48 vCPU, 192 GB, 4 L4 (cloud.google.com/compute/docs/gpus, accelerator-optimized machines); p5.48xlarge 192 vCPU,
  2048 GiB, 8 H100; p4d.24xlarge 96 vCPU, 1152 GiB, 8 A100 40GB (aws.amazon.com/ec2/instance-types/p5, /p4).
  Allocatable less the kubelet's reservations, in the proportions GKE documents for large machines
  (cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes: about 2.5 % of CPU above 4 cores and
  2 % of memory above 128 GiB, plus the 100 MiB eviction threshold).
- EFA devices on the EKS GPU nodes: the EFA device plugin advertises `vpc.amazonaws.com/efa`, one per EFA
  interface: p5.48xlarge 32, p4d.24xlarge 4 (docs.aws.amazon.com/eks/latest/userguide/node-efa.html; counts from
  docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html).
- GKE taints GPU node pools `nvidia.com/gpu=present:NoSchedule` and runs the ExtendedResourceToleration admission
  plugin (cloud.google.com/kubernetes-engine/docs/how-to/gpus, "GPU node taints"); EKS managed node groups taint
  nothing by default (docs.aws.amazon.com/eks/latest/userguide/node-taints-managed-node-groups.html).
- GKE runs no GPU feature discovery unless the NVIDIA GPU operator is installed: its GPU nodes carry
  `cloud.google.com/gke-accelerator` and no `nvidia.com/gpu.product` (the gke nodes here have none). The L4 pool
  sits in the same zone as the H100 pool, as GKE's a3 and g2 families share zones (us-central1-a offers both).
- A node pool kept for inference, tainted `dedicated=inference:NoSchedule`: the form the Kubernetes docs give
  for dedicated nodes (kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration, "Dedicated Nodes").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.kubeapi.real_nodes import eks_node, gke_node
from tests.realkube.cluster import KWOK_NODE

Obj = dict[str, Any]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
INFERENCE_TAINT = {"key": "dedicated", "value": "inference", "effect": "NoSchedule"}
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"

# (capacity cpu, capacity memory, allocatable cpu, allocatable memory, GPUs)
MACHINES: Mapping[str, tuple[str, str, str, str, int]] = {
    "a3-highgpu-8g": ("208", "1827430188Ki", "202930m", "1789982380Ki", 8),
    "g2-standard-48": ("48", "198052432Ki", "46930m", "193855056Ki", 4),
    "p5.48xlarge": ("192", "2097152000Ki", "187330m", "2055139968Ki", 8),
    "p4d.24xlarge": ("96", "1176502272Ki", "93730m", "1153006528Ki", 8),
    "e2-standard-8": ("8", "32880580Ki", "7910m", "29094852Ki", 0),
}

# EFA interfaces the EFA device plugin advertises (see the docstring).
EFA = {"p5.48xlarge": 32, "p4d.24xlarge": 4}


def kwok(node: Obj, taints: Sequence[Mapping[str, str]] = ()) -> Obj:
    """The node as kwok runs it: annotated for kwok, with its machine's resources and the given taints."""
    instance = node["metadata"]["labels"]["node.kubernetes.io/instance-type"]
    cpu, memory, alloc_cpu, alloc_memory, gpus = MACHINES[instance]
    node["metadata"].setdefault("annotations", {})[KWOK_NODE] = "fake"
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "98831908Ki"}
    allocatable = {"cpu": alloc_cpu, "memory": alloc_memory, "pods": "110", "ephemeral-storage": "47060071478"}
    if gpus:
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(gpus)
    if instance in EFA:
        capacity["vpc.amazonaws.com/efa"] = allocatable["vpc.amazonaws.com/efa"] = str(EFA[instance])
    node["status"] = {"capacity": capacity, "allocatable": allocatable,
                      "nodeInfo": {**node["status"]["nodeInfo"], "kubeletVersion": "v1.36.3"}}
    node["spec"].pop("taints", None)
    if taints:
        node["spec"]["taints"] = [dict(t) for t in taints]
    return node


def gke_us_central1() -> list[Obj]:
    """GKE Standard, us-central1, no GPU operator: H100 (a3-highgpu-8g) and L4 (g2-standard-48) pools in
    us-central1-a, an H100 pool in us-central1-b with one node of an inference pool; every GPU node carries GKE's
    GPU taint, none a GFD label."""
    def node(pool: str, suffix: str, zone: str, instance: str, accelerator: str) -> Obj:
        return gke_node(f"gke-ml-central-{pool}-5c2f3a1b-{suffix}", project="ml-platform-prod", region="us-central1",
                        zone=zone, instance_type=instance, accelerator=accelerator, pool=pool,
                        gpus=MACHINES[instance][4])

    h100, l4 = ("a3-highgpu-8g", "nvidia-h100-80gb"), ("g2-standard-48", "nvidia-l4")
    return [
        kwok(node("h100-a", "x7k2", "us-central1-a", *h100), [GPU_TAINT]),
        kwok(node("h100-a", "m4q9", "us-central1-a", *h100), [GPU_TAINT]),
        kwok(node("l4-a", "p3d5", "us-central1-a", *l4), [GPU_TAINT]),
        kwok(node("l4-a", "r8v1", "us-central1-a", *l4), [GPU_TAINT]),
        kwok(node("h100-b", "t2w8", "us-central1-b", *h100), [GPU_TAINT]),
        kwok(node("h100-b", "k9z3", "us-central1-b", *h100), [GPU_TAINT]),
        kwok(node("inference", "q1n6", "us-central1-b", *h100), [GPU_TAINT, INFERENCE_TAINT]),
    ]


def eks_us_east_1() -> list[Obj]:
    """EKS managed node groups with the GPU operator's GFD: two p5 (H100) in us-east-1a (use1-az6 in this
    account), two p4d (A100 40GB) in us-east-1b (use1-az2); no taints."""
    def node(ip: str, zone: str, zone_id: str, instance: str, product: str, instance_id: str, group: str) -> Obj:
        return eks_node(ip, region="us-east-1", zone=zone, zone_id=zone_id, instance_type=instance, product=product,
                        instance_id=instance_id, nodegroup=group, gpus=MACHINES[instance][4])

    return [
        kwok(node("10.0.1.23", "us-east-1a", "use1-az6", "p5.48xlarge", H100, "i-0a99d3bb7b27d62ac", "gpu-p5")),
        kwok(node("10.0.1.57", "us-east-1a", "use1-az6", "p5.48xlarge", H100, "i-04f1c2e9b7d3a6158", "gpu-p5")),
        kwok(node("10.0.2.14", "us-east-1b", "use1-az2", "p4d.24xlarge", A100, "i-0b3e5d7f9a1c2e4f6", "gpu-p4d")),
        kwok(node("10.0.2.88", "us-east-1b", "use1-az2", "p4d.24xlarge", A100, "i-07c9e1a3b5d7f9e2a", "gpu-p4d")),
    ]


def gke_system_pool(region: str = "us-central1", zone: str = "us-central1-a") -> list[Obj]:
    """The default pool of a GKE cluster without GPUs (the MultiKueue manager's): two e2-standard-8."""
    out = []
    for suffix in ("b7c1", "f2g4"):
        node = gke_node(f"gke-manager-default-pool-0e1d2c3b-{suffix}", project="ml-platform-prod", region=region,
                        zone=zone, instance_type="e2-standard-8", accelerator="", pool="default-pool", gpus=0)
        node["metadata"]["labels"].pop("cloud.google.com/gke-accelerator")
        out.append(kwok(node))
    return out


def gfd_pool() -> list[Obj]:
    """A self-managed cluster's GPU nodes (kubeadm on EC2 with the GPU operator): the EKS shapes less the EKS
    labels, two p5 in each of us-east-1a and us-east-1c."""
    out = []
    for ip, zone, zone_id in (("10.1.1.10", "us-east-1a", "use1-az6"), ("10.1.1.11", "us-east-1a", "use1-az6"),
                              ("10.1.3.10", "us-east-1c", "use1-az4"), ("10.1.3.11", "us-east-1c", "use1-az4")):
        node = eks_node(ip, region="us-east-1", zone=zone, zone_id=zone_id, instance_type="p5.48xlarge", product=H100,
                        instance_id=f"i-0{ip.replace('.', '')}d3bb7b27d6", nodegroup="unused", gpus=8)
        for key in [k for k in node["metadata"]["labels"] if k.startswith("eks.amazonaws.com/")]:
            del node["metadata"]["labels"][key]
        out.append(kwok(node))
    return out
