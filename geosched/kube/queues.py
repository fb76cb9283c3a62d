"""`geosched submit --check-queues`: before a gang goes to a Kueue cluster, read what its LocalQueue leads to
(ClusterQueue, ResourceFlavors, Topology) on that cluster and say what is missing for Kueue to admit it.

Without the check a job whose queue, quota or topology is missing is applied and then waits, inadmissible, with
the reason only in its Workload's status. The comparison itself is pure (`backends.kueue.missing`); this module
only reads, through the one kube client.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from geosched.kube import keys
from geosched.kube.backends import kueue
from geosched.kube.client import Kube, Resource

LOCAL_QUEUES = Resource(kueue.API_VERSION, "LocalQueue", "localqueues", True)
CLUSTER_QUEUES = Resource(kueue.API_VERSION, "ClusterQueue", "clusterqueues", False)
RESOURCE_FLAVORS = Resource(kueue.API_VERSION, "ResourceFlavor", "resourceflavors", False)
TOPOLOGIES = Resource(kueue.API_VERSION, "Topology", "topologies", False)


def read_queue_objects(kube: Kube, namespace: str, queue: str) -> kueue.QueueObjects:
    if kube.resource(kueue.API_VERSION, "LocalQueue") is None:
        return kueue.QueueObjects(served=False)
    local = kube.get(LOCAL_QUEUES.path(namespace, queue))
    cq_name = str((local or {}).get("spec", {}).get("clusterQueue") or "")
    cluster_queue = kube.get(CLUSTER_QUEUES.path(name=cq_name)) if cq_name else None
    if local is None or cluster_queue is None:
        return kueue.QueueObjects(served=True, local_queue=local, cluster_queue=cluster_queue)
    flavors = {name: kube.get(RESOURCE_FLAVORS.path(name=name)) for name in kueue.flavor_names(cluster_queue)}
    names = sorted({str(f["spec"]["topologyName"]) for f in flavors.values()
                    if f is not None and f.get("spec", {}).get("topologyName")})
    topologies = {name: kube.get(TOPOLOGIES.path(name=name)) for name in names}
    return kueue.QueueObjects(True, local, cluster_queue, flavors, topologies)


def check_queues(kube: Kube, manifests: Sequence[Mapping[str, Any]], namespace: str, queue: str) -> list[str]:
    """What `kube`'s cluster lacks to admit the rendered gang through `namespace/queue` (empty: nothing)."""
    resources: set[str] = set()
    levels: set[str] = set()
    for template in _pod_templates(manifests):
        level = (template.get("metadata") or {}).get("annotations", {}).get(keys.KUEUE_REQUIRED_TOPOLOGY)
        if level:
            levels.add(str(level))
        spec = template.get("spec") or {}
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            for part in ("requests", "limits"):
                resources.update(str(r) for r in (container.get("resources") or {}).get(part) or {})
    found = read_queue_objects(kube, namespace, queue)
    # One gang has one required level (the handoff writes the same on every pod set).
    return kueue.missing(queue, namespace, min(levels) if levels else None, resources, found)


def _pod_templates(value: Any) -> Iterator[Mapping[str, Any]]:
    """Every pod template in the manifests, at whatever depth the job kind nests them."""
    if isinstance(value, Mapping):
        spec = value.get("spec")
        if isinstance(spec, Mapping) and "containers" in spec:
            yield value
            return
        for item in value.values():
            yield from _pod_templates(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _pod_templates(item)
