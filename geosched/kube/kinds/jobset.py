"""jobset.x-k8s.io/v1alpha2 JobSet: one pod set per replicated job, `replicas` x its Job's parallelism pods.
Suspended by `spec.suspend`; no start time in its status (the Suspended condition or creation says it)."""

from __future__ import annotations

from geosched.kube.kinds import template
from geosched.kube.kinds.base import JobKind
from geosched.kube.kinds.template import PathKey
from geosched.kube.objpath import At


class JobSet(JobKind):
    api_version = "jobset.x-k8s.io/v1alpha2"
    kind = "JobSet"
    plural = "jobsets"

    def pod_sets(self, spec: At) -> list[template.Template]:
        out: list[template.Template] = []
        for i, rjob in enumerate(spec.key("replicatedJobs").items(required=True)):
            rjob.key("name").string()
            replicas = rjob.key("replicas").integer(minimum=0, default=1)
            job_spec = rjob.dig("template", "spec")
            job_spec.mapping(required=True)
            # JobSet's defaulting webhook makes a missing completionMode Indexed (kubernetes-sigs/jobset
            # pkg/webhooks/jobset_webhook.go, Default: "Default job completion mode to indexed"), and every upstream
            # example leaves it out: read as the cluster will run it, not as a bare Job's NonIndexed.
            pods = replicas * template.indexed_pods(job_spec, default_mode="Indexed")
            path: tuple[PathKey, ...] = ("spec", "replicatedJobs", i, "template", "spec", "template")
            out.append(template.read(job_spec.key("template"), path, pods))
        if not out:
            raise spec.key("replicatedJobs").error("must list at least one replicated job")
        return out


KIND = JobSet()
