"""Owned machines are priced by what they cost, so one free pool cannot swamp the other terms (issue 23 item 2).

main already left $0 pools out of the cost term's reference (tests/test_free_pool.py); what this adds: an SSH
inventory node without `price_ondemand` (before: not eligible at all, "without a on-demand price") gets its
amortised $/h (geosched/core/owned.py), and with that price a cloud zone whose network is much better still wins.
The inventory's shape is the one geosched/files/inventory.py documents; the cloud node is a p5.48xlarge at the
shipped catalog's on-demand price.
"""

from __future__ import annotations

import pytest

from geosched.core import catalog, owned
from geosched.core.models import Job, LinkStats, Placement, Weights
from geosched.files.inventory import parse_inventory
from geosched.policies import PlacementContext, place
from tests.handmade import degrade, fleet, network, node

# An owned site on 1 Gbit/s Ethernet between its nodes (the cloud nodes have testing.GOOD's links): its step is
# several times the cloud's, more than the 16x price ratio times the cost weight (0.1) makes up for.
ONE_GBE = LinkStats(rtt_p50_ms=0.5, rtt_p95_ms=1.0, loss=0.0, throughput_gbps=1.0)


def inventory(**extra: object) -> dict[str, object]:
    return {"nodes": [{"name": f"hpc-{i}", "address": f"10.0.0.{i + 1}", "zone": "zrh-hall-a", "region": "zurich",
                       "gpu": "H100", "gpus": 8, "cluster": "hpc", **extra} for i in range(2)],
            "regions": [{"provider": "onprem", "name": "zurich", "grid_gco2e_per_kwh": 30, "pue": 1.25}]}


def test_an_owned_node_without_a_price_gets_its_amortised_price() -> None:
    parsed = parse_inventory(inventory(), "inventory.yaml").fleet
    assert parsed is not None
    # DGX H100 list $199,000 / 8 GPUs / (4 y x 8760 h) + 0.7 kW x $0.08/kWh = $0.766 per GPU-hour.
    assert [n.price_ondemand for n in parsed.nodes] == [pytest.approx(8 * (24875 / 35040 + 0.7 * 0.08), abs=1e-3)] * 2
    stated = parse_inventory(inventory(price_ondemand=9.5), "inventory.yaml").fleet
    assert stated is not None and {n.price_ondemand for n in stated.nodes} == {9.5}
    unknown = parse_inventory(inventory(gpu="T4", gpus=1), "inventory.yaml").fleet
    assert unknown is not None and {n.price_ondemand for n in unknown.nodes} == {None}


def test_owned_is_cheaper_than_the_cloud_but_not_free() -> None:
    p5 = next(o for o in catalog.offerings() if o.instance_type == "p5.48xlarge" and o.price_ondemand)
    price = owned.usd_per_hour("H100", 8)
    assert price is not None and 0 < price < p5.price_ondemand / 5


def mixed(slow_onprem: bool) -> PlacementContext:
    price = owned.usd_per_hour("H100", 8)
    onprem = [node(f"hpc-{i}", "zrh-hall-a", "zurich", provider="onprem", price=price, cluster="hpc")
              for i in range(6)]
    p5 = next(o for o in catalog.offerings() if o.instance_type == "p5.48xlarge" and o.price_ondemand)
    cloud = [node(f"aws-{i}", "use1-az1", "us-east-1", provider="aws", price=p5.price_ondemand, cluster="eks")
             for i in range(2)]
    f = fleet([*onprem, *cloud])
    return PlacementContext(f, network(f, degrade(f, {n.name: ONE_GBE for n in onprem} if slow_onprem else {})))


def test_the_cloud_wins_when_the_network_says_so_and_owned_wins_otherwise() -> None:
    job = Job("train", workers=2, gpus_per_worker=8)
    fast = place(job, mixed(slow_onprem=False), "zone-first", Weights())
    slow = place(job, mixed(slow_onprem=True), "zone-first", Weights())
    assert isinstance(fast, Placement) and isinstance(slow, Placement)
    assert fast.zones == ("zrh-hall-a",)  # as fast and 16x cheaper: the owned machines
    assert slow.zones == ("use1-az1",)    # owned several times slower per step: the network decides
    assert 1 < slow.score.cost < 50       # the price ratio, not billions
