"""A GKE cluster in the GKE REST double (geosched_emulators/gke.py) for the node pool tests: a regional cluster in
us-central1, where the shipped catalog offers a3-highgpu-8g (8 x H100) in zones a, b and c.

Shapes: the GKE v1 REST reference (projects.locations.clusters, .nodePools); the double cites them.
"""

from __future__ import annotations

from geosched.providers.plan import GangRequest, PricingMode
from geosched_emulators.gke import GkeDouble

PROJECT = "geosched-test"
LOCATION = "us-central1"
CLUSTER = "train"
MACHINE = "a3-highgpu-8g"


def make_cluster(gke: GkeDouble, name: str = CLUSTER, location: str = LOCATION) -> str:
    gke.add_cluster(PROJECT, location, name)
    return name


def request(nodes: int = 2, pricing: PricingMode = PricingMode.ON_DEMAND) -> GangRequest:
    return GangRequest("H100", 8, nodes, pricing, ("gcp",), (LOCATION,))
