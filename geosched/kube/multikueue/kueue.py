"""What Kueue's objects say, read from their JSON; and the one status write a dispatcher makes. Pure.

Upstream contract (kubernetes-sigs/kueue at ff69552e79ad, the commit of the CRDs in shared/schemas/crds):

- `multiKueue.dispatcherName` in the Kueue Configuration names the dispatcher; the built-in ones are
  `kueue.x-k8s.io/multikueue-dispatcher-all-at-once` (the default) and `...-incremental`
  (apis/config/v1beta2/configuration_types.go). Any other name hands the choice to an external controller,
  which sets `.status.nominatedClusterNames`; MultiKueue copies the Workload only there
  (site/content/en/docs/concepts/multikueue.md, "External (Custom implementation)").
- A Workload is up for nomination while it holds a quota reservation (condition QuotaReserved=True), is not
  Finished, its MultiKueue admission check (an AdmissionCheck whose controllerName is
  `kueue.x-k8s.io/multikueue`) is Pending and `.status.clusterName` is unset
  (pkg/controller/workloaddispatcher/incrementaldispatcher.go, pkg/workload/workload.go
  ShouldSkipClusterNomination). Once clusterName is set it is immutable and nominatedClusterNames must be
  empty (the CRD's CEL rules); at most 20 names (maxItems).
- The write: the docs' "Known Limitation" requires the `kueue-admission` field manager (or a feature gate /
  MutatingAdmissionPolicy that clears the field). Kueue itself writes nominatedClusterNames with server-side
  apply on the status subresource, manager `kueue-admission`, force, carrying the resourceVersion it read and
  the whole admission-managed status (pkg/workload/patching/patching.go PatchAdmissionStatus,
  prepareWorkloadPatch). Applying with that manager but fewer fields would make the API server drop the
  fields the manager stops applying (the quota reservation among them), so `nomination_apply` sends exactly
  the set prepareWorkloadPatch sends. With any other manager only nominatedClusterNames is sent (for clusters
  with WorkloadRequestUseMergePatch or the clear-nominated-cluster-names policy).
- MultiKueueConfig `spec.clusters` names MultiKueueClusters; an AdmissionCheck's `spec.parameters` names the
  MultiKueueConfig. A MultiKueueCluster's kubeconfig is `spec.clusterSource.kubeConfig` (v1beta2) or
  `spec.kubeConfig` (v1beta1), `{location, locationType}`; locationType Secret: the Secret named `location` in
  Kueue's namespace, key `kubeconfig` (pkg/controller/admissionchecks/multikueue/multikueuecluster.go).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from geosched.core.errors import InputError
from geosched.core.models import Job
from geosched.files.fields import parse_time
from geosched.kube import keys
from geosched.kube.backends.kueue import GROUP, VERSIONS
from geosched.kube.inventory import pod_gpus, pod_request
from geosched.kube.jobinput import pod_templates_gang
from geosched.kube.objpath import At
from geosched.kube.quantity import whole_count
from geosched.kube.scheduler.pods import Requirements, requirements
from geosched.kube.tolerations import GPU_ADMISSION

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
ADMISSION_FIELD_MANAGER = "kueue-admission"
ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
DEFAULT_DISPATCHER = "geosched.io/dispatcher"
KUBECONFIG_KEY = "kubeconfig"
MAX_NOMINATED = 20
# Kueue's manifests: ConfigMap `manager-config` with namePrefix `kueue-` in namespace kueue-system
# (config/components/manager/kustomization.yaml, config/default/kustomization.yaml).
KUEUE_NAMESPACE = "kueue-system"
KUEUE_CONFIGMAP = "kueue-manager-config"
KUEUE_CONFIG_KEY = "controller_manager_config.yaml"
# The conditions PatchAdmissionStatus carries (admissionManagedConditions in patching.go).
ADMISSION_CONDITIONS = ("QuotaReserved", "BlockedOnPreemptionGates", "Evicted", "Admitted", "Preempted",
                        "Requeued", "DeactivationTarget", "Finished", "PodsReady")
# A topology domain finer than a zone (a rack, a block, a host) lies inside one zone.
ZONE_OR_FINER = "zone or finer"


def dispatcher_of(configuration: Any) -> str:
    """The dispatcher a Kueue Configuration names (Kueue's default when it names none)."""
    multikueue = configuration.get("multiKueue") if isinstance(configuration, Mapping) else None
    name = multikueue.get("dispatcherName") if isinstance(multikueue, Mapping) else None
    return name if isinstance(name, str) and name else ALL_AT_ONCE


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == kind:
            return c.get("status") == "True"
    return False


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def multikueue_checks(admission_checks: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """AdmissionCheck name -> its MultiKueueConfig name, for the checks MultiKueue controls."""
    out: dict[str, str] = {}
    for ac in admission_checks:
        spec = ac.get("spec") or {}
        if spec.get("controllerName") != MULTIKUEUE_CONTROLLER:
            continue
        params = spec.get("parameters") or {}
        if params.get("kind", "MultiKueueConfig") == "MultiKueueConfig" and params.get("name"):
            out[name_of(ac)] = str(params["name"])
    return out


def queue_checks(cluster_queue: Mapping[str, Any]) -> set[str]:
    """The admission checks a ClusterQueue applies: `spec.admissionChecks` (v1beta1) and
    `spec.admissionChecksStrategy.admissionChecks[].name` (both versions)."""
    spec = cluster_queue.get("spec") or {}
    names = {str(n) for n in spec.get("admissionChecks") or []}
    for rule in (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []:
        if isinstance(rule, Mapping) and rule.get("name"):
            names.add(str(rule["name"]))
    return names


def kubeconfig_ref(cluster: Mapping[str, Any]) -> tuple[str, str] | None:
    """(location, locationType) of a MultiKueueCluster's kubeconfig; None when it uses a ClusterProfile."""
    spec = cluster.get("spec") or {}
    ref = (spec.get("clusterSource") or {}).get("kubeConfig") or spec.get("kubeConfig")
    if not isinstance(ref, Mapping) or not ref.get("location"):
        return None
    return str(ref["location"]), str(ref.get("locationType") or "Secret")


@dataclass(frozen=True, slots=True)
class Pending:
    """A Workload waiting for a dispatcher, with the MultiKueueConfig that lists its candidate clusters."""

    namespace: str
    name: str
    uid: str
    config: str
    nominated: tuple[str, ...]
    obj: Mapping[str, Any]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def skip_reason(wl: Mapping[str, Any], checks: Mapping[str, str], queues: Mapping[str, set[str]]) -> str | None:
    """Why this Workload is not ours to nominate now, or None when it is (the conditions in the module doc)."""
    meta, status = wl.get("metadata") or {}, wl.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "being deleted"
    if status.get("clusterName"):
        return f"admitted by {status['clusterName']}"
    if condition_true(wl, "Finished"):
        return "finished"
    if not condition_true(wl, "QuotaReserved"):
        return "no quota reservation"
    queue = str((status.get("admission") or {}).get("clusterQueue") or "")
    mk = [s for s in status.get("admissionChecks") or [] if isinstance(s, Mapping) and s.get("name") in checks]
    if not mk:
        return "no MultiKueue admission check"
    if mk[0].get("state") != "Pending":
        return f"MultiKueue check {mk[0].get('state')}"
    if queue not in queues or mk[0]["name"] not in queues[queue]:
        return f"ClusterQueue {queue or '(none)'} does not apply MultiKueue check {mk[0]['name']}"
    return None


def pending_of(wl: Mapping[str, Any], checks: Mapping[str, str]) -> Pending:
    meta, status = wl.get("metadata") or {}, wl.get("status") or {}
    check = next(s["name"] for s in status.get("admissionChecks") or []
                 if isinstance(s, Mapping) and s.get("name") in checks)
    return Pending(str(meta.get("namespace") or "default"), str(meta.get("name")), str(meta.get("uid") or ""),
                   checks[check], tuple(str(n) for n in status.get("nominatedClusterNames") or []), wl)


def nominated_at(wl: Mapping[str, Any], field_manager: str) -> datetime | None:
    """When `field_manager` last changed the Workload's status by apply while owning nominatedClusterNames: the
    API server keeps it in `metadata.managedFields` (one entry per manager, operation and subresource; its `time`
    is set on every apply that changed the object, in whole seconds). None when no such entry says so (the names
    were written otherwise, or the time is unreadable)."""
    for entry in (wl.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(entry, Mapping) or (entry.get("manager"), entry.get("operation"),
                                              entry.get("subresource")) != (field_manager, "Apply", "status"):
            continue
        status = (entry.get("fieldsV1") or {}).get("f:status")
        if not isinstance(status, Mapping) or "f:nominatedClusterNames" not in status:
            return None
        try:
            return parse_time(entry.get("time"), "managedFields", "time")
        except InputError:
            return None
    return None


# --- the gang ---------------------------------------------------------------------------------------

def workload_gang(wl: Mapping[str, Any], known: set[str] | None = None) -> Job:
    """The Workload's PodSets as one gang: `count` pods of each template, GPUs per pod from the template
    (the rules of `geosched submit`: all GPU pods ask for the same count; GPU model, zone and region from
    nodeSelector / required node affinity). Topology requests: `required` zone, or any level finer than a
    zone, keeps the gang in one zone; `required` region in one region; `required` hostname puts a PodSet on
    one node (one worker of count x GPUs). Raises InputError (the field named) when it is no gang."""
    source = f"Workload {(wl.get('metadata') or {}).get('namespace')}/{name_of(wl)}"
    root = At(wl, source)
    sets = root.dig("spec", "podSets").items(required=True)
    templates: list[tuple[At, int]] = []
    max_zones: int | None = None
    max_regions: int | None = None
    for ps in sets:
        count = ps.key("count").integer(minimum=0, default=1)
        template = ps.key("template")
        level = _required_level(ps.key("topologyRequest"))
        if level == keys.HOSTNAME and count > 1:
            template = At(_one_pod_of(template.value, count), template.source, template.path)
            count = 1
        if level == keys.REGION:
            max_regions = 1
        elif level is not None:
            max_zones = 1
        templates.append((template, count))
    job = pod_templates_gang(name_of(wl), str((wl.get("metadata") or {}).get("namespace") or "default"),
                             templates, root.key("spec"), known)
    return Job(name=job.name, namespace=job.namespace, image=job.image, workers=job.workers,
               gpus_per_worker=job.gpus_per_worker, gpu=job.gpu, zones=job.zones, regions=job.regions,
               max_zones=max_zones, max_regions=max_regions, schedule=job.schedule)


# The Workload's template is read before any admission: it does not carry yet the GPU toleration the worker's
# ExtendedResourceToleration plugin adds (tolerations.GPU_ADMISSION), so it is added here.


def gpu_requirements(wl: Mapping[str, Any]) -> tuple[Requirements, ...]:
    """What limits the nodes of each GPU PodSet's pods (nodeSelector, required node affinity, tolerations, and
    the GPU toleration the worker's admission adds), one per distinct template."""
    out: list[Requirements] = []
    for ps in At(wl, "Workload").dig("spec", "podSets").items():
        spec = ps.dig("template", "spec")
        if not pod_gpus(spec):
            continue
        own = requirements(spec)
        req = Requirements(own.selector, own.terms, (*own.tolerations, GPU_ADMISSION))
        if req not in out:
            out.append(req)
    return tuple(out)


# The resources besides GPUs a worker's node must have room for (`worker_needs`).
NEEDS = ("cpu", "memory")


def worker_needs(wl: Mapping[str, Any]) -> tuple[float, ...]:
    """What one worker of the gang asks of each of `NEEDS` (cores, bytes): the most any GPU PodSet's pod asks,
    a PodSet that must share one node (`required` hostname) counted as one worker of all its pods."""
    out = [0.0] * len(NEEDS)
    for ps in At(wl, "Workload").dig("spec", "podSets").items():
        spec = ps.dig("template", "spec")
        if not pod_gpus(spec):
            continue
        pods = ps.key("count").integer(minimum=0, default=1) \
            if _required_level(ps.key("topologyRequest")) == keys.HOSTNAME else 1
        out = [max(have, pods * pod_request(spec, r)) for have, r in zip(out, NEEDS, strict=True)]
    return tuple(out)


def _required_level(request: At) -> str | None:
    required = request.key("required").opt_string() if request.present else None
    if not required:
        return None
    return required if required in (keys.REGION, keys.ZONE, keys.HOSTNAME) else ZONE_OR_FINER


def _one_pod_of(template: Any, count: int) -> Any:
    """A template whose GPU limits are `count` times the original: a PodSet that must share one node."""
    scaled = copy.deepcopy(template)
    for c in ((scaled or {}).get("spec") or {}).get("containers") or []:
        for part in ("limits", "requests"):
            values = (c.get("resources") or {}).get(part) or {}
            each = whole_count(values.get(keys.GPU))
            if each is not None:  # anything else is reported by the template's reading, path and all
                values[keys.GPU] = str(each * count)
    return scaled


# --- the write --------------------------------------------------------------------------------------

def nomination_apply(wl: Mapping[str, Any], nominated: Sequence[str], field_manager: str,
                     api_version: str = f"{GROUP}/{VERSIONS[0]}") -> dict[str, Any]:
    """The server-side apply configuration for the Workload's status subresource that sets
    `nominatedClusterNames`, as Kueue's PatchAdmissionStatus builds it (see the module doc). `api_version`: the one
    the write goes to (an apply body's apiVersion must be the URL's; a listed item may not say its own)."""
    meta, status = wl.get("metadata") or {}, wl.get("status") or {}
    out_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if meta.get(k)}
    body: dict[str, Any] = {"apiVersion": api_version, "kind": "Workload", "metadata": out_meta}
    if field_manager != ADMISSION_FIELD_MANAGER:
        body["status"] = {"nominatedClusterNames": list(nominated)}
        return body
    out: dict[str, Any] = {}
    if status.get("admission"):
        out["admission"] = copy.deepcopy(status["admission"])
    elif status.get("resourceRequests"):
        out["resourceRequests"] = copy.deepcopy(status["resourceRequests"])
    requeue = status.get("requeueState") or {}
    if requeue.get("count") is not None or requeue.get("requeueAt") is not None:
        out["requeueState"] = copy.deepcopy(requeue)
    conditions = [copy.deepcopy(c) for kind in ADMISSION_CONDITIONS for c in status.get("conditions") or []
                  if isinstance(c, Mapping) and c.get("type") == kind]
    if conditions:
        out["conditions"] = conditions
    for key in ("accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds"):  # v1beta1's spelling
        if status.get(key) is not None:
            out[key] = status[key]
    evictions = (status.get("schedulingStats") or {}).get("evictions")
    if "schedulingStats" in status:
        out["schedulingStats"] = {"evictions": copy.deepcopy(evictions)} if evictions else {}
    for key in ("clusterName", "unhealthyNodes", "preemptionGates", "admissionChecks"):
        if status.get(key):
            out[key] = copy.deepcopy(status[key])
    if nominated:
        out["nominatedClusterNames"] = list(nominated)
    body["status"] = out
    return body
