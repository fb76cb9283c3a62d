"""Queued provisioning through Kueue: a job placed in zone Z of a cluster, rendered beside the Kueue objects whose
ProvisioningRequest admission check asks the cluster's autoscaler for the gang's nodes, in Z. Pure.

The flow (Kueue's "ProvisioningRequest" admission check, kueue.sigs.k8s.io/docs/admission-check-controllers/
provisioning; GKE's "Run a large-scale workload with flex-start with queued provisioning",
cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest):
1. the job carries its LocalQueue's label; Kueue reserves quota in the ClusterQueue, whose admission check is the
   ProvisioningRequest one (AdmissionCheck `spec.controllerName: kueue.x-k8s.io/provisioning-request`, its
   `parameters` naming a ProvisioningRequestConfig);
2. Kueue creates a ProvisioningRequest (autoscaling.x-k8s.io/v1) of the config's `provisioningClassName`, one
   PodTemplate per pod set copied from the job's own pod template (sigs.k8s.io/kueue v0.17.0
   pkg/controller/admissionchecks/provisioning/controller.go `createPodTemplate`): the zone geosched pinned in the
   job's nodeSelector is what the autoscaler reads, so the nodes come up in Z and nowhere else;
3. the autoscaler (GKE's Dynamic Workload Scheduler for `queued-provisioning.gke.io`, cluster-autoscaler for
   `best-effort-atomic-scale-up.autoscaling.x-k8s.io`) sets the request's `Provisioned` condition True once every
   node exists; Kueue then admits the job and kube-scheduler binds its pods to those nodes.

What this module renders: the job (any kind geosched reads, or a compact job built as an Indexed Job) with its
queue label and, on every pod template, `nodeSelector` zone Z and the GPU label, and the tolerations of the taints
the class's nodes carry; before it the job file's other documents, unchanged (a Service, a ConfigMap), as `submit`
applies them (`kept`: never withdrawn); and, cluster-scoped, one ResourceFlavor (the GPU label), the
ProvisioningRequestConfig (`managedResources: [nvidia.com/gpu]`: only pod sets asking for GPUs get a request), the
AdmissionCheck, a ClusterQueue applying that check whose quota is the gang's own request (nodes that do not exist
yet have nothing to size it from; a cluster owner raises it to queue more gangs, and a live one is never lowered:
`raised_queue`) and the LocalQueue, all named per (class, GPU, namespace) by `queue_name`. Rendered at Kueue's
v1beta2 (its storage version since v0.16; v0.17.0 serves v1beta1 and v1beta2 of ProvisioningRequestConfig,
config/components/crd/bases/kueue.x-k8s.io_provisioningrequestconfigs.yaml).

Where Kueue does not run, `render_request` renders the request itself (the PodTemplates and the
ProvisioningRequest, the job's pods annotated as its consumers: cluster-autoscaler's own flow). On EKS only
cluster-autoscaler's classes apply (`EKS_CLASSES`), and the nodes are pinned by labels the autoscaler knows before
they exist: the zone's name and `node.kubernetes.io/instance-type` (geosched/cli/up.py `_queue_provisioning`).
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from geosched.core.errors import InputError
from geosched.files.fields import describe
from geosched.kube import affinity, keys, kinds, tolerations
from geosched.kube.backends.kueue import API_VERSION, GROUP
from geosched.kube.jobinput import JobInput, PodSet
from geosched.kube.kinds.template import at_path
from geosched.kube.objpath import At
from geosched.kube.quantity import parse_quantity
from geosched.kube.resources import CPU, PODS, pod_requests
from geosched.kube.tolerations import Toleration

# Kueue's ProvisioningRequest admission check controller (apis/kueue/v1beta2 `ProvisioningRequestControllerName`).
CONTROLLER = "kueue.x-k8s.io/provisioning-request"
# GKE's Dynamic Workload Scheduler (the GKE how-to above); cluster-autoscaler's own classes
# (kubernetes/autoscaler cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1 `ProvisioningClass*`):
# best-effort-atomic-scale-up makes the nodes all or none; check-capacity only checks that they exist already.
QUEUED_PROVISIONING = "queued-provisioning.gke.io"
BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
CLASSES = (QUEUED_PROVISIONING, BEST_EFFORT_ATOMIC, CHECK_CAPACITY)
# The taints the class's new nodes carry, which the job's pods must tolerate (the request's pod templates are the
# pods the autoscaler simulates on the new nodes): on GKE every GPU node has nvidia.com/gpu=present:NoSchedule
# ("Run GPUs in GKE Standard node pools"), and nodes of a queued-provisioning node pool also
# cloud.google.com/gke-queued=true:NoSchedule (the taint a queued-provisioning pool's `config.taints` holds as
# the GKE API returns it, and the toleration GKE's flex-start examples give their pods).
QUEUED_TAINT = Toleration("cloud.google.com/gke-queued", "Equal", "true", "NoSchedule")
GKE_GPU_TAINT = Toleration(keys.GPU, "Equal", "present", "NoSchedule")
CLASS_TOLERATIONS: Mapping[str, tuple[Toleration, ...]] = {
    QUEUED_PROVISIONING: (GKE_GPU_TAINT, QUEUED_TAINT),
    BEST_EFFORT_ATOMIC: (),
    CHECK_CAPACITY: (),
}
# On EKS, cluster-autoscaler scales the cluster's node groups (its AWS cloud provider: ASGs, managed node groups
# among them), and only its own classes reach it: queued-provisioning.gke.io is GKE's. Their GPU nodes are tainted
# nvidia.com/gpu with the value their owner chose (geosched's managed groups: "true", providers/nodegroups/spec.py
# GPU_TAINT; the EKS User Guide's GPU examples: "true" or "present"), so the pods tolerate the key with any value.
EKS_CLASSES = (BEST_EFFORT_ATOMIC, CHECK_CAPACITY)
EKS_GPU_TAINT = Toleration(keys.GPU, "Exists", "", "NoSchedule")
DEFAULT_NAME = "geosched-provisioning"
# The request's API (the CRD of the autoscaler module Kueue v0.17.0 requires, tests/kube/data/crds) and the pod
# annotations that tie pods to a request (Kueue's constants.go, see render_request).
REQUEST_API_VERSION = "autoscaling.x-k8s.io/v1"
CONSUMES = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Target:
    """Where the gang's nodes are to come up: a zone of the cluster and the GPU label (and value) the new nodes
    will carry (GKE: cloud.google.com/gke-accelerator, e.g. nvidia-h100-80gb; with GFD: nvidia.com/gpu.product)."""

    zone: str
    gpu_label: str
    gpu_value: str
    class_name: str = QUEUED_PROVISIONING
    name: str = DEFAULT_NAME  # the cluster-scoped objects' name (a ClusterQueue, its check, its config)
    # The taints the new nodes carry, tolerated on every pod template; None: the class's own (CLASS_TOLERATIONS).
    tolerations: tuple[Toleration, ...] | None = None

    def node_tolerations(self) -> tuple[Toleration, ...]:
        return CLASS_TOLERATIONS[self.class_name] if self.tolerations is None else self.tolerations


def render(job: JobInput, target: Target, *, queue: str | None, namespace: str) -> list[dict[str, Any]]:
    """The Kueue objects (flavor, config, check, ClusterQueue, LocalQueue) and the job pinned to `target.zone`,
    ready to apply in that order; the LocalQueue is `queue`, None: named as the ClusterQueue (`queue_name`).
    Refuses (InputError) a job that cannot be pinned: no pod template (a TrainJob), a nodeSelector already asking
    for another zone or GPU, or an unknown class."""
    obj, companions, pod_sets, _ = _pinned(job, target, namespace)
    queue = queue or queue_name(target, namespace)
    obj.setdefault("metadata", {}).setdefault("labels", {})[keys.KUEUE_QUEUE] = queue
    quota = gang_request(obj, pod_sets, job.source)
    return [*queue_objects(target, queue, namespace, quota), *_extras(job), obj, *companions]


def render_request(job: JobInput, target: Target, *, namespace: str) -> list[dict[str, Any]]:
    """Without Kueue: the ProvisioningRequest itself, one PodTemplate per pod set (the pinned pod template, its
    count the pod set's), then the job pinned to `target.zone`, its pods annotated as consuming the request.

    The shape is cluster-autoscaler's (kubernetes/autoscaler cluster-autoscaler/FAQ.md "ProvisioningRequest" and
    cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1 types.go: `spec.provisioningClassName`,
    `spec.podSets[]` of {podTemplateRef.name, count}, PodTemplates in the request's namespace), and the pods'
    annotations those Kueue itself puts on the pods of a request it made (sigs.k8s.io/kueue v0.17.0
    pkg/controller/admissionchecks/provisioning/constants.go `ConsumesAnnotationKey`, `ClassNameAnnotationKey`:
    autoscaling.x-k8s.io/consume-provisioning-request and autoscaling.x-k8s.io/provisioning-class-name; the older
    cluster-autoscaler.kubernetes.io/ prefix is deprecated, Kueue v0.14 release notes). The autoscaler leaves pods
    carrying them out of its ordinary scale-up and books the request's nodes for them, so the job may be applied
    at once, beside the request (as a GitOps tree applies everything together): its pods wait Pending until the
    nodes exist. Kueue is not involved; with Kueue, `render` is the one to use (Kueue makes the request itself,
    and one rendered beside it would ask the autoscaler twice)."""
    obj, companions, pod_sets, templates = _pinned(job, target, namespace)
    request_name = _request_name(obj, target)
    pod_templates: list[dict[str, Any]] = []
    request_sets: list[dict[str, Any]] = []
    for index, (pod_set, template) in enumerate(zip(pod_sets, templates, strict=True)):
        annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[CONSUMES] = request_name
        annotations[CLASS_ANNOTATION] = target.class_name
        template_name = f"{request_name}-{index}"
        pod_templates.append({"apiVersion": "v1", "kind": "PodTemplate",
                              "metadata": {"name": template_name, "namespace": namespace},
                              "template": copy.deepcopy(template)})
        request_sets.append({"podTemplateRef": {"name": template_name}, "count": pod_set.pods})
    request = {"apiVersion": REQUEST_API_VERSION, "kind": "ProvisioningRequest",
               "metadata": {"name": request_name, "namespace": namespace},
               "spec": {"provisioningClassName": target.class_name, "podSets": request_sets}}
    return [*pod_templates, request, *_extras(job), obj, *companions]


def _extras(job: JobInput) -> list[dict[str, Any]]:
    """The job file's other documents (a Service the pods are reached by, a ConfigMap they read), unchanged and
    before the job as `submit` applies them (kube/render.py): left out, the job was applied without them."""
    return [copy.deepcopy(dict(e)) for e in job.extras]


def kept(job: JobInput) -> frozenset[tuple[str, str, str]]:
    """The job file's other documents as `identity` names them: applied with the job, as `submit` applies them,
    but never withdrawn with a refused zone nor required to be new (cli/provfailover.py). They pin nothing to the
    zone, and they may be the user's already (a Namespace, a shared ConfigMap): deleting one would delete what
    geosched did not create."""
    return frozenset(identity(e) for e in job.extras)


def identity(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(apiVersion, kind, name) of a manifest."""
    return (str(obj.get("apiVersion")), str(obj.get("kind")), str((obj.get("metadata") or {}).get("name")))


def job_of(manifests: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The job among what `render` or `render_request` made: the one object of a job kind (a job file holds
    exactly one, kube/jobinput.py; its other documents and the companions are of no job kind)."""
    return next(m for m in manifests if kinds.lookup(str(m.get("apiVersion")), str(m.get("kind"))) is not None)


def _request_name(obj: Mapping[str, Any], target: Target) -> str:
    """`<job>-<target.name>`, cut to leave room for a PodTemplate's `-<index>` in 253 (both DNS subdomains)."""
    job_name = str((obj.get("metadata") or {}).get("name") or "job")
    return f"{job_name}-{target.name}"[:240].rstrip("-.")


def _pinned(job: JobInput, target: Target, namespace: str) -> tuple[dict[str, Any], tuple[dict[str, Any], ...],
                                                                    tuple[PodSet, ...], list[dict[str, Any]]]:
    """The job's object (a copy) with every pod template pinned to the target's zone and GPU label and tolerating
    the class's taints; its companions, pod sets and those templates (inside the object)."""
    if target.class_name not in CLASSES:
        raise InputError("--provisioning-class", "", f"{target.class_name!r} is not one of {', '.join(CLASSES)}")
    if not _NAME.match(target.name):
        raise InputError("--name", "", f"{target.name[:80]!r} is not a Kubernetes object name (lowercase letters, "
                         "digits and '-', at most 63)")
    obj, companions, pod_sets = _job_objects(job, namespace)
    templates = [_template(obj, p, job.source) for p in pod_sets]
    requirements = [(keys.ZONE, (target.zone,)), (target.gpu_label, (target.gpu_value,))]
    for template in templates:
        spec = template.setdefault("spec", {})
        selector = dict(spec.get("nodeSelector") or {})
        problem = affinity.select_exactly(selector, requirements)
        if problem is not None:
            raise InputError(job.source, "nodeSelector", problem)
        spec["nodeSelector"] = selector
        tolerations.add_to(spec, target.node_tolerations())
    return obj, companions, pod_sets, templates


def queue_objects(target: Target, queue: str, namespace: str,
                  quota: Mapping[str, int | str]) -> list[dict[str, Any]]:
    """The cluster-scoped Kueue objects that send the gang through a ProvisioningRequest, all named
    `queue_name(target, namespace)`, and its LocalQueue."""
    name = queue_name(target, namespace)
    flavor = {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": name},
              "spec": {"nodeLabels": {target.gpu_label: target.gpu_value}}}
    config = {"apiVersion": API_VERSION, "kind": "ProvisioningRequestConfig", "metadata": {"name": name},
              "spec": {"provisioningClassName": target.class_name, "managedResources": [keys.GPU]}}
    check = {"apiVersion": API_VERSION, "kind": "AdmissionCheck", "metadata": {"name": name},
             "spec": {"controllerName": CONTROLLER,
                      "parameters": {"apiGroup": GROUP, "kind": "ProvisioningRequestConfig", "name": name}}}
    covered = sorted(quota)
    cluster_queue = {
        "apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": name},
        "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                 "resourceGroups": [{"coveredResources": covered, "flavors": [
                     {"name": name, "resources": [{"name": r, "nominalQuota": quota[r]} for r in covered]}]}],
                 "admissionChecksStrategy": {"admissionChecks": [{"name": name}]}}}
    local_queue = {"apiVersion": API_VERSION, "kind": "LocalQueue",
                   "metadata": {"name": queue, "namespace": namespace}, "spec": {"clusterQueue": name}}
    return [flavor, config, check, cluster_queue, local_queue]


def queue_name(target: Target, namespace: str) -> str:
    """The name of the cluster-scoped Kueue objects of gangs of one (class, GPU label and value, namespace):
    `<target.name>-<GPU value>-<digest of the four>`, at most 63 characters.

    One name for every gang was one set of objects: the second `up` rewrote the first gang's flavor (its GPU), its
    ClusterQueue's namespaceSelector and quota, and the first gang, not admitted yet, waited for ever (issue 26).
    Gangs that agree on all four share the objects (each renders them identical) and queue in Kueue's order on one
    quota (`raised_queue`); those that differ in any never meet. The zone is left out: it is pinned in the job's
    nodeSelector, not in the flavor, so one queue serves every zone. The digest keeps two GPU values that read
    alike once cut or lower-cased apart; the value is there for the person reading `kubectl get clusterqueues`."""
    key = "\0".join((target.class_name, target.gpu_label, target.gpu_value, namespace))
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    readable = re.sub(r"[^a-z0-9]+", "-", target.gpu_value.lower()).strip("-")
    return f"{f'{target.name}-{readable}'[:63 - 11].rstrip('-')}-{digest}"


def raised_queue(rendered: Mapping[str, Any], live: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ClusterQueue to apply for a gang, given the one in the cluster (None: there is none): `rendered` where
    there is none; None (apply nothing) where the live quota of the gang's flavor already holds the gang's; else
    `rendered` whose resourceGroups are the live ones with each resource of the gang's flavor raised to the gang's,
    other flavors, groups and larger quotas kept.

    Never lowered: the quota may be another gang's (a larger one of the same queue) or the cluster owner's, who
    raises it to run more gangs at once; applied over, it fell back to this gang's. Left alone while it suffices:
    Kueue v0.17.0's ClusterQueue CRD makes `resourceGroups` an atomic list, so an owner's `kubectl` edit owns all of
    it, and an apply of other values under geosched's field manager was a conflict that failed the next `up`. A
    quota below the gang's would leave it never admitted, with no error, so it is raised (the caller takes the
    field over with `force`)."""
    if live is None:
        return copy.deepcopy(dict(rendered))
    [rendered_group] = rendered["spec"]["resourceGroups"]
    [flavor] = rendered_group["flavors"]
    wanted = {str(r["name"]): r["nominalQuota"] for r in flavor["resources"]}
    groups = copy.deepcopy(list((live.get("spec") or {}).get("resourceGroups") or []))
    group = next((g for g in groups if any(f.get("name") == flavor["name"] for f in g.get("flavors") or [])), None)
    if group is None:  # the owner took the flavor out: the gang's group goes back in beside the others
        group = {"coveredResources": [], "flavors": [{"name": flavor["name"], "resources": []}]}
        groups.append(group)
    elsewhere = {str(r) for g in groups if g is not group for r in g.get("coveredResources") or []}
    mine = next(f for f in group["flavors"] if f.get("name") == flavor["name"])
    have = {str(r["name"]): r for r in mine.get("resources") or []}
    changed = False
    for resource, quota in wanted.items():
        if resource in elsewhere:  # Kueue counts a resource in one group only: the owner's choice stands
            continue
        if resource not in have:
            # Kueue requires every flavor of a group to list each covered resource: the others get none of it.
            group["coveredResources"] = [*group.get("coveredResources", []), resource]
            for other in group["flavors"]:
                other.setdefault("resources", []).append(
                    {"name": resource, "nominalQuota": quota if other is mine else 0})
            changed = True
        elif parse_quantity(have[resource].get("nominalQuota", 0)) < parse_quantity(quota):
            have[resource]["nominalQuota"] = quota
            changed = True
    if not changed:
        return None
    raised = copy.deepcopy(dict(rendered))
    raised["spec"]["resourceGroups"] = groups
    return raised


def for_gitops(objects: Sequence[Mapping[str, Any]], live: Mapping[str, Any] | None, *,
               owned: bool = False) -> list[dict[str, Any]]:
    """The objects `up --provisioning-class --out` writes, given the cluster's ClusterQueue of the gang's queue
    (None: the cluster has none): `objects` with the ClusterQueue as `raised_queue` resolves it: left out where the
    cluster's already holds the gang's quota, the cluster's raised to the gang's where it does not, the rendered one
    where there is none. `owned`: the file being replaced carries that ClusterQueue (its sync made or manages it):
    it stays in, with the cluster's quotas where they hold the gang, as a file without it would have the sync's
    prune delete the queue under the gang.

    A GitOps apply makes the cluster what the file says (Argo CD, Flux: server-side apply of the whole object, and
    Kueue's `resourceGroups` is one atomic list): a file carrying the gang's own quota set an owner's raised quota
    back to the gang's at the next sync, and the other gangs of the queue waited. Kueue's docs give ClusterQueues to
    the batch administrator (kueue.sigs.k8s.io/docs/tasks/manage/administer_cluster_quotas; a batch user only
    submits to a LocalQueue), so where one exists and suffices the file leaves it to its owner."""
    written: list[dict[str, Any]] = []
    for obj in objects:
        if obj.get("kind") == "ClusterQueue":
            queue = raised_queue(obj, live)
            if queue is None:
                if not owned:
                    continue
                assert live is not None  # raised_queue writes the rendered one where there is none
                queue = copy.deepcopy(dict(obj))
                queue["spec"]["resourceGroups"] = copy.deepcopy(live["spec"]["resourceGroups"])
            obj = queue
        written.append(copy.deepcopy(dict(obj)))
    return written


# The largest quantity Kubernetes holds (resource.Quantity's int64 of base units): a quota past it is one the API
# server refuses, and "9e999" became a 1,000-digit quota in the rendered ClusterQueue.
MAX_QUANTITY = Decimal(2**63 - 1)


def gang_request(obj: Mapping[str, Any], pod_sets: Sequence[PodSet], source: str) -> dict[str, int | str]:
    """What the gang's pods request together, each pod counted as Kueue counts it for the Workload (kube-scheduler's
    rule, geosched.kube.resources.pod_requests: its largest init container when more than its app containers and
    sidecars, a container's limit where it sets no request, its overhead), GPUs always among them: the
    ClusterQueue's quota for this gang. A value that is not a quantity of at least 0 and at most MAX_QUANTITY is
    one line naming the job file and the field (the job readers count GPUs only)."""
    totals: dict[str, int] = {keys.GPU: 0}
    for pod_set in pod_sets:
        assert pod_set.path is not None
        spec = at_path(obj, pod_set.path).get("spec") or {}
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in pod_set.path).lstrip(".")
        _check_quantities(spec, source, f"{at}.spec")
        for resource, amount in pod_requests(At(spec, source)).items():
            if resource != PODS:  # Kueue counts pods only for a queue that covers them; this one does not
                totals[resource] = totals.get(resource, 0) + amount * pod_set.pods
    # pod_requests counts cpu in millicores and the rest in whole units.
    if any(Decimal(total) / (1000 if r == CPU else 1) > MAX_QUANTITY for r, total in totals.items()):
        raise InputError(source, "resources", f"the gang's pods ask for more than Kubernetes holds ({MAX_QUANTITY})")
    return {r: (v // 1000 if v % 1000 == 0 else f"{v}m") if r == CPU else v for r, v in totals.items()}


def _check_quantities(spec: Mapping[str, Any], source: str, at: str) -> None:
    """Every quantity `pod_requests` reads is one (it passes over what is not): else one line naming the field."""
    for group in ("initContainers", "containers"):
        containers = spec.get(group) or []
        for index, container in enumerate(containers if isinstance(containers, list) else []):
            resources = (container.get("resources") if isinstance(container, Mapping) else None) or {}
            for kind in ("limits", "requests"):
                values = (resources.get(kind) if isinstance(resources, Mapping) else None) or {}
                for resource, value in (values.items() if isinstance(values, Mapping) else ()):
                    _quantity(value, source, f"{at}.{group}[{index}].resources.{kind}.{resource}")
    overhead = spec.get("overhead") or {}
    for resource, value in (overhead.items() if isinstance(overhead, Mapping) else ()):
        _quantity(value, source, f"{at}.overhead.{resource}")
    pod_level = (spec.get("resources") or {}) if isinstance(spec.get("resources"), Mapping) else {}
    for kind in ("limits", "requests"):
        values = pod_level.get(kind) or {}
        for resource, value in (values.items() if isinstance(values, Mapping) else ()):
            _quantity(value, source, f"{at}.resources.{kind}.{resource}")


def _quantity(value: Any, source: str, where: str) -> None:
    try:
        amount = parse_quantity(value)
    except ValueError:
        raise InputError(source, where, f"expected a Kubernetes quantity such as 8, 500m or 64Gi, got "
                         f"{describe(value)}") from None
    if not 0 <= amount <= MAX_QUANTITY:
        raise InputError(source, where, f"must be at least 0 and at most {MAX_QUANTITY}")


def _job_objects(job: JobInput, namespace: str) -> tuple[dict[str, Any], tuple[dict[str, Any], ...],
                                                          tuple[PodSet, ...]]:
    if job.original is None:  # a compact job: the Indexed Job (and its headless Service) `submit` renders
        from geosched.kube.compact import CompactKind, build

        built = build(job.job, namespace, CompactKind.JOB, job.source)
        return built.obj, built.companions, built.pod_sets
    obj = copy.deepcopy(dict(job.original))
    obj.setdefault("metadata", {}).setdefault("namespace", namespace)
    return obj, (), job.pod_sets


def _template(obj: dict[str, Any], pod_set: PodSet, source: str) -> dict[str, Any]:
    if pod_set.path is None:
        raise InputError(source, "kind", "a ProvisioningRequest copies the job's pod templates, and this kind has "
                         "none of its own (a TrainJob's pods come from its runtime)")
    return at_path(obj, pod_set.path)
