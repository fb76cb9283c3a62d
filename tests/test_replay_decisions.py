"""The replay's speed-ups change no decision (issue 22 item 4).

Every placement of seeded replays is compared with the one the code made before those speed-ups (commit
2751575; recorded again on purpose for issue 22's capacity-aware choice, policies/capacity.py, which moves
zone-first's decisions: 298 of 1,800 lines of the default-fleet replay, most of the geo one; and again for its
patience, policies/patience.py: the default-fleet replay is unchanged, the geo one's llm-54 now waits once for a
healthy ring and every line after it moves; and for the zone-aware EASY reservations, policies/reservation.py: the
default-fleet replay is unchanged; in the geo one the backfill holds or starts other jobs once blocked gangs have
reservations, and every line from its 25th, zone-first's llm-25, moves), recorded in
tests/data/replay_decisions.json: the nodes, the workers on each, the score's total and
the start time, job by job (a line per decision, kept as a short SHA-256 to keep the file small). The replays
cover what the fast paths touch and what they skip: a default-fleet trace of mostly one-worker gangs with
multi-node ones among them (EASY backfill, baselines too) and LLM gangs of 2-128 nodes on the geo fleet with
degraded NICs, where multi-zone placements win.

If a policy change moves decisions on purpose, record again (and say so in the commit):
    PYTHONPATH=$PWD .venv/bin/python tests/test_replay_decisions.py --record
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from geosched import policies
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import Job, NoFit, Placement, Weights
from geosched.policies import PlacementContext, job_view
from geosched.policies.patience import Waiting
from geosched.policies.scoring import ring
from geosched.policies.zone_first import rank
from geosched.simulate import SimOptions, simulate
from geosched.simulate.engine import PlaceFn
from geosched.simulate.fleets import geo_fleet
from geosched.simulate.gavel import shipped_throughputs
from geosched.simulate.llm import llm_trace
from geosched.simulate.synthetic import synthetic_trace

RECORDED = Path(__file__).parent / "data" / "replay_decisions.json"
DEFAULT_FLEET_POLICIES = ("zone-first", "tas", "pack")


def recording(out: list[str], explain: bool = False) -> PlaceFn:
    def place(job: Job, ctx: PlacementContext, policy: str, weights: Weights | None,
              waiting: Waiting | None) -> Placement | NoFit:
        result = policies.place(job, ctx, policy, weights, explain=explain, waiting=waiting)
        if isinstance(result, Placement):
            nodes = ";".join(f"{a.node}:{a.workers}" for a in result.assignments)
            out.append(f"{policy} {job.name} {nodes} {result.score.total!r}")
        else:
            out.append(f"{policy} {job.name} {'waiting' if result.waiting else 'nofit'}")
        return result

    return place


def decisions(explain: bool = False) -> dict[str, list[str]]:
    """Every policy call of the seeded replays, in order, and each replayed job's start."""
    runs: dict[str, list[str]] = {}
    ctx = PlacementContext(default_fleet(), default_network())
    capacity = int(ctx.gpus_free[ctx.ready].sum())
    jobs = synthetic_trace(300, shipped_throughputs(), capacity_gpus=capacity, load=0.9, seed=4)
    fleet, network = geo_fleet()
    geo = PlacementContext(fleet, network)
    llm = llm_trace(80, capacity_gpus=sum(n.gpus for n in fleet.nodes), load=0.5, seed=3)
    for name, trace, context, names, options in (
        ("default", jobs, ctx, DEFAULT_FLEET_POLICIES, SimOptions(backfill=True)),
        ("geo", llm, geo, ("zone-first", "tas"), SimOptions(gpu="H100", backfill=True)),
    ):
        calls: list[str] = []
        results = simulate(trace, context, names, place_fn=recording(calls, explain), options=options)
        starts = [f"{r.policy} {j.id} {j.start_s!r}" for r in results for j in r.records]
        runs[name] = calls + starts
    return runs


def digest(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()[:16]


def test_replays_place_every_job_as_before_the_speed_ups() -> None:
    recorded = json.loads(RECORDED.read_text())
    now = decisions()
    for name, digests in recorded.items():
        assert len(now[name]) == len(digests), name
        for k, (was, line) in enumerate(zip(digests, now[name], strict=True)):
            assert digest(line) == was, f"{name}, line {k} differs from the recorded decision; now: {line}"


def test_the_replay_decides_as_the_explained_path_does() -> None:
    """Without an explanation zone-first skips the multi-zone search for one-worker gangs; with one it runs it."""
    fast = decisions(explain=False)
    explained = decisions(explain=True)
    assert fast == explained


def test_one_node_rings_and_rankings_are_the_same_on_either_path() -> None:
    """`ring` and `rank` answer a batch of one-node options without sorting; a batch with one two-node option
    in it takes the general path, which must give the one-node options the same figures."""
    ctx = PlacementContext(default_fleet(), default_network())
    view = job_view(ctx, Job("two", 2, 8), Weights(), explain=False)
    singles = view.candidates[:40]
    pair = view.candidates[40:42]
    nodes_fast, starts_fast = singles, np.arange(singles.size)
    nodes_slow = np.concatenate([singles, pair])
    starts_slow = np.arange(singles.size + 1)
    fast, slow = ring(view, nodes_fast, starts_fast), ring(view, nodes_slow, starts_slow)
    for field in ("comm", "rtt", "loss", "tput", "a", "b"):
        a, b = getattr(fast, field), getattr(slow, field)[: singles.size]
        assert a.dtype == b.dtype and np.array_equal(a, b), field
    assert slow.comm[-1] > 0  # the two-node option did take the general path
    total = np.linspace(1.0, 1.1, singles.size + 1)
    usd = np.ones(singles.size + 1)
    r_fast = rank(view, nodes_fast, starts_fast, total[:-1], usd[:-1])
    r_slow = rank(view, nodes_slow, starts_slow, total, usd)
    for field in ("zones", "regions", "left", "pool_left"):
        a, b = getattr(r_fast, field), getattr(r_slow, field)[: singles.size]
        assert a.dtype == b.dtype and np.array_equal(a, b), field


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    made = {name: [digest(line) for line in lines] for name, lines in decisions().items()}
    RECORDED.write_text(json.dumps(made, indent=0) + "\n")
    print(f"recorded {sum(len(v) for v in made.values())} lines in {RECORDED}")
