"""geosched.io/v1alpha1 Job: geosched's compact job file (`geosched.files.documents.parse_job`). Not an object any
cluster serves: rendering builds a batch/v1 Job or a JobSet from it (`geosched.kube.compact`)."""

from __future__ import annotations

from geosched.files.formats import API_VERSION
from geosched.kube.kinds import template
from geosched.kube.kinds.base import JobKind
from geosched.kube.objpath import At


class CompactJob(JobKind):
    api_version = API_VERSION
    kind = "Job"
    plural = ""
    served = False

    def pod_sets(self, spec: At) -> list[template.Template]:
        raise AssertionError("a compact job is read by geosched.files.documents.parse_job, not from pod templates")


KIND = CompactJob()
