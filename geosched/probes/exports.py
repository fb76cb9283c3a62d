"""The measured network as documents other tools read. Pure: view and nodes in, dicts out.

* snapshot: geosched's own NetworkView document (`documents.network_to_dict`), what `place --network` reads.
* NetworkTopology (networktopology.diktyo.x-k8s.io/v1alpha1): field names from its CRD schema
  (`configmapName`, `weights[].topologyList[].originList[].costList[]`), not from the upstream example.
  scheduler-plugins' NetworkOverhead / TopologicalSort plugins read it by name (`networkTopologyName`,
  default `nt-default`) in their namespaces (default `default`) and take the weights named by
  `weightsName` (default `UserDefined`). Costs between zones of one region go under the zone key,
  costs between regions under the region key, as the plugins look them up; lists are sorted by origin
  and destination because the plugins binary-search them.
* ConfigMap for the NetworkTopology controller: it reads the ConfigMap named in the object's
  `spec.configmapName`, in the object's namespace, with one key per ordered node pair,
  `netperf.p90.latency.milliseconds.origin.<a>.destination.<b>`, and parses each value as an integer.

Costs are the p95 RTT in whole milliseconds (we keep p50 and p95; p95 is the nearest kept percentile at
or above the p90 the key names), at least 1 so a measured link never reads as "free" (the controller
reads a missing or unparsable key as 0). Bandwidth capacity is the measured throughput in bit/s.
Node names are used as Kubernetes node names: geosched keeps one identity per node.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from itertools import permutations
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geosched.core.models import LinkStats, NetworkView, Node

NT_API_VERSION = "networktopology.diktyo.x-k8s.io/v1alpha1"
NT_KIND = "NetworkTopology"
DEFAULT_NT_NAME = "nt-default"
DEFAULT_NAMESPACE = "default"
DEFAULT_CONFIGMAP = "netperf-metrics"
DEFAULT_WEIGHTS = "UserDefined"
REGION_KEY = "topology.kubernetes.io/region"
ZONE_KEY = "topology.kubernetes.io/zone"
CONFIGMAP_KEY = "netperf.p90.latency.milliseconds.origin.{}.destination.{}"
# A ConfigMap holds at most 1 MiB of data.
CONFIGMAP_MAX_BYTES = 1024 * 1024
_CONFIGMAP_KEY_RE = re.compile(r"^[-._a-zA-Z0-9]+$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PROVENANCE = {"geosched.io/source": "geosched probe", "geosched.io/latency-percentile": "p95"}


def snapshot(view: NetworkView) -> dict[str, Any]:
    from geosched.files.documents import network_to_dict
    return network_to_dict(view)


def latency_cost(link: LinkStats) -> int:
    return max(1, round(link.rtt_p95_ms))


def bandwidth_quantity(gbps: float) -> str:
    return f"{max(1, round(gbps * 1000))}M"


def network_topology(view: NetworkView, nodes: Sequence[Node], *, name: str = DEFAULT_NT_NAME,
                     namespace: str = DEFAULT_NAMESPACE, configmap_name: str = DEFAULT_CONFIGMAP,
                     weights_name: str = DEFAULT_WEIGHTS) -> dict[str, Any]:
    for what, value in (("name", name), ("namespace", namespace), ("configmap name", configmap_name)):
        _check_name(what, value)
    region_of_zone = {n.zone: n.region for n in nodes}
    zones = sorted(region_of_zone)
    regions = sorted(set(region_of_zone.values()))
    zone_costs: dict[str, list[dict[str, Any]]] = {z: [] for z in zones}
    between: dict[tuple[str, str], list[LinkStats]] = {}
    for za, zb in permutations(zones, 2):
        link = view.zone_link(za, zb)
        if link is None:
            continue
        ra, rb = region_of_zone[za], region_of_zone[zb]
        if ra == rb:
            zone_costs[za].append(_cost(zb, link.rtt_p95_ms, link.throughput_gbps))
        else:
            between.setdefault((ra, rb), []).append(link)
    region_costs: dict[str, list[dict[str, Any]]] = {r: [] for r in regions}
    for (ra, rb), links in sorted(between.items()):
        region_costs[ra].append(_cost(rb, statistics.median(x.rtt_p95_ms for x in links),
                                      statistics.median(x.throughput_gbps for x in links)))
    topology = [
        {"topologyKey": REGION_KEY, "originList": _origins(region_costs)},
        {"topologyKey": ZONE_KEY, "originList": _origins(zone_costs)},
    ]
    return {
        "apiVersion": NT_API_VERSION,
        "kind": NT_KIND,
        "metadata": {"name": name, "namespace": namespace, "annotations": dict(PROVENANCE)},
        "spec": {"configmapName": configmap_name,
                 "weights": [{"name": weights_name, "topologyList": topology}]},
    }


def netperf_configmap(view: NetworkView, nodes: Sequence[Node], *, name: str = DEFAULT_CONFIGMAP,
                      namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
    """Every ordered pair of nodes the view knows (measured, or estimated from the zone pair)."""
    _check_name("configmap name", name)
    data: dict[str, str] = {}
    summaries = view.node_summaries({n.name: n.zone for n in nodes})
    for a, b in permutations(sorted(nodes, key=lambda n: n.name), 2):
        link = view.link(a, b, summaries)
        if link is None:
            continue
        key = CONFIGMAP_KEY.format(a.name, b.name)
        if not _CONFIGMAP_KEY_RE.match(key):
            raise ValueError(f"node name {a.name!r} or {b.name!r} cannot form a ConfigMap key "
                             "(letters, digits, '-', '_', '.' only)")
        data[key] = str(latency_cost(link))
    size = sum(len(k) + len(v) for k, v in data.items())
    if size > CONFIGMAP_MAX_BYTES:
        raise ValueError(f"{len(nodes)} nodes give {len(data)} keys ({size} bytes), more than a ConfigMap's "
                         f"{CONFIGMAP_MAX_BYTES} bytes; export a subset of the nodes")
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "annotations": dict(PROVENANCE)},
            "data": data}


def _cost(destination: str, rtt_p95_ms: float, gbps: float) -> dict[str, Any]:
    return {"destination": destination, "networkCost": max(1, round(rtt_p95_ms)),
            "bandwidthCapacity": bandwidth_quantity(gbps)}


def _origins(costs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"origin": origin, "costList": sorted(items, key=lambda c: str(c["destination"]))}
            for origin, items in sorted(costs.items())]


def _check_name(what: str, value: str) -> None:
    if len(value) > 253 or not _DNS_SUBDOMAIN_RE.match(value):
        raise ValueError(f"{what} {value!r} is not a Kubernetes object name (lowercase RFC 1123 subdomain)")
