"""Kueue: the queue label on the job object, the required topology on its pod templates; and the cluster's own
Kueue objects (Topology, ResourceFlavors, ClusterQueue, LocalQueue) that admit such a gang, for
`geosched submit --kueue-objects`, and what a cluster lacks of them (`submit --check-queues`).

Versions: kueue.x-k8s.io/v1beta2 is Kueue's storage version since v0.16 and v1beta1 is deprecated (served through
Kueue's conversion webhook; kubernetes-sigs/kueue v0.17.8, config/components/crd/bases). Objects are rendered at
v1beta2 and read at the newest version the cluster serves (`VERSIONS`), so a Kueue before v0.15 is still read."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from geosched.kube import keys
from geosched.kube.backends.base import Gang, Handoff
from geosched.kube.config import ClusterConfig
from geosched.kube.quantity import parse_quantity

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # newest first: the first a cluster serves is the one read
API_VERSION = f"{GROUP}/{VERSIONS[0]}"
TOPOLOGY_NAME = "geosched"
CLUSTER_QUEUE_NAME = "geosched"
# Broadest first, hostname last (Kueue requires the hostname level, if present, to be the lowest).
TOPOLOGY_LEVELS = (keys.REGION, keys.ZONE, keys.HOSTNAME)
# The label a GPU node's flavor pins, in the order geosched trusts them: GPU feature discovery's product, else GKE's
# accelerator (GKE without GFD).
FLAVOR_LABELS = (keys.GPU_PRODUCT, keys.GKE_ACCELERATOR)


def handoff(gang: Gang, cluster: ClusterConfig) -> Handoff:
    assert cluster.queue is not None, "config parsing requires a queue for kueue"
    # Kueue reads the queue from the job object's labels (the pod label is only for plain pods).
    level = gang.holding_level
    annotations = {keys.KUEUE_REQUIRED_TOPOLOGY: level} if level is not None else {}
    # Kueue admits and leaves binding to the pods' scheduler: the one the cluster config names, if any.
    return Handoff(object_labels={keys.KUEUE_QUEUE: cluster.queue}, pod_annotations=annotations,
                   scheduler_name=cluster.scheduler_name, pod_level_required=cluster.scheduler_name is not None)


def cluster_objects(nodes: Iterable[Mapping[str, Any]], queue: str, namespace: str,
                    resources: Iterable[str]) -> list[dict[str, Any]]:
    """The Kueue objects that admit gangs through `namespace/queue` on a cluster of `nodes` (the API's Node JSON):
    one Topology (region > zone > hostname), one ResourceFlavor per GPU model among the nodes (pinned by the label
    the nodes carry, `FLAVOR_LABELS`), a ClusterQueue whose one resource group covers `resources` (what the pods
    request) with each flavor's quota the sum of its nodes' allocatable, and the LocalQueue pointing at it. After
    Kueue's topology-aware scheduling docs (kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling); quotas are
    the nodes' whole capacity: the queue admits what the nodes hold, and a cohort or a smaller quota is the
    cluster owner's to set."""
    topology = {"apiVersion": API_VERSION, "kind": "Topology", "metadata": {"name": TOPOLOGY_NAME},
                "spec": {"levels": [{"nodeLabel": level} for level in TOPOLOGY_LEVELS]}}
    labelled = [((n.get("metadata") or {}).get("labels") or {}, n) for n in nodes]
    gpu_nodes = [(labels, n) for labels, n in labelled if any(labels.get(k) for k in FLAVOR_LABELS)]
    # One label for the whole cluster when every GPU node carries it (GKE with GFD on some pools only would else
    # split one GPU model into two flavors); per node otherwise.
    common = next((k for k in FLAVOR_LABELS if all(labels.get(k) for labels, _ in gpu_nodes)), None)
    pools: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for labels, node in gpu_nodes:
        label = common or next(k for k in FLAVOR_LABELS if labels.get(k))
        pools.setdefault((label, str(labels[label])), []).append(node)
    covered = sorted(set(resources) | {keys.GPU})
    flavors: list[dict[str, Any]] = []
    quotas: list[dict[str, Any]] = []
    for (label, value), members in sorted(pools.items(), key=lambda item: item[0][1]):
        name = flavor_name(value)
        flavors.append({"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": name},
                        "spec": {"nodeLabels": {label: value}, "topologyName": TOPOLOGY_NAME}})
        quotas.append({"name": name, "resources": [{"name": r, "nominalQuota": _total(members, r)} for r in covered]})
    cluster_queue = {"apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE_NAME},
                     "spec": {"namespaceSelector": {},
                              "resourceGroups": [{"coveredResources": covered, "flavors": quotas}]}}
    local_queue = {"apiVersion": API_VERSION, "kind": "LocalQueue",
                   "metadata": {"name": queue, "namespace": namespace}, "spec": {"clusterQueue": CLUSTER_QUEUE_NAME}}
    return [topology, *flavors, cluster_queue, local_queue]


def _total(nodes: Sequence[Mapping[str, Any]], resource: str) -> int | str:
    """The nodes' allocatable `resource` added up, as a quantity: a whole number, else millis ("1500m")."""
    total = Decimal(0)
    for node in nodes:
        value = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
        try:
            total += parse_quantity(value) if value is not None else 0
        except (ValueError, TypeError, ArithmeticError):
            continue  # a value the kubelet would not write; counted as none
    return int(total) if total == total.to_integral_value() else f"{int(total * 1000)}m"


def flavor_name(product: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", product.lower()).strip("-")
    return f"{TOPOLOGY_NAME}-{slug}"[:253].rstrip("-")


def requested_resources(manifests: Sequence[Mapping[str, Any]]) -> set[str]:
    """Every resource the pods of `manifests` request or limit (what a ClusterQueue must cover)."""
    out: set[str] = set()
    for template in pod_templates(manifests):
        spec = template.get("spec") or {}
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            for part in ("requests", "limits"):
                out.update(str(r) for r in (container.get("resources") or {}).get(part) or {})
    return out


def pod_templates(value: Any) -> Iterable[Mapping[str, Any]]:
    """Every pod template in the manifests, at whatever depth the job kind nests them."""
    if isinstance(value, Mapping):
        spec = value.get("spec")
        if isinstance(spec, Mapping) and "containers" in spec:
            yield value
            return
        for item in value.values():
            yield from pod_templates(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from pod_templates(item)


# --- what a cluster must hold to admit the gang (`geosched submit --check-queues`) -------------------------------

@dataclass(frozen=True)
class QueueObjects:
    """The Kueue objects a job's LocalQueue leads to, as read from the cluster (None: not found)."""

    served: bool  # the cluster serves Kueue's API at all (any of VERSIONS)
    local_queue: Mapping[str, Any] | None = None
    cluster_queue: Mapping[str, Any] | None = None
    flavors: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    topologies: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)


def flavor_names(cluster_queue: Mapping[str, Any]) -> list[str]:
    return [str(f.get("name")) for g in cluster_queue.get("spec", {}).get("resourceGroups") or []
            for f in g.get("flavors") or []]


def missing(queue: str, namespace: str, required_level: str | None, resources: Iterable[str],
            found: QueueObjects) -> list[str]:
    """What the cluster lacks for Kueue to admit the gang through `namespace/queue`, one reason each (empty:
    nothing). After Kueue's topology-aware scheduling docs (kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling):
    the LocalQueue points at a ClusterQueue, whose resource groups must cover every resource the pods request
    with flavors that exist; with a required topology level, one of those flavors must name a Topology
    (`spec.topologyName`) that has that node label among its levels."""
    if not found.served:
        return [f"Kueue is not installed ({GROUP} is not served at {' or '.join(VERSIONS)})"]
    if found.local_queue is None:
        return [f"LocalQueue {namespace}/{queue} not found"]
    cq_name = str(found.local_queue.get("spec", {}).get("clusterQueue", ""))
    if found.cluster_queue is None:
        return [f"ClusterQueue {cq_name!r} (of LocalQueue {namespace}/{queue}) not found"]
    out: list[str] = []
    covered = {str(r) for g in found.cluster_queue.get("spec", {}).get("resourceGroups") or []
               for r in g.get("coveredResources") or []}
    for resource in sorted(set(resources) - covered):
        out.append(f"ClusterQueue {cq_name} does not cover {resource}, which the pods request")
    names = flavor_names(found.cluster_queue)
    out += [f"ResourceFlavor {name} (of ClusterQueue {cq_name}) not found"
            for name in names if found.flavors.get(name) is None]
    if required_level is None:
        return out
    topologies = {str(f["spec"]["topologyName"]) for f in found.flavors.values()
                  if f is not None and f.get("spec", {}).get("topologyName")}
    if not topologies:
        out.append(f"no ResourceFlavor of ClusterQueue {cq_name} names a Topology (spec.topologyName), which "
                   f"topology-aware scheduling needs for the required level {required_level}")
    for name in sorted(topologies):
        topology = found.topologies.get(name)
        if topology is None:
            out.append(f"Topology {name} not found")
            continue
        levels = [str(level.get("nodeLabel")) for level in topology.get("spec", {}).get("levels") or []]
        if required_level not in levels:
            out.append(f"Topology {name} has no level {required_level} (levels: {', '.join(levels) or 'none'})")
    return out
