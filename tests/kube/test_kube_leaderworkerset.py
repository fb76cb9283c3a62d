"""LeaderWorkerSet (geosched/kube/kinds/leaderworkerset.py): read, placed and rendered like every kind, checked
against its upstream CRD (kubernetes-sigs/lws v0.10.0, tests/kube/data/crds); what geosched does without a suspend
field."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import yaml
from kube_support import DATA, NOW, WORKLOAD_API_VERSIONS, make_placement, validate_manifest

from geosched.core.errors import InputError
from geosched.kube import flex, submit
from geosched.kube.config import Backend, ClusterConfig
from geosched.kube.jobinput import parse_job_object, parse_job_text, read_job_file
from geosched.kube.kinds import leaderworkerset
from geosched.kube.render import RenderOptions, render

Validate = Callable[[Mapping[str, Any]], None]
FILE = DATA / "leaderworkerset.yaml"
LEADER = ("spec", "leaderWorkerTemplate", "leaderTemplate")
WORKERS = ("spec", "leaderWorkerTemplate", "workerTemplate")


def lws() -> dict[str, Any]:
    found: dict[str, Any] = next(d for d in yaml.safe_load_all(FILE.read_text(encoding="utf-8"))
                                 if d["kind"] == "LeaderWorkerSet")
    return found


def test_the_upstream_vllm_example_is_a_gang_of_every_group() -> None:
    job = read_job_file(FILE)
    assert job.kind is leaderworkerset.KIND
    # 2 groups of size 2: the leaders (one per group) and the workers (size-1 per group), 8 GPUs each.
    assert [(p.path, p.pods, p.gpus_per_pod) for p in job.pod_sets] == [(LEADER, 2, 8), (WORKERS, 2, 8)]
    assert (job.job.workers, job.job.gpus_per_worker, job.pods) == (4, 8, 4)
    assert job.job.image == "vllm/vllm-openai:v0.8.5"
    assert [e["kind"] for e in job.extras] == ["Service"]  # the leader Service rides along


def test_without_a_leader_template_every_pod_is_a_worker() -> None:
    obj = lws()
    del obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    obj["spec"]["replicas"] = 3
    obj["spec"]["leaderWorkerTemplate"]["size"] = 4
    job = parse_job_object(obj, "lws.yaml")
    assert [(p.path, p.pods) for p in job.pod_sets] == [(WORKERS, 12)]
    assert job.job.workers == 12


def test_a_gpu_less_leader_belongs_to_the_gang_but_is_not_a_worker() -> None:
    obj = lws()
    leader = obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    del leader["resources"]["limits"]["nvidia.com/gpu"]
    job = parse_job_object(obj, "lws.yaml")
    assert (job.job.workers, job.pods) == (2, 4)


def test_defaults_are_one_group_of_one_pod() -> None:
    obj = lws()
    del obj["spec"]["replicas"]
    del obj["spec"]["leaderWorkerTemplate"]["size"]
    del obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert parse_job_object(obj, "lws.yaml").job.workers == 1


@pytest.mark.parametrize(("change", "message"), [
    (lambda o: o["spec"].update(replicas=0), "zero replicas"),
    (lambda o: o["spec"]["leaderWorkerTemplate"].update(size=0), r"leaderWorkerTemplate.size"),
    (lambda o: o["spec"].pop("leaderWorkerTemplate"), r"spec.leaderWorkerTemplate"),
    (lambda o: o.update(apiVersion="leaderworkerset.x-k8s.io/v2"), r"apiVersion: LeaderWorkerSet .* is not supported"),
])
def test_bad_sets_are_one_line(change: Callable[[dict[str, Any]], Any], message: str) -> None:
    obj = lws()
    change(obj)
    with pytest.raises(InputError, match=message):
        parse_job_text(yaml.safe_dump(obj), "lws.yaml")


@pytest.mark.parametrize("backend", list(Backend), ids=[b.value for b in Backend])
def test_rendered_for_every_backend_matches_the_crd(backend: Backend) -> None:
    job = read_job_file(FILE)
    config = ClusterConfig(name="eks-east", context="x", backend=backend, queue="q", namespace="ml")
    manifests = render(job, make_placement(job.job), config, RenderOptions(now=NOW))
    for m in manifests:  # the gang API exists in 1.36 only; the v0.10.0 CRD's pod templates carry schedulingGroup
        if backend is Backend.WORKLOAD_API:
            validate_manifest(m, WORKLOAD_API_VERSIONS)
        else:
            validate_manifest(m)
    obj = manifests[-1]
    assert obj["kind"] == "LeaderWorkerSet"
    for path in (LEADER, WORKERS):
        template: Any = obj
        for step in path:
            template = template[step]
        terms = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["use1-az1"]} in \
            terms["nodeSelectorTerms"][0]["matchExpressions"]
    groups = [m for m in manifests if m["kind"] == "PodGroup"]
    if backend in (Backend.COSCHEDULING, Backend.VOLCANO):
        assert groups[0]["spec"]["minMember"] == 4  # the whole set, leaders and workers
    if backend is Backend.WORKLOAD_API:
        assert groups[0]["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}}
        assert obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["schedulingGroup"] == {
            "podGroupName": "vllm"}


def test_the_crd_check_sees_a_misspelt_field(validate: Validate) -> None:
    job = read_job_file(FILE)
    config = ClusterConfig(name="eks-east", context="x", backend=Backend.NONE, namespace="ml")
    obj = copy.deepcopy(render(job, make_placement(job.job), config, RenderOptions(now=NOW))[-1])
    obj["spec"]["leaderWorkerTemplate"]["sizes"] = obj["spec"]["leaderWorkerTemplate"].pop("size")
    with pytest.raises(AssertionError, match="sizes"):
        validate(obj)


def test_a_set_without_suspend_is_not_held_but_refused_in_one_line() -> None:
    obj = lws()
    with pytest.raises(InputError, match=r"^jobs/vllm.yaml: metadata.annotations: leaderworkerset.x-k8s.io/v1 "
                                         r"LeaderWorkerSet has no suspend field"):
        flex.hold(obj, 3600.0, 0.0, source="jobs/vllm.yaml")
    flex.release(obj)  # never held: left as it is
    assert obj == lws()


def test_jobs_reads_its_state_and_run() -> None:
    # Status shape: LeaderWorkerSetStatus in the v0.10.0 CRD (conditions Available/Progressing, readyReplicas).
    running = {**lws(), "metadata": {"name": "vllm", "creationTimestamp": "2025-03-01T12:00:00Z"},
               "status": {"readyReplicas": 2, "replicas": 2,
                          "conditions": [{"type": "Available", "status": "True",
                                          "lastTransitionTime": "2025-03-01T12:05:00Z"}]}}
    assert submit.job_state(running) == "Running"
    start, end = submit.job_times("LeaderWorkerSet", running)
    assert (start, end) == (NOW.timestamp(), None)
    waiting = {**running, "status": {"conditions": [{"type": "Progressing", "status": "True"}]}}
    assert submit.job_state(waiting) == "Pending"
    assert submit.job_times("LeaderWorkerSet", waiting) == (None, None)
