"""What a gang's GKE node pool is, decided without any call: pure (the GKE twin of spec.py).

In: the gang plan (`plan.Plan`) and what the cluster is (its project, location, region and node locations). Out:
the zones to try in order, the CreateNodePoolRequest for one of them, what a node pool's status and its create
operation's error mean in the provider error taxonomy.

GKE REST shapes relied on (cloud.google.com/kubernetes-engine/docs/reference/rest/v1/
projects.locations.clusters.nodePools, .../projects.locations.clusters, .../projects.locations.operations):
- nodePools.create: POST v1/{parent=projects/*/locations/*/clusters/*}/nodePools, body {nodePool}; answers an
  Operation (operationType CREATE_NODE_POOL, status PENDING | RUNNING | DONE | ABORTING, error google.rpc.Status
  {code, message}); delete answers one of type DELETE_NODE_POOL.
- NodePool: name (RFC 1035, at most 40 characters), config (NodeConfig: machineType, labels {k: v}, taints [{key,
  value, effect NO_SCHEDULE | PREFER_NO_SCHEDULE | NO_EXECUTE}], accelerators [{acceleratorCount, acceleratorType,
  gpuDriverInstallationConfig {gpuDriverVersion DEFAULT | LATEST | INSTALLATION_DISABLED}}], spot, resourceLabels
  {k: v}: the labels put on the Compute Engine resources), initialNodeCount, locations [zone], autoscaling
  {enabled, minNodeCount, maxNodeCount}, placementPolicy {type COMPACT}, status PROVISIONING | RUNNING |
  RUNNING_WITH_ERROR | RECONCILING | STOPPING | ERROR, statusMessage, selfLink.
- Cluster: location (a region, or a zone for a zonal cluster), locations (the zones its nodes may use), status
  PROVISIONING | RUNNING | RECONCILING | STOPPING | ERROR | DEGRADED.

GPU pools: GKE taints every node of a pool with GPUs `nvidia.com/gpu=present:NoSchedule` itself (docs, "Run GPUs
in GKE Standard node pools": "GKE automatically adds a taint ... nvidia.com/gpu=present:NoSchedule"), so the
request carries no taint of its own: the taint `up` tolerates is that one (`GPU_TAINT`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geosched.clouds import gcp as gcp_cloud
from geosched.core import gpus
from geosched.core.models import Pricing
from geosched.kube import keys
from geosched.providers.base import CapacityError, ProviderError, QuotaError, UnsupportedError
from geosched.providers.lifecycle import GANG_LABEL
from geosched.providers.nodegroups import backend
from geosched.providers.nodegroups.backend import pool_name
from geosched.providers.plan import Candidate, Plan, Skipped

PROVIDER = gcp_cloud.NAME
# The taint GKE puts on GPU nodes (see above), as a node carries it.
GPU_TAINT = {"key": keys.GPU, "value": "present", "effect": "NoSchedule"}
# The GPU types built into a machine family whose part differs from the catalog GPU model's usual one
# (cloud.google.com/compute/docs/gpus, "GPU machine types": A3 Mega carries nvidia-h100-mega-80gb, A2 Ultra
# nvidia-a100-80gb). Every other family: gpus.part(model).gke_accelerator (a3-highgpu: nvidia-h100-80gb).
FAMILY_ACCELERATORS = {"a3-megagpu": "nvidia-h100-mega-80gb", "a2-ultragpu": "nvidia-a100-80gb",
                       "a3-ultragpu": "nvidia-h200-141gb"}
# Machine series a compact placement policy accepts (GKE docs, "Define compact placement for GKE nodes",
# Requirements: A2, A3, A4, C2, C2D, C3, C3D, C4, C4D, G2, H3, N2, N2D), and the most nodes one compact placement
# holds. 150 was the figure of the older pages: Compute Engine's "Placement policies overview" (compact policies
# "support up to 150 VMs per policy", then for A2, C2, G2, C2D, N2 and N2D only) and the GKE page's own ("Pods
# grouped on up to 150 nodes"). The GKE page now reads 1,500 ("Compact placement is available for Pods grouped on
# up to 1,500 nodes"; "Each placement group is limited to 1,500 nodes", the same for every machine series and GPU
# it lists: C2 ... N2D, A100, L4, H100), so a 151-node A3 gang was refused a placement GKE gives it. The page states
# the figure in its Autopilot section; no smaller one for Standard pools was found in it. A pool is at most
# MAX_POOL_NODES (1,000) anyway, so within GKE's limits every pool of two nodes or more of these series is compact.
# Outside the series, or for one node, the pool is made without one.
COMPACT_SERIES = frozenset({"a2", "a3", "a4", "c2", "c2d", "c3", "c3d", "c4", "c4d", "g2", "h3", "n2", "n2d"})
COMPACT_MAX_NODES = 1500
# GKE quotas and limits: "Nodes per node pool zone: 1,000" (cloud.google.com/kubernetes-engine/quotas). A gang is
# one pool in one zone, held at its size.
MAX_POOL_NODES = 1000
# NodePool.status onto the meaning `gke.py` gives it.
PROVISIONING, RUNNING, RECONCILING, STOPPING = "PROVISIONING", "RUNNING", "RECONCILING", "STOPPING"
ERROR, RUNNING_WITH_ERROR = "ERROR", "RUNNING_WITH_ERROR"
# What a failed create's message says (the operation's error carries Compute Engine's own code; GKE docs,
# "Troubleshoot node pool creation": ZONE_RESOURCE_POOL_EXHAUSTED, GCE_STOCKOUT, "Insufficient regional quota").
CAPACITY_MARKERS = ("ZONE_RESOURCE_POOL_EXHAUSTED", "GCE_STOCKOUT", "does not have enough resources available",
                    "resource_availability")
QUOTA_MARKERS = ("QUOTA_EXCEEDED", "Insufficient regional quota", "Insufficient project quota", "quota exceeded")


@dataclass(frozen=True, slots=True)
class Cluster:
    """A GKE cluster as node pools need it. `location` addresses it (a region, or a zone for a zonal cluster);
    `zones` are its node locations (Cluster.locations)."""

    name: str
    project: str
    location: str
    region: str
    zones: tuple[str, ...]
    status: str = RUNNING

    @property
    def path(self) -> str:
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.name}"

    @property
    def regional(self) -> bool:
        return self.location == self.region

    def holds(self, zone: str) -> bool:
        """A pool may go into any zone of a regional cluster's region; a zonal cluster's only into its node
        locations (GKE docs, "Regional clusters" / "Node locations")."""
        if self.regional:
            return zone.rsplit("-", 1)[0] == self.region
        return zone in self.zones


@dataclass(frozen=True, slots=True)
class Target:
    """One zone to try (backend.Target): the plan's candidate in the cluster."""

    candidate: Candidate
    cluster: str
    location: str

    @property
    def where(self) -> str:
        return self.location

    @property
    def zone_name(self) -> str:
        return self.candidate.zone

    @property
    def capacity_type(self) -> str:
        return backend.capacity_type(self.candidate.pricing)


def region_of(location: str) -> str:
    """A location's region: itself for a region (us-central1), the zone's region for a zone (us-central1-a)."""
    head, _, tail = location.rpartition("-")
    return head if head and len(tail) == 1 else location


def targets(plan: Plan, cluster: Cluster) -> tuple[tuple[Target, ...], tuple[Skipped, ...]]:
    def fit(c: Candidate) -> Target | str:
        if not cluster.holds(c.zone):
            return f"zone {c.zone} is not a node location of zonal cluster {cluster.name}"
        if accelerator(c.instance_type, c.gpu) is None:
            return f"no GKE accelerator type known for {c.instance_type} ({c.gpu})"
        return Target(c, cluster.name, cluster.location)

    return backend.split(plan, PROVIDER, cluster.name, cluster.region, fit)


def size_problem(nodes: int) -> str | None:
    if nodes > MAX_POOL_NODES:
        return (f"{nodes} nodes is more than one GKE node pool holds in a zone ({MAX_POOL_NODES}, 'Nodes per node "
                "pool zone'); split the job into gangs of at most that many")
    return None


def accelerator(instance_type: str, gpu: str) -> str | None:
    family = instance_type.rsplit("-", 1)[0]
    return FAMILY_ACCELERATORS.get(family) or gpus.part(gpu).gke_accelerator


def compact(instance_type: str, nodes: int) -> bool:
    return instance_type.split("-", 1)[0] in COMPACT_SERIES and 1 < nodes <= COMPACT_MAX_NODES


# Ownership, on the pool's Compute Engine resources (NodeConfig.resourceLabels): how `down` tells a pool of this
# store's gang from anyone else's (label values must be lowercase letters, digits and '-', as those are).
resource_labels = backend.ownership


def create_request(target: Target, *, project: str, gang: str, seq: int, owner: str, token: str,
                   nodes: int) -> dict[str, Any]:
    """The CreateNodePoolRequest (protobuf field names, as google-cloud-container takes a mapping)."""
    c = target.candidate
    config: dict[str, Any] = {
        "machine_type": c.instance_type,
        "labels": {GANG_LABEL: gang},
        # Built into A2/A3/G2 machines, and still named in the request (gcloud's --accelerator): GKE installs the
        # default driver for it.
        "accelerators": [{"accelerator_count": c.gpus, "accelerator_type": accelerator(c.instance_type, c.gpu),
                          "gpu_driver_installation_config": {"gpu_driver_version": "DEFAULT"}}],
        "spot": c.pricing is Pricing.SPOT,
        "resource_labels": resource_labels(gang, owner, token),
        "oauth_scopes": ["https://www.googleapis.com/auth/cloud-platform"],
    }
    pool: dict[str, Any] = {
        "name": pool_name(gang, seq),
        "config": config,
        "initial_node_count": nodes,
        "locations": [c.zone],
        # The gang is all-or-nothing: held at its size.
        "autoscaling": {"enabled": True, "min_node_count": nodes, "max_node_count": nodes},
        "management": {"auto_repair": True, "auto_upgrade": False},
    }
    if compact(c.instance_type, nodes):
        pool["placement_policy"] = {"type_": "COMPACT"}
    cluster_path = f"projects/{project}/locations/{target.location}/clusters/{target.cluster}"
    return {"parent": cluster_path, "node_pool": pool}


def failure(status: str, message: str, name: str) -> ProviderError:
    """What a failed pool (or its create operation's error) means for failover: capacity (next zone), quota
    (next region), anything else an unsupported configuration of this zone."""
    text = f"node pool {name} {status}: {message or 'no message given'}"
    if any(m.lower() in message.lower() for m in CAPACITY_MARKERS):
        return CapacityError(text, code="ZONE_RESOURCE_POOL_EXHAUSTED")
    if any(m.lower() in message.lower() for m in QUOTA_MARKERS):
        return QuotaError(text, code="QUOTA_EXCEEDED")
    return UnsupportedError(text, code=status)


def labels_of(config: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((config or {}).get("resource_labels") or {}).items()}
