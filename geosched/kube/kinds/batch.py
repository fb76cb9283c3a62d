"""batch/v1 Job: one pod set of `parallelism` pods (Indexed when more than one: each worker its own rank)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from geosched.kube.kinds import template
from geosched.kube.kinds.base import JobKind, when
from geosched.kube.objpath import At


class BatchJob(JobKind):
    api_version = "batch/v1"
    kind = "Job"
    plural = "jobs"
    owns_pods = True  # the Job controller makes the pods, owned by the Job

    def pod_sets(self, spec: At) -> list[template.Template]:
        return [template.read(spec.key("template"), ("spec", "template"), template.indexed_pods(spec))]

    def owned_pods_gang(self, obj: Mapping[str, Any]) -> int | None:
        """min(parallelism, completions): the pods that run at once."""
        spec = obj.get("spec")
        if not isinstance(spec, Mapping):
            return None
        parallelism = spec.get("parallelism")
        completions = spec.get("completions")
        p = parallelism if isinstance(parallelism, int) else 1
        return min(p, completions) if isinstance(completions, int) else p

    states_start = True

    def started_at(self, status: Mapping[str, Any], true: Mapping[str, float | None]) -> float | None:
        return when(status.get("startTime"))


KIND = BatchJob()
