"""Pods as the scheduler needs them: which gang, how many GPUs, where they may run. Pure: API JSON in, values out.

Gang membership, first match wins:

1. label `scheduling.x-k8s.io/pod-group` (scheduler-plugins coscheduling; its PodGroup gives the size);
2. annotation `scheduling.k8s.io/group-name` (Volcano; its PodGroup gives the size);
3. the controller owner reference (a batch Job's pods are one gang of `parallelism` pods);
4. none: the pod is a gang of one.

Where a pod may run: its nodeSelector, its required node affinity (terms ORed, expressions ANDed, with the
operators In, NotIn, Exists, DoesNotExist, Gt, Lt; matchFields on metadata.name) and the node's
NoSchedule/NoExecute taints it does not tolerate, as the default scheduler's NodeAffinity and TaintToleration
filters read them (tolerations matched by `geosched.kube.tolerations`, the one matcher geosched has).

What a pod asks of its node (cpu, memory, ephemeral storage, a pod slot, extended resources such as EFA
devices): `geosched.kube.resources.pod_requests`, as NodeResourcesFit and the kubelet count it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geosched.core.errors import InputError
from geosched.core.models import Schedule
from geosched.kube import flex, keys
from geosched.kube.inventory import pod_gpus
from geosched.kube.objpath import At
from geosched.kube.resources import pod_requests
from geosched.kube.tolerations import Taint, Toleration, of_pod_spec, tolerated

GANG_NOTE = keys.PREFIX + "gang"
# matchFields requirements are matched against this pseudo-label (the only field the API allows is the name).
NODE_NAME_FIELD = "field:metadata.name"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"


@dataclass(frozen=True, slots=True)
class GangKey:
    namespace: str
    source: str  # pod-group | volcano | owner | pod
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Owner:
    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class Expr:
    key: str
    operator: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Requirements:
    """Everything that limits a pod's nodes, hashable so pods sharing a template share one node mask."""

    selector: tuple[tuple[str, str], ...] = ()
    terms: tuple[tuple[Expr, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    node: str | None
    gpus: int
    phase: str
    gang: GangKey
    owner: Owner | None
    created: str
    index: int | None
    deleting: bool
    gated: bool
    ours: bool  # bound by geosched (the binding's annotation is on the pod)
    priority: int
    requirements: Requirements
    # The slack its annotations declare (geosched.kube.flex), or why they could not be read.
    schedule: Schedule | None = None
    schedule_error: str | None = None
    # Everything it asks of its node, GPUs included (geosched.kube.resources), sorted by resource.
    requests: tuple[tuple[str, int], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def pod_info(obj: Mapping[str, Any]) -> PodInfo:
    root = At(obj, "pod")
    meta, spec = root.key("metadata"), root.key("spec")
    namespace = str(meta.key("namespace").value or "default")
    name = str(meta.key("name").value)
    labels = _strings(meta.key("labels").value)
    notes = _strings(meta.key("annotations").value)
    owner = _controller(meta)
    index = notes.get(JOB_INDEX) or labels.get(JOB_INDEX)
    node = spec.key("nodeName").value
    schedule, schedule_error = None, None
    try:
        schedule = flex.schedule_of(notes, f"pod {namespace}/{name}", "metadata.annotations")
    except InputError as exc:
        schedule_error = str(exc)
    return PodInfo(
        namespace=namespace,
        name=name,
        uid=str(meta.key("uid").value or ""),
        node=str(node) if node else None,
        gpus=pod_gpus(spec),
        phase=str(root.dig("status", "phase").value or "Pending"),
        gang=gang_key(namespace, name, labels, notes, owner),
        owner=owner,
        created=str(meta.key("creationTimestamp").value or ""),
        index=int(index) if index is not None and index.isdigit() else None,
        deleting=meta.key("deletionTimestamp").value is not None,
        gated=bool(spec.key("schedulingGates").value),
        ours=GANG_NOTE in notes,
        priority=int(spec.key("priority").value or 0),
        requirements=requirements(spec),
        schedule=schedule,
        schedule_error=schedule_error,
        requests=tuple(sorted(pod_requests(spec).items())),
    )


def gang_key(namespace: str, name: str, labels: Mapping[str, str], notes: Mapping[str, str],
             owner: Owner | None) -> GangKey:
    if group := labels.get(keys.COSCHED_POD_GROUP):
        return GangKey(namespace, "pod-group", group)
    if group := notes.get(keys.VOLCANO_GROUP_NAME):
        return GangKey(namespace, "volcano", group)
    if owner is not None:
        return GangKey(namespace, "owner", f"{owner.kind.lower()}/{owner.name}")
    return GangKey(namespace, "pod", name)


def _controller(meta: At) -> Owner | None:
    for ref in meta.key("ownerReferences").items():
        if ref.key("controller").value is True:
            return Owner(str(ref.key("apiVersion").value), str(ref.key("kind").value), str(ref.key("name").value),
                         str(ref.key("uid").value))
    return None


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


# --- where a pod may run ----------------------------------------------------------------------------

def requirements(spec: At) -> Requirements:
    selector = tuple(sorted(_strings(spec.key("nodeSelector").value).items()))
    terms = tuple(
        tuple(_expr(e, "") for e in term.key("matchExpressions").items())
        + tuple(_expr(e, "field:") for e in term.key("matchFields").items())
        for term in spec.dig("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                             "nodeSelectorTerms").items()
    )
    return Requirements(selector, terms, of_pod_spec(spec))


def _expr(e: At, prefix: str) -> Expr:
    return Expr(prefix + str(e.key("key").value), str(e.key("operator").value),
                tuple(str(v) for v in (e.key("values").value or ())))


def node_labels(node: Mapping[str, Any]) -> dict[str, str]:
    """A node's labels, plus its name under NODE_NAME_FIELD for matchFields."""
    meta = At(node, "node").key("metadata")
    return {**_strings(meta.key("labels").value), NODE_NAME_FIELD: str(meta.key("name").value)}


def fits(req: Requirements, labels: Mapping[str, str], taints: Sequence[Taint]) -> bool:
    if any(labels.get(k) != v for k, v in req.selector):
        return False
    # No term: no constraint; terms with no expressions match nothing (as the API server reads them).
    if req.terms and not any(term and all(_matches(e, labels) for e in term) for term in req.terms):
        return False
    return all(tolerated(req.tolerations, t) for t in taints)


def _matches(e: Expr, labels: Mapping[str, str]) -> bool:
    value = labels.get(e.key)
    if e.operator == "In":
        return value is not None and value in e.values
    if e.operator == "NotIn":
        return value is None or value not in e.values
    if e.operator == "Exists":
        return value is not None
    if e.operator == "DoesNotExist":
        return value is None
    if e.operator in ("Gt", "Lt") and value is not None and e.values:
        try:
            have, bound = int(value), int(e.values[0])
        except ValueError:
            return False
        return have > bound if e.operator == "Gt" else have < bound
    return False

