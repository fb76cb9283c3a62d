"""zone-first: the whole gang in one zone if at all possible, then the best nodes there."""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np
import pytest

from geosched.core.models import Job, NoFit, Placement, Weights
from geosched.policies import PlacementContext, job_view, place
from geosched.policies.capacity import CAPACITY_TOLERANCE
from geosched.policies.exact import solve_exact
from geosched.policies.scoring import evaluate
from tests.handmade import INTER_REGION, LOSSY, SLOW, degrade, fleet, network, node


def ctx_of(nodes, bad=None, carbon=None):
    f = fleet(nodes, carbon)
    return PlacementContext(f, network(f, degrade(f, bad or {})))


def ok(result: Placement | NoFit) -> Placement:
    assert isinstance(result, Placement), result
    return result


def test_whole_gang_in_one_zone_even_if_another_zone_has_more_free_nodes():
    nodes = [node(f"a{i}", "za") for i in range(4)] + [node(f"b{i}", "zb") for i in range(10)]
    p = ok(place(Job("j", workers=4, gpus_per_worker=8), ctx_of(nodes)))
    assert len(p.zones) == 1
    assert sum(a.workers for a in p.assignments) == 4


def test_takes_the_best_nodes_inside_the_zone():
    nodes = [node(f"a{i}", "za") for i in range(6)]
    c = ctx_of(nodes, bad={"a1": SLOW, "a4": LOSSY})
    p = ok(place(Job("j", workers=4, gpus_per_worker=8), c))
    chosen = {a.node for a in p.assignments}
    assert chosen == {"a0", "a2", "a3", "a5"}
    assert p.score.worst_loss == 0.0
    assert p.score.worst_rtt_ms == pytest.approx(0.2)


def test_prefers_a_clean_zone_over_one_with_a_slow_node_it_would_need():
    za = [node(f"a{i}", "za") for i in range(4)]
    zb = [node(f"b{i}", "zb") for i in range(4)]
    p = ok(place(Job("j", workers=4, gpus_per_worker=8), ctx_of(za + zb, bad={"a2": SLOW})))
    assert p.zones == ("zb",)
    assert any(r.subject.startswith("za ") and "total" in r.reason for r in p.rejected)


def test_fewest_zones_of_one_region_before_crossing_regions():
    nodes = (
        [node(f"a{i}", "za", "r1") for i in range(3)]
        + [node(f"b{i}", "zb", "r1") for i in range(3)]
        + [node(f"c{i}", "zc", "r1") for i in range(3)]
        + [node(f"d{i}", "zd", "r2") for i in range(4)]
    )
    p = ok(place(Job("j", workers=5, gpus_per_worker=8), ctx_of(nodes)))
    assert len(p.zones) == 2 and p.regions == ("lab:r1",)


def test_crosses_regions_only_when_no_region_holds_the_gang():
    nodes = [node(f"a{i}", "za", "r1") for i in range(3)] + [node(f"d{i}", "zd", "r2") for i in range(3)]
    p = ok(place(Job("j", workers=5, gpus_per_worker=8), ctx_of(nodes)))
    assert set(p.regions) == {"lab:r1", "lab:r2"}
    assert p.score.worst_rtt_ms == INTER_REGION.rtt_p50_ms
    capped = place(Job("j", workers=5, gpus_per_worker=8, max_regions=1), ctx_of(nodes))
    assert isinstance(capped, NoFit)
    assert "holds 3 of 5 workers" in capped.message


def test_max_zones_one_refuses_to_split():
    nodes = [node(f"a{i}", "za") for i in range(3)] + [node(f"b{i}", "zb") for i in range(3)]
    result = place(Job("j", workers=4, gpus_per_worker=8, max_zones=1), ctx_of(nodes))
    assert isinstance(result, NoFit)


def test_gang_stays_in_one_cluster_and_on_one_gpu_model():
    nodes = (
        [node(f"a{i}", "za", cluster="c1") for i in range(2)]
        + [node(f"b{i}", "za", cluster="c2") for i in range(2)]
        + [node(f"h{i}", "za", gpu="H100") for i in range(2)]
    )
    result = place(Job("j", workers=3, gpus_per_worker=8), ctx_of(nodes))
    assert isinstance(result, NoFit)
    p = ok(place(Job("j", workers=2, gpus_per_worker=8, gpu="H100"), ctx_of(nodes)))
    assert {a.node for a in p.assignments} == {"h0", "h1"}


def test_busy_gpus_and_workers_per_node():
    nodes = [node("a0", "za", free=4), node("a1", "za", free=8), node("a2", "za", free=0)]
    p = ok(place(Job("j", workers=3, gpus_per_worker=4), ctx_of(nodes)))
    assert {a.node: a.workers for a in p.assignments} == {"a0": 1, "a1": 2}


def test_cost_weight_moves_the_gang_to_the_cheaper_zone():
    za = [node(f"a{i}", "za", price=32.0) for i in range(3)]
    zb = [node(f"b{i}", "zb", price=8.0) for i in range(3)]
    c = ctx_of(za + zb, bad={"b0": SLOW})
    fast = ok(place(Job("j", workers=2, gpus_per_worker=8), c, weights=Weights(1.0, 0.0, 0.0)))
    cheap = ok(place(Job("j", workers=2, gpus_per_worker=8), c, weights=Weights(1.0, 5.0, 0.0)))
    assert fast.zones == ("za",) or fast.score.network <= cheap.score.network
    assert cheap.zones == ("zb",)
    assert cheap.score.usd_per_hour == pytest.approx(2 * 8.0)


def test_carbon_weight_moves_the_gang_to_the_greener_region():
    nodes = [node(f"a{i}", "za", "dirty") for i in range(2)] + [node(f"b{i}", "zb", "clean") for i in range(2)]
    c = ctx_of(nodes, carbon={"dirty": 700.0, "clean": 30.0})
    p = ok(place(Job("j", workers=2, gpus_per_worker=8), c, weights=Weights(1.0, 0.0, 1.0)))
    assert p.zones == ("zb",)
    watts = 46 + 0.9 * (407 - 46)
    assert p.score.gco2e_per_hour == pytest.approx(16 * watts / 1000 * 1.1 * 30.0)


def test_single_node_gang_has_no_network_step():
    p = ok(place(Job("j", workers=2, gpus_per_worker=4), ctx_of([node("a0", "za"), node("a1", "za")])))
    assert len(p.assignments) == 1 and p.score.comm_ms == 0.0 and p.score.network == 1.0


def test_a_slow_node_that_holds_the_whole_gang_alone_needs_no_network():
    nodes = [node("slow", "za", price=8.0)] + [node(f"ok{i}", "za", free=4, price=16.0) for i in range(3)]
    p = ok(place(Job("j", workers=2, gpus_per_worker=4), ctx_of(nodes, bad={"slow": SLOW}), weights=Weights(1, 1, 0)))
    assert [a.node for a in p.assignments] == ["slow"] and p.score.comm_ms == 0.0


def test_no_fit_names_the_reason():
    result = place(Job("j", workers=1, gpus_per_worker=8, gpu="H100"), ctx_of([node("a0", "za")]))
    assert isinstance(result, NoFit)
    assert "no ready node" in result.message and "za: its one node filtered out (1 not H100)" in result.message


def test_vectorised_ranking_agrees_with_the_shared_score():
    nodes = [node(f"{z}{i}", z, price=8.0 + i) for z in ("za", "zb", "zc") for i in range(5)]
    c = ctx_of(nodes, bad={"za1": SLOW, "zb3": LOSSY})
    job = Job("j", workers=3, gpus_per_worker=8)
    p = ok(place(job, c, weights=Weights(1.0, 0.5, 0.2)))
    view = job_view(c, job, Weights(1.0, 0.5, 0.2))
    index = {n: i for i, n in enumerate(c.names)}
    nodes_idx = np.array([index[a.node] for a in p.assignments])
    workers = np.array([a.workers for a in p.assignments])
    expected = evaluate(view, nodes_idx, workers)
    assert p.score.hop == expected.hop
    assert asdict(replace(p.score, hop=None)) == pytest.approx(asdict(replace(expected, hop=None)))
    assert all(p.score.total <= alt.score.total for alt in p.alternatives)


@pytest.mark.parametrize("seed", range(12))
def test_matches_the_exact_optimum_on_small_random_fleets(seed):
    """The exact solver enumerates every node set under zone-first's own rule (tolerance band, fewest zones,
    best fit); zone-first must land within 3% of its total, on as few zones."""
    rng = np.random.default_rng(seed)
    zones = [("za", "r1"), ("zb", "r1"), ("zc", "r2"), ("zd", "r2")]
    nodes = []
    for k in range(int(rng.integers(8, 17))):
        z, r = zones[int(rng.integers(len(zones)))]
        nodes.append(node(f"n{k}", z, r, free=int(rng.choice([0, 4, 8, 8])), price=float(rng.choice([8, 12, 16]))))
    bad = {f"n{k}": (SLOW if rng.random() < 0.5 else LOSSY) for k in rng.choice(len(nodes), 3, replace=False)}
    c = ctx_of(nodes, bad=bad)
    job = Job("j", workers=int(rng.integers(2, 7)), gpus_per_worker=4)
    weights = Weights(1.0, float(rng.choice([0.0, 0.1, 1.0])), float(rng.choice([0.0, 0.5])))
    result = place(job, c, weights=weights)
    exact = solve_exact(job_view(c, job, weights))
    assert (exact is None) == isinstance(result, NoFit)
    if exact is not None:
        p = ok(result)
        assert len(p.zones) <= exact.zones
        assert p.score.total <= exact.score.total * 1.03 + 1e-9


@pytest.mark.parametrize(("price", "chosen"), [(30.0, "zb"), (40.0, "za")])
def test_a_tighter_pool_wins_within_the_capacity_band(price: float, chosen: str) -> None:
    # Issue 22: a roomy cheap cluster and a tight dearer one, a gang either holds in one zone. At 30 $/h the tight
    # pool's total is 8% above the cheap one's, outside the 5% zone band, inside the 12% capacity band: it takes
    # the gang and the roomy pool stays whole for larger gangs. At 40 $/h it is 14% dearer: price wins.
    nodes = ([node(f"a{i}", "za", cluster="big") for i in range(10)]
             + [node(f"b{i}", "zb", cluster="small", price=price) for i in range(3)])
    p = ok(place(Job("j", workers=2, gpus_per_worker=8), ctx_of(nodes)))
    assert p.zones == (chosen,)
    if chosen == "zb":
        (why,) = [r.reason for r in p.rejected if r.subject.startswith("za ")]
        assert "keeps 8 free workers (chosen: 1" in why and "tightest pool" in why
        assert p.alternatives[0].score.total * (1 + CAPACITY_TOLERANCE) >= p.score.total > (
            p.alternatives[0].score.total * 1.05)


@pytest.mark.parametrize("seed", range(6))
def test_each_cells_lowest_node_is_the_sorts_first_whatever_the_ties_and_nans(seed: int) -> None:
    """`_ByCell.lowest` (segment minima; several keys in one pass) picks what a lexsort by (cell, value, free GPUs,
    index) puts first in each cell, with ties on every key and NaN values (0 x an infinite price) among them."""
    from geosched.policies.zone_first import _ByCell

    rng = np.random.default_rng(seed)
    nodes = [node(f"n{i}", f"z{i % 5}", gpus=8) for i in range(60)]
    ctx = ctx_of(nodes).with_free(rng.integers(1, 9, len(nodes)))  # ties on free GPUs too
    view = job_view(ctx, Job("j", workers=1, gpus_per_worker=1), Weights())
    order = ctx.by_cell[view.eligible[ctx.by_cell]]
    cell = ctx.cell_of[order]
    starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
    by_cell = _ByCell.of(view, order, starts)
    keys = rng.choice([0.5, 1.0, 1.0, 2.0, np.inf], size=(2, order.size))  # few distinct values: many ties
    if seed % 2:
        keys[rng.random(keys.shape) < 0.2] = np.nan
    among = rng.random(order.size) < 0.6

    def by_sort(values: np.ndarray, within: np.ndarray) -> list[int]:
        k = np.flatnonzero(within)
        k = k[np.lexsort((order[k], ctx.gpus_free[order[k]], values[k], cell[k]))]
        first = np.ones(k.size, dtype=bool)
        first[1:] = cell[k][1:] != cell[k][:-1]
        return order[k[first]].tolist()

    everywhere = np.ones(order.size, dtype=bool)
    assert [r.tolist() for r in by_cell.lowest(keys)] == [by_sort(r, everywhere) for r in keys]
    for row in keys:
        assert by_cell.lowest(row).tolist() == by_sort(row, everywhere)
        assert by_cell.lowest(row, among).tolist() == by_sort(row, among)


def test_a_context_that_served_other_job_shapes_filters_and_prices_as_a_fresh_one() -> None:
    """`job_view` keeps each job shape's filters and references on the context (shared by `with_free`): views of
    one job on a context that served other shapes, and after free GPUs changed, equal those of a fresh context."""
    from geosched.core.models import Pricing

    nodes = ([node(f"a{i}", "za", gpu="H100", spot=6.0 + i) for i in range(4)]
             + [node(f"b{i}", "zb", gpu="A100") for i in range(4)]
             + [node(f"c{i}", "zc", gpu="H100", region="r2", spot=5.0) for i in range(4)])
    jobs = [Job("any", 1, 1), Job("h100", 2, 4, gpu="H100"), Job("spot", 1, 8, pricing=Pricing.SPOT),
            Job("region", 1, 2, regions=("r2",)), Job("spot-h100", 3, 8, gpu="H100", pricing=Pricing.SPOT)]
    used = ctx_of(nodes)
    for job in jobs:
        job_view(used, job, Weights())
    free = used.gpus_free.copy()
    free[::3] = 0
    for seen, same_free in ((used, lambda c: c), (used.with_free(free), lambda c: c.with_free(free))):
        for job in jobs:
            a, b = job_view(seen, job, Weights()), job_view(same_free(ctx_of(nodes)), job, Weights())
            assert (a.price_ref, a.carbon_ref, a.ideal_step_ms) == (b.price_ref, b.carbon_ref, b.ideal_step_ms), job
            for name in ("eligible", "capacity", "cost_gpu", "removed"):
                assert np.array_equal(getattr(a, name), getattr(b, name)), (job.name, name)
            assert a.filters == b.filters
