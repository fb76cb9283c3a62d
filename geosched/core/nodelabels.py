"""Node labels as real nodes carry them: what EKS, GKE and NVIDIA GPU feature discovery set on a GPU node
(for nodes geosched describes instead of reading them from a cluster: the embedded default fleet), and
`selectable`, a fleet node's labels as a scheduler matches them (for rendering and checking manifests).

What each platform sets (a node carries these; geosched emits nothing else as a cloud's own; each cloud's own
labels and providerID are defined with its spec in `geosched.clouds`):

- Kubernetes and its cloud providers: `kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch`,
  `topology.kubernetes.io/region`, `topology.kubernetes.io/zone`, `node.kubernetes.io/instance-type`
  (kubernetes.io/docs/reference/labels-annotations-taints).
- EKS: the zone *name* (`us-east-1a`) in `topology.kubernetes.io/zone` and the zone ID (`use1-az1`) in
  `topology.k8s.aws/zone-id` (kubernetes/cloud-provider-aws#855; EKS 1.30+); managed node groups add
  `eks.amazonaws.com/nodegroup` and `eks.amazonaws.com/capacityType` (ON_DEMAND or SPOT). The name of a zone
  ID differs per AWS account, so it is always an input here, never derived. providerID
  `aws:///<zone name>/<instance id>` (cloud-provider-aws).
- GKE: zone names in `topology.kubernetes.io/zone` (`us-central1-a`), `cloud.google.com/gke-nodepool`,
  `cloud.google.com/gke-accelerator` on GPU nodes (`nvidia-h100-80gb`), `cloud.google.com/machine-family`.
  providerID `gce://<project>/<zone>/<instance name>` (cloud-provider-gcp).
- GPU feature discovery: `nvidia.com/gpu.product` (`NVIDIA-H100-80GB-HBM3`), `nvidia.com/gpu.count`,
  `nvidia.com/gpu.present`; values per GPU model in `geosched.core.gpus`.
"""

from __future__ import annotations

from collections.abc import Mapping

from geosched import clouds
from geosched.clouds import NodeShape
from geosched.core.gpus import part
from geosched.core.models import Node

# Well-known node labels (kubernetes.io/docs/reference/labels-annotations-taints) and NVIDIA GPU feature discovery's
# (github.com/NVIDIA/k8s-device-plugin, docs/gpu-feature-discovery). Defined here, in the pure core, because the
# embedded fleet's nodes carry them; geosched.kube.keys names them for the renderer and the cluster readers.
REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
OS = "kubernetes.io/os"
ARCH = "kubernetes.io/arch"
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_PRESENT = "nvidia.com/gpu.present"


def cloud_labels(*, provider: str, region: str, zone: str, zone_label: str, instance_type: str, gpu: str,
                 gpus: int, hostname: str, pool: str, spot: bool = False) -> dict[str, str]:
    """The labels a GPU node of `provider` (a cloud of `geosched.clouds`) carries. `zone` is the fleet's zone
    (AWS: the zone ID), `zone_label` the value of `topology.kubernetes.io/zone` on the node (AWS: that zone's name
    in the account running the cluster); `pool` the node group (EKS) or node pool (GKE). The cloud's own labels
    come from its spec."""
    spec = clouds.get(provider)
    if spec is None:
        raise ValueError(f"no cloud node labels for provider {provider!r}")
    labels = {HOSTNAME: hostname, OS: "linux", ARCH: "amd64", REGION: region,
              ZONE: zone_label, INSTANCE_TYPE: instance_type}
    gpu_part = part(gpu)
    labels.update(spec.node_labels(NodeShape(zone=zone, pool=pool, instance_type=instance_type, gpu=gpu_part,
                                             spot=spot)))
    if gpu_part.product is not None:
        labels[GPU_PRODUCT] = gpu_part.product
        labels[GPU_COUNT] = str(gpus)
        labels[GPU_PRESENT] = "true"
    return labels


def provider_id(provider: str, zone_label: str, name: str, project: str) -> str:
    """The providerID a cloud's node controller sets (its spec's scheme): AWS with an instance ID derived from
    `name` (so the same node always gets the same one), GCE with the instance name in `project`."""
    spec = clouds.get(provider)
    if spec is None or spec.provider_id is None:
        raise ValueError(f"no providerID format for provider {provider!r}")
    return spec.provider_id(zone_label, name, project)


def selectable(node: Node) -> Mapping[str, str]:
    """The node's labels as a node selector sees them. A fleet file may leave out labels whose value the fleet
    already states: the hostname (the node name), the region, and the zone: in the cloud's zone-ID label where
    its spec names one (AWS), else in the zone label. The zone label of an AWS node is never filled in: the fleet
    names AWS zones by ID, and the zone name a node carries differs per account."""
    defaults = {HOSTNAME: node.name, REGION: node.region}
    spec = clouds.get(node.provider)
    defaults[spec.zone_id_label if spec is not None and spec.zone_id_label else ZONE] = node.zone
    return {**defaults, **node.labels}
