"""A placed gang rendered as the manifests to apply on its cluster.

The user's own object comes back with the placement added; nothing else of it changes:

- required node affinity on `topology.kubernetes.io/zone` In the placement's zones, on
  `topology.kubernetes.io/region` when the gang sits in one region, on `nvidia.com/gpu.product` when the
  placed nodes' product labels are known, and on `kubernetes.io/hostname` when the cluster pins hosts;
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

from geosched.documents import job_to_dict, placement_to_dict
from geosched.errors import InputError
from geosched.kube import affinity, karmada, keys, nodelabels, provenance
from geosched.kube.backends import handoff
from geosched.kube.backends import kueue as kueue_backend
from geosched.kube.backends.base import Gang, Handoff
from geosched.kube.compact import CompactKind, build
from geosched.kube.config import Backend, ClusterConfig, cluster_to_dict
from geosched.kube.jobinput import TRAINJOB_NODE_JOB, JobInput, JobKind, PathKey, PodSet
from geosched.models import Node, Placement


@dataclass(frozen=True)
class RenderOptions:
    now: datetime
    compact_kind: CompactKind = CompactKind.JOB
    nodes: Mapping[str, Node] = field(default_factory=dict)
    # Kueue only: also render the cluster's Topology and one ResourceFlavor per GPU product of `nodes`.
    kueue_cluster_objects: bool = False


@dataclass(frozen=True)
class Constraints:
    """The label values the placement turns into, as written on pods."""

    zones: tuple[str, ...]
    region: str | None
    hosts: tuple[str, ...]
    products: tuple[str, ...]

    def requirements(self, *, gpu_pod: bool, pin: bool) -> list[affinity.Requirement]:
        """Every pod of the gang stays in its zones; GPU pods also on the placed GPU product and, when
        pinned, on the placed hosts. A GPU-less helper may take any node there."""
        out: list[affinity.Requirement] = [(keys.ZONE, self.zones)]
        if self.region is not None:
            out.append((keys.REGION, (self.region,)))
        if gpu_pod and self.products:
            out.append((keys.GPU_PRODUCT, self.products))
        if gpu_pod and pin:
            out.append((keys.HOSTNAME, self.hosts))
        return out


def render(job: JobInput, placement: Placement, cluster: ClusterConfig, options: RenderOptions) -> list[dict[str, Any]]:
    _check(job, placement, cluster)
    namespace = job.namespace or cluster.namespace or "default"
    if job.original is None:
        built = build(job.job, namespace, options.compact_kind, job.source)
        kind, obj, companions, pod_sets = built.kind, built.obj, built.companions, built.pod_sets
    else:
        kind, obj, companions, pod_sets = job.kind, copy.deepcopy(dict(job.original)), (), job.pod_sets
        obj.setdefault("metadata", {}).setdefault("namespace", namespace)
    constraints = constraints_for(placement, options.nodes)
    gang = Gang(name=job.name, namespace=namespace, kind=kind, pods=sum(p.pods for p in pod_sets),
                gpus=job.job.gpus, zones=placement.zones, regions=placement.regions)
    plan = handoff(gang, cluster)
    if plan.refused is not None:
        raise InputError(job.source, "kind", f"backend {cluster.backend.value}: {plan.refused}")

    _apply_pods(obj, kind, pod_sets, plan, constraints, cluster, job)
    _apply_object(obj, kind, plan)

    digest = provenance.inputs_digest({
        "kind": kind.value,
        "job": job.original if job.original is not None else job_to_dict(job.job),
        "extras": list(job.extras),
        "placement": placement_to_dict(placement),
        "cluster": cluster_to_dict(cluster),
        "compact_kind": options.compact_kind.value,
        "constraints": {"zones": constraints.zones, "region": constraints.region, "hosts": constraints.hosts,
                        "products": constraints.products},
        "kueue_cluster_objects": options.kueue_cluster_objects,
    })
    _merge(obj["metadata"], "labels", {keys.JOB_LABEL: job.name})
    notes = provenance.provenance_annotations(placement, cluster.name, digest, options.now)
    _merge(obj["metadata"], "annotations", notes)

    cluster_objects: list[dict[str, Any]] = []
    if options.kueue_cluster_objects and cluster.backend is Backend.KUEUE:
        cluster_objects = kueue_backend.cluster_objects(n for n in options.nodes.values()
                                                        if n.cluster in (None, cluster.name))
    # The gang's own companions carry its label and digest; the cluster's Kueue objects are shared by all
    # jobs, so they carry neither (two jobs would otherwise rewrite them back and forth in Git).
    ours = [copy.deepcopy(o) for o in (*plan.side_objects, *companions)]
    for o in ours:
        _merge(o["metadata"], "labels", {keys.JOB_LABEL: job.name})
        _merge(o["metadata"], "annotations", {provenance.DIGEST: digest})
    # Apply order: what the pods refer to (flavors, PodGroup, Service, the user's ConfigMaps) before the job.
    manifests = [*cluster_objects, *ours, *(copy.deepcopy(dict(e)) for e in job.extras), obj]
    if cluster.karmada:
        manifests.append(karmada.propagation_policy(job.name, namespace, cluster.name, manifests))
    return manifests


def to_yaml(manifests: Iterable[Mapping[str, Any]]) -> str:
    """A YAML stream for `kubectl apply -f` and Git: sorted keys, no line folding, so equal inputs give equal bytes."""
    return yaml.safe_dump_all([dict(m) for m in manifests], sort_keys=True, default_flow_style=False,
                              allow_unicode=True, explicit_start=True, width=1 << 20)


def constraints_for(placement: Placement, nodes: Mapping[str, Node]) -> Constraints:
    """The label values of the placed nodes themselves (`nodelabels.selectable`), so every value pinned is one
    that nodes of the target cluster carry. Without nodes, the placement's names as they are."""
    if not nodes:
        region = placement.regions[0].split(":", 1)[-1] if len(placement.regions) == 1 else None
        return Constraints(placement.zones, region, tuple(sorted({a.node for a in placement.assignments})), ())
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
    # A product is known only if every placed node says it; otherwise constraining would exclude the others.
    products = sorted({own[keys.GPU_PRODUCT] for own in labels if keys.GPU_PRODUCT in own})
    if any(keys.GPU_PRODUCT not in own for own in labels):
        products = []
    return Constraints(tuple(zones), region, tuple(hosts), tuple(products))


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


def _apply_pods(obj: dict[str, Any], kind: JobKind, pod_sets: Sequence[PodSet], plan: Handoff,
                constraints: Constraints, cluster: ClusterConfig, job: JobInput) -> None:
    if kind is JobKind.TRAINJOB:
        _apply_trainjob(obj, plan, constraints, cluster, job.source)
        return
    for pod_set in pod_sets:
        assert pod_set.path is not None, "only a TrainJob has pods without a template"
        template = _resolve(obj, pod_set.path)
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


def _apply_trainjob(obj: dict[str, Any], plan: Handoff, constraints: Constraints, cluster: ClusterConfig,
                    source: str) -> None:
    """A TrainJob's pod template lives in its runtime; the TrainJob can only add a nodeSelector for the
    runtime's `node` job, so what needs affinity with several values or pod metadata is refused, not dropped."""
    if plan.pod_level_required:
        raise InputError(source, "spec", f"backend {cluster.backend.value} needs labels or a scheduler on the pods, "
                         "which a TrainJob cannot set; its runtime's podGroupPolicy does gang scheduling")
    # Kueue's topology annotation is dropped here: the nodeSelector below already holds the gang in one zone.
    override: dict[str, Any] = {"targetJobs": [{"name": TRAINJOB_NODE_JOB}], "nodeSelector": {}}
    wanted = constraints.requirements(gpu_pod=True, pin=cluster.pin_hosts)
    reason = affinity.select_exactly(override["nodeSelector"], wanted)
    if reason is not None:
        raise InputError(source, "spec.podSpecOverrides", f"cannot place a TrainJob here: {reason}")
    obj["spec"].setdefault("podSpecOverrides", []).append(override)


def _apply_object(obj: dict[str, Any], kind: JobKind, plan: Handoff) -> None:
    _merge(obj["metadata"], "labels", plan.object_labels)
    if plan.scheduling_policy and kind is JobKind.PYTORCHJOB:
        policy = obj["spec"].setdefault("runPolicy", {}).setdefault("schedulingPolicy", {})
        policy.update(plan.scheduling_policy)


def _resolve(obj: dict[str, Any], path: Sequence[PathKey]) -> dict[str, Any]:
    here: Any = obj
    for step in path:
        here = here[step]
    assert isinstance(here, dict)
    return here


def _merge(meta: dict[str, Any], key: str, values: Mapping[str, str]) -> None:
    if values:
        meta[key] = {**(meta.get(key) or {}), **values}
