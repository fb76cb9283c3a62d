"""A placed gang rendered as the manifests to apply on its cluster.

The user's own object comes back with the placement added; nothing else of it changes:

- required node affinity on `topology.kubernetes.io/zone` In the placement's zones, on
  `topology.kubernetes.io/region` when the gang sits in one region, on the GPU model by the label the placed
  nodes carry (`gpuidentity.pin`: GFD's `nvidia.com/gpu.product`, else GKE's `cloud.google.com/gke-accelerator`,
  else `node.kubernetes.io/instance-type`, the first that no node of another model shares), and on
  `kubernetes.io/hostname` when the cluster pins hosts, or when that GPU pin would also admit a node of the gang's
  zones whose `nvidia.com/gpu` are shared replicas or MIG slices (`RenderOptions.not_whole`);
- the tolerations a compact job and its cluster's config declare (`tolerations:`), on every pod template (a
  kind without pod templates, such as a TrainJob, pins its pods its own way: `JobKind.pin_untemplated`), after
  the pods' own, so the nodes the taint filter counted as
  capacity are nodes the pods may use;
- the backend's handoff (Kueue, coscheduling, Volcano, Kubernetes' Workload API; see backends/);
- provenance annotations under `geosched.io/`, and the `geosched.io/job` label on the object and its pods;
- a Karmada PropagationPolicy when the cluster sits behind Karmada.

Host pinning is per gang, not per worker: one pod template serves every worker of an Indexed Job, so the
template admits the set of placed hosts and GPU capacity spreads the workers over them; the exact
node=workers split is recorded in the `geosched.io/assignments` annotation.

Label values come from the placed nodes' own labels (`RenderOptions.nodes`), never from geosched's names: a
fleet's zone identity differs from the zone label on AWS (zone IDs in the fleet, zone names, which differ per
account, on nodes), and a node's name from its hostname label. An AWS node whose zone label is unknown is an
error, not a guess. Without nodes (a caller that has none), the placement's names are used as they are.

Same inputs give byte-identical output through `to_yaml` (sorted keys).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import yaml

from geosched.core import nodelabels
from geosched.core.errors import InputError
from geosched.core.models import Node, Placement
from geosched.files.documents import job_to_dict, placement_to_dict
from geosched.kube import affinity, gpudirect, gpuidentity, karmada, keys, podoptions, provenance
from geosched.kube import tolerations as toleration_rules
from geosched.kube.backends import handoff
from geosched.kube.backends.base import Gang, Handoff
from geosched.kube.compact import CompactKind, build
from geosched.kube.config import Backend, ClusterConfig, cluster_to_dict
from geosched.kube.jobinput import JobInput, JobKind, PodSet
from geosched.kube.kinds.base import PinRequest
from geosched.kube.kinds.template import at_path


@dataclass(frozen=True)
class RenderOptions:
    now: datetime
    compact_kind: CompactKind = CompactKind.JOB
    nodes: Mapping[str, Node] = field(default_factory=dict)
    # The labels of the cluster's GPU nodes that are no capacity because their nvidia.com/gpu are shared replicas or
    # MIG slices (`inventory.Inventory.not_whole`): the gang's pods must not be bound there either.
    not_whole: Sequence[Mapping[str, str]] = ()


@dataclass(frozen=True)
class Constraints:
    """The label values the placement turns into, as written on pods."""

    zones: tuple[str, ...]
    region: str | None
    hosts: tuple[str, ...]
    gpu: gpuidentity.Pin | None = None
    # The GPU pin also admits nodes whose GPUs are not whole (a time-sliced p5 carries the instance type a whole one
    # does, and no label more where GPU feature discovery does not run): only the placed hosts keep the pods off.
    hosts_required: bool = False

    def requirements(self, *, gpu_pod: bool, pin: bool) -> list[affinity.Requirement]:
        """Every pod of the gang stays in its zones; GPU pods also on the placed GPU model and, when
        pinned (or `hosts_required`), on the placed hosts. A GPU-less helper may take any node there."""
        out: list[affinity.Requirement] = [(keys.ZONE, self.zones)]
        if self.region is not None:
            out.append((keys.REGION, (self.region,)))
        if gpu_pod and self.gpu is not None:
            out.append((self.gpu.key, self.gpu.values))
        if gpu_pod and (pin or self.hosts_required):
            out.append((keys.HOSTNAME, self.hosts))
        return out


def render(job: JobInput, placement: Placement, cluster: ClusterConfig, options: RenderOptions) -> list[dict[str, Any]]:
    _check(job, placement, cluster)
    namespace = job.namespace or cluster.namespace or "default"
    if job.original is None:
        built = build(job.job, namespace, options.compact_kind, job.source)
        kind, obj, companions, pod_sets = built.kind, built.obj, built.companions, built.pod_sets
        # The compact job's workers ask for what the cluster's pod options and the placed machines call for.
        placed = podoptions.machines(options.nodes, (a.node for a in placement.assignments))
        pod_options = podoptions.merged(cluster.pods, job.pod_options, job.source)
        for pod_set in pod_sets:
            assert pod_set.path is not None, "a compact job's pods have a template"
            podoptions.apply(at_path(obj, pod_set.path)["spec"], pod_options, placed, job.job.gpus_per_worker,
                             kueue=cluster.backend is Backend.KUEUE)
        if pod_options.gpudirect is not None:
            _gpudirect(obj, pod_sets, pod_options, placement, cluster, job, options.nodes)
    else:
        kind, obj, companions, pod_sets = job.kind, copy.deepcopy(dict(job.original)), (), job.pod_sets
        obj.setdefault("metadata", {}).setdefault("namespace", namespace)
    constraints = constraints_for(placement, options.nodes, options.not_whole)
    gang = Gang(name=job.name, namespace=namespace, kind=kind, pods=sum(p.pods for p in pod_sets),
                gpus=job.job.gpus, zones=placement.zones, regions=placement.regions)
    plan = handoff(gang, cluster)
    if plan.refused is not None:
        raise InputError(job.source, "kind", f"backend {cluster.backend.value}: {plan.refused}")

    _apply_pods(obj, kind, pod_sets, plan, constraints, cluster, job)
    _apply_object(obj, kind, plan)

    digest = provenance.inputs_digest({
        "kind": kind.label,
        "job": job.original if job.original is not None else job_to_dict(job.job),
        "extras": list(job.extras),
        "placement": placement_to_dict(placement),
        "cluster": cluster_to_dict(cluster),
        "compact_kind": options.compact_kind.value,
        "constraints": _digested(constraints),
        # Rendered no cluster objects then and none now (submit --kueue-objects does): kept, so the digests of
        # trees rendered before do not change and no job of theirs is rewritten.
        "kueue_cluster_objects": False,
        # Only when set: the digests of jobs without pod options do not change.
        **({"pods": dict(job.pod_options)} if job.pod_options else {}),
        **({"tolerations": [toleration_rules.to_manifest(t) for t in job.tolerations]}
           if job.original is None and job.tolerations else {}),
    })
    _merge(obj["metadata"], "labels", {keys.JOB_LABEL: job.name})
    notes = provenance.provenance_annotations(placement, cluster.name, digest, options.now)
    _merge(obj["metadata"], "annotations", notes)

    # The gang's own companions carry its label and digest. (The cluster's Kueue objects, shared by all its jobs,
    # are not a job's: `submit --kueue-objects` renders them from the cluster's nodes, backends/kueue.py.)
    ours = [copy.deepcopy(o) for o in (*plan.side_objects, *companions)]
    for o in ours:
        _merge(o["metadata"], "labels", {keys.JOB_LABEL: job.name})
        _merge(o["metadata"], "annotations", {provenance.DIGEST: digest})
    # Apply order: what the pods refer to (flavors, PodGroup, Service, the user's ConfigMaps) before the job.
    manifests = [*ours, *(copy.deepcopy(dict(e)) for e in job.extras), obj]
    if cluster.karmada:
        manifests.append(karmada.propagation_policy(job.name, namespace, cluster.name, manifests))
    return manifests


def to_yaml(manifests: Iterable[Mapping[str, Any]]) -> str:
    """A YAML stream for `kubectl apply -f` and Git: sorted keys, no line folding, so equal inputs give equal bytes."""
    return yaml.safe_dump_all([dict(m) for m in manifests], sort_keys=True, default_flow_style=False,
                              allow_unicode=True, explicit_start=True, width=1 << 20)


def constraints_for(placement: Placement, nodes: Mapping[str, Node],
                    not_whole: Sequence[Mapping[str, str]] = ()) -> Constraints:
    """The label values of the placed nodes themselves (`nodelabels.selectable`), so every value pinned is one
    that nodes of the target cluster carry. Without nodes, the placement's names as they are. `not_whole`: the
    labels of the cluster's nodes whose GPUs are shared or sliced; where the GPU pin (or its absence) would admit
    one in the gang's zones, the gang is held to its placed hosts."""
    if not nodes:
        region = placement.regions[0].split(":", 1)[-1] if len(placement.regions) == 1 else None
        return Constraints(placement.zones, region, tuple(sorted({a.node for a in placement.assignments})))
    missing = sorted({a.node for a in placement.assignments} - set(nodes))
    if missing:
        raise InputError("placement", "assignments", f"node {missing[0]} is not in the fleet rendered from")
    placed = [nodes[a.node] for a in placement.assignments]
    labels = [nodelabels.selectable(n) for n in placed]
    for node, own in zip(placed, labels, strict=True):
        if keys.ZONE not in own:
            raise InputError(f"node {node.name}", "labels", f"no {keys.ZONE} label: the gang cannot be held in "
                             f"zone {node.zone} (an AWS zone's name differs per account; take the snapshot from the "
                             "clusters with `geosched snapshot export --from-clusters`, or add the label)")
    zones = sorted({own[keys.ZONE] for own in labels})
    regions = {own[keys.REGION] for own in labels}
    region = regions.pop() if len(placement.regions) == 1 and len(regions) == 1 else None
    hosts = sorted({own[keys.HOSTNAME] for own in labels})
    models = {n.gpu for n in placed}
    others = [nodelabels.selectable(n) for n in nodes.values() if n.gpu not in models]
    # Apart from the other models first (as before not_whole existed); a pin that also sets the sliced nodes apart is
    # taken only when it still sets every other model apart: falling back to the first label would admit another
    # model (H100-MEGA shares H100's product) whenever a sliced node outside the gang's zones shares every label.
    gpu_pin = gpuidentity.pin(labels, others)
    both = gpuidentity.pin(labels, [*others, *not_whole]) if not_whole else None
    if both is not None and not any(o.get(both.key) in both.values for o in [*others, *not_whole]):
        gpu_pin = both
    admitted = [other for other in not_whole if other.get(keys.ZONE) in zones
                and (gpu_pin is None or other.get(gpu_pin.key) in gpu_pin.values)]
    return Constraints(tuple(zones), region, tuple(hosts), gpu_pin, hosts_required=bool(admitted))


def _digested(constraints: Constraints) -> dict[str, object]:
    """The constraints as the inputs digest holds them. A product pin keeps the form it had before the other
    identity labels could be pinned, so trees rendered then keep their digests and none of their jobs is
    rewritten."""
    pinned = constraints.gpu
    out: dict[str, object] = {"zones": constraints.zones, "region": constraints.region, "hosts": constraints.hosts,
                              "products": pinned.values if pinned is not None and pinned.key == keys.GPU_PRODUCT
                              else ()}
    if pinned is not None and pinned.key != keys.GPU_PRODUCT:
        out["gpu_pin"] = {"key": pinned.key, "values": pinned.values}
    if constraints.hosts_required:  # only when set: other trees' digests do not change
        out["hosts_required"] = True
    return out


def _check(job: JobInput, placement: Placement, cluster: ClusterConfig) -> None:
    if placement.cluster is not None and placement.cluster != cluster.name:
        raise InputError("placement", "cluster", f"the gang was placed on cluster {placement.cluster!r}, "
                         f"not {cluster.name!r}")
    if not placement.zones:
        raise InputError("placement", "zones", "a placement names at least one zone")
    ask, got = job.job, placement.job
    if (ask.workers, ask.gpus_per_worker) != (got.workers, got.gpus_per_worker):
        raise InputError(job.source, "", f"the placement is for {got.workers} x {got.gpus_per_worker} GPUs, the job "
                         f"asks for {ask.workers} x {ask.gpus_per_worker}")


def declared_tolerations(job: JobInput, cluster: ClusterConfig) -> tuple[toleration_rules.Toleration, ...]:
    """What render adds to every pod: a compact job's declared tolerations, then its cluster's. (A manifest's own
    are on its pods already.)"""
    return (*(job.tolerations if job.original is None else ()), *cluster.tolerations)


def _gpudirect(obj: dict[str, Any], pod_sets: Sequence[PodSet], pods: podoptions.PodOptions, placement: Placement,
               cluster: ClusterConfig, job: JobInput, nodes: Mapping[str, Node]) -> None:
    """GKE GPUDirect on a compact job's workers, where the placed nodes can run it (gpudirect.py); else one line."""
    assert pods.gpudirect is not None
    reason = gpudirect.refusal(pods.gpudirect, nodes, (a.node for a in placement.assignments),
                               job.job.gpus_per_worker)
    if reason is not None:
        # Name whichever file set the option: the job's own `pods:` wins over its cluster's.
        source = job.source if job.pod_options and "gpudirect" in job.pod_options else f"cluster {cluster.name}"
        raise InputError(source, "pods.gpudirect", f"cannot use gpudirect: {pods.gpudirect} here: {reason}")
    for pod_set in (p for p in pod_sets if p.gpus_per_pod > 0):  # a GPU-less helper has no GPU NICs to drive
        assert pod_set.path is not None, "a compact job's pods have a template"
        gpudirect.apply(at_path(obj, pod_set.path), pods.gpudirect, pods.gpudirect_networks, pods.gpudirect_image)


def _apply_pods(obj: dict[str, Any], kind: JobKind, pod_sets: Sequence[PodSet], plan: Handoff,
                constraints: Constraints, cluster: ClusterConfig, job: JobInput) -> None:
    for pod_set in pod_sets:
        if pod_set.path is None:  # the kind's pods have no template in the object: the kind pins them
            kind.pin_untemplated(obj, PinRequest(
                requirements=constraints.requirements(gpu_pod=True, pin=cluster.pin_hosts),
                tolerations=(*job.tolerations, *cluster.tolerations), cluster_tolerations=bool(cluster.tolerations),
                pod_level_required=plan.pod_level_required, backend=cluster.backend.value, source=job.source))
            continue
        template = at_path(obj, pod_set.path)
        meta = template.setdefault("metadata", {})
        # The job's label on its pods too, so the GPUs they hold can be told from others' (`snapshot export
        # --from-clusters --placements`: a GitOps tree's own jobs do not compete with themselves).
        _merge(meta, "labels", {keys.JOB_LABEL: job.name, **plan.pod_labels})
        _merge(meta, "annotations", plan.pod_annotations)
        spec = template["spec"]
        spec.update(copy.deepcopy(dict(plan.pod_spec)))
        if plan.scheduler_name is not None:
            spec["schedulerName"] = plan.scheduler_name
        affinity.require_in(spec, constraints.requirements(gpu_pod=pod_set.gpus_per_pod > 0, pin=cluster.pin_hosts))
        toleration_rules.add_to(spec, declared_tolerations(job, cluster))


def _apply_object(obj: dict[str, Any], kind: JobKind, plan: Handoff) -> None:
    _merge(obj["metadata"], "labels", plan.object_labels)
    if plan.scheduling_policy and kind.scheduling_policy_path is not None:
        here = obj
        for key in kind.scheduling_policy_path:
            here = here.setdefault(key, {})
        here.update(plan.scheduling_policy)


def _merge(meta: dict[str, Any], key: str, values: Mapping[str, str]) -> None:
    if values:
        meta[key] = {**(meta.get(key) or {}), **values}
