"""Kueue: the queue label on the job object, the required topology on its pod templates, and optionally the
cluster's Topology and ResourceFlavor objects (kueue.x-k8s.io/v1beta1) that topology-aware scheduling needs."""

from __future__ import annotations

import re
from collections.abc import Iterable
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
    annotations: dict[str, str] = {}
    if gang.single_zone:
        annotations[keys.KUEUE_REQUIRED_TOPOLOGY] = keys.ZONE
    elif gang.single_region:
        annotations[keys.KUEUE_REQUIRED_TOPOLOGY] = keys.REGION
    # Across regions no single topology domain holds the gang: node affinity alone keeps it to its zones.
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
