"""kubeflow.org/v1 PyTorchJob: Master and Worker replica specs, each a pod set. Suspended by
`spec.runPolicy.suspend`. The training operator makes the gang's PodGroup itself from
`spec.runPolicy.schedulingPolicy` (coscheduling, Volcano), and its CRD's pod templates predate
`spec.schedulingGroup`, so Kubernetes' Workload API cannot hold its gang."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from geosched.kube.gang_backends import Backend
from geosched.kube.kinds import template
from geosched.kube.kinds.base import JobKind, when
from geosched.kube.objpath import At

ROLES = ("Master", "Worker")


class PyTorchJob(JobKind):
    api_version = "kubeflow.org/v1"
    kind = "PyTorchJob"
    plural = "pytorchjobs"
    suspend_path = ("spec", "runPolicy", "suspend")
    scheduling_policy_path = ("spec", "runPolicy", "schedulingPolicy")

    def pod_sets(self, spec: At) -> list[template.Template]:
        if spec.key("elasticPolicy").present:
            raise spec.key("elasticPolicy").error("an elastic PyTorchJob has no fixed gang size; geosched places "
                                                  "fixed gangs (remove elasticPolicy)")
        out: list[template.Template] = []
        for role, replica in spec.key("pytorchReplicaSpecs").entries(required=True):
            if role not in ROLES:
                raise replica.error(f"unknown replica type (expected {' or '.join(ROLES)})")
            replicas = replica.key("replicas").integer(minimum=0, default=1)
            if role == "Master" and replicas > 1:
                raise replica.key("replicas").error(f"a PyTorchJob has one Master, got {replicas}")
            out.append(template.read(replica.key("template"), ("spec", "pytorchReplicaSpecs", role, "template"),
                                     replicas))
        if not out:
            raise spec.key("pytorchReplicaSpecs").error("must define Master and/or Worker")
        return out

    def refusal(self, backend: Backend) -> str | None:
        if backend is Backend.WORKLOAD_API:
            # The kubeflow.org/v1 CRD's pod templates predate schedulingGroup: the API server would prune it and the
            # pods would be scheduled one by one (shared/schemas/crds/kubeflow.org_pytorchjobs.yaml has no such field).
            return ("a kubeflow.org/v1 PyTorchJob's pod templates cannot carry spec.schedulingGroup (its CRD "
                    "predates it); use a JobSet or an indexed Job, or backend coscheduling or volcano")
        return None

    states_start = True

    def started_at(self, status: Mapping[str, Any], true: Mapping[str, float | None]) -> float | None:
        # Without a startTime, the time its Running condition turned True.
        return when(status.get("startTime")) or true.get("Running")


KIND = PyTorchJob()
