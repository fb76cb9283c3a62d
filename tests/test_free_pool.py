"""A free or cheap pool must not swamp the other terms (issue 23 item 2).

The shape: tests/data/good/fleet.yaml, an on-prem HPC region whose nodes say `price_ondemand: 0` beside AWS
p4d.24xlarge nodes priced from the catalog. The cost and carbon terms are normalised by the median $/GPU-h
(gCO2e/GPU-h) of the eligible nodes; with most of them at $0 that median was 0, floored at 1e-9, and a cloud
gang's cost term came out in the billions (`cost 4,096,575,000.0`): no network could make a cloud zone win.
"""

from __future__ import annotations

import numpy as np

from geosched.core.models import Job, Placement, Weights
from geosched.policies import PlacementContext, job_view, place
from geosched.policies.scoring import evaluate
from tests.handmade import SLOW, degrade, fleet, network, node


def mixed(bad_onprem: bool = False) -> PlacementContext:
    onprem = [node(f"hpc-{i}", "zrh-hall-a", "zurich", provider="onprem", price=0.0, cluster="hpc")
              for i in range(6)]
    cloud = [node(f"aws-{i}", "use1-az1", "us-east-1", provider="aws", price=32.77, cluster="eks-east")
             for i in range(2)]
    f = fleet([*onprem, *cloud])
    bad = {n.name: SLOW for n in onprem} if bad_onprem else {}
    return PlacementContext(f, network(f, degrade(f, bad)))


def test_a_cloud_gang_beside_a_free_pool_has_a_cost_term_of_the_order_of_its_price_ratio() -> None:
    ctx = mixed()
    job = Job("train", workers=2, gpus_per_worker=8)
    view = job_view(ctx, job, Weights(), explain=False)  # every node eligible, six of eight at $0
    score = evaluate(view, np.array([ctx.names.index("aws-0"), ctx.names.index("aws-1")]), np.array([1, 1]))
    # The reference is the median of the priced (non-zero) eligible nodes: here the cloud nodes themselves.
    assert score.cost == 1.0
    assert score.total < 10


def test_a_cloud_zone_wins_over_a_free_pool_when_the_free_pool_is_slow_enough() -> None:
    job = Job("train", workers=2, gpus_per_worker=8)
    fast = place(job, mixed(), "zone-first", Weights())
    slow = place(job, mixed(bad_onprem=True), "zone-first", Weights())
    assert isinstance(fast, Placement) and isinstance(slow, Placement)
    assert fast.zones == ("zrh-hall-a",)          # free and as fast: the free pool
    assert slow.zones == ("use1-az1",)            # free but three times slower per step: the network decides
    assert fast.score.cost == 0.0
