"""Exports: the NetworkTopology object against its CRD, the netperf ConfigMap, the snapshot file."""

from __future__ import annotations

import pytest
from probe_support import validate_configmap, validate_crd_object

from geosched.core.models import LinkStats, NetworkView, Node
from geosched.files.documents import parse_network
from geosched.probes.exports import (
    CONFIGMAP_MAX_BYTES,
    bandwidth_quantity,
    netperf_configmap,
    network_topology,
    snapshot,
)


def node(name: str, zone: str, region: str) -> Node:
    return Node(name, "onprem", region, zone, "custom", "A100", 8, 8)


NODES = [node("n-1", "z1", "r1"), node("n-2", "z1", "r1"), node("n-3", "z2", "r1"), node("n-4", "z3", "r2")]
VIEW = NetworkView(
    zone_links={
        ("z1", "z1"): LinkStats(0.3, 0.45, 0.0, 9.5),
        ("z1", "z2"): LinkStats(1.2, 1.6, 0.0, 4.0),
        ("z1", "z3"): LinkStats(30.0, 31.4, 0.01, 0.2),
        ("z2", "z3"): LinkStats(32.0, 34.6, 0.0, 0.25),
    },
    node_links={("n-1", "n-2"): LinkStats(0.25, 0.3, 0.0, 9.0)},
)


def test_network_topology_valid_against_the_crd() -> None:
    doc = network_topology(VIEW, NODES)
    validate_crd_object(doc)
    assert doc["metadata"] == {"name": "nt-default", "namespace": "default",
                               "annotations": {"geosched.io/source": "geosched probe",
                                               "geosched.io/latency-percentile": "p95"}}
    spec = doc["spec"]
    assert spec["configmapName"] == "netperf-metrics"
    [weights] = spec["weights"]
    assert weights["name"] == "UserDefined"
    region, zone = weights["topologyList"]
    assert region["topologyKey"] == "topology.kubernetes.io/region"
    # r1 -> r2 is the median over z1-z3 and z2-z3; costs are whole ms of p95.
    assert region["originList"] == [
        {"origin": "r1", "costList": [{"destination": "r2", "networkCost": 33, "bandwidthCapacity": "225M"}]},
        {"origin": "r2", "costList": [{"destination": "r1", "networkCost": 33, "bandwidthCapacity": "225M"}]},
    ]
    assert zone["topologyKey"] == "topology.kubernetes.io/zone"
    # Only zones of one region have zone costs; z3 alone in r2 has none.
    assert zone["originList"] == [
        {"origin": "z1", "costList": [{"destination": "z2", "networkCost": 2, "bandwidthCapacity": "4000M"}]},
        {"origin": "z2", "costList": [{"destination": "z1", "networkCost": 2, "bandwidthCapacity": "4000M"}]},
        {"origin": "z3", "costList": []},
    ]


def test_network_topology_names_are_checked() -> None:
    validate_crd_object(network_topology(VIEW, NODES, name="geo", namespace="sched", configmap_name="cm.x"))
    with pytest.raises(ValueError, match="not a Kubernetes object name"):
        network_topology(VIEW, NODES, name="Bad_Name")


def test_configmap_has_every_ordered_pair_with_integer_ms() -> None:
    doc = netperf_configmap(VIEW, NODES)
    validate_configmap(doc)
    assert doc["metadata"]["name"] == "netperf-metrics" and doc["metadata"]["namespace"] == "default"
    data = doc["data"]
    assert len(data) == 4 * 3
    assert data["netperf.p90.latency.milliseconds.origin.n-1.destination.n-2"] == "1"  # measured 0.3 -> at least 1
    assert data["netperf.p90.latency.milliseconds.origin.n-2.destination.n-1"] == "1"
    assert data["netperf.p90.latency.milliseconds.origin.n-1.destination.n-3"] == "2"  # zone estimate
    assert data["netperf.p90.latency.milliseconds.origin.n-4.destination.n-3"] == "35"
    assert all(v.isdigit() for v in data.values())


def test_configmap_refuses_bad_names_and_oversize() -> None:
    with pytest.raises(ValueError, match="cannot form a ConfigMap key"):
        netperf_configmap(VIEW, [node("n 1", "z1", "r1"), node("n-2", "z1", "r1")])
    many = [node(f"node-{i:04d}", "z1", "r1") for i in range(160)]
    small = netperf_configmap(VIEW, many[:20])
    assert len(small["data"]) == 380
    # 160 nodes -> 25,440 keys of 73 bytes: over 1 MiB (a ConfigMap per node pair does not scale).
    assert CONFIGMAP_MAX_BYTES < 160 * 159 * 73
    with pytest.raises(ValueError, match="more than a ConfigMap"):
        netperf_configmap(VIEW, many)


def test_snapshot_round_trips_through_the_document_parser() -> None:
    doc = snapshot(VIEW)
    back = parse_network(doc, "snapshot")
    assert back.zone_links == VIEW.zone_links and back.node_links == VIEW.node_links


def test_bandwidth_quantity() -> None:
    assert bandwidth_quantity(0.0958) == "96M"
    assert bandwidth_quantity(0.0) == "1M"
