"""Kubernetes Node objects (and the pods bound to them) turned into geosched `Node` records. No API calls:
the caller lists nodes and pods and hands them in, as dicts or kubernetes client models (V1Node, V1Pod).

- labels: region and zone from `topology.kubernetes.io/{region,zone}`; where the cloud's spec names a zone-ID
  label (AWS: `topology.k8s.aws/zone-id`) the zone is its value when present, since the fleet names AWS zones by
  ID (zone names differ per account); instance type from `node.kubernetes.io/instance-type`;
- GPU model: `geosched.kube.gpuidentity.model_of`, the one resolver: `nvidia.com/gpu.product` (GPU feature
  discovery), else GKE's `cloud.google.com/gke-accelerator` (GKE's own driver installer runs no GPU feature
  discovery), else the catalog's GPU for the instance type; list prices from `geosched.kube.nodeprice` (the
  catalog's offering in the node's zone, else its region);
- GPUs: allocatable `nvidia.com/gpu`; free = allocatable minus what bound, non-terminated pods ask for, and none
  on a node whose pod slots (allocatable `pods`) bound pods all take; the room for everything else a worker asks
  (cpu, memory, ephemeral storage, EFA): allocatable minus what the bound pods request (`Node.room`, counted by
  `geosched.kube.resources` as NodeResourcesFit counts it), which `geosched.core.room` holds each job's workers to;
- cordoned (spec.unschedulable) or NotReady nodes stay in the fleet with state NOT_READY and no free GPU, so
  the node keeps its identity while policies pass it over; nodes without GPUs, or without zone labels or a
  known GPU model, or whose GPUs are MIG slices or shared replicas (`gpuidentity.not_whole` by GFD's labels,
  `gpuidentity.more_than_built` by a count above the machine's GPUs where no GFD runs), are left out with the reason;
- provider from spec.providerID: the cloud whose spec lists its scheme (`aws:///zone/i-...` is aws,
  `gce://project/zone/name` is gcp; `geosched.clouds`), any other scheme names itself, none is `onprem`; cluster
  is the kube context name.

One node, one identity: `merge_launched` joins a node that a provider launched with the node that joined a
cluster, matched first by instance ID (the last segment of the providerID, so either a full providerID or a
bare ID on the launched record matches), then by node name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Any

from geosched import clouds
from geosched.core import catalog
from geosched.core.models import Node, NodeState, Offering, Rejection
from geosched.kube import gpuidentity, keys, nodeprice, resources
from geosched.kube.objpath import At
from geosched.kube.quantity import parse_quantity, whole_count
from geosched.kube.tolerations import GPU_ADMISSION, Toleration, node_taints, untolerated

TERMINATED_PHASES = {"Succeeded", "Failed"}


@dataclass(frozen=True)
class Inventory:
    nodes: tuple[Node, ...]
    skipped: tuple[Rejection, ...]
    # The labels of the GPU nodes left out because their nvidia.com/gpu are not whole GPUs: no capacity, yet the
    # kube-scheduler may still bind a gang's pods there (they advertise nvidia.com/gpu), so rendering must keep them
    # off (`render.constraints_for`).
    not_whole: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class NotWhole(Rejection):
    """A node left out because its nvidia.com/gpu are shared replicas or MIG slices, with its labels."""

    labels: Mapping[str, str] = field(default_factory=dict)


def as_dict(obj: Any) -> Any:
    """A kubernetes client model as the API's JSON shape (camelCase keys), dicts and scalars as they are.

    The client's own converter lives on ApiClient, which builds a connection pool; this only walks the
    models' `attribute_map`.
    """
    if isinstance(obj, Mapping):
        return {str(k): as_dict(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [as_dict(v) for v in obj]
    if isinstance(obj, datetime | date):
        return obj.isoformat()
    attribute_map = getattr(obj, "attribute_map", None)
    if isinstance(attribute_map, Mapping):
        return {json_key: as_dict(getattr(obj, attr)) for attr, json_key in attribute_map.items()
                if getattr(obj, attr, None) is not None}
    return obj


def nodes_from_kube(kube_nodes: Iterable[Any], pods: Iterable[Any], cluster: str, *,
                    skip_tainted: bool = False, tolerations: Sequence[Toleration] = ()) -> Inventory:
    """`skip_tainted`: leave out nodes with a NoSchedule/NoExecute taint the pods geosched renders do not tolerate
    (for placing those pods: submit, snapshot export; the in-cluster scheduler reads each pod's own tolerations):
    the GPU toleration admission adds, and `tolerations`, what the job and the cluster's config declare."""
    pods = [as_dict(p) for p in pods]
    used = gpus_in_use(pods)
    slots = pods_bound(pods)
    bound = requests_bound(pods)
    offers = catalog.offering_index()
    nodes: list[Node] = []
    skipped: list[Rejection] = []
    for item in kube_nodes:
        data = as_dict(item)
        result = node_from_kube(data, used, cluster, offers, slots, bound)
        if skip_tainted and isinstance(result, Node) and (taint := untolerated_taint(data, tolerations)) is not None:
            result = Rejection(result.name, f"taint {taint}, which the job's pods do not tolerate (declare "
                               "`tolerations:` in the job or its cluster's config to use the node)")
        if isinstance(result, Node):
            nodes.append(result)
        else:
            skipped.append(result)
    return Inventory(tuple(nodes), tuple(skipped),
                     tuple({keys.HOSTNAME: r.subject, **r.labels} for r in skipped if isinstance(r, NotWhole)))


def node_from_kube(data: Any, used: Mapping[str, int], cluster: str,
                   offers: Mapping[tuple[str, str, str], Offering] | None = None,
                   slots: Mapping[str, int] | None = None,
                   bound: Mapping[str, Sequence[resources.Requests]] | None = None) -> Node | Rejection:
    root = At(data, f"node in {cluster}")
    name = root.dig("metadata", "name").string()
    root = At(data, f"node {name} in {cluster}")
    labels = {k: str(v.value) for k, v in root.dig("metadata", "labels").entries() if v.value is not None}
    allocatable = whole_count(root.dig("status", "allocatable", keys.GPU).value) or 0
    if allocatable == 0:
        return Rejection(name, f"no allocatable {keys.GPU}")
    provider_id = root.dig("spec", "providerID").value
    provider_id = provider_id if isinstance(provider_id, str) and provider_id else None
    provider = provider_of(provider_id)
    # An empty label value names no place.
    region = labels.get(keys.REGION) or None
    spec = clouds.get(provider)
    zone_id_label = spec.zone_id_label if spec is not None else None
    zone = (zone_id_label is not None and labels.get(zone_id_label)) or labels.get(keys.ZONE) or None
    if region is None or zone is None:
        return Rejection(name, f"missing {keys.REGION} or {keys.ZONE} label")
    instance_type = labels.get(keys.INSTANCE_TYPE, "custom")
    if (shared := gpuidentity.not_whole(labels) or gpuidentity.more_than_built(provider, instance_type,
                                                                                allocatable)) is not None:
        return NotWhole(name, shared, labels)
    gpu = gpuidentity.model_of(labels, provider)
    if gpu is None:
        return Rejection(name, f"unknown GPU model ({keys.GPU_PRODUCT}={labels.get(keys.GPU_PRODUCT) or '(none)'}, "
                         f"{keys.GKE_ACCELERATOR}={labels.get(keys.GKE_ACCELERATOR) or '(none)'}, no catalog GPU for "
                         f"{provider} {instance_type})")
    price = nodeprice.list_price(provider, instance_type, region, zone, gpu, offers)
    ready = _ready(root) and root.dig("spec", "unschedulable").value is not True
    # Every pod slot taken (allocatable pods): the kubelet admits no worker, whatever GPUs are free.
    allocatable_all = resources.allocatable(root)
    pod_slots = allocatable_all.get(resources.PODS)
    full = pod_slots is not None and (slots or {}).get(name, 0) >= pod_slots
    return Node(
        name=name,
        provider=provider,
        region=region,
        zone=zone,
        instance_type=instance_type,
        gpu=gpu,
        gpus=allocatable,
        gpus_free=max(0, allocatable - used.get(name, 0)) if ready and not full else 0,
        price_ondemand=price.ondemand if price else None,
        price_spot=price.spot if price else None,
        cluster=cluster,
        addresses=tuple(a.key("address").string() for a in root.dig("status", "addresses").items()
                        if a.key("type").value in ("InternalIP", "ExternalIP")),
        labels=labels,
        state=NodeState.READY if ready else NodeState.NOT_READY,
        provider_id=provider_id,
        room=resources.room(allocatable_all, (bound or {}).get(name, ())),
    )


def untolerated_taint(data: Any, tolerations: Sequence[Toleration] = ()) -> str | None:
    """The first NoSchedule/NoExecute taint of a node (API JSON) that a GPU pod with these tolerations does not
    tolerate, as `key=value:effect`; None when there is none. A GPU pod also carries the toleration the
    ExtendedResourceToleration admission plugin adds (`tolerations.GPU_ADMISSION`, which GKE and EKS run), so GKE's
    nvidia.com/gpu=present:NoSchedule and an EKS node group's nvidia.com/gpu=true:NoSchedule take it."""
    taint = untolerated((GPU_ADMISSION, *tolerations), node_taints(data))
    return None if taint is None else str(taint)


def _ready(root: At) -> bool:
    for condition in root.dig("status", "conditions").items():
        if condition.key("type").value == "Ready":
            return bool(condition.key("status").value == "True")
    return False


def gpus_in_use(pods: Iterable[Any]) -> dict[str, int]:
    """GPUs that bound, non-terminated pods hold, per node name."""
    used: dict[str, int] = {}
    for item in pods:
        data = as_dict(item)
        root = At(data, "pod")
        node = root.dig("spec", "nodeName").value
        if not isinstance(node, str) or root.dig("status", "phase").value in TERMINATED_PHASES:
            continue
        used[node] = used.get(node, 0) + pod_gpus(root.key("spec"))
    return used


def pods_bound(pods: Iterable[Any]) -> dict[str, int]:
    """Bound, non-terminated pods per node name: the pod slots they take."""
    count: dict[str, int] = {}
    for item in pods:
        root = At(as_dict(item), "pod")
        node = root.dig("spec", "nodeName").value
        if isinstance(node, str) and root.dig("status", "phase").value not in TERMINATED_PHASES:
            count[node] = count.get(node, 0) + 1
    return count


def requests_bound(pods: Iterable[Any]) -> dict[str, list[resources.Requests]]:
    """What each bound, non-terminated pod requests (`resources.pod_requests`), per node name."""
    out: dict[str, list[resources.Requests]] = {}
    for item in pods:
        root = At(as_dict(item), "pod")
        node = root.dig("spec", "nodeName").value
        if isinstance(node, str) and root.dig("status", "phase").value not in TERMINATED_PHASES:
            out.setdefault(node, []).append(resources.pod_requests(root.key("spec")))
    return out


def pod_gpus(spec: At) -> int:
    # Init containers run one at a time before the app containers, which run together.
    app = sum(_container_gpus(c) for c in spec.key("containers").items())
    init = max((_container_gpus(c) for c in spec.key("initContainers").items()), default=0)
    return max(app, init)


def pod_request(spec: At, resource: str) -> float:
    """What a pod asks of a resource such as cpu (cores) or memory (bytes), as the scheduler counts it: its app
    containers together or its largest init container, whichever is more; a container's request, else its limit
    (the API server defaults a missing request to the limit). Unreadable quantities count as nothing."""
    app = sum(_container_request(c, resource) for c in spec.key("containers").items())
    init = max((_container_request(c, resource) for c in spec.key("initContainers").items()), default=0.0)
    return max(app, init)


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity ("500m", "1Ti", 96) as a number, None when it is none."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(parse_quantity(value))
    except (ValueError, TypeError, ArithmeticError):
        return None


def _container_request(container: At, resource: str) -> float:
    resources = container.key("resources")
    value = resources.dig("requests", resource).value
    if value is None:
        value = resources.dig("limits", resource).value
    return quantity(value) or 0.0


def _container_gpus(container: At) -> int:
    resources = container.key("resources")
    # An extended resource's request equals its limit; a pod may state either.
    value = resources.dig("requests", keys.GPU).value
    if value is None:
        value = resources.dig("limits", keys.GPU).value
    return (whole_count(value) or 0) if value is not None else 0


def provider_of(provider_id: str | None) -> str:
    if not provider_id or "://" not in provider_id:
        return "onprem"
    scheme = provider_id.split("://", 1)[0]
    spec = clouds.by_scheme(scheme)
    return spec.name if spec is not None else scheme


def instance_id(provider_id: str | None) -> str | None:
    """`aws:///us-east-1a/i-0abc` -> `i-0abc`, `gce://proj/zone/vm-1` -> `vm-1`, a bare ID as it is."""
    if not provider_id:
        return None
    tail = provider_id.split("://", 1)[-1]
    parts = [p for p in tail.split("/") if p]
    return parts[-1] if parts else None


def merge_launched(kube_nodes: Sequence[Node], launched: Sequence[Node]) -> tuple[Node, ...]:
    """One record per machine: a launched node seen in a cluster keeps its name, provider, place, type and
    prices (what geosched's store and probes know it by) and takes the cluster's view of GPUs, state, labels
    and cluster. Launched nodes not (yet) in a cluster and cluster nodes geosched did not launch stay as
    they are."""
    by_id = {i: n for n in launched if (i := instance_id(n.provider_id)) is not None}
    by_name = {n.name: n for n in launched}
    out: list[Node] = []
    matched: set[str] = set()
    for kube in kube_nodes:
        kube_id = instance_id(kube.provider_id)
        own = (by_id.get(kube_id) if kube_id is not None else None) or by_name.get(kube.name)
        if own is None or own.name in matched:
            out.append(kube)
            continue
        matched.add(own.name)
        out.append(replace(
            own,
            gpus=kube.gpus,
            gpus_free=kube.gpus_free,
            state=kube.state,
            cluster=kube.cluster,
            room=kube.room,
            labels={**own.labels, **kube.labels},
            addresses=tuple(dict.fromkeys((*own.addresses, *kube.addresses))),
            provider_id=own.provider_id or kube.provider_id,
            price_ondemand=own.price_ondemand if own.price_ondemand is not None else kube.price_ondemand,
            price_spot=own.price_spot if own.price_spot is not None else kube.price_spot,
        ))
    out.extend(n for n in launched if n.name not in matched)
    return tuple(out)
