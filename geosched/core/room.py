"""What a node has room for besides its GPUs, and what one worker asks of it: the one resolver every path places
through (`place`, `simulate` and GitOps on a catalog or snapshot fleet; `submit` and the MultiKueue dispatcher on
live nodes), so a node that cannot hold a worker is no candidate anywhere. Pure.

Units are those of `geosched.kube.resources`, as kube-scheduler counts: cpu in millicores, memory and storage in
bytes, every other resource in whole units.

A worker's requests (`Job.worker_requests`): what its pod asks of a node besides GPUs and its pod slot (the largest
of the gang's GPU pod templates, per resource), as `geosched.kube.resources.pod_requests` counts a pod.

A node's room, the first of these that applies:

1. `Node.room`: what its cluster said, `status.allocatable` minus the requests of the pods bound there
   (`geosched.kube.inventory`, counted as NodeResourcesFit counts them). Complete: an extended resource it does
   not list is one it has none of; a standard one (cpu, memory, ephemeral-storage, pods) it does not list does
   not limit it (every kubelet lists them).
2. The catalog's size of its instance type (vCPUs, memory GiB): a machine not launched yet, or a snapshot's. An
   upper bound, since a real node's kubelet reserves a few percent of each: a worker refused here would be refused
   by kube-scheduler too. Only cpu and memory are known; nothing else limits it.
3. Nothing known (an on-premises machine of no catalog type): not limited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from geosched.core.models import Node
from geosched.core.specs import InstanceSpec

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL = "ephemeral-storage"
PODS = "pods"
GPU = "nvidia.com/gpu"  # counted as free GPUs, never as room (geosched.kube.keys.GPU; the core may not import kube)
# Reported by every kubelet: a node that does not list one is not limited by it.
STANDARD = frozenset({CPU, MEMORY, EPHEMERAL, PODS})
UNLIMITED = 2**62
GIB = 2**30

Requests = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Room:
    """What a node has left per resource; `complete`: a resource it does not list is one it has none of (an
    extended resource on a live node), else not limited."""

    left: Mapping[str, int]
    complete: bool

    def has(self, resource: str) -> int:
        value = self.left.get(resource)
        if value is not None:
            return value
        return 0 if self.complete and resource not in STANDARD else UNLIMITED


UNKNOWN = Room({}, complete=False)


def worker_requests(requests: Iterable[Mapping[str, int]]) -> Requests:
    """Per resource, the most any of the pods asks (each worker's node must hold it), without GPUs and pod slots
    (counted as free GPUs and by the inventory), sorted by resource."""
    out: dict[str, int] = {}
    for pod in requests:
        for resource, value in pod.items():
            if resource not in (GPU, PODS) and value > 0:
                out[resource] = max(out.get(resource, 0), value)
    return tuple(sorted(out.items()))


def of_spec(spec: InstanceSpec) -> Room:
    """A machine of this catalog size, before its kubelet reserves anything."""
    return Room({CPU: round(spec.vcpus * 1000), MEMORY: round(spec.memory_gib * GIB)}, complete=False)


def resolve(node: Node, specs: Mapping[tuple[str, str], InstanceSpec]) -> Room:
    """The node's room by the module's rules: its cluster's count, else its catalog size, else not limited."""
    if node.room is not None:
        return Room(node.room, complete=True)
    spec = specs.get((node.provider, node.instance_type))
    return of_spec(spec) if spec is not None else UNKNOWN


def show(resource: str, amount: int) -> str:
    """An amount as a person reads it: cpu in cores, memory and storage in Gi (Mi below 1 Gi)."""
    if resource == CPU:
        return f"{amount / 1000:g} cpu"
    if resource in (MEMORY, EPHEMERAL) or resource.startswith("hugepages-"):
        return f"{amount / GIB:.4g}Gi" if amount >= GIB else f"{amount / 2**20:.4g}Mi"
    return f"{amount}"
