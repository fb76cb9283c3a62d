"""scheduler-plugins coscheduling: a PodGroup (scheduling.x-k8s.io/v1alpha1) holding the whole gang and the
pod-group label on its pods. A PyTorchJob instead states minAvailable in its runPolicy: the training operator
creates the PodGroup itself and would fight a second one (any kind with a `scheduling_policy_path`).

The pods go to the scheduler that runs the Coscheduling plugin: `scheduler_name` in the cluster config, by default
`scheduler-plugins-scheduler`, the name scheduler-plugins installs itself under as a second scheduler. A cluster
that enabled the plugin in its default scheduler sets `scheduler_name: default-scheduler`."""

from __future__ import annotations

from geosched.kube import keys
from geosched.kube.backends.base import Gang, Handoff, gpu_resources
from geosched.kube.config import ClusterConfig

API_VERSION = "scheduling.x-k8s.io/v1alpha1"


def handoff(gang: Gang, cluster: ClusterConfig) -> Handoff:
    scheduler = cluster.scheduler_name or keys.COSCHED_SCHEDULER
    if gang.kind.scheduling_policy_path is not None:  # its operator makes the PodGroup
        return Handoff(scheduling_policy={"minAvailable": gang.pods}, scheduler_name=scheduler,
                       pod_level_required=True)
    group = {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": gang.name, "namespace": gang.namespace},
        "spec": {"minMember": gang.pods, "minResources": gpu_resources(gang)},
    }
    return Handoff(pod_labels={keys.COSCHED_POD_GROUP: gang.name}, scheduler_name=scheduler,
                   side_objects=(group,), pod_level_required=True)
