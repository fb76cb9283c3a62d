"""Rendering placed gangs: every input kind x every backend x Karmada on/off x placement shape, each manifest
validated against its schema, plus the semantics the schemas cannot see."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
import yaml
from kube_support import DATA, NOW, WORKLOAD_API_VERSIONS, make_placement, validate_manifest

from geosched.core.errors import InputError
from geosched.core.models import Node
from geosched.kube import karmada, keys, kinds
from geosched.kube.backends import kueue as kueue_backend
from geosched.kube.backends import volcano
from geosched.kube.backends.base import Gang
from geosched.kube.compact import CompactKind
from geosched.kube.config import Backend, ClusterConfig
from geosched.kube.jobinput import JobInput, read_job_file
from geosched.kube.kinds import batch
from geosched.kube.objpath import At
from geosched.kube.render import RenderOptions, render, to_yaml

Validate = Callable[[Mapping[str, Any]], None]

INPUTS = {
    "batch": ("batch-job.yaml", CompactKind.JOB),
    "jobset": ("jobset.yaml", CompactKind.JOB),
    "pytorch": ("pytorchjob.yaml", CompactKind.JOB),
    "trainjob": ("trainjob.yaml", CompactKind.JOB),
    "lws": ("leaderworkerset.yaml", CompactKind.JOB),
    "compact-job": ("compact.yaml", CompactKind.JOB),
    "compact-jobset": ("compact.yaml", CompactKind.JOBSET),
    "multi-doc": ("multi-doc.yaml", CompactKind.JOB),
}
# What a backend may write outside geosched.io/: exactly the keys it is documented to need.
FOREIGN_KEYS = {keys.KUEUE_QUEUE, keys.KUEUE_REQUIRED_TOPOLOGY, keys.COSCHED_POD_GROUP, keys.VOLCANO_GROUP_NAME}


def cluster(backend: Backend, *, karmada: bool = False, pin_hosts: bool = False) -> ClusterConfig:
    return ClusterConfig(name="eks-east", context="eks-east-ctx", backend=backend,
                         queue="team-a" if backend in (Backend.KUEUE, Backend.VOLCANO) else None,
                         karmada=karmada, pin_hosts=pin_hosts, namespace="ml")


def job_input(name: str) -> JobInput:
    return read_job_file(DATA / INPUTS[name][0])


def options(name: str, **kw: Any) -> RenderOptions:
    return RenderOptions(now=NOW, compact_kind=INPUTS[name][1], **kw)


def main_object(manifests: list[dict[str, Any]], job: JobInput) -> dict[str, Any]:
    served = {k.kind for k in kinds.served()}
    found = [m for m in manifests if m["kind"] in served and m["metadata"]["name"] == job.name]
    assert len(found) == 1
    return found[0]


def pod_templates(obj: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], bool]]:
    """(pod template, asks for GPUs) for every template of the object."""
    def gpus(t: Mapping[str, Any]) -> bool:
        return any(keys.GPU in (c.get("resources", {}).get("limits") or {}) for c in t["spec"]["containers"])

    def at(path: tuple[str | int, ...]) -> Mapping[str, Any]:
        here: Any = obj
        for step in path:
            here = here[step]
        return here  # type: ignore[no-any-return]

    kind = kinds.lookup(obj["apiVersion"], obj["kind"])
    assert kind is not None
    templates = [at(p.path) for p in kind.pod_sets(At(obj["spec"], "rendered", "spec")) if p.path is not None]
    return [(t, gpus(t)) for t in templates]


def required(template: Mapping[str, Any]) -> list[dict[str, Any]]:
    return (template["spec"].get("affinity", {}).get("nodeAffinity", {})
            .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", []))


def values_of(template: Mapping[str, Any], key: str) -> list[list[str]]:
    """Per term, the `In` values for `key` (empty if the term does not constrain it)."""
    return [[v for e in term.get("matchExpressions", []) if e["key"] == key and e["operator"] == "In"
             for v in e["values"]] for term in required(template)]


def is_subset(small: Any, big: Any) -> bool:
    if isinstance(small, Mapping):
        return isinstance(big, Mapping) and all(k in big and is_subset(v, big[k]) for k, v in small.items())
    if isinstance(small, list):
        return isinstance(big, list) and len(small) <= len(big) and all(
            is_subset(a, b) for a, b in zip(small, big, strict=False))
    return bool(small == big)


def added_keys(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> set[str]:
    return set(after or {}) - set(before or {})


def expected_failure(name: str, backend: Backend, scenario: str) -> str | None:
    if name == "pytorch" and backend is Backend.WORKLOAD_API:
        return "cannot carry spec.schedulingGroup"
    if name == "trainjob" and backend in (Backend.COSCHEDULING, Backend.VOLCANO, Backend.WORKLOAD_API):
        return "which a TrainJob cannot set"
    if name == "trainjob" and scenario != "one-zone":
        return "one value per label"
    return None


@pytest.mark.parametrize("scenario", ["one-zone", "two-zones", "two-regions"])
@pytest.mark.parametrize("karmada", [False, True], ids=["direct", "karmada"])
@pytest.mark.parametrize("backend", list(Backend), ids=[b.value for b in Backend])
@pytest.mark.parametrize("name", list(INPUTS))
def test_matrix(name: str, backend: Backend, karmada: bool, scenario: str, validate: Validate) -> None:
    job = job_input(name)
    placement = make_placement(job.job, scenario)
    config = cluster(backend, karmada=karmada)
    failure = expected_failure(name, backend, scenario)
    if failure is not None:
        with pytest.raises(InputError, match=failure):
            render(job, placement, config, options(name))
        return
    manifests = render(job, placement, config, options(name))
    for manifest in manifests:
        if backend is Backend.WORKLOAD_API:
            validate_manifest(manifest, WORKLOAD_API_VERSIONS)
        else:
            validate(manifest)

    obj = main_object(manifests, job)
    namespace = job.namespace or "ml"
    assert obj["metadata"]["namespace"] == namespace
    _check_provenance(obj, placement.zones)
    _check_placement(obj, placement.zones, placement.regions)
    _check_backend(manifests, obj, job, backend, scenario)
    _check_karmada(manifests, karmada, namespace)
    _check_only_documented_foreign_keys(job, obj)
    if job.original is not None:
        assert is_subset(job.original, obj), "the user's object must come back with additions only"
    # Rendering does not touch its input.
    assert job.original is None or job.original == read_job_file(DATA / INPUTS[name][0]).original


def _check_provenance(obj: Mapping[str, Any], zones: tuple[str, ...]) -> None:
    annotations = obj["metadata"]["annotations"]
    assert annotations["geosched.io/zones"] == ",".join(zones)
    assert annotations["geosched.io/cluster"] == "eks-east"
    assert annotations["geosched.io/placed-at"] == "2025-03-01T12:00:00Z"
    assert annotations["geosched.io/usd-per-hour"] == "131.0904"
    assert annotations["geosched.io/gco2e-per-hour"] == "12345.68"
    assert json.loads(annotations["geosched.io/score"]) == {"carbon": 0.0, "cost": 0.523, "network": 1.0,
                                                            "total": 1.0523}
    assert len(annotations["geosched.io/inputs-sha256"]) == 64
    assert obj["metadata"]["labels"][keys.JOB_LABEL] == obj["metadata"]["name"]
    for template, _ in pod_templates(obj):
        assert template["metadata"]["labels"][keys.JOB_LABEL] == obj["metadata"]["name"]


def _check_placement(obj: Mapping[str, Any], zones: tuple[str, ...], regions: tuple[str, ...]) -> None:
    if obj["kind"] == "TrainJob":
        override = obj["spec"]["podSpecOverrides"][-1]
        assert override["targetJobs"] == [{"name": "node"}]
        assert override["nodeSelector"][keys.ZONE] == zones[0]
        assert override["nodeSelector"][keys.REGION] == regions[0].split(":")[1]
        return
    templates = pod_templates(obj)
    assert templates
    for template, _ in templates:
        assert required(template), "every pod of the gang gets required node affinity"
        for per_term in values_of(template, keys.ZONE):
            assert sorted(per_term) == sorted(zones)
        regions_written = values_of(template, keys.REGION)
        if len(regions) == 1:
            assert all(r == [regions[0].split(":")[1]] for r in regions_written)
        else:
            assert all(r == [] for r in regions_written)
        assert all(v == [] for v in values_of(template, keys.HOSTNAME)), "no pinning unless asked"


def _check_backend(manifests: list[dict[str, Any]], obj: Mapping[str, Any], job: JobInput, backend: Backend,
                   scenario: str) -> None:
    labels = obj["metadata"].get("labels", {})
    templates = pod_templates(obj)
    groups = [m for m in manifests if m["kind"] == "PodGroup"]
    pods = job.pods
    if backend is Backend.KUEUE:
        assert labels[keys.KUEUE_QUEUE] == "team-a"
        topology = {"one-zone": keys.ZONE, "two-zones": keys.REGION, "two-regions": None}[scenario]
        for template, _ in templates:
            assert template.get("metadata", {}).get("annotations", {}).get(keys.KUEUE_REQUIRED_TOPOLOGY) == topology
        assert not groups
    else:
        assert keys.KUEUE_QUEUE not in labels
    if backend is Backend.COSCHEDULING:
        # With no scheduler_name configured, the name scheduler-plugins installs its second scheduler under: without
        # it the pods would go to the default scheduler, which knows no gangs.
        for template, _ in templates:
            assert template["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        if obj["kind"] == "PyTorchJob":
            assert obj["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == pods
            assert not groups
        else:
            (group,) = groups
            assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
            assert group["spec"]["minMember"] == pods
            for template, _ in templates:
                assert template["metadata"]["labels"][keys.COSCHED_POD_GROUP] == group["metadata"]["name"]
    if backend is Backend.VOLCANO and obj["kind"] == "PyTorchJob":
        # The training operator builds the PodGroup (test_volcano_pytorchjob_keeps_its_bound_in_node_affinity).
        assert not groups
        assert obj["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": pods, "queue": "team-a"}
    elif backend is Backend.VOLCANO:
        (group,) = groups
        assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
        assert group["spec"]["minMember"] == pods and group["spec"]["queue"] == "team-a"
        # No tier mapping in the cluster config: no networkTopology (test_volcano_tiers_come_from_the_config).
        assert "networkTopology" not in group["spec"]
        for template, _ in templates:
            assert template["spec"]["schedulerName"] == "volcano"
            assert template["metadata"]["annotations"][keys.VOLCANO_GROUP_NAME] == group["metadata"]["name"]
    if backend is Backend.WORKLOAD_API:
        _check_workload_api(manifests, obj, pods, scenario)
    else:
        assert all("schedulingGroup" not in t["spec"] for t, _ in templates)
    if backend is Backend.NONE:
        assert not groups
        for template, _ in templates:
            assert "schedulerName" not in template["spec"] or template["spec"]["schedulerName"] == "default"


def _check_workload_api(manifests: list[dict[str, Any]], obj: Mapping[str, Any], pods: int, scenario: str) -> None:
    """One Workload and one PodGroup (scheduling.k8s.io/v1alpha2) before the job, the gang's size as minCount, the
    holding level as the one topology constraint, and every pod joined to the group on the default scheduler."""
    kinds = [(m["apiVersion"], m["kind"]) for m in manifests]
    native = "scheduling.k8s.io/v1alpha2"
    assert kinds.index((native, "Workload")) < kinds.index((native, "PodGroup")) < manifests.index(dict(obj))
    (workload,) = [m for m in manifests if m["kind"] == "Workload"]
    (group,) = [m for m in manifests if m["kind"] == "PodGroup"]
    name = obj["metadata"]["name"]
    (template,) = workload["spec"]["podGroupTemplates"]
    api_version, kind = obj["apiVersion"], obj["kind"]
    assert workload["spec"]["controllerRef"] == {"apiGroup": api_version.rpartition("/")[0], "kind": kind,
                                                 "name": name}
    assert template["schedulingPolicy"] == group["spec"]["schedulingPolicy"] == {"gang": {"minCount": pods}}
    assert group["spec"]["podGroupTemplateRef"] == {"workload": {"workloadName": workload["metadata"]["name"],
                                                                 "podGroupTemplateName": template["name"]}}
    level = {"one-zone": keys.ZONE, "two-zones": keys.REGION, "two-regions": None}[scenario]
    expected = {"topology": [{"key": level}]} if level else None
    assert template.get("schedulingConstraints") == group["spec"].get("schedulingConstraints") == expected
    for pod, _ in pod_templates(obj):
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": group["metadata"]["name"]}
        assert "schedulerName" not in pod["spec"], "the default scheduler runs the GangScheduling plugin"


def _check_karmada(manifests: list[dict[str, Any]], karmada: bool, namespace: str) -> None:
    policies = [m for m in manifests if m["kind"] == "PropagationPolicy"]
    if not karmada:
        assert not policies
        return
    (policy,) = policies
    assert manifests[-1] is policy
    placement = policy["spec"]["placement"]
    assert placement["clusterAffinity"]["clusterNames"] == ["eks-east"]
    assert placement["replicaScheduling"]["replicaSchedulingType"] == "Duplicated"
    selected = {(s["apiVersion"], s["kind"], s["name"]) for s in policy["spec"]["resourceSelectors"]}
    others = {(m["apiVersion"], m["kind"], m["metadata"]["name"]) for m in manifests if m is not policy}
    assert selected == others
    assert all(s["namespace"] == namespace for s in policy["spec"]["resourceSelectors"])


def _check_only_documented_foreign_keys(job: JobInput, obj: Mapping[str, Any]) -> None:
    if job.original is None:
        return
    original = job.original
    added = added_keys(original["metadata"].get("labels"), obj["metadata"].get("labels"))
    added |= added_keys(original["metadata"].get("annotations"), obj["metadata"].get("annotations"))
    for before, (after, _) in zip(pod_templates(original), pod_templates(obj), strict=True):
        for field in ("labels", "annotations"):
            added |= added_keys(before[0].get("metadata", {}).get(field), after.get("metadata", {}).get(field))
    foreign = {k for k in added if not k.startswith(keys.PREFIX)}
    assert foreign <= FOREIGN_KEYS


# --- determinism --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(INPUTS))
def test_same_inputs_same_bytes(name: str) -> None:
    config = cluster(Backend.KUEUE if name == "trainjob" else Backend.VOLCANO, karmada=True)
    first = to_yaml(render(job_input(name), make_placement(job_input(name).job), config, options(name)))
    again = job_input(name)  # parsed afresh: new dicts, same content
    second = to_yaml(render(again, make_placement(again.job), config, options(name)))
    assert first.encode() == second.encode()
    assert first.startswith("---\n")


def test_time_changes_only_the_timestamp() -> None:
    job = job_input("jobset")
    placement = make_placement(job.job)
    config = cluster(Backend.KUEUE)
    early = render(job, placement, config, RenderOptions(now=NOW))
    late = render(job, placement, config, RenderOptions(now=NOW + timedelta(hours=1)))
    a, b = main_object(early, job)["metadata"]["annotations"], main_object(late, job)["metadata"]["annotations"]
    assert {k for k in a if a[k] != b[k]} == {"geosched.io/placed-at"}


def test_digest_follows_the_inputs() -> None:
    job = job_input("batch")
    config = cluster(Backend.KUEUE)

    def digest(placement: Any, cfg: ClusterConfig = config) -> str:
        obj = main_object(render(job, placement, cfg, RenderOptions(now=NOW)), job)
        return str(obj["metadata"]["annotations"]["geosched.io/inputs-sha256"])

    base = digest(make_placement(job.job))
    assert base == digest(make_placement(job.job))
    assert base != digest(make_placement(job.job, "two-zones"))
    assert base != digest(make_placement(job.job, policy="pack"))
    assert base != digest(make_placement(job.job), replace(config, queue="team-b"))


def test_naive_time_is_refused() -> None:
    job = job_input("batch")
    with pytest.raises(ValueError, match="timezone"):
        render(job, make_placement(job.job), cluster(Backend.NONE), RenderOptions(now=NOW.replace(tzinfo=None)))


# --- details -------------------------------------------------------------------------------------

def fleet_nodes() -> dict[str, Node]:
    """The scenario's nodes as an EKS inventory sees them: zone IDs in the fleet, zone names on the nodes."""
    def node(name: str, zone: str, zone_name: str, region: str = "us-east-1") -> Node:
        return Node(name=name, provider="aws", region=region, zone=zone, instance_type="p4d.24xlarge",
                    gpu="A100", gpus=8, gpus_free=8, cluster="eks-east",
                    labels={keys.ZONE: zone_name, keys.REGION: region, keys.HOSTNAME: f"{name}.ec2.internal",
                            keys.GPU_PRODUCT: "NVIDIA-A100-SXM4-40GB"})

    return {n.name: n for n in (node("ip-10-0-1-1", "use1-az1", "us-east-1a"),
                                node("ip-10-0-1-2", "use1-az1", "us-east-1a"),
                                node("ip-10-0-2-1", "use1-az2", "us-east-1b"))}


def test_labels_come_from_the_nodes_when_known(validate: Validate) -> None:
    job = job_input("jobset")
    manifests = render(job, make_placement(job.job, "two-zones"), cluster(Backend.NONE, pin_hosts=True),
                       RenderOptions(now=NOW, nodes=fleet_nodes()))
    for m in manifests:
        validate(m)
    (driver, _), (workers, _) = pod_templates(main_object(manifests, job))
    assert values_of(workers, keys.ZONE) == [["us-east-1a", "us-east-1b"]]
    assert values_of(workers, keys.HOSTNAME) == [["ip-10-0-1-1.ec2.internal", "ip-10-0-2-1.ec2.internal"]]
    # The user's own product constraint stays; ours, from the placed nodes, is ANDed in the same term.
    assert values_of(workers, keys.GPU_PRODUCT) == [["NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe",
                                                    "NVIDIA-A100-SXM4-40GB"]]
    # The GPU-less driver stays in the zones but is neither pinned nor held to a GPU product.
    assert values_of(driver, keys.ZONE) == [["us-east-1a", "us-east-1b"]]
    assert values_of(driver, keys.HOSTNAME) == [[]] and values_of(driver, keys.GPU_PRODUCT) == [[]]


def test_an_aws_node_without_its_zone_label_is_refused_not_guessed() -> None:
    # The fleet names AWS zones by ID; the zone name on the node differs per account, so it is never derived.
    job = job_input("batch")
    nodes = {name: replace(n, labels={k: v for k, v in n.labels.items() if k != keys.ZONE})
             for name, n in fleet_nodes().items()}
    with pytest.raises(InputError, match=r"node ip-10-0-1-1: labels: no topology.kubernetes.io/zone label"):
        render(job, make_placement(job.job), cluster(Backend.NONE), RenderOptions(now=NOW, nodes=nodes))


def test_label_values_come_from_the_placed_nodes_only() -> None:
    # A node of the same zone ID in another account (another cluster) names the zone differently: only the
    # placed nodes' values are pinned.
    job = job_input("batch")
    other = Node(name="elsewhere", provider="aws", region="us-east-1", zone="use1-az1", instance_type="p4d.24xlarge",
                 gpu="A100", gpus=8, gpus_free=8, cluster="eks-other",
                 labels={keys.ZONE: "us-east-1c", keys.REGION: "us-east-1"})
    manifests = render(job, make_placement(job.job), cluster(Backend.NONE),
                       RenderOptions(now=NOW, nodes={**fleet_nodes(), "elsewhere": other}))
    ((template, _),) = pod_templates(main_object(manifests, job))
    assert values_of(template, keys.ZONE) == [["us-east-1a"]]
    assert values_of(template, keys.GPU_PRODUCT) == [["NVIDIA-A100-SXM4-40GB"]]


def test_pinning_without_nodes_uses_placement_names() -> None:
    job = job_input("batch")
    manifests = render(job, make_placement(job.job), cluster(Backend.NONE, pin_hosts=True), RenderOptions(now=NOW))
    ((template, _),) = pod_templates(main_object(manifests, job))
    assert values_of(template, keys.HOSTNAME) == [["ip-10-0-1-1", "ip-10-0-1-2"]]
    annotations = main_object(manifests, job)["metadata"]["annotations"]
    assert annotations["geosched.io/assignments"] == "ip-10-0-1-1=2,ip-10-0-1-2=2"


def test_existing_terms_are_narrowed_not_replaced() -> None:
    job = job_input("jobset")
    manifests = render(job, make_placement(job.job), cluster(Backend.NONE), RenderOptions(now=NOW))
    (_, (workers, _)) = pod_templates(main_object(manifests, job))
    (term,) = required(workers)
    assert [e["key"] for e in term["matchExpressions"]] == [keys.GPU_PRODUCT, keys.ZONE, keys.REGION]


def test_rendering_rendered_output_adds_nothing_twice() -> None:
    job = job_input("batch")
    placement = make_placement(job.job)
    config = cluster(Backend.COSCHEDULING)
    first = main_object(render(job, placement, config, RenderOptions(now=NOW)), job)
    again = JobInput(job.kind, job.job, job.source, copy.deepcopy(first), job.pod_sets, job.namespace)
    second = main_object(render(again, placement, config, RenderOptions(now=NOW)), job)
    assert required(second["spec"]["template"]) == required(first["spec"]["template"])


def test_kueue_cluster_objects(validate: Validate) -> None:
    """The cluster's Kueue objects at v1beta2 from its Node JSON: a GFD node's flavor pins its product, a GKE node
    without GFD (the GKE default) its accelerator; the ClusterQueue's quotas are the nodes' allocatable."""
    def node(name: str, labels: dict[str, str], allocatable: dict[str, str]) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}}

    nodes = [node("a", {keys.GPU_PRODUCT: "NVIDIA-A100-SXM4-40GB"}, {keys.GPU: "8", "cpu": "95500m", "memory": "1Ti"}),
             node("b", {keys.GPU_PRODUCT: "NVIDIA-A100-SXM4-40GB"}, {keys.GPU: "8", "cpu": "96", "memory": "1Ti"}),
             node("c", {keys.GKE_ACCELERATOR: "nvidia-l4"}, {keys.GPU: "1", "cpu": "7910m", "memory": "29Gi"}),
             node("cpu-only", {}, {"cpu": "4", "memory": "16Gi"})]
    objects = kueue_backend.cluster_objects(nodes, "team-a", "ml", {keys.GPU, "cpu"})
    for m in objects:
        validate(m)
        assert m["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert [m["kind"] for m in objects] == ["Topology", "ResourceFlavor", "ResourceFlavor", "ClusterQueue",
                                            "LocalQueue"]
    assert objects[0]["spec"]["levels"] == [{"nodeLabel": keys.REGION}, {"nodeLabel": keys.ZONE},
                                            {"nodeLabel": keys.HOSTNAME}]
    assert [f["spec"] for f in objects[1:3]] == [
        {"nodeLabels": {keys.GPU_PRODUCT: "NVIDIA-A100-SXM4-40GB"}, "topologyName": "geosched"},
        {"nodeLabels": {keys.GKE_ACCELERATOR: "nvidia-l4"}, "topologyName": "geosched"}]
    group = objects[3]["spec"]["resourceGroups"][0]
    assert group["coveredResources"] == ["cpu", keys.GPU]
    assert group["flavors"] == [
        {"name": "geosched-nvidia-a100-sxm4-40gb", "resources": [{"name": "cpu", "nominalQuota": "191500m"},
                                                                 {"name": keys.GPU, "nominalQuota": 16}]},
        {"name": "geosched-nvidia-l4", "resources": [{"name": "cpu", "nominalQuota": "7910m"},
                                                     {"name": keys.GPU, "nominalQuota": 1}]}]
    assert objects[4]["spec"] == {"clusterQueue": "geosched"}
    assert all("labels" not in m["metadata"] for m in objects), "shared by every job of the cluster"
    # GKE with the GPU operator's GFD on one pool only: one flavor, by the label every GPU node carries.
    both = {keys.GKE_ACCELERATOR: "nvidia-h100-80gb", keys.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"}
    mixed = [node("g1", both, {keys.GPU: "8"}), node("g2", {keys.GKE_ACCELERATOR: "nvidia-h100-80gb"}, {keys.GPU: "8"})]
    flavors = [m for m in kueue_backend.cluster_objects(mixed, "q", "ml", {keys.GPU}) if m["kind"] == "ResourceFlavor"]
    assert [f["spec"]["nodeLabels"] for f in flavors] == [{keys.GKE_ACCELERATOR: "nvidia-h100-80gb"}]
    # A Karmada PropagationPolicy cannot select the cluster-scoped ones: applied to the member directly.
    assert [karmada.is_cluster_scoped(m) for m in objects] == [True, True, True, True, False]


def test_compact_defaults_to_indexed_job_with_headless_service(validate: Validate) -> None:
    job = job_input("compact-job")
    manifests = render(job, make_placement(job.job), cluster(Backend.NONE), options("compact-job"))
    assert [m["kind"] for m in manifests] == ["Service", "Job"]
    service, obj = manifests
    assert obj["spec"]["completionMode"] == "Indexed" and obj["spec"]["parallelism"] == 4
    assert obj["spec"]["template"]["spec"]["subdomain"] == service["metadata"]["name"] == "resnet-32"
    assert service["spec"]["clusterIP"] == "None"
    container = obj["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"] == {keys.GPU: 8}
    assert {"name": "GEOSCHED_COORDINATOR", "value": "resnet-32-0.resnet-32"} in container["env"]
    assert obj["metadata"]["namespace"] == "ml"


def test_compact_jobset(validate: Validate) -> None:
    job = job_input("compact-jobset")
    manifests = render(job, make_placement(job.job), cluster(Backend.NONE), options("compact-jobset"))
    (obj,) = manifests
    assert obj["kind"] == "JobSet"
    env = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "GEOSCHED_COORDINATOR", "value": "resnet-32-workers-0-0.resnet-32"} in env


def test_compact_needs_an_image() -> None:
    job = job_input("compact-job")
    bare = JobInput(job.kind, replace(job.job, image=None), job.source, None, ())
    with pytest.raises(InputError) as info:
        render(bare, make_placement(bare.job), cluster(Backend.NONE), RenderOptions(now=NOW))
    assert info.value.field == "image"


def test_trainjob_pins_hosts_only_when_one_host() -> None:
    job = job_input("trainjob")
    with pytest.raises(InputError, match="one value per label"):
        render(job, make_placement(job.job), cluster(Backend.NONE, pin_hosts=True), RenderOptions(now=NOW))


def test_placement_for_another_cluster() -> None:
    job = job_input("batch")
    placement = replace(make_placement(job.job), cluster="gke-central")
    with pytest.raises(InputError, match="gke-central"):
        render(job, placement, cluster(Backend.NONE), RenderOptions(now=NOW))


def test_placement_for_another_gang() -> None:
    job = job_input("batch")
    placement = make_placement(replace(job.job, workers=8))
    with pytest.raises(InputError, match="8 x 8"):
        render(job, placement, cluster(Backend.NONE), RenderOptions(now=NOW))


def test_explicit_namespace_wins_over_config() -> None:
    job = job_input("pytorch")  # namespace research
    obj = main_object(render(job, make_placement(job.job), cluster(Backend.NONE), RenderOptions(now=NOW)), job)
    assert obj["metadata"]["namespace"] == "research"


def test_coscheduling_scheduler_name_from_config() -> None:
    # A cluster that runs coscheduling in its default scheduler (manifests/coscheduling/scheduler-config.yaml in
    # scheduler-plugins: profile schedulerName default-scheduler) says so in the cluster config.
    job = job_input("batch")
    config = replace(cluster(Backend.COSCHEDULING), scheduler_name="default-scheduler")
    obj = main_object(render(job, make_placement(job.job), config, RenderOptions(now=NOW)), job)
    assert obj["spec"]["template"]["spec"]["schedulerName"] == "default-scheduler"


@pytest.mark.parametrize(("zone_tier", "region_tier", "zones", "expected"), [
    # Volcano's label discovery over region > zone > hostname numbers zones 1 and regions 2.
    (1, 2, ("us-east-1a",), 1),
    (1, 2, ("us-east-1a", "us-east-1b"), 2),
    # Switch tiers 1-2 inside a zone, the zone at 3; the cluster maps no region.
    (3, None, ("us-east-1a",), 3),
    (3, None, ("us-east-1a", "us-east-1b"), None),
    # Only regions mapped: a one-zone gang is still bound to its region.
    (None, 4, ("us-east-1a",), 4),
])
def test_volcano_tiers_come_from_the_config(zone_tier: int | None, region_tier: int | None,
                                            zones: tuple[str, ...], expected: int | None) -> None:
    gang = Gang(name="g", namespace="ml", kind=batch.KIND, pods=4, gpus=8, zones=zones,
                regions=("us-east-1",))
    config = replace(cluster(Backend.VOLCANO), volcano_zone_tier=zone_tier, volcano_region_tier=region_tier)
    (group,) = volcano.handoff(gang, config).side_objects
    if expected is None:
        assert "networkTopology" not in group["spec"]
    else:
        assert group["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": expected}


def test_volcano_pytorchjob_keeps_its_bound_in_node_affinity(validate: Validate) -> None:
    """Issue 21 item 8. With Volcano gang scheduling the training operator builds a PyTorchJob's PodGroup itself and,
    on every sync, replaces the spec of the one it finds: `volcanoPodGroup.Spec = PodGroupSpec{MinMember, Queue,
    PriorityClassName, MinResources}` (kubeflow/training-operator release-1.9 078ec30ff266,
    pkg/controller.v1/common/job.go ReconcileJobs and scheduling.go SyncPodGroup), so a networkTopology rendered
    on that PodGroup is dropped, and the group geosched applied would be rewritten under a GitOps sync forever.
    Volcano reads the network bound from the PodGroup spec alone (volcano ed72c7c815a9, pkg/scheduler/api/
    job_info.go). So no PodGroup is rendered: the operator's is fed through schedulingPolicy (minAvailable, queue),
    and the bound a zone or region tier would set is the pods' required node affinity, which the operator keeps."""
    job = job_input("pytorch")
    config = replace(cluster(Backend.VOLCANO), volcano_zone_tier=1, volcano_region_tier=2)
    manifests = render(job, make_placement(job.job), config, options("pytorch"))
    for m in manifests:
        validate(m)
    assert [m["kind"] for m in manifests] == ["PyTorchJob"]
    obj = manifests[0]
    assert obj["spec"]["runPolicy"]["schedulingPolicy"] == {"minAvailable": job.pods, "queue": "team-a"}
    for role in ("Master", "Worker"):
        spec = obj["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]
        [term] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"]
        pinned = {e["key"]: e["values"] for e in term["matchExpressions"]}
        assert pinned[keys.ZONE] == list(make_placement(job.job).zones), role


def test_multi_doc_extras_ride_along_unchanged() -> None:
    job = job_input("multi-doc")
    manifests = render(job, make_placement(job.job), cluster(Backend.NONE, karmada=True), RenderOptions(now=NOW))
    assert [m["kind"] for m in manifests] == ["ConfigMap", "Job", "PropagationPolicy"]
    assert manifests[0] == job.extras[0]


def test_yaml_reads_back_as_rendered() -> None:
    job = job_input("jobset")
    manifests = render(job, make_placement(job.job), cluster(Backend.KUEUE, karmada=True), RenderOptions(now=NOW))
    assert list(yaml.safe_load_all(to_yaml(manifests))) == manifests


@pytest.mark.parametrize("backend", [Backend.NONE, Backend.KUEUE])
def test_every_backend_honours_the_configured_scheduler_name(backend: Backend) -> None:
    # Issue 21 item 6: kueue and none dropped `scheduler_name`, so pods went to the default scheduler.
    job = job_input("batch")
    config = replace(cluster(backend), scheduler_name="geosched")
    obj = main_object(render(job, make_placement(job.job), config, RenderOptions(now=NOW)), job)
    assert obj["spec"]["template"]["spec"]["schedulerName"] == "geosched"
    unset = main_object(render(job, make_placement(job.job), cluster(backend), RenderOptions(now=NOW)), job)
    assert "schedulerName" not in unset["spec"]["template"]["spec"] or \
        unset["spec"]["template"]["spec"]["schedulerName"] == job_input("batch").original["spec"]["template"][
            "spec"].get("schedulerName")
