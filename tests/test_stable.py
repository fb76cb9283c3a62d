"""Stable placements (geosched.policies.stable, issue 11): kept first while they fit, then the rest; reasons for every
move; rebalancing only for the minimum gain; and the property that random edits move no untouched job."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from benchmarks.bench_stable import run, scratch_decider, snapshot, stable_decider
from geosched.core.models import Job, NodeState, Placement
from geosched.policies import PlacementContext
from geosched.policies.stable import KEPT, Current, Decision, Fate, Rebalance, Request, current_of, place_all
from tests.handmade import SLOW, fleet, network, node


def lab() -> PlacementContext:
    """Two zones of one region, four 8-GPU nodes each; z1 a little cheaper."""
    nodes = [node(f"{z}-{i}", z, price=16.0 if z == "z1" else 17.0, cluster="c") for z in ("z1", "z2")
             for i in range(4)]
    f = fleet(nodes)
    return PlacementContext(f, network(f))


def decide(ctx: PlacementContext, *requests: Request, rebalance: Rebalance | None = None) -> dict[str, Decision]:
    out = place_all(list(requests), ctx, ctx.gpus_free.copy(), rebalance=rebalance)
    return {d.key: d for d in out}


def test_a_new_job_placed_first_by_name_takes_nothing_from_a_kept_one() -> None:
    ctx = lab()
    big = Job("b-big", workers=4, gpus_per_worker=8)
    first = decide(ctx, Request("b-big", big))["b-big"]
    assert isinstance(first.result, Placement) and first.result.zones == ("z1",)
    # "a-new" sorts first and would take z1 from scratch; kept first, b-big stays and a-new goes to z2.
    out = decide(ctx, Request("a-new", Job("a-new", workers=2, gpus_per_worker=8)),
                 Request("b-big", big, current_of(first.result)))
    assert (out["b-big"].fate, out["b-big"].note) == (Fate.KEPT, KEPT)
    assert out["b-big"].result.assignments == first.result.assignments
    assert out["a-new"].fate is Fate.NEW and out["a-new"].result.zones == ("z2",)


@pytest.mark.parametrize(("edit", "fate", "note"), [
    (lambda j: replace(j, workers=3), Fate.MOVED, "moved: the gang has 3 workers now, its nodes hold 2"),
    (lambda j: replace(j, zones=("z2",)), Fate.MOVED, "moved: node z1-0 is in zone z1, which the job no longer allows"),
    (lambda j: replace(j, gpu="H100"), Fate.UNPLACED,
     "no longer fits (node z1-0 has A100 GPUs, the job asks for H100)"),
])
def test_a_job_whose_own_spec_no_longer_fits_its_nodes_moves_and_says_why(
        edit: Callable[[Job], Job], fate: Fate, note: str) -> None:
    ctx = lab()
    job = Job("j", workers=2, gpus_per_worker=8)
    before = decide(ctx, Request("j", job))["j"].result
    assert isinstance(before, Placement)
    after = decide(ctx, Request("j", edit(job), current_of(before)))["j"]
    assert after.fate is fate
    assert after.note.startswith(note), after.note


def test_a_spec_change_that_leaves_its_nodes_valid_keeps_them() -> None:
    ctx = lab()
    job = Job("j", workers=2, gpus_per_worker=8)
    before = decide(ctx, Request("j", job))["j"].result
    slower = replace(job, profile=replace(job.profile, compute_ms=3000.0), image="ghcr.io/example/llm:2")
    after = decide(ctx, Request("j", slower, current_of(before)))["j"]
    assert after.fate is Fate.KEPT and after.result.assignments == before.assignments


def test_a_drained_or_vanished_node_moves_its_job() -> None:
    ctx = lab()
    job = Job("j", workers=2, gpus_per_worker=8)
    before = decide(ctx, Request("j", job))["j"].result
    gone = Current(before.cluster, before.zones, (("z1-9", 1), *((a.node, a.workers) for a in before.assignments[1:])))
    assert decide(ctx, Request("j", job, gone))["j"].note == "moved: node z1-9 is no longer in the fleet"
    drained = [replace(n, state=NodeState.NOT_READY) if n.name == before.assignments[0].node else n
               for n in ctx.fleet.nodes]
    f = replace(ctx.fleet, nodes=tuple(drained))
    out = decide(PlacementContext(f, ctx.network), Request("j", job, current_of(before)))["j"]
    assert out.note == f"moved: node {before.assignments[0].node} is not-ready"


def test_zones_only_current_keeps_the_job_in_its_cluster_and_zones() -> None:
    ctx = lab()
    job = Job("j", workers=2, gpus_per_worker=8)
    out = decide(ctx, Request("j", job, Current("c", ("z2",))))["j"]
    assert out.fate is Fate.KEPT and out.result.zones == ("z2",)
    assert out.result.job == job  # the zone restriction was ours, not the user's


def test_rebalance_moves_only_for_the_minimum_gain() -> None:
    nodes = [node(f"{z}-{i}", z, cluster="c") for z in ("z1", "z2") for i in range(2)]
    f = fleet(nodes)
    ctx = PlacementContext(f, network(f, {("z1-0", "z1-1"): SLOW}))
    job = Job("j", workers=2, gpus_per_worker=8)
    on_slow = Current("c", ("z1",), (("z1-0", 1), ("z1-1", 1)))
    assert decide(ctx, Request("j", job, on_slow))["j"].fate is Fate.KEPT
    moved = decide(ctx, Request("j", job, on_slow), rebalance=Rebalance())["j"]
    assert moved.fate is Fate.MOVED and moved.result.zones == ("z2",)
    assert moved.note.startswith("moved: rebalanced, total ") and "the minimum gain is 10%" in moved.note
    assert decide(ctx, Request("j", job, on_slow), rebalance=Rebalance(0.99))["j"].fate is Fate.KEPT


def test_unplaced_reasons_are_the_same_whether_placed_before_or_after_the_others() -> None:
    ctx = lab()
    jobs = [Request("a-huge", Job("a-huge", workers=9, gpus_per_worker=8)),
            Request("b", Job("b", workers=3, gpus_per_worker=8))]
    first = place_all(jobs, ctx, ctx.gpus_free.copy())
    again = place_all([jobs[0], replace(jobs[1], current=current_of(first[1].result))],
                      ctx, ctx.gpus_free.copy())
    assert first[0].result == again[0].result and first[0].fate is Fate.UNPLACED


def test_random_edit_sequences_move_no_untouched_job() -> None:
    """200 sequences x 5 edits in CI (benchmarks/bench_stable.py runs 1,000); from scratch, the same generator
    moves untouched jobs, so the property is not vacuous."""
    ctx, free = snapshot("example")
    stable = run(200, 5, seed=11, decide=stable_decider(ctx, free), fleet=ctx.fleet)
    assert stable.untouched_checked > 5000
    assert stable.untouched_moved == 0
    assert stable.edited_moved > 0
    scratch = run(20, 5, seed=11, decide=scratch_decider(ctx, free), fleet=ctx.fleet)
    assert scratch.untouched_moved > 0
    assert np.isfinite(stable.seconds)


def test_a_job_that_grows_per_worker_in_place_cannot_squeeze_out_a_neighbour() -> None:
    """Found by the 1,000-sequence run: `a` (1 x 1 GPU) shares a node with `b` (1 x 1 GPU); `a` now asks for 8 GPUs
    per worker. Checked first by key, it kept its node and took all 8 GPUs, moving `b`. Growing jobs are checked
    after the others."""
    f = fleet([node("n0", "z1", cluster="c", free=2), node("n1", "z1", cluster="c", free=8)])
    ctx = PlacementContext(f, network(f))
    a, b = Job("a", workers=1, gpus_per_worker=1), Job("b", workers=1, gpus_per_worker=1)
    on_n0 = Current("c", ("z1",), (("n0", 1),), gpus_per_worker=1)
    out = decide(ctx, Request("a", replace(a, gpus_per_worker=2), on_n0), Request("b", b, on_n0))
    assert out["b"].fate is Fate.KEPT
    assert out["a"].fate is Fate.MOVED and out["a"].result.assignments[0].node == "n1"
    assert out["a"].note == "moved: node n0 has 1 free GPUs, its 1 worker(s) need 2"
