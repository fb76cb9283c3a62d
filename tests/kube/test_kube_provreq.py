"""Queued provisioning rendered beside the job (geosched/kube/provreq.py): the Kueue objects validated against
Kueue v0.17.0's ProvisioningRequestConfig CRD (tests/kube/data/crds, from the release's module) and the upstream
Kueue CRDs of shared/schemas/crds, the job pinned to the zone so the ProvisioningRequest Kueue makes from its pod
template asks for nodes there. tests/realkube/test_realkube_provreq.py runs the same objects on the real Kueue."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kube_support import DATA

from geosched.core.errors import InputError
from geosched.kube import keys, provreq
from geosched.kube.jobinput import read_job_file

Validate = Callable[[Mapping[str, Any]], None]
GKE_C = provreq.Target(zone="us-central1-c", gpu_label=keys.GKE_ACCELERATOR, gpu_value="nvidia-h100-80gb")


def compact(tmp_path: Path, workers: int = 8, gpus: int = 8) -> Path:
    path = tmp_path / "train.yaml"
    path.write_text(f"apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                    f"workers: {workers}\ngpus_per_worker: {gpus}\ngpu: H100\n", encoding="utf-8")
    return path


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


def test_an_8_node_gang_renders_the_check_its_queue_and_the_job_pinned_to_the_zone(
        tmp_path: Path, validate: Validate) -> None:
    objs = provreq.render(read_job_file(compact(tmp_path)), GKE_C, queue="team-a", namespace="ml")
    assert [o["kind"] for o in objs] == ["ResourceFlavor", "ProvisioningRequestConfig", "AdmissionCheck",
                                         "ClusterQueue", "LocalQueue", "Job", "Service"]
    for obj in objs:
        validate(obj)
    k = by_kind(objs)
    # Named for the gangs of this class, GPU and namespace (provreq.queue_name), every cluster-scoped one alike.
    name = "geosched-provisioning-nvidia-h100-80gb-16f1fe20de"
    assert {o["metadata"]["name"] for o in objs if o["kind"] not in ("Job", "Service", "LocalQueue")} == {name}
    assert k["ProvisioningRequestConfig"]["spec"] == {"provisioningClassName": "queued-provisioning.gke.io",
                                                      "managedResources": ["nvidia.com/gpu"]}
    assert k["AdmissionCheck"]["spec"] == {
        "controllerName": "kueue.x-k8s.io/provisioning-request",
        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": name}}
    queue = k["ClusterQueue"]["spec"]
    assert queue["admissionChecksStrategy"] == {"admissionChecks": [{"name": name}]}
    [group] = queue["resourceGroups"]
    [flavor] = group["flavors"]
    assert flavor["name"] == k["ResourceFlavor"]["metadata"]["name"]
    assert {r["name"]: r["nominalQuota"] for r in flavor["resources"]}["nvidia.com/gpu"] == 64
    assert k["ResourceFlavor"]["spec"] == {"nodeLabels": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}}
    assert k["LocalQueue"]["spec"] == {"clusterQueue": name}
    job = k["Job"]
    assert job["metadata"]["labels"][keys.KUEUE_QUEUE] == "team-a"
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"topology.kubernetes.io/zone": "us-central1-c",
                                   "cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert {"key": "cloud.google.com/gke-queued", "operator": "Equal", "value": "true",
            "effect": "NoSchedule"} in pod["tolerations"]
    assert job["spec"]["parallelism"] == 8


def test_a_manifest_keeps_its_own_selector_when_it_agrees_and_is_refused_when_it_does_not(
        validate: Validate) -> None:
    job = read_job_file(DATA / "batch-job.yaml")  # nodeSelector nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB
    gfd = provreq.Target(zone="us-east-1a", gpu_label=keys.GPU_PRODUCT, gpu_value="NVIDIA-A100-SXM4-80GB",
                         class_name=provreq.BEST_EFFORT_ATOMIC, name="research-a100")
    objs = provreq.render(job, gfd, queue="q", namespace="research")
    for obj in objs:
        validate(obj)
    k = by_kind(objs)
    pod = k["Job"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {keys.GPU_PRODUCT: "NVIDIA-A100-SXM4-80GB", keys.ZONE: "us-east-1a"}
    assert pod["tolerations"] == job.original["spec"]["template"]["spec"]["tolerations"]  # type: ignore[index]
    # 4 pods x (8 GPUs limited, 90 CPUs requested, 900Gi limited): limits count where requests are not set.
    quota = {r["name"]: r["nominalQuota"] for r in k["ClusterQueue"]["spec"]["resourceGroups"][0]["flavors"][0][
        "resources"]}
    assert quota["nvidia.com/gpu"] == 32 and quota["cpu"] == 360
    assert quota["memory"] == 4 * 900 * 2**30
    h100 = provreq.Target(zone="us-east-1a", gpu_label=keys.GPU_PRODUCT, gpu_value="NVIDIA-H100-80GB-HBM3")
    with pytest.raises(InputError, match=r"nodeSelector.*nvidia\.com/gpu\.product=NVIDIA-A100-SXM4-80GB"):
        provreq.render(job, h100, queue="q", namespace="research")


def test_an_unknown_class_or_name_is_refused(tmp_path: Path) -> None:
    job = read_job_file(compact(tmp_path))
    for target, field in ((provreq.Target("us-central1-c", keys.GKE_ACCELERATOR, "nvidia-h100-80gb",
                                          class_name="queued-provisioning"), "--provisioning-class"),
                          (provreq.Target("us-central1-c", keys.GKE_ACCELERATOR, "nvidia-h100-80gb",
                                          name="Not_A_Name"), "--name")):
        with pytest.raises(InputError) as raised:
            provreq.render(job, target, queue="q", namespace="ml")
        assert raised.value.source == field


def test_the_schemas_can_fail(tmp_path: Path, validate: Validate) -> None:
    """The CRDs checked against would catch a misspelt field or a wrong type in what is rendered."""
    k = by_kind(provreq.render(read_job_file(compact(tmp_path)), GKE_C, queue="q", namespace="ml"))
    config = copy.deepcopy(k["ProvisioningRequestConfig"])
    config["spec"]["managedResource"] = config["spec"].pop("managedResources")
    with pytest.raises(AssertionError, match="managedResource"):
        validate(config)
    check = copy.deepcopy(k["AdmissionCheck"])
    check["spec"]["parameters"]["kind"] = 7
    with pytest.raises(AssertionError, match="kind"):
        validate(check)
    queue = copy.deepcopy(k["ClusterQueue"])
    queue["spec"]["admissionChecksStrategy"] = {"admissionChecks": ["geosched-provisioning"]}
    with pytest.raises(AssertionError, match="admissionChecks"):
        validate(queue)


EKS_A = provreq.Target(zone="us-east-1a", gpu_label=keys.INSTANCE_TYPE, gpu_value="p5.48xlarge",
                       class_name=provreq.BEST_EFFORT_ATOMIC, tolerations=(provreq.EKS_GPU_TAINT,))


def test_on_eks_the_job_is_pinned_by_zone_name_and_instance_type_and_tolerates_any_gpu_taint(
        tmp_path: Path, validate: Validate) -> None:
    objs = provreq.render(read_job_file(compact(tmp_path, workers=2)), EKS_A, queue="q", namespace="ml")
    for obj in objs:
        validate(obj)
    k = by_kind(objs)
    assert k["ProvisioningRequestConfig"]["spec"]["provisioningClassName"] == provreq.BEST_EFFORT_ATOMIC
    assert k["ResourceFlavor"]["spec"] == {"nodeLabels": {keys.INSTANCE_TYPE: "p5.48xlarge"}}
    pod = k["Job"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {keys.ZONE: "us-east-1a", keys.INSTANCE_TYPE: "p5.48xlarge"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert not any(t.get("key") == "cloud.google.com/gke-queued" for t in pod["tolerations"])


@pytest.mark.parametrize("target", [GKE_C, EKS_A])
def test_without_kueue_the_request_and_its_templates_come_first_and_the_pods_consume_it(
        tmp_path: Path, validate: Validate, target: provreq.Target) -> None:
    objs = provreq.render_request(read_job_file(compact(tmp_path)), target, namespace="ml")
    assert [o["kind"] for o in objs] == ["PodTemplate", "ProvisioningRequest", "Job", "Service"]
    for obj in objs:
        validate(obj)  # the request against the autoscaler's CRD (tests/kube/data/crds), the rest as Kubernetes
    template, request, job = objs[0], objs[1], objs[2]
    name = "train-geosched-provisioning"
    assert request["metadata"] == {"name": name, "namespace": "ml"}
    assert request["spec"] == {"provisioningClassName": target.class_name,
                               "podSets": [{"podTemplateRef": {"name": f"{name}-0"}, "count": 8}]}
    assert template["metadata"] == {"name": f"{name}-0", "namespace": "ml"}
    # The autoscaler simulates the template's pods: the same zone, GPU label and tolerations as the job's pods.
    pod_template = job["spec"]["template"]
    assert template["template"] == pod_template
    assert pod_template["spec"]["nodeSelector"] == {keys.ZONE: target.zone, target.gpu_label: target.gpu_value}
    assert pod_template["metadata"]["annotations"] == {
        "autoscaling.x-k8s.io/consume-provisioning-request": name,
        "autoscaling.x-k8s.io/provisioning-class-name": target.class_name}
    assert keys.KUEUE_QUEUE not in (job["metadata"].get("labels") or {})  # no Kueue here


def test_the_request_schema_can_fail(tmp_path: Path, validate: Validate) -> None:
    request = provreq.render_request(read_job_file(compact(tmp_path)), EKS_A, namespace="ml")[1]
    broken = copy.deepcopy(request)
    broken["spec"]["podSets"][0]["count"] = "8"
    with pytest.raises(AssertionError, match="count"):
        validate(broken)
    broken = copy.deepcopy(request)
    del broken["spec"]["provisioningClassName"]
    with pytest.raises(AssertionError, match="provisioningClassName"):
        validate(broken)


@pytest.mark.parametrize(("data", "extra"), [
    # kubernetes-sigs/lws docs/examples/vllm/GPU/lws.yaml: the leader's Service after the LeaderWorkerSet.
    ("leaderworkerset.yaml", "Service"),
    # The ConfigMap the pods read through envFrom (a missing one: CreateContainerConfigError, pods never start).
    ("multi-doc.yaml", "ConfigMap"),
])
@pytest.mark.parametrize("kueue", [True, False])
def test_the_job_files_other_documents_are_rendered_before_the_job(
        data: str, extra: str, kueue: bool, validate: Validate) -> None:
    # They were dropped: `up --provisioning-class` applied (or wrote for GitOps) the job alone, where `submit` and
    # `up --karpenter` apply the file's other documents too.
    job = read_job_file(DATA / data)
    objs = (provreq.render(job, GKE_C, queue="q", namespace="research") if kueue else
            provreq.render_request(job, GKE_C, namespace="research"))
    for obj in objs:
        validate(obj)
    kinds = [o["kind"] for o in objs]
    assert kinds.count(extra) == 1, kinds
    assert kinds.index(extra) < kinds.index(job.kind.kind)
    [got] = [o for o in objs if o["kind"] == extra]
    assert got == job.extras[0]


# A Job whose pods fetch the model first (an init container bigger than the trainer, as a download is) and ship
# logs beside the trainer (a sidecar: an init container with restartPolicy Always, the shape of the Kubernetes
# docs' "Sidecar containers" Job example, kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/), on a
# RuntimeClass with a pod overhead (kubernetes.io/docs/concepts/scheduling-eviction/pod-overhead/).
INIT_AND_SIDECAR = """\
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      overhead: {cpu: 250m, memory: 120Mi}
      initContainers:
        - name: fetch-model
          image: amazon/aws-cli:2.15.0
          resources: {requests: {cpu: "32", memory: 64Gi}}
        - name: logshipper
          image: alpine:latest
          restartPolicy: Always
          resources: {requests: {cpu: "1", memory: 1Gi}}
      containers:
        - name: trainer
          image: ghcr.io/example/train:1
          resources:
            requests: {cpu: "8", memory: 32Gi}
            limits: {nvidia.com/gpu: 8}
"""


def test_the_queues_quota_is_what_kueue_counts_for_the_pods_init_and_sidecar_containers_included(
        tmp_path: Path) -> None:
    # Kueue counts a pod as kube-scheduler does (its largest init container if more than its app containers and
    # sidecars together, plus its overhead): a quota of the app containers alone (8 cpu, 32Gi a pod) is less than
    # the Workload asks, so Kueue never admits it and no ProvisioningRequest is ever made.
    path = tmp_path / "train.yaml"
    path.write_text(INIT_AND_SIDECAR, encoding="utf-8")
    objs = provreq.render(read_job_file(path), GKE_C, queue="q", namespace="ml")
    [group] = by_kind(objs)["ClusterQueue"]["spec"]["resourceGroups"]
    quota = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    # A pod: cpu max(8 + 1, 32) + 0.25, memory max(32Gi + 1Gi, 64Gi) + 120Mi; two pods.
    assert quota == {"cpu": "64500m", "memory": 2 * (64 * 2**30 + 120 * 2**20), "nvidia.com/gpu": 16}
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]


def test_gangs_of_another_class_gpu_or_namespace_get_their_own_queue_objects_within_63_characters(
        tmp_path: Path) -> None:
    job = read_job_file(compact(tmp_path))

    def names(target: provreq.Target, namespace: str = "ml") -> set[str]:
        objs = provreq.render(job, target, queue=None, namespace=namespace)
        return {o["metadata"]["name"] for o in objs if o["kind"] not in ("Job", "Service")}

    [mine] = names(GKE_C)
    # The zone is the job's nodeSelector, not the queue's: another zone's gang of the same GPU shares the queue.
    assert names(replace(GKE_C, zone="us-central1-a")) == {mine}
    others = [names(GKE_C, "research"), names(replace(GKE_C, gpu_value="nvidia-a100-80gb")),
              names(replace(GKE_C, class_name=provreq.BEST_EFFORT_ATOMIC)),
              # GPU values that read alike once lower-cased and cut are told apart by the digest.
              names(replace(GKE_C, gpu_value="NVIDIA-H100-80GB")),
              names(replace(GKE_C, gpu_label="nvidia.com/gpu.product"))]
    assert all(len(n) == 1 and mine not in n for n in others) and len(set().union(*others)) == len(others)
    [long] = names(replace(GKE_C, name="a" * 63, gpu_value="x" * 200))
    assert len(long) == 63 and long.startswith("a" * 52 + "-")


QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ml"}},
                  "resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
                      {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "64500m"},
                                                  {"name": "nvidia.com/gpu", "nominalQuota": 16}]}]}],
                  "admissionChecksStrategy": {"admissionChecks": [{"name": "q"}]}}}


def live_with(groups: list[dict[str, Any]]) -> dict[str, Any]:
    live = copy.deepcopy(QUEUE)
    live["spec"]["resourceGroups"] = groups
    return live


def test_a_live_queue_holding_the_gang_is_left_alone_and_one_below_it_raised_never_lowered() -> None:
    assert provreq.raised_queue(QUEUE, None) == QUEUE
    # Larger everywhere (a quantity in another unit: 65 cpu > 64500m): nothing to apply.
    assert provreq.raised_queue(QUEUE, live_with([{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "65"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": 64}]}]}])) is None
    # Below in one resource: that one raised, the larger one and the owner's other flavor kept.
    other = {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": 8}, {"name": "nvidia.com/gpu",
                                                                                 "nominalQuota": 4}]}
    raised = provreq.raised_queue(QUEUE, live_with([{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 100},
                                    {"name": "nvidia.com/gpu", "nominalQuota": 8}]}, other]}]))
    assert raised is not None and raised["spec"]["resourceGroups"] == [
        {"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
            {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 100},
                                        {"name": "nvidia.com/gpu", "nominalQuota": 16}]}, other]}]
    assert raised["spec"]["namespaceSelector"] == QUEUE["spec"]["namespaceSelector"]
    # A resource the owner's group does not cover is added to it, the other flavors given none of it; one another
    # group covers stays the owner's (Kueue counts a resource in one group only).
    raised = provreq.raised_queue(QUEUE, live_with([
        {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "f", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": 16}]}, {"name": "spot", "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}]))
    assert raised is not None and raised["spec"]["resourceGroups"] == [
        {"coveredResources": ["nvidia.com/gpu", "cpu"], "flavors": [
            {"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 16},
                                        {"name": "cpu", "nominalQuota": "64500m"}]},
            {"name": "spot", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4},
                                           {"name": "cpu", "nominalQuota": 0}]}]}]
    cpu_group = {"coveredResources": ["cpu"], "flavors": [{"name": "cpus", "resources": [
        {"name": "cpu", "nominalQuota": 1}]}]}
    assert provreq.raised_queue(QUEUE, live_with([
        {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "f", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": 16}]}]}, cpu_group])) is None
    # The owner took the gang's flavor out: it goes back in, in a group of its own beside theirs.
    raised = provreq.raised_queue(QUEUE, live_with([cpu_group]))
    assert raised is not None and raised["spec"]["resourceGroups"] == [cpu_group, {
        "coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "f", "resources": [
            {"name": "nvidia.com/gpu", "nominalQuota": 16}]}]}]


def test_the_gitops_file_leaves_out_a_queue_that_holds_the_gang_unless_it_already_carries_it() -> None:
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    objects = [flavor, QUEUE]
    larger = live_with([{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "65"}, {"name": "nvidia.com/gpu",
                                                                             "nominalQuota": 64}]}]}])
    assert provreq.for_gitops(objects, None) == objects  # no queue in the cluster: the gang's own
    assert provreq.for_gitops(objects, larger) == [flavor]  # the owner's, holding the gang: theirs
    # A file that carries it keeps it at the cluster's quotas: dropped, the sync's prune would delete the queue.
    [_, kept] = provreq.for_gitops(objects, larger, owned=True)
    assert kept["spec"]["resourceGroups"] == larger["spec"]["resourceGroups"]
    assert kept["spec"]["namespaceSelector"] == QUEUE["spec"]["namespaceSelector"]
    # Below the gang: raised to it, owned or not.
    smaller = live_with([{"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "65"}, {"name": "nvidia.com/gpu",
                                                                             "nominalQuota": 8}]}]}])
    for owned in (False, True):
        [_, raised] = provreq.for_gitops(objects, smaller, owned=owned)
        assert [r["nominalQuota"] for r in raised["spec"]["resourceGroups"][0]["flavors"][0]["resources"]] == [
            "65", 16]
