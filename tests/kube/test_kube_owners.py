"""A job's companions carry an owner reference to it (issue 21 item 5), on what render really emits."""

from __future__ import annotations

from typing import Any

from kube_support import DATA, NOW, make_placement

from geosched.kube import keys, owners
from geosched.kube.config import Backend, ClusterConfig
from geosched.kube.jobinput import read_job_file
from geosched.kube.render import RenderOptions, render


def rendered(backend: Backend) -> list[dict[str, Any]]:
    job = read_job_file(DATA / "compact.yaml")  # the compact job file the render tests use
    cluster = ClusterConfig(name="eks-east", context="eks-east-ctx", backend=backend, namespace="ml")
    return render(job, make_placement(job.job), cluster, RenderOptions(now=NOW))


def test_the_podgroup_and_service_are_the_companions_and_the_users_extras_are_not() -> None:
    manifests = rendered(Backend.COSCHEDULING)
    job = manifests[-1]
    extra = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "resnet-32-config", "namespace": "ml",
                                                                   "labels": {keys.JOB_LABEL: "resnet-32"}}}
    found = owners.companions([*manifests[:-1], extra, job], job, "ml")
    assert sorted((m["kind"], m["metadata"]["name"]) for m in found) == [("PodGroup", "resnet-32"),
                                                                       ("Service", "resnet-32")]
    assert owners.companions(manifests, job, "other") == []  # owner references never cross namespaces


def test_an_owned_companion_names_the_job_once() -> None:
    manifests = rendered(Backend.COSCHEDULING)
    server_job = {**manifests[-1], "metadata": {**manifests[-1]["metadata"], "uid": "6f1c-uid"}}
    ref = owners.owner_reference(server_job)
    assert ref == {"apiVersion": "batch/v1", "kind": "Job", "name": "resnet-32", "uid": "6f1c-uid"}
    assert owners.owner_reference(manifests[-1]) is None  # not on the cluster yet: no UID
    once = owners.owned(manifests[0], ref)
    assert owners.owned(once, ref)["metadata"]["ownerReferences"] == [ref]
    assert "ownerReferences" not in manifests[0]["metadata"]


def test_the_compact_job_ignores_disruptions_and_fails_on_a_real_failure() -> None:
    job = rendered(Backend.NONE)[-1]
    assert job["spec"]["backoffLimit"] == 0
    assert job["spec"]["podFailurePolicy"] == {"rules": [{
        "action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}
