"""Kubernetes' own gang scheduling (KEP-4671, "Gang Scheduling using Workload Object"): a `Workload` and a
`PodGroup` of `scheduling.k8s.io/v1alpha2`, and every pod of the gang joined to the group by
`spec.schedulingGroup.podGroupName`. kube-scheduler's GangScheduling plugin then binds none of the pods until
`minCount` of them fit together.

Shapes from the Kubernetes 1.36 OpenAPI (the kubernetes-validate package's v1.36.0 schemas:
`io.k8s.api.scheduling.v1alpha2.{Workload,PodGroup,PodGroupTemplate,GangSchedulingPolicy,TopologyConstraint}`,
`io.k8s.api.core.v1.PodSchedulingGroup`) and the docs (kubernetes.io/docs/concepts/workloads/podgroup-api,
.../pods/scheduling-group, .../scheduling-eviction/gang-scheduling):

- the Workload holds one PodGroupTemplate with the gang policy (`schedulingPolicy.gang.minCount`) and, for a gang
  held in one zone or one region, one topology constraint (`schedulingConstraints.topology[].key`; 1.36 takes
  one at most) on that level's node label;
- the PodGroup is the runtime instance the pods name: it copies the template's policy and constraints, as the
  API expects of the controller that creates it, and points back with `podGroupTemplateRef.workload`;
- both are named after the job, as the coscheduling and Volcano groups are.

Jobs and JobSets carry the pods' field (the JobSet CRD in shared/schemas/crds has it); a PyTorchJob (kubeflow.org/v1)
is refused (`kinds/pytorchjob.py`), its CRD would prune it; a TrainJob, whose pods live in its runtime, too
(`pod_level_required`).

The pods go to the cluster's default scheduler (or `scheduler_name` from the cluster config), which runs the
plugin when the GangScheduling gate is on. A pod template that names its group is also what keeps the Job
controller of 1.36 (WorkloadWithJob gate, KEP-5547 alpha) from creating a second Workload for the same Job.

Alpha API: 1.35 serves v1alpha1 (pods name it by `spec.workloadRef`), 1.37 serves v1alpha3 and v1beta1 (topology
by `level`); this backend writes v1alpha2 and is for 1.36 clusters (see backends/README.md).
"""

from __future__ import annotations

from typing import Any

from geosched.kube.backends.base import Gang, Handoff
from geosched.kube.config import ClusterConfig

API_VERSION = "scheduling.k8s.io/v1alpha2"
TEMPLATE = "gang"
# What a cluster that does not serve the API lacks (kubernetes.io/docs/concepts/workloads/podgroup-api).
NOT_SERVED = ("Kubernetes 1.36 serves it with the GenericWorkload feature gate on and "
              "--runtime-config=scheduling.k8s.io/v1alpha2=true")


def handoff(gang: Gang, cluster: ClusterConfig) -> Handoff:
    def policy() -> dict[str, Any]:  # fresh dicts per object: shared ones would be YAML anchors in the output
        return {"gang": {"minCount": gang.pods}}

    template: dict[str, Any] = {"name": TEMPLATE, "schedulingPolicy": policy()}
    group_spec: dict[str, Any] = {
        "podGroupTemplateRef": {"workload": {"workloadName": gang.name, "podGroupTemplateName": TEMPLATE}},
        "schedulingPolicy": policy(),
    }
    if gang.holding_level is not None:
        # Honoured with the TopologyAwareWorkloadScheduling gate (KEP-5732); without it the server drops the field
        # and node affinity alone keeps the gang in its zones.
        template["schedulingConstraints"] = {"topology": [{"key": gang.holding_level}]}
        group_spec["schedulingConstraints"] = {"topology": [{"key": gang.holding_level}]}
    workload = {"apiVersion": API_VERSION, "kind": "Workload",
                "metadata": {"name": gang.name, "namespace": gang.namespace},
                "spec": {"controllerRef": controller_ref(gang), "podGroupTemplates": [template]}}
    group = {"apiVersion": API_VERSION, "kind": "PodGroup",
             "metadata": {"name": gang.name, "namespace": gang.namespace}, "spec": group_spec}
    return Handoff(pod_spec={"schedulingGroup": {"podGroupName": gang.name}},
                   scheduler_name=cluster.scheduler_name, side_objects=(workload, group), pod_level_required=True)


def controller_ref(gang: Gang) -> dict[str, str]:
    """The job object as a TypedLocalObjectReference (`apiGroup` is the group alone, empty for the core group)."""
    group, kind = gang.kind.group, gang.kind.kind
    return {"apiGroup": group, "kind": kind, "name": gang.name} if group else {"kind": kind, "name": gang.name}
