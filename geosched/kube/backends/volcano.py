"""Volcano: a PodGroup (scheduling.volcano.sh/v1beta1) with the gang size and a hard network-topology limit,
pods sent to the volcano scheduler and joined to the group by the group-name annotation.

HyperNode tiers are a cluster's own numbering (tier 1 is a leaf switch where HyperNodes come from switch
discovery): only the cluster config says which tier is a zone and which a region (`kube/config.py`), and by
default none is, so the group gets no networkTopology and node affinity alone keeps the gang in its zones. A gang
across regions gets none either: no tier holds it, and a hard limit would never bind.

A PyTorchJob gets no PodGroup: with Volcano gang scheduling the training operator creates the job's group itself
and on every sync replaces the spec of the one it finds with {minMember, queue, priorityClassName, minResources}
(kubeflow/training-operator release-1.9 078ec30ff266, pkg/controller.v1/common/job.go ReconcileJobs,
scheduling.go SyncPodGroup), dropping `networkTopology`, which Volcano reads from the PodGroup spec alone (volcano
ed72c7c815a9, pkg/scheduler/api/job_info.go). The gang's size and queue go to the operator through
`runPolicy.schedulingPolicy`, and the bound a zone or region tier would set stays where the operator keeps it:
the pods' required node affinity on the placement's zones (and region), which the renderer writes for every
backend.
"""

from __future__ import annotations

from typing import Any

from geosched.kube import keys
from geosched.kube.backends.base import Gang, Handoff, gpu_resources
from geosched.kube.config import ClusterConfig

API_VERSION = "scheduling.volcano.sh/v1beta1"


def handoff(gang: Gang, cluster: ClusterConfig) -> Handoff:
    scheduler = cluster.scheduler_name or keys.VOLCANO_SCHEDULER
    if gang.kind.scheduling_policy_path is not None:  # its operator makes the PodGroup
        policy: dict[str, Any] = {"minAvailable": gang.pods}
        if cluster.queue is not None:
            policy["queue"] = cluster.queue
        return Handoff(pod_annotations={keys.VOLCANO_GROUP_NAME: gang.name}, scheduler_name=scheduler,
                       scheduling_policy=policy, pod_level_required=True)
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
    group = {"apiVersion": API_VERSION, "kind": "PodGroup",
             "metadata": {"name": gang.name, "namespace": gang.namespace}, "spec": spec}
    return Handoff(pod_annotations={keys.VOLCANO_GROUP_NAME: gang.name}, scheduler_name=scheduler,
                   side_objects=(group,), pod_level_required=True)
