"""Each baseline does what its name promises, behind the same protocol and the same score."""

from __future__ import annotations

import pytest

from geosched.core.models import Job, Placement
from geosched.policies import PlacementContext, names, place
from tests.handmade import SLOW, degrade, fleet, network, node


def ctx_of(nodes, bad=None, carbon=None):
    f = fleet(nodes, carbon)
    return PlacementContext(f, network(f, degrade(f, bad or {})))


def run(policy, nodes, job, **kw) -> Placement:
    result = place(job, ctx_of(nodes, **kw), policy)
    assert isinstance(result, Placement), result
    return result


def test_every_policy_is_registered():
    assert set(names()) >= {"zone-first", "spread", "pack", "random", "cheapest", "greenest", "tas", "karmada"}


def test_spread_goes_round_robin_over_zones_like_the_default_scheduler():
    nodes = [node(f"{z}{i}", z) for z in ("za", "zb", "zc") for i in range(3)]
    p = run("spread", nodes, Job("j", workers=3, gpus_per_worker=8))
    assert len(p.zones) == 3


def test_spread_prefers_the_emptiest_nodes():
    nodes = [node("a0", "za", free=2), node("a1", "za", free=8), node("a2", "za", free=6)]
    p = run("spread", nodes, Job("j", workers=2, gpus_per_worker=2))
    assert {a.node for a in p.assignments} == {"a1", "a2"}


def test_pack_fills_the_fullest_nodes_first():
    nodes = [node("a0", "za", free=8), node("b0", "zb", free=2), node("c0", "zc", free=4)]
    p = run("pack", nodes, Job("j", workers=3, gpus_per_worker=2))
    assert {a.node: a.workers for a in p.assignments} == {"b0": 1, "c0": 2}


def test_cheapest_and_greenest_pick_by_price_and_by_grid():
    nodes = [node("a0", "za", "dirty", price=8.0), node("b0", "zb", "clean", price=30.0)]
    carbon = {"dirty": 700.0, "clean": 20.0}
    assert run("cheapest", nodes, Job("j", 1, 8), carbon=carbon).zones == ("za",)
    assert run("greenest", nodes, Job("j", 1, 8), carbon=carbon).zones == ("zb",)


def test_random_is_reproducible_per_job_and_differs_across_jobs():
    nodes = [node(f"a{i}", f"z{i % 4}") for i in range(16)]
    first = run("random", nodes, Job("alpha", 4, 8))
    assert run("random", nodes, Job("alpha", 4, 8)).assignments == first.assignments
    others = {run("random", nodes, Job(f"job-{k}", 4, 8)).assignments for k in range(5)}
    assert len(others) > 1


@pytest.mark.parametrize("policy", ["spread", "pack", "random", "cheapest", "greenest", "tas", "karmada"])
def test_network_blind_baselines_lose_to_zone_first_on_the_network_term(policy):
    nodes = [node(f"{z}{i}", z) for z in ("za", "zb") for i in range(4)]
    bad = {"za0": SLOW, "zb0": SLOW}
    job = Job("j", workers=6, gpus_per_worker=8)
    baseline = run(policy, nodes, job, bad=bad)
    best = run("zone-first", nodes, job, bad=bad)
    assert best.score.network <= baseline.score.network


@pytest.mark.parametrize("policy", ["spread", "pack", "random", "cheapest", "greenest", "tas", "karmada"])
def test_baselines_honour_zone_limits(policy):
    nodes = [node(f"{z}{i}", z) for z in ("za", "zb", "zc") for i in range(2)]
    result = place(Job("j", workers=2, gpus_per_worker=8, max_zones=1), ctx_of(nodes), policy)
    if isinstance(result, Placement):
        assert len(result.zones) == 1
    else:
        assert "allows 1" in result.message
