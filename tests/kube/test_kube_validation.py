"""The schema checks themselves: they must reject what the API server would reject (or silently prune)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from kube_support import DATA, NOW, make_placement

from geosched.kube.config import Backend, ClusterConfig
from geosched.kube.jobinput import read_job_file
from geosched.kube.render import RenderOptions, render

Validate = Callable[[Mapping[str, Any]], None]


def rendered(name: str, backend: Backend) -> list[dict[str, Any]]:
    job = read_job_file(DATA / name)
    config = ClusterConfig(name="eks-east", context="x", backend=backend, queue="q", karmada=True)
    return render(job, make_placement(job.job), config, RenderOptions(now=NOW))


def find(manifests: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return copy.deepcopy(next(m for m in manifests if m["kind"] == kind))


def test_unknown_field_in_a_custom_resource(validate: Validate) -> None:
    group = find(rendered("batch-job.yaml", Backend.COSCHEDULING), "PodGroup")
    group["spec"]["minMembers"] = group["spec"].pop("minMember")
    with pytest.raises(AssertionError, match="minMembers"):
        validate(group)


def test_enum_in_a_custom_resource(validate: Validate) -> None:
    group = find(rendered("batch-job.yaml", Backend.VOLCANO), "PodGroup")
    group["spec"]["networkTopology"] = {"mode": "strict", "highestTierAllowed": 1}
    with pytest.raises(AssertionError, match="strict"):
        validate(group)


def test_karmada_divided_is_a_valid_value_but_wrong_type_is_not(validate: Validate) -> None:
    policy = find(rendered("batch-job.yaml", Backend.NONE), "PropagationPolicy")
    policy["spec"]["placement"]["clusterAffinity"]["clusterNames"] = "eks-east"
    with pytest.raises(AssertionError, match="clusterNames"):
        validate(policy)


def test_pod_template_inside_a_jobset(validate: Validate) -> None:
    jobset = find(rendered("jobset.yaml", Backend.NONE), "JobSet")
    pod = jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpression"] = []
    with pytest.raises(AssertionError, match="matchExpression"):
        validate(jobset)


def test_pod_template_inside_a_pytorchjob(validate: Validate) -> None:
    job = find(rendered("pytorchjob.yaml", Backend.NONE), "PyTorchJob")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] = 7
    with pytest.raises(AssertionError, match=r"schedulerName|7"):
        validate(job)


def test_builtin_job(validate: Validate) -> None:
    job = find(rendered("batch-job.yaml", Backend.NONE), "Job")
    job["spec"]["template"]["spec"]["nodeSelecter"] = {}
    with pytest.raises(AssertionError, match="nodeSelecter"):
        validate(job)


def test_label_syntax(validate: Validate) -> None:
    job = find(rendered("batch-job.yaml", Backend.NONE), "Job")
    job["metadata"]["labels"]["geosched.io/zones"] = "use1-az1,use1-az2"
    with pytest.raises(AssertionError, match="label"):
        validate(job)


def test_custom_resource_metadata(validate: Validate) -> None:
    group = find(rendered("batch-job.yaml", Backend.COSCHEDULING), "PodGroup")
    group["metadata"]["labels"] = {"a": 1}
    with pytest.raises(AssertionError):
        validate(group)
