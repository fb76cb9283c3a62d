"""The pure part of GKE node pools: which zones a cluster can hold, the CreateNodePoolRequest, the accelerator of a
machine, where a compact placement policy applies, and what a failed pool's message means for failover. Shapes:
cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools (gkespec.py cites
each); failure messages as GKE's operations carry them (emulators/geosched_emulators/gke.py `GkeFault`)."""

from __future__ import annotations

import pytest

from geosched.providers.base import CapacityError, QuotaError, UnsupportedError
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import gkespec
from geosched.providers.plan import PricingMode
from tests.providers.gke_support import request
from tests.providers.prov_support import gcp_provider

REGIONAL = gkespec.Cluster("train", "p", "us-central1", "us-central1", ("us-central1-a", "us-central1-b"))
ZONAL = gkespec.Cluster("train", "p", "us-central1-b", "us-central1", ("us-central1-b",))


def plan(pricing: PricingMode = PricingMode.ON_DEMAND):  # type: ignore[no-untyped-def]
    return plan_gang(request(2, pricing), {"gcp": gcp_provider("http://127.0.0.1:9")}, None)


def test_a_regional_cluster_holds_every_zone_of_its_region_a_zonal_one_its_node_locations() -> None:
    zones = [c.zone for c in plan().candidates]
    targets, skipped = gkespec.targets(plan(), REGIONAL)
    assert [t.candidate.zone for t in targets] == zones and skipped == ()
    targets, skipped = gkespec.targets(plan(), ZONAL)
    assert [t.candidate.zone for t in targets] == ["us-central1-b"]
    assert {s.reason for s in skipped} == {"zone us-central1-a is not a node location of zonal cluster train",
                                           "zone us-central1-c is not a node location of zonal cluster train"}
    assert {t.where for t in targets} == {"us-central1-b"}  # the cluster's location addresses the pool


def test_the_request_carries_zone_accelerator_compact_spot_size_and_ownership() -> None:
    [target, *_] = gkespec.targets(plan(PricingMode.SPOT), REGIONAL)[0]
    body = gkespec.create_request(target, project="p", gang="g", seq=3, owner="o1", token="g-3", nodes=2)
    assert body["parent"] == "projects/p/locations/us-central1/clusters/train"
    pool = body["node_pool"]
    assert (pool["name"], pool["locations"], pool["initial_node_count"]) == ("g-3", [target.candidate.zone], 2)
    assert pool["autoscaling"] == {"enabled": True, "min_node_count": 2, "max_node_count": 2}
    assert pool["placement_policy"] == {"type_": "COMPACT"}
    config = pool["config"]
    assert (config["machine_type"], config["spot"]) == ("a3-highgpu-8g", True)
    assert config["accelerators"][0]["accelerator_type"] == "nvidia-h100-80gb"
    assert config["accelerators"][0]["accelerator_count"] == 8
    assert config["labels"] == {"geosched.io/gang": "g"}
    assert config["resource_labels"] == {"geosched-gang": "g", "geosched-owner": "o1", "geosched-attempt": "g-3"}
    assert "taints" not in config  # GKE taints GPU nodes itself


@pytest.mark.parametrize(("machine", "gpu", "accelerator"), [
    ("a3-highgpu-8g", "H100", "nvidia-h100-80gb"),
    ("a3-megagpu-8g", "H100", "nvidia-h100-mega-80gb"),
    ("a2-ultragpu-8g", "A100-80GB", "nvidia-a100-80gb"),
    ("a2-highgpu-8g", "A100", "nvidia-tesla-a100"),
    ("g2-standard-48", "L4", "nvidia-l4"),
    ("x9-custom-8g", "MI300X", None),
])
def test_the_accelerator_of_a_machine(machine: str, gpu: str, accelerator: str | None) -> None:
    assert gkespec.accelerator(machine, gpu) == accelerator


def test_compact_placement_only_where_it_applies() -> None:
    assert gkespec.compact("a3-highgpu-8g", 8)
    assert not gkespec.compact("a3-highgpu-8g", 1)  # one machine places nothing
    # GKE's compact placement holds up to 1,500 nodes (it was 150): a 151-node gang, and the largest pool GKE
    # makes in one zone, are placed compact; past 1,500 none is.
    assert gkespec.compact("a3-highgpu-8g", 151)
    assert gkespec.compact("a3-highgpu-8g", gkespec.MAX_POOL_NODES)
    assert not gkespec.compact("a3-highgpu-8g", gkespec.COMPACT_MAX_NODES + 1)
    assert not gkespec.compact("n1-standard-8", 8)  # N1 takes no compact policy on GKE


def test_a_gang_past_the_old_150_node_figure_asks_for_compact_placement() -> None:
    # 160 x a3-highgpu-8g (1,280 H100s): inside GKE's 1,500-node compact placement, so asked for; before, the pool
    # was created without it and its nodes spread over the zone.
    [target, *_] = gkespec.targets(plan(), REGIONAL)[0]
    body = gkespec.create_request(target, project="p", gang="g", seq=1, owner="o1", token="g-1", nodes=160)
    assert body["node_pool"]["placement_policy"] == {"type_": "COMPACT"}
    one = gkespec.create_request(target, project="p", gang="g", seq=1, owner="o1", token="g-1", nodes=1)
    assert "placement_policy" not in one["node_pool"]


def test_the_pool_size_cap() -> None:
    assert gkespec.size_problem(1000) is None
    assert "1000" in (gkespec.size_problem(1001) or "")


def test_what_a_failure_means() -> None:
    assert isinstance(gkespec.failure("ERROR", "... [ZONE_RESOURCE_POOL_EXHAUSTED]: Instance creation failed", "p"),
                      CapacityError)
    assert isinstance(gkespec.failure("ERROR", "GCE_STOCKOUT", "p"), CapacityError)
    quota = gkespec.failure("ERROR", 'Insufficient regional quota to satisfy request: resource "NVIDIA_H100_GPUS"', "p")
    assert isinstance(quota, QuotaError)
    other = gkespec.failure("ERROR", "", "p")
    assert isinstance(other, UnsupportedError) and other.message == "node pool p ERROR: no message given"


def test_a_location_names_its_region() -> None:
    assert gkespec.region_of("us-central1") == "us-central1"
    assert gkespec.region_of("us-central1-b") == "us-central1"
    assert gkespec.region_of("europe-west4-a") == "europe-west4"
