"""Label, annotation and resource names that other controllers define; geosched emits them, never invents them."""

from __future__ import annotations

# Well-known node labels (kubernetes.io/docs/reference/labels-annotations-taints) and NVIDIA's GPU labels.
REGION = "topology.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
OS = "kubernetes.io/os"
ARCH = "kubernetes.io/arch"
GPU = "nvidia.com/gpu"
# NVIDIA GPU feature discovery (github.com/NVIDIA/k8s-device-plugin, docs/gpu-feature-discovery).
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
GPU_PRESENT = "nvidia.com/gpu.present"
# EKS also labels nodes with the zone ID, the fleet's zone identity for AWS (zone names differ per account):
# kubernetes/cloud-provider-aws#855, on EKS nodes since Kubernetes 1.30. Managed node groups add their own.
AWS_ZONE_ID = "topology.k8s.aws/zone-id"
EKS_NODEGROUP = "eks.amazonaws.com/nodegroup"
EKS_CAPACITY_TYPE = "eks.amazonaws.com/capacityType"
# GKE (cloud.google.com/kubernetes-engine/docs/how-to/gpus, .../concepts/node-pools).
GKE_NODEPOOL = "cloud.google.com/gke-nodepool"
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
GKE_MACHINE_FAMILY = "cloud.google.com/machine-family"

# Kueue.
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"

# scheduler-plugins coscheduling.
COSCHED_POD_GROUP = "scheduling.x-k8s.io/pod-group"
# The name scheduler-plugins runs its scheduler under when installed beside the default one, as its install docs
# and chart do (manifests/install/charts/as-a-second-scheduler/values.yaml `scheduler.name`; doc/install.md:
# "specify .spec.schedulerName to match the secondary scheduler name").
COSCHED_SCHEDULER = "scheduler-plugins-scheduler"

# Volcano.
VOLCANO_GROUP_NAME = "scheduling.k8s.io/group-name"
VOLCANO_SCHEDULER = "volcano"

# geosched's own prefix: the only one written freely.
PREFIX = "geosched.io/"
JOB_LABEL = PREFIX + "job"
