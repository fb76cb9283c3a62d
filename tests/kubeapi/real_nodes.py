"""GPU nodes shaped like the ones EKS and GKE really register, written out by hand from what those platforms
document and show, never from geosched's own label code (a test built from it could not catch it being wrong).
And `selected`: the nodes a pod spec's node constraints select, asked of the API server's label selectors.

Sources of the shapes:
- EKS managed node group node (`kubectl get node -o yaml` on EKS 1.30+): `eks.amazonaws.com/nodegroup`,
  `eks.amazonaws.com/capacityType`, `eks.amazonaws.com/nodegroup-image`, `k8s.io/cloud-provider-aws`, the zone
  name in `topology.kubernetes.io/zone` and the zone ID in `topology.k8s.aws/zone-id`
  (kubernetes/cloud-provider-aws#855), beta labels kept for compatibility; node name and hostname
  `ip-a-b-c-d.ec2.internal` (us-east-1) or `ip-a-b-c-d.<region>.compute.internal`; providerID
  `aws:///<zone name>/<instance id>`.
- GKE Standard node pool node: `cloud.google.com/gke-nodepool`, `cloud.google.com/gke-accelerator`
  (cloud.google.com/kubernetes-engine/docs/how-to/gpus), `cloud.google.com/machine-family`,
  `cloud.google.com/gke-os-distribution`, `topology.gke.io/zone`; node name
  `gke-<cluster>-<pool>-<hash>-<suffix>`; providerID `gce://<project>/<zone>/<instance name>`.
- NVIDIA GPU feature discovery (GPU operator; github.com/NVIDIA/k8s-device-plugin docs): `nvidia.com/gpu.product`
  (`NVIDIA-H100-80GB-HBM3`, `NVIDIA-A100-SXM4-40GB`), `nvidia.com/gpu.count`, `nvidia.com/gpu.memory` (MiB),
  `nvidia.com/gpu.family`, `nvidia.com/gpu.present`, `nvidia.com/cuda.driver-version.major`. GKE's own driver
  installer runs no GFD, so GKE nodes without the GPU operator carry none of these (`gfd=False`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.client import ApiClient, CoreV1Api

from tests.kubeemu import EmulatedCluster, node_manifest

Obj = dict[str, Any]

GFD = {
    "NVIDIA-H100-80GB-HBM3": {"nvidia.com/gpu.memory": "81559", "nvidia.com/gpu.family": "hopper",
                              "nvidia.com/gpu.compute.major": "9"},
    "NVIDIA-A100-SXM4-40GB": {"nvidia.com/gpu.memory": "40960", "nvidia.com/gpu.family": "ampere",
                              "nvidia.com/gpu.compute.major": "8"},
}


def _gfd(product: str, gpus: int) -> dict[str, str]:
    return {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/gpu.replicas": "1", "nvidia.com/cuda.driver-version.major": "550", **GFD[product]}


def _node(name: str, labels: Mapping[str, str], provider_id: str, gpus: int) -> Obj:
    node = node_manifest(name, region=labels["topology.kubernetes.io/region"],
                         zone=labels["topology.kubernetes.io/zone"], gpus=gpus)
    node["metadata"]["labels"] = dict(labels)
    node["spec"]["providerID"] = provider_id
    return node


def eks_node(ip: str, *, region: str, zone: str, zone_id: str, instance_type: str, product: str, instance_id: str,
             nodegroup: str, gpus: int = 8) -> Obj:
    host = f"ip-{ip.replace('.', '-')}.ec2.internal" if region == "us-east-1" else \
        f"ip-{ip.replace('.', '-')}.{region}.compute.internal"
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": instance_type,
        "beta.kubernetes.io/os": "linux",
        "eks.amazonaws.com/capacityType": "ON_DEMAND", "eks.amazonaws.com/nodegroup": nodegroup,
        "eks.amazonaws.com/nodegroup-image": "ami-0c4ca6471e3246940",
        "failure-domain.beta.kubernetes.io/region": region, "failure-domain.beta.kubernetes.io/zone": zone,
        "k8s.io/cloud-provider-aws": "36ba6312c5cced003c295089f34e99e3",
        "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": host, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": instance_type,
        "topology.k8s.aws/zone-id": zone_id,
        "topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone,
        **_gfd(product, gpus),
    }
    return _node(host, labels, f"aws:///{zone}/{instance_id}", gpus)


def gke_node(name: str, *, project: str, region: str, zone: str, instance_type: str, accelerator: str,
             pool: str, product: str | None = None, gpus: int = 8) -> Obj:
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": instance_type,
        "beta.kubernetes.io/os": "linux",
        "cloud.google.com/gke-accelerator": accelerator, "cloud.google.com/gke-boot-disk": "pd-balanced",
        "cloud.google.com/gke-container-runtime": "containerd", "cloud.google.com/gke-nodepool": pool,
        "cloud.google.com/gke-os-distribution": "cos", "cloud.google.com/machine-family": instance_type.split("-")[0],
        "cloud.google.com/private-node": "false",
        "failure-domain.beta.kubernetes.io/region": region, "failure-domain.beta.kubernetes.io/zone": zone,
        "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": instance_type,
        "topology.gke.io/zone": zone, "topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone,
        **(_gfd(product, gpus) if product else {}),
    }
    return _node(name, labels, f"gce://{project}/{zone}/{name}", gpus)


def eks_us_east_1() -> list[Obj]:
    """Two p5 node-group nodes in us-east-1a (use1-az6 in this account), two p4d in us-east-1b (use1-az2)."""
    return [
        eks_node("10.0.1.23", region="us-east-1", zone="us-east-1a", zone_id="use1-az6", instance_type="p5.48xlarge",
                 product="NVIDIA-H100-80GB-HBM3", instance_id="i-0a99d3bb7b27d62ac", nodegroup="gpu-p5"),
        eks_node("10.0.1.57", region="us-east-1", zone="us-east-1a", zone_id="use1-az6", instance_type="p5.48xlarge",
                 product="NVIDIA-H100-80GB-HBM3", instance_id="i-04f1c2e9b7d3a6158", nodegroup="gpu-p5"),
        eks_node("10.0.2.14", region="us-east-1", zone="us-east-1b", zone_id="use1-az2", instance_type="p4d.24xlarge",
                 product="NVIDIA-A100-SXM4-40GB", instance_id="i-0b3e5d7f9a1c2e4f6", nodegroup="gpu-p4d"),
        eks_node("10.0.2.88", region="us-east-1", zone="us-east-1b", zone_id="use1-az2", instance_type="p4d.24xlarge",
                 product="NVIDIA-A100-SXM4-40GB", instance_id="i-07c9e1a3b5d7f9e2a", nodegroup="gpu-p4d"),
    ]


def gke_us_central1() -> list[Obj]:
    """Three a3-highgpu-8g nodes in us-central1-c, with the GPU operator's GFD labels on two of them only."""
    def node(suffix: str, product: str | None) -> Obj:
        return gke_node(f"gke-train-central-h100-pool-5c2f3a1b-{suffix}", project="ml-platform-prod",
                        region="us-central1", zone="us-central1-c", instance_type="a3-highgpu-8g",
                        accelerator="nvidia-h100-80gb", pool="h100-pool", product=product)

    return [node("x7k2", "NVIDIA-H100-80GB-HBM3"), node("m4q9", "NVIDIA-H100-80GB-HBM3"), node("t2w8", None)]


def seed(cluster: EmulatedCluster, nodes: Iterable[Obj]) -> list[str]:
    names = []
    for node in nodes:
        cluster.create(node)
        names.append(node["metadata"]["name"])
    return names


# --- what a pod's constraints select, asked of the API server --------------------------------------

def pod_specs(obj: Any) -> list[Mapping[str, Any]]:
    """Every pod spec in an object (a mapping with `containers`), TrainJob overrides (`targetJobs`) included."""
    found: list[Mapping[str, Any]] = []
    if isinstance(obj, Mapping):
        if "containers" in obj or "targetJobs" in obj:
            found.append(obj)
        for value in obj.values():
            found.extend(pod_specs(value))
    elif isinstance(obj, list):
        for value in obj:
            found.extend(pod_specs(value))
    return found


def label_selectors(spec: Mapping[str, Any]) -> list[str]:
    """The pod spec's nodeSelector AND each required nodeSelectorTerm, as label selector strings (terms are
    ORed: one selector per term)."""
    selector = [f"{k}={v}" for k, v in sorted((spec.get("nodeSelector") or {}).items())]
    terms = (spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", {})
             .get("nodeSelectorTerms") or [{}])
    out = []
    for term in terms:
        parts = list(selector)
        for e in term.get("matchExpressions") or []:
            op, key, values = e["operator"], e["key"], ",".join(e.get("values") or [])
            parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                          "DoesNotExist": f"!{key}"}[op])
        out.append(",".join(parts))
    return out


def selected(api: ApiClient, spec: Mapping[str, Any]) -> set[str]:
    core = CoreV1Api(api)
    names: set[str] = set()
    for selector in label_selectors(spec):
        names |= {n.metadata.name for n in core.list_node(label_selector=selector).items}
    return names
