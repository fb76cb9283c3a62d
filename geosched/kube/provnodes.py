"""The nodes an autoscaler made for a gang's ProvisioningRequest, found through the gang's pods, and whether they are
gone: what the usage ledger charges for a gang `up --provisioning-class` queued (providers/provreqs.py says why and
how). Pure but for `wait_bound`, `nodes_now` and `requests_now`, which read the cluster.

Which nodes: nothing on a node names the request that made it (cluster-autoscaler labels none; GKE's nodes of a
queued-provisioning pool carry `cloud.google.com/gke-queued=true` and their pool's `cloud.google.com/gke-nodepool`,
GKE's "Run a large-scale workload with flex-start with queued provisioning",
cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest). The request's pods do: each carries
`autoscaling.x-k8s.io/consume-provisioning-request: <request>` (put there by Kueue when it admits the job through
the check, or rendered by geosched without Kueue), and the autoscaler books the nodes it made for exactly those pods
(cluster-autoscaler FAQ, "ProvisioningRequest": the booking lasts 10 minutes, then the nodes may be scaled away).
So: the nodes the request's pods are bound to (`spec.nodeName`), those created at or after the request (an older
node was there before anything was asked: check-capacity only finds such nodes, and best-effort-atomic-scale-up
makes only what the cluster lacks).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geosched.core import catalog
from geosched.kube import keys
from geosched.kube.client import Kube
from geosched.kube.kinds.base import when
from geosched.kube.nodeprice import market
from geosched.kube.provreq import CONSUMES
from geosched.kube.provwatch import REQUESTS, WatchFailed, asked
from geosched.store import usage

PODS = "/api/v1/namespaces/{ns}/pods"
NODES = "/api/v1/nodes"


@dataclass(frozen=True, slots=True)
class Bound:
    """The request's pods bound so far (`bound` of `expected`), and the nodes they are bound to."""

    nodes: tuple[str, ...]
    bound: int
    expected: int


def expected_pods(requests: Iterable[Mapping[str, Any]]) -> int:
    """How many pods the requests were made for: the sum of their pod sets' counts (the API's
    `spec.podSets[].count`). Pure."""
    return sum(int(s.get("count") or 0) for r in requests for s in ((r.get("spec") or {}).get("podSets") or [])
               if isinstance(s, Mapping))


def bound_to(pods: Iterable[Mapping[str, Any]], requests: Iterable[str]) -> Bound:
    """Of `pods`, those consuming one of `requests` and bound to a node; `expected` left 0 for the caller. Pure."""
    names = set(requests)
    consumers = [p for p in pods
                 if ((p.get("metadata") or {}).get("annotations") or {}).get(CONSUMES) in names]
    nodes = [str((p.get("spec") or {}).get("nodeName")) for p in consumers if (p.get("spec") or {}).get("nodeName")]
    return Bound(tuple(sorted(set(nodes))), len(nodes), 0)


def made_for(node: Mapping[str, Any], asked_at: float) -> bool:
    """Whether `node` came up for a request created at `asked_at`: it registered at or after it. Pure."""
    created = when((node.get("metadata") or {}).get("creationTimestamp"))
    return created is not None and created >= asked_at


def node_usage(node: Mapping[str, Any], *, job: str, provider: str, region: str, zone: str, cluster: str, gpu: str,
               gpus: int, instance_type: str) -> tuple[usage.Usage, float] | None:
    """The ledger row of one node the autoscaler made (providers/provreqs.py), and its start: the node's
    `creationTimestamp`. The place is the attempt's (`provider`, `region`, `zone`: the catalog's keys, the zone the
    job was pinned to); the machine and market the node's own labels (`node.kubernetes.io/instance-type`, else
    `instance_type`, the one asked for; spot by `nodeprice.market`); its GPUs its capacity's `nvidia.com/gpu`, else
    `gpus`. None for a node without a uid or creation time (no API server returns one). Pure."""
    meta = node.get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    start = when(meta.get("creationTimestamp"))
    uid = meta.get("uid")
    if start is None or not uid:
        return None
    capacity = ((node.get("status") or {}).get("capacity") or {}).get(keys.GPU)
    try:
        held = int(str(capacity)) if capacity is not None else gpus
    except ValueError:
        held = gpus
    # The catalog's spelling of the model, which the report's power and spec tables are keyed by.
    model = next((m for m in catalog.gpu_models() if m.lower() == gpu.lower()), gpu)
    return (usage.Usage(kind=usage.Kind.NODE, name=str(meta.get("name")), job=job, provider=provider, region=region,
                        zone=zone, cluster=cluster, instance_type=labels.get(keys.INSTANCE_TYPE) or instance_type,
                        gpu=model, gpus=max(held, 0), pricing=market(labels), source=usage.Source.PROVIDER,
                        ref=str(uid)), start)


def requests_now(kube: Kube, namespace: str, names: Sequence[str]) -> list[Any]:
    """The gang's requests as the cluster holds them (those deleted already left out)."""
    path = REQUESTS.format(ns=namespace)
    found = [asked(kube, f"reading ProvisioningRequest {n} in namespace {namespace}",
                    lambda n=n: kube.get(f"{path}/{n}"), WatchFailed) for n in names]  # type: ignore[misc]
    return [r for r in found if r is not None]


def wait_bound(kube: Kube, namespace: str, requests: Sequence[str], expected: int, *, timeout_s: float,
               poll_s: float = 2.0, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> Bound:
    """Poll the namespace's pods until `expected` of them consume one of `requests` and are bound, or the deadline
    passes; what is bound then. Kueue admits the job once the request is Provisioned, and the job's controller
    makes the pods: seconds, but not at once."""
    start = clock()
    while True:
        pods = asked(kube, f"listing the pods of namespace {namespace}",
                      lambda: kube.list_all(PODS.format(ns=namespace))[0], WatchFailed)
        bound = bound_to(pods, requests)
        waited = clock() - start
        if bound.bound >= expected or waited >= timeout_s:
            return Bound(bound.nodes, bound.bound, expected)
        sleep(min(poll_s, max(0.0, timeout_s - waited)))


def nodes_now(kube: Kube, names: Iterable[str]) -> dict[str, Any]:
    """name -> the node as the cluster holds it, None when it has none of that name."""
    return {n: asked(kube, f"reading node {n}", lambda n=n: kube.get(f"{NODES}/{n}"),  # type: ignore[misc]
                      WatchFailed) for n in names}
