"""Label, annotation and resource names that other controllers define; geosched emits them, never invents them."""

from __future__ import annotations

from geosched.clouds import aws as _aws
from geosched.clouds import gcp as _gcp
from geosched.core import nodelabels as _labels

# Well-known node labels (kubernetes.io/docs/reference/labels-annotations-taints) and NVIDIA's GPU labels: those a
# node carries are defined with the node labels of the pure core (geosched.core.nodelabels), which the embedded
# fleet is built with, and named here too.
REGION = _labels.REGION
ZONE = _labels.ZONE
HOSTNAME = _labels.HOSTNAME
INSTANCE_TYPE = _labels.INSTANCE_TYPE
OS = _labels.OS
ARCH = _labels.ARCH
GPU = "nvidia.com/gpu"
# NVIDIA GPU feature discovery (github.com/NVIDIA/k8s-device-plugin, docs/gpu-feature-discovery).
GPU_PRODUCT = _labels.GPU_PRODUCT
GPU_COUNT = _labels.GPU_COUNT
GPU_PRESENT = _labels.GPU_PRESENT
# GFD's labels of shared and partitioned GPUs: under MIG's "single" strategy every GPU is cut into slices advertised
# as nvidia.com/gpu and the product is named `...-MIG-1g.5gb` (docs/gpu-feature-discovery, "MIG 'single'"); and
# time-slicing or MPS replicas (the GPU operator's "Time-Slicing GPUs in Kubernetes": `gpu.replicas`, the product
# suffixed `-SHARED`, `gpu.sharing-strategy` time-slicing or mps).
GPU_REPLICAS = "nvidia.com/gpu.replicas"
GPU_SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"
# EKS also labels nodes with the zone ID, the fleet's zone identity for AWS (zone names differ per account):
# kubernetes/cloud-provider-aws#855, on EKS nodes since Kubernetes 1.30. Managed node groups add their own.
# The cloud-specific keys are defined with their cloud (geosched.clouds) and named here too for the renderer.
AWS_ZONE_ID = _aws.ZONE_ID_LABEL
EKS_NODEGROUP = _aws.NODEGROUP_LABEL
EKS_CAPACITY_TYPE = _aws.CAPACITY_TYPE_LABEL
# GKE (cloud.google.com/kubernetes-engine/docs/how-to/gpus, .../concepts/node-pools).
GKE_NODEPOOL = _gcp.NODEPOOL_LABEL
GKE_ACCELERATOR = _gcp.ACCELERATOR_LABEL
GKE_MACHINE_FAMILY = _gcp.MACHINE_FAMILY_LABEL
GKE_GPU_PARTITION = _gcp.GPU_PARTITION_LABEL
GKE_GPU_SHARING = _gcp.GPU_SHARING_LABEL

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
