"""`geosched submit --check-queues`: before a gang goes to a Kueue cluster, read what its LocalQueue leads to
(ClusterQueue, ResourceFlavors, Topology) on that cluster and say what is missing for Kueue to admit it.

Without the check a job whose queue, quota or topology is missing is applied and then waits, inadmissible, with
the reason only in its Workload's status. The comparison itself is pure (`backends.kueue.missing`); this module
only reads, through the one kube client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from geosched.kube import keys
from geosched.kube.backends import kueue
from geosched.kube.client import Kube, Resource


def served_version(kube: Kube, kind: str = "LocalQueue") -> str | None:
    """The newest kueue.x-k8s.io version the cluster serves `kind` at (v1beta2 first), None without Kueue. The one
    resolver of Kueue's version for every reader: `--check-queues` and the MultiKueue dispatcher."""
    return next((f"{kueue.GROUP}/{v}" for v in kueue.VERSIONS if kube.resource(f"{kueue.GROUP}/{v}", kind)), None)


def read_queue_objects(kube: Kube, namespace: str, queue: str) -> kueue.QueueObjects:
    version = served_version(kube)
    if version is None:
        return kueue.QueueObjects(served=False)
    local = kube.get(Resource(version, "LocalQueue", "localqueues", True).path(namespace, queue))
    cq_name = str((local or {}).get("spec", {}).get("clusterQueue") or "")
    cluster_queue = kube.get(Resource(version, "ClusterQueue", "clusterqueues", False).path(name=cq_name)) \
        if cq_name else None
    if local is None or cluster_queue is None:
        return kueue.QueueObjects(served=True, local_queue=local, cluster_queue=cluster_queue)
    flavors = {name: kube.get(Resource(version, "ResourceFlavor", "resourceflavors", False).path(name=name))
               for name in kueue.flavor_names(cluster_queue)}
    names = sorted({str(f["spec"]["topologyName"]) for f in flavors.values()
                    if f is not None and f.get("spec", {}).get("topologyName")})
    topologies = {name: kube.get(Resource(version, "Topology", "topologies", False).path(name=name)) for name in names}
    return kueue.QueueObjects(True, local, cluster_queue, flavors, topologies)


def check_queues(kube: Kube, manifests: Sequence[Mapping[str, Any]], namespace: str, queue: str) -> list[str]:
    """What `kube`'s cluster lacks to admit the rendered gang through `namespace/queue` (empty: nothing)."""
    levels: set[str] = set()
    for template in kueue.pod_templates(manifests):
        level = (template.get("metadata") or {}).get("annotations", {}).get(keys.KUEUE_REQUIRED_TOPOLOGY)
        if level:
            levels.add(str(level))
    found = read_queue_objects(kube, namespace, queue)
    # One gang has one required level (the handoff writes the same on every pod set).
    return kueue.missing(queue, namespace, min(levels) if levels else None, kueue.requested_resources(manifests),
                         found)
