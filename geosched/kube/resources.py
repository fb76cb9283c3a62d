"""What a pod asks of a node and what a node has left, counted as kube-scheduler's NodeResourcesFit filter and
the kubelet's admission count them, so geosched never binds a pod the kubelet would reject. Pure.

A pod's requests (k8s.io/component-helpers resource.PodRequests, which both use):

- per resource, its app containers together, or its largest init container if that is more; a sidecar (an init
  container with `restartPolicy: Always`) keeps running, so it adds to the app containers and to every init
  container that starts after it;
- a container's request, else its limit (the API server defaults a missing request to the limit; extended
  resources such as `nvidia.com/gpu` or `vpc.amazonaws.com/efa` may state only a limit);
- pod-level `spec.resources.requests` (cpu, memory), when set, in place of the containers' sum;
- plus `spec.overhead` (RuntimeClass overhead, set by admission);
- plus one `pods` slot.

A node's room: its `status.allocatable` minus what its bound, non-terminal pods request. A pod fits when every
resource it asks for (> 0) is within the room. Units are integers: cpu in millicores, everything else in whole
units (bytes for memory and storage), rounded up as the API server rounds requests.

A node that does not report cpu, memory, ephemeral-storage or pods in allocatable is not limited by it (every
kubelet reports all four; only hand-written nodes lack them); a node without an extended resource has none.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from geosched.kube.objpath import At
from geosched.kube.quantity import parse_quantity

if TYPE_CHECKING:
    from geosched.policies.context import IntArray

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL = "ephemeral-storage"
PODS = "pods"
# Reported by every kubelet: a hand-written node without one of them is not limited by it.
STANDARD = frozenset({CPU, MEMORY, EPHEMERAL, PODS})
# Pod-level resources (KEP-2837) cover these two only.
POD_LEVEL = (CPU, MEMORY)
UNLIMITED = 2**62

Requests = dict[str, int]


def amount(resource: str, value: Any) -> int | None:
    """A quantity in the unit this module counts in (millicores for cpu, whole units otherwise), rounded up;
    None when it is not a quantity."""
    if value is None or isinstance(value, bool):
        return None
    try:
        q = parse_quantity(value)
    except (ValueError, TypeError, ArithmeticError):
        return None
    scaled = q * 1000 if resource == CPU else q
    whole: int = math.ceil(scaled)  # a Decimal: exact, so 100m is 100 millicores
    return max(0, whole)


def pod_requests(spec: At) -> Requests:
    """What one pod asks of its node (see the module's docstring), `pods` included."""
    app: Requests = {}
    for c in spec.key("containers").items():
        _add(app, _container(c))
    init_peak: Requests = {}
    sidecars: Requests = {}
    for c in spec.key("initContainers").items():
        own = _container(c)
        if c.key("restartPolicy").value == "Always":
            _add(app, own)
            _add(sidecars, own)
            running = dict(sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
        _max(init_peak, running)
    out = dict(app)
    _max(out, init_peak)
    pod_level = spec.dig("resources", "requests")
    for resource in POD_LEVEL:
        if (value := amount(resource, pod_level.key(resource).value)) is not None:
            out[resource] = value
    for resource, v in spec.key("overhead").entries():
        if (value := amount(resource, v.value)) is not None:
            out[resource] = out.get(resource, 0) + value
    out[PODS] = out.get(PODS, 0) + 1
    return {k: v for k, v in out.items() if v > 0}


def allocatable(node: At) -> Requests:
    """A node's `status.allocatable`, in this module's units (unreadable quantities left out)."""
    out: Requests = {}
    for resource, v in node.dig("status", "allocatable").entries():
        if (value := amount(resource, v.value)) is not None:
            out[resource] = value
    return out


def room(alloc: Mapping[str, int], bound: Iterable[Mapping[str, int]]) -> Requests:
    """What is left of `alloc` once the bound pods' requests are taken (may go negative: over-committed)."""
    left = dict(alloc)
    for requests in bound:
        for resource, value in requests.items():
            if resource in left:
                left[resource] -= value
    return left


def shortfall(left: Mapping[str, int], requests: Mapping[str, int]) -> str | None:
    """The first resource (by name) the pod asks for and the node cannot give, or None when the pod fits."""
    for resource in sorted(requests):
        want = requests[resource]
        if want <= 0:
            continue
        have = left.get(resource)
        if have is None:
            if resource in STANDARD:
                continue
            return resource
        if want > have:
            return resource
    return None


def node_rooms(nodes: Sequence[Mapping[str, int]]) -> dict[str, IntArray]:
    """Per resource, the room of each node (in the order given) as one array; a standard resource a node does
    not report is unlimited there, an extended one it lacks is 0."""
    import numpy as np  # here, not at the top: the job readers that import this module serve `geosched -h`

    out: dict[str, IntArray] = {}
    for resource in sorted({r for n in nodes for r in n}):
        missing = UNLIMITED if resource in STANDARD else 0
        out[resource] = np.fromiter((n.get(resource, missing) for n in nodes), dtype=np.int64, count=len(nodes))
    return out


def fit_counts(rooms: Mapping[str, IntArray], requests: Mapping[str, int], nodes: int,
               skip: frozenset[str] = frozenset()) -> IntArray | None:
    """How many pods asking `requests` each node's room holds (resources in `skip` not counted); None when
    nothing counted limits them."""
    import numpy as np  # see node_rooms

    count: IntArray | None = None
    for resource, want in requests.items():
        if want <= 0 or resource in skip:
            continue
        have = rooms.get(resource)
        if have is None:
            if resource in STANDARD:
                continue
            return np.zeros(nodes, dtype=np.int64)
        n = np.maximum(have, 0) // want
        count = n if count is None else np.minimum(count, n)
    return count


def _container(c: At) -> Requests:
    resources = c.key("resources")
    out: Requests = {}
    names = {str(k) for k, _ in resources.key("requests").entries()} | {str(k) for k, _ in
                                                                          resources.key("limits").entries()}
    for resource in names:
        value = resources.dig("requests", resource).value
        if value is None:
            value = resources.dig("limits", resource).value
        if (n := amount(resource, value)) is not None:
            out[resource] = n
    return out


def _add(into: Requests, more: Mapping[str, int]) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0) + v


def _max(into: Requests, other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = max(into.get(k, 0), v)
