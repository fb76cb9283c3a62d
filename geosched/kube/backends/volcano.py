"""Volcano: a PodGroup (scheduling.volcano.sh/v1beta1) with the gang size and a hard network-topology limit,
pods sent to the volcano scheduler and joined to the group by the group-name annotation.

HyperNode tiers are a cluster's own numbering (tier 1 is a leaf switch where HyperNodes come from switch
discovery): only the cluster config says which tier is a zone and which a region (`kube/config.py`), and by
default none is, so the group gets no networkTopology and node affinity alone keeps the gang in its zones. A gang
across regions gets none either: no tier holds it, and a hard limit would never bind.
"""

from __future__ import annotations

from typing import Any

from geosched.kube import keys
from geosched.kube.backends.base import Gang, Handoff, gpu_resources
from geosched.kube.config import ClusterConfig
from geosched.kube.jobinput import JobKind

API_VERSION = "scheduling.volcano.sh/v1beta1"


def handoff(gang: Gang, cluster: ClusterConfig) -> Handoff:
    spec: dict[str, Any] = {"minMember": gang.pods, "minResources": gpu_resources(gang)}
    if cluster.queue is not None:
        spec["queue"] = cluster.queue
    tier = None
    if gang.single_zone and cluster.volcano_zone_tier is not None:
        tier = cluster.volcano_zone_tier
    elif gang.single_region:
        # A one-zone gang on a cluster that maps only regions: the region tier still bounds it.
        tier = cluster.volcano_region_tier
    if tier is not None:
        spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
    # Named after the job, as the training operator names a PyTorchJob's group, so both mean the same group.
    group = {"apiVersion": API_VERSION, "kind": "PodGroup",
             "metadata": {"name": gang.name, "namespace": gang.namespace}, "spec": spec}
    policy = {"minAvailable": gang.pods} if gang.kind is JobKind.PYTORCHJOB else {}
    return Handoff(pod_annotations={keys.VOLCANO_GROUP_NAME: gang.name},
                   scheduler_name=cluster.scheduler_name or keys.VOLCANO_SCHEDULER,
                   scheduling_policy=policy, side_objects=(group,), pod_level_required=True)
