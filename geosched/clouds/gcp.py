"""GCP: Compute Engine GPU VMs, GKE node pools.

- Zones: zone names (`us-central1-a`) in `topology.kubernetes.io/zone` are the same in every project, so the
  zone label is the fleet's zone.
- GKE labels: `cloud.google.com/gke-nodepool`, `cloud.google.com/gke-accelerator` on GPU nodes
  (`nvidia-h100-80gb`), `cloud.google.com/machine-family` (cloud.google.com/kubernetes-engine/docs/how-to/gpus,
  .../concepts/node-pools).
- providerID `gce://<project>/<zone>/<instance name>` (kubernetes/cloud-provider-gcp).
- Prices: `gcp_gpu_vms.csv`; A3 Edge (`a3-edgegpu-*`) is listed by the feed but offered only in the zones and to
  the projects Google enables it for (cloud.google.com/compute/docs/gpus, "A3 Edge").
- The network model measured one endpoint per zone (Skyplane); a zone without one takes a sibling's.
- Spot: no interruption API; Spot VMs are reclaimed at a rate GCP calls "generally low": 15%/day is assumed
  (the upper end of the 5-15% an older edition of cloud.google.com/compute/docs/instances/preemptible gave).
- CPU power: Cloud Carbon Footprint's MIN_WATTS_MEDIAN / MAX_WATTS_MEDIAN (packages/gcp constants).
"""

from __future__ import annotations

from collections.abc import Mapping

from geosched.clouds.spec import CloudSetting, CloudSpec, NodeShape

NAME = "gcp"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
MACHINE_FAMILY_LABEL = "cloud.google.com/machine-family"
# GPUs GKE shares or partitions, each pod then getting a slice of one (an `nvidia.com/gpu` is a slice, not a GPU):
# MIG partitions (cloud.google.com/kubernetes-engine/docs/how-to/gpus-multi: `gke-gpu-partition-size=1g.5gb`) and
# time-sharing or MPS (.../how-to/timesharing-gpus, .../how-to/nvidia-mps-gpus: `gke-gpu-sharing-strategy`).
GPU_PARTITION_LABEL = "cloud.google.com/gke-gpu-partition-size"
GPU_SHARING_LABEL = "cloud.google.com/gke-gpu-sharing-strategy"
# Spot VMs and the older preemptible VMs (cloud.google.com/kubernetes-engine/docs/concepts/spot-vms,
# .../concepts/preemptible-vms).
SPOT_LABELS = (("cloud.google.com/gke-spot", "true"), ("cloud.google.com/gke-preemptible", "true"))
DAILY_PREEMPTION = 0.15


def node_labels(node: NodeShape) -> Mapping[str, str]:
    labels = {NODEPOOL_LABEL: node.pool, MACHINE_FAMILY_LABEL: node.instance_type.split("-", 1)[0]}
    if node.gpu.gke_accelerator is not None:
        labels[ACCELERATOR_LABEL] = node.gpu.gke_accelerator
    return labels


def provider_id(zone_label: str, name: str, project: str) -> str:
    return f"gce://{project}/{zone_label}/{name}"


# Credentials are google.auth's application default credentials: not settings.
SETTINGS = (
    CloudSetting("project", "GEOSCHED_GCP_PROJECT", "GCP project."),
    CloudSetting("endpoint", "GEOSCHED_GCP_ENDPOINT", "Compute Engine API endpoint (an emulator, a private endpoint).",
                 shown_default="Google's"),
    CloudSetting("gke_endpoint", "GEOSCHED_GKE_ENDPOINT", "GKE (container) API endpoint for node pools (`provision "
                 "--cluster --provider gcp`, `up`): an emulator, a private endpoint. An http:// endpoint is called "
                 "without credentials.", shown_default="Google's"),
    CloudSetting("image", "GEOSCHED_GCP_IMAGE", "Image to launch.",
                 shown_default="Deep Learning VM family common-cu124-debian-11-py310"),
    CloudSetting("public_ips", "GEOSCHED_GCP_PUBLIC_IPS", "Give VMs geosched launches on GCP an external address (no: "
                 "reach them by internal address, from inside the VPC, a bastion or a VPN). With a Terraform network, "
                 "the module's `public_ips` decides.", "flag", default=True),
)

SPEC = CloudSpec(
    name=NAME,
    title="GCP",
    provider_id_schemes=("gce",),
    node_labels=node_labels,
    spot_labels=SPOT_LABELS,
    pool_label=NODEPOOL_LABEL,
    provider_id=provider_id,
    kube_service="gke",
    catalog_file="gcp_gpu_vms.csv",
    not_launchable=("a3-edgegpu-",),
    network_endpoint="zone",
    spot_daily_preemption=DAILY_PREEMPTION,
    ccf_cpu_watts=(0.68, 4.11),
    terraform_module="terraform/modules/gcp-gpu-region",
    extra="gcp",
    # `google` is a namespace shared by google-cloud-compute, google-auth, google-api-core and protobuf: all of the
    # extra; `requests` is the Compute Engine REST transport's own errors (geosched.providers.gcp).
    sdk_modules=("google", "requests"),
    extra_purpose=("Compute Engine provisioning, GKE node pools, GCP prices (google-cloud-compute, "
                   "google-cloud-container)"),
    settings=SETTINGS,
    sources=(
        "github.com/kubernetes/cloud-provider-gcp (providerID)",
        "cloud.google.com/kubernetes-engine/docs/how-to/gpus",
    ),
)
