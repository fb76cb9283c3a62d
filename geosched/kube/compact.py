"""A compact geosched job rendered as Kubernetes objects of a standard kind.

Default: an Indexed batch/v1 Job with a headless Service for rendezvous. It runs on any cluster, with no
controller beyond Kubernetes itself, and Kueue, coscheduling and Volcano all manage it. `jobset` renders a
JobSet (one replicated job of `workers` indexed pods) for clusters that run the JobSet controller, which then
owns the headless Service and restarts the gang as a whole.

Workers find each other through DNS: rank 0 is `GEOSCHED_COORDINATOR`, the worker's rank is the index
Kubernetes sets in JOB_COMPLETION_INDEX.

Failures: `backoffLimit: 0`, so a worker that fails fails the gang (a lost worker stalls all-reduce; retrying one
index alone does not help), and a `podFailurePolicy` that ignores pods with the `DisruptionTarget` condition: a
pod that geosched's scheduler releases from a half-bound gang (reason GeoschedGangRollback), that kube-scheduler
preempts, or that a drain or taint evicts is recreated without counting against the Job, as Kubernetes documents
for disruptions (kubernetes.io/docs/concepts/workloads/controllers/job/#pod-failure-policy).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geosched.core.models import Job
    from geosched.kube.jobinput import JobKind, PathKey, PodSet


class CompactKind(StrEnum):
    JOB = "job"
    JOBSET = "jobset"


JOBSET_WORKERS = "workers"


@dataclass(frozen=True)
class Built:
    kind: JobKind
    obj: dict[str, Any]
    companions: tuple[dict[str, Any], ...]
    pod_sets: tuple[PodSet, ...]


def build(job: Job, namespace: str, kind: CompactKind, source: str) -> Built:
    from geosched.core.errors import InputError
    if job.image is None:
        raise InputError(source, "image", "required to run the job on Kubernetes (the container image)")
    if kind is CompactKind.JOBSET:
        return _jobset(job, namespace)
    return _indexed_job(job, namespace)


def _pod_template(job: Job, coordinator: str, subdomain: str | None) -> dict[str, Any]:
    from geosched.kube import keys
    container = {
        "name": "worker",
        "image": job.image,
        "resources": {"limits": {keys.GPU: job.gpus_per_worker}},
        "env": [
            {"name": "GEOSCHED_WORKERS", "value": str(job.workers)},
            {"name": "GEOSCHED_GPUS_PER_WORKER", "value": str(job.gpus_per_worker)},
            {"name": "GEOSCHED_COORDINATOR", "value": coordinator},
        ],
    }
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if subdomain is not None:
        spec["subdomain"] = subdomain
    return {"metadata": {"labels": {keys.JOB_LABEL: job.name}}, "spec": spec}


# A disrupted pod (released by geosched's rollback, preempted, evicted) is not the job's failure.
IGNORE_DISRUPTIONS = {"rules": [{"action": "Ignore",
                                 "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}


def _indexed_spec(job: Job, template: dict[str, Any]) -> dict[str, Any]:
    # A gang fails as one: a lost worker stalls all-reduce, so retrying one index alone does not help.
    return {"completionMode": "Indexed", "completions": job.workers, "parallelism": job.workers,
            "backoffLimit": 0, "podFailurePolicy": copy.deepcopy(IGNORE_DISRUPTIONS), "template": template}


def _indexed_job(job: Job, namespace: str) -> Built:
    # Pods of an Indexed Job are named <job>-<index>; with the Service as subdomain they resolve in DNS.
    from geosched.kube import keys
    from geosched.kube.jobinput import PodSet
    from geosched.kube.kinds import batch
    template = _pod_template(job, f"{job.name}-0.{job.name}", subdomain=job.name)
    obj = {"apiVersion": batch.KIND.api_version, "kind": batch.KIND.kind,
           "metadata": {"name": job.name, "namespace": namespace}, "spec": _indexed_spec(job, template)}
    service = {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": job.name, "namespace": namespace},
        # Workers must resolve each other before they are ready: rendezvous is how they become ready.
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {keys.JOB_LABEL: job.name}},
    }
    path: tuple[PathKey, ...] = ("spec", "template")
    return Built(batch.KIND, obj, (service,), (PodSet(path, job.workers, job.gpus_per_worker),))


def _jobset(job: Job, namespace: str) -> Built:
    # JobSet pods are <jobset>-<replicatedJob>-<job index>-<pod index> under a Service named after the JobSet.
    from geosched.kube.jobinput import PodSet
    from geosched.kube.kinds import jobset
    template = _pod_template(job, f"{job.name}-{JOBSET_WORKERS}-0-0.{job.name}", subdomain=None)
    obj = {
        "apiVersion": jobset.KIND.api_version, "kind": jobset.KIND.kind,
        "metadata": {"name": job.name, "namespace": namespace},
        "spec": {
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "replicatedJobs": [{"name": JOBSET_WORKERS, "replicas": 1,
                                "template": {"spec": _indexed_spec(job, template)}}],
        },
    }
    path: tuple[PathKey, ...] = ("spec", "replicatedJobs", 0, "template", "spec", "template")
    return Built(jobset.KIND, obj, (), (PodSet(path, job.workers, job.gpus_per_worker),))
