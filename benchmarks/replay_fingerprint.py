"""Fingerprints of replay decisions, to show a speed-up changes none (issue 22 item 4).

Run by hand, once on the code before a change and once after: python benchmarks/replay_fingerprint.py [--jobs N]
[--explain]. Each line is one replay: a SHA-256 (first 16 hex digits) over every policy call's answer in order
(the job, its nodes and workers on each, the score's total to the last bit, or why it waits or does not fit) and
every job's start time and zones. Equal lines: the same decisions. The replays:

- `bench_simulate.py`'s speed trace (synthetic, `--jobs` jobs, offered load 60%, seed 1) on the embedded default
  fleet with zone-first: mostly one-worker gangs, 2% multi-node ones, queueing once the fleet fills;
- a short one at 90% load with EASY backfill (seed 4);
- LLM gangs of 16+ GPUs (`simulate.llm`, seeds 1-3) on the geo fleet, healthy links and 3% degraded NICs, pinned to
  H100 with backfill, and seed 1 with any GPU model: multi-zone placements, rings, patience.

`tests/test_replay_decisions.py` checks shorter replays against recorded digests on every test run; this one covers
the full speed trace, which is too slow for the suite.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections.abc import Sequence

from geosched import policies
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import Job, NoFit, Placement, Weights
from geosched.policies import PlacementContext
from geosched.policies.patience import Waiting
from geosched.simulate import SimOptions, TraceJob, simulate
from geosched.simulate.engine import PlaceFn
from geosched.simulate.fleets import geo_fleet
from geosched.simulate.gavel import shipped_throughputs
from geosched.simulate.llm import llm_trace
from geosched.simulate.synthetic import synthetic_trace


def recording(digest: hashlib._Hash, calls: list[int], explain: bool) -> PlaceFn:
    def place(job: Job, ctx: PlacementContext, policy: str, weights: Weights | None,
              waiting: Waiting | None) -> Placement | NoFit:
        result = policies.place(job, ctx, policy, weights, explain=explain, waiting=waiting)
        calls[0] += 1
        if isinstance(result, Placement):
            nodes = ";".join(f"{a.node}:{a.workers}" for a in result.assignments)
            line = f"{policy} {job.name} {nodes} {result.score.total!r}"
        else:
            line = f"{policy} {job.name} {'waiting' if result.waiting else 'nofit'}"
        digest.update(line.encode() + b"\n")
        return result

    return place


def fingerprint(label: str, trace: Sequence[TraceJob], ctx: PlacementContext, options: SimOptions,
                explain: bool) -> None:
    digest, calls = hashlib.sha256(), [0]
    start = time.perf_counter()
    results = simulate(trace, ctx, ["zone-first"], place_fn=recording(digest, calls, explain), options=options)
    for r in results:
        for j in r.records:
            digest.update(f"{r.policy} {j.id} {j.start_s!r} {j.zones}\n".encode())
    print(f"{label:<36} calls {calls[0]:>7} {digest.hexdigest()[:16]}  ({time.perf_counter() - start:.1f} s)",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000, help="length of bench_simulate's speed trace")
    parser.add_argument("--explain", action="store_true", help="decide with explanations (the slower path)")
    args = parser.parse_args()
    ctx = PlacementContext(default_fleet(), default_network())
    capacity = int(ctx.gpus_free[ctx.ready].sum())
    fingerprint(f"synthetic {args.jobs} seed1 load0.6", synthetic_trace(
        args.jobs, shipped_throughputs(), capacity_gpus=capacity, load=0.6, seed=1), ctx, SimOptions(), args.explain)
    fingerprint("synthetic 3000 seed4 load0.9 backfill", synthetic_trace(
        3000, shipped_throughputs(), capacity_gpus=capacity, load=0.9, seed=4), ctx, SimOptions(backfill=True),
        args.explain)
    for links, degraded in (("healthy", 0.0), ("degraded", None)):
        fleet, network = geo_fleet() if degraded is None else geo_fleet(degraded=degraded)
        geo = PlacementContext(fleet, network)
        gpus = sum(n.gpus for n in fleet.nodes)
        for seed in (1, 2, 3):
            fingerprint(f"llm {links} seed{seed} H100 backfill", llm_trace(120, capacity_gpus=gpus, load=0.6,
                                                                          seed=seed),
                        geo, SimOptions(gpu="H100", backfill=True), args.explain)
        fingerprint(f"llm {links} seed1 any GPU", llm_trace(120, capacity_gpus=gpus, load=0.6, seed=1), geo,
                    SimOptions(), args.explain)


if __name__ == "__main__":
    main()
