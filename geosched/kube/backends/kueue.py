"""Kueue: the queue label on the job object, the required topology on its pod templates, and optionally the
cluster's Topology and ResourceFlavor objects (kueue.x-k8s.io/v1beta1) that topology-aware scheduling needs."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from geosched.kube import keys
from geosched.kube.backends.base import Gang, Handoff
from geosched.kube.config import ClusterConfig
from geosched.models import Node

API_VERSION = "kueue.x-k8s.io/v1beta1"
TOPOLOGY_NAME = "geosched"
# Broadest first, hostname last (Kueue requires the hostname level, if present, to be the lowest).
TOPOLOGY_LEVELS = (keys.REGION, keys.ZONE, keys.HOSTNAME)


def handoff(gang: Gang, cluster: ClusterConfig) -> Handoff:
    assert cluster.queue is not None, "config parsing requires a queue for kueue"
    # Kueue reads the queue from the job object's labels (the pod label is only for plain pods).
    level = gang.holding_level
    annotations = {keys.KUEUE_REQUIRED_TOPOLOGY: level} if level is not None else {}
    return Handoff(object_labels={keys.KUEUE_QUEUE: cluster.queue}, pod_annotations=annotations)


def cluster_objects(nodes: Iterable[Node]) -> list[dict[str, Any]]:
    """One Topology (region > zone > hostname) and one ResourceFlavor per GPU product among `nodes`."""
    topology = {"apiVersion": API_VERSION, "kind": "Topology", "metadata": {"name": TOPOLOGY_NAME},
                "spec": {"levels": [{"nodeLabel": level} for level in TOPOLOGY_LEVELS]}}
    products = sorted({n.labels[keys.GPU_PRODUCT] for n in nodes if keys.GPU_PRODUCT in n.labels})
    flavors = [{"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": flavor_name(p)},
                "spec": {"nodeLabels": {keys.GPU_PRODUCT: p}, "topologyName": TOPOLOGY_NAME}}
               for p in products]
    return [topology, *flavors]


def flavor_name(product: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", product.lower()).strip("-")
    return f"{TOPOLOGY_NAME}-{slug}"[:253].rstrip("-")


# --- what a cluster must hold to admit the gang (`geosched submit --check-queues`) -------------------------------

@dataclass(frozen=True)
class QueueObjects:
    """The Kueue objects a job's LocalQueue leads to, as read from the cluster (None: not found)."""

    served: bool  # the cluster serves kueue.x-k8s.io/v1beta1 at all
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
        return [f"Kueue is not installed ({API_VERSION} is not served)"]
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
