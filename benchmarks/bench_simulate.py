"""Trace replay: policy comparison on the shipped Gavel traces, carbon trade-off, replay speed.

Run by hand: python benchmarks/bench_simulate.py [--jobs 100000] [--sweep-jobs 20000] [--jitter-copies 5]
             [--skip-speed] [--skip-traces] [--skip-synthetic]

1. Every shipped Gavel trace x every registered policy on the embedded default fleet: avg/p95 JCT, cost,
   kgCO2e, mean network slow-down, gangs split over zones; zone-first's JCT against spread and pack.
2. Carbon: zone-first with a carbon weight against zone-first with the default weights, per trace; once with
   the GPU model free and once with every gang pinned to H100. The simulator has no per-GPU speed model (a
   job runs as long on an L4 as on an H100), so only the pinned figures are free of "greener by picking
   small GPUs that would in truth run longer".
2b. The same traces on a fleet of the size they were written for: Gavel's experiments used 108 GPUs, so
   14 H100 nodes (112 GPUs) of one regional cluster (EKS us-east-1), dealt round-robin over its 4 zones,
   all free. Here gangs queue and multi-node gangs must choose zones, which is what placement is about.
2c. How much of 2b is noise: each trace again with every duration multiplied by exp(0.01 x N(0,1)) (a 1%
   jitter, `--jitter-copies` seeded copies), zone-first, spread and pack on each copy. Under strict FIFO a
   queued trace is chaotic: which of several equally good nodes a small job takes decides when a whole node
   next frees, so one replay's ratio can move by +-10% with no change of policy. The ratio that means
   something is the one that holds across the copies.
3. The same on a synthetic trace (`--sweep-jobs` jobs, Gavel-like, 2% of them 16- or 32-GPU gangs) at
   offered loads 60% and 90% of the fleet's free GPUs. The shipped traces were written for a ~100-GPU
   cluster: even arriving all at once, a whole trace barely fills the ~4,000 free GPUs of the default
   fleet, so nothing ever queues there. A sensitivity check on our own synthetic load, not the headline.
4. Replay speed on a synthetic trace of `--jobs` jobs (default 100,000): wall and CPU time with zone-first, the
   number of policy calls and their cost, the engine's own overhead measured with a trivial stand-in
   placer, and a cProfile breakdown of where the time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from geosched import policies
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import Assignment, Job, NoFit, Placement, Score, Weights
from geosched.policies import PlacementContext
from geosched.policies.patience import Waiting
from geosched.simulate import PolicyResult, SimOptions, TraceJob, read_trace, simulate
from geosched.simulate.engine import PlaceFn
from geosched.simulate.fleets import GAVEL_NODES, sized_fleet
from geosched.simulate.gavel import shipped_throughputs, shipped_traces
from geosched.simulate.synthetic import synthetic_trace

CARBON_WEIGHTS = (0.5, 1.0, 2.0)
SWEEP_LOADS = (0.6, 0.9)
JITTER = 0.01  # section 2c: relative spread of the durations of the jittered copies
PINNED_GPU = "H100"  # the default fleet's largest pools
HEADER = (f"{'policy':<11} {'avg JCT h':>10} {'p95 JCT h':>10} {'queue h':>8} {'cost $':>11} {'kgCO2e':>9} "
          f"{'slowdown':>8} {'multi-zone':>10} {'unplaced':>8}")


def row(r: PolicyResult) -> str:
    return (f"{r.policy:<11} {r.avg_jct_s / 3600:10.2f} {r.p95_jct_s / 3600:10.2f} {r.avg_queue_s / 3600:8.2f} "
            f"{r.cost_usd:11,.0f} {r.kgco2e:9,.0f} {r.avg_slowdown:8.3f} {r.multi_zone_jobs:10d} {r.unplaced:8d}")


def ratios(results: Sequence[PolicyResult]) -> str:
    by = {r.policy: r for r in results}
    zf = by["zone-first"].avg_jct_s
    return (f"  avg JCT ratio vs zone-first: spread {by['spread'].avg_jct_s / zf:.3f}x, "
            f"pack {by['pack'].avg_jct_s / zf:.3f}x, tas {by['tas'].avg_jct_s / zf:.3f}x")


def compare(ctx: PlacementContext, traces: dict[str, list[TraceJob]], label: str, gpu: str | None = PINNED_GPU) -> None:
    names = policies.names()
    print(f"\n== {label}: every policy ({', '.join(names)}), every gang on {gpu or 'any GPU'}")
    for name, jobs in traces.items():
        start = time.perf_counter()
        results = simulate(jobs, ctx, names, options=SimOptions(gpu=gpu))
        print(f"\n{name}: {len(jobs)} jobs, {time.perf_counter() - start:.1f} s for {len(names)} replays")
        print(HEADER)
        for r in results:
            print(row(r))
        print(ratios(results))


def jittered(jobs: Sequence[TraceJob], seed: int, sigma: float = JITTER) -> list[TraceJob]:
    """The same trace with every duration multiplied by exp(sigma x N(0,1)), seeded."""
    rng = np.random.default_rng(seed)
    factors = np.exp(sigma * rng.standard_normal(len(jobs)))
    return [replace(j, duration_s=j.duration_s * float(f)) for j, f in zip(jobs, factors, strict=True)]


def robustness(ctx: PlacementContext, traces: dict[str, list[TraceJob]], label: str, copies: int,
               gpu: str | None = PINNED_GPU) -> None:
    trio = ["pack", "spread", "zone-first"]
    print(f"\n== {label}: avg JCT ratios vs zone-first on {copies} copies with {JITTER:.0%} duration jitter")
    head = "shipped   mean   [min, max]   zf wins"
    print(f"{'trace':<20} {'vs spread: ' + head:>50} {'vs pack: ' + head:>50}")
    for name, jobs in traces.items():
        shipped = {r.policy: r.avg_jct_s for r in simulate(jobs, ctx, trio, options=SimOptions(gpu=gpu))}
        ratios: dict[str, list[float]] = {"spread": [], "pack": []}
        for seed in range(1, copies + 1):
            by = {r.policy: r.avg_jct_s for r in simulate(jittered(jobs, seed), ctx, trio, options=SimOptions(gpu=gpu))}
            for other in ratios:
                ratios[other].append(by[other] / by["zone-first"] if by["zone-first"] else 1.0)
        cells = []
        for other, values in ratios.items():
            v = np.array(values)
            base = shipped[other] / shipped["zone-first"] if shipped["zone-first"] else 1.0
            wins = int((v > 1).sum())
            cells.append(f"{base:7.3f}x {v.mean():6.3f}x [{v.min():.3f}, {v.max():.3f}] {wins:3d}/{copies}")
        print(f"{name:<20} {cells[0]:>50} {cells[1]:>50}")


def carbon(ctx: PlacementContext, traces: dict[str, list[TraceJob]], label: str, gpu: str | None = None) -> None:
    pinned = f", every gang pinned to {gpu}" if gpu else ", GPU model free (no per-GPU speed model!)"
    print(f"\n== {label}: zone-first with a carbon weight vs default weights {Weights()}{pinned}")
    print(f"{'trace':<26} {'carbon w':>8} {'kgCO2e':>9} {'saving':>7} {'avg JCT':>8} {'cost':>8}")
    options = SimOptions(gpu=gpu)
    for name, jobs in traces.items():
        base, = simulate(jobs, ctx, ["zone-first"], options=options)
        print(f"{name:<26} {'0':>8} {base.kgco2e:9,.0f} {'':>7} {'':>8} {'':>8}")
        for w in CARBON_WEIGHTS:
            green, = simulate(jobs, ctx, ["zone-first"], Weights(carbon=w), options=options)
            saving = 1 - green.kgco2e / base.kgco2e if base.kgco2e else 0.0
            print(f"{'':<26} {w:8.1f} {green.kgco2e:9,.0f} {saving:7.1%} "
                  f"{green.avg_jct_s / base.avg_jct_s - 1:+8.1%} {green.cost_usd / base.cost_usd - 1:+8.1%}")
    print("  (targets: >= 30% less kgCO2e at <= +5% avg JCT; 'avg JCT' and 'cost' are changes vs weight 0)")


def counting(calls: list[float]) -> PlaceFn:
    def place(job: Job, ctx: PlacementContext, policy: str, weights: Weights | None,
              waiting: Waiting | None) -> Placement | NoFit:
        start = time.perf_counter()
        result = policies.place(job, ctx, policy, weights, explain=False, waiting=waiting)
        calls.append(time.perf_counter() - start)
        return result

    return place


def first_fit() -> PlaceFn:
    """A stand-in placer costing a few microseconds: the first nodes with room, a fixed score. It ignores
    pools and the network; it exists only to time the engine without a policy in the way."""
    def place(job: Job, view: PlacementContext, policy: str, weights: Weights | None,
              waiting: Waiting | None) -> Placement | NoFit:
        cap = np.where(view.ready, view.gpus_free // job.gpus_per_worker, 0)
        nodes = np.flatnonzero(cap)
        before = np.cumsum(cap[nodes]) - cap[nodes]
        take = np.clip(job.workers - before, 0, cap[nodes])
        if int(take.sum()) < job.workers:
            return NoFit(job, policy, ())
        keep = take > 0
        out = tuple(Assignment(view.names[i], view.zone_names[int(view.zone_of[i])], int(t))
                    for i, t in zip(nodes[keep].tolist(), take[keep].tolist(), strict=True))
        score = Score(1.0, 1.0, 1.0, 1.0, job.profile.compute_ms, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0)
        return Placement(job, policy, None, tuple(sorted({a.zone for a in out})), (), out, score, Weights())

    return place


def speed(ctx: PlacementContext, n: int, load: float) -> None:
    capacity = int(ctx.gpus_free[ctx.ready].sum())
    start = time.perf_counter()
    jobs = synthetic_trace(n, shipped_throughputs(), capacity_gpus=capacity, load=load, seed=1)
    print(f"\n== replay speed: synthetic trace of {n:,} jobs at offered load {load:.0%} of {capacity:,} free GPUs "
          f"(built in {time.perf_counter() - start:.1f} s)")
    # CPU time beside wall time: on a machine shared with other work the wall time of either run moves with the
    # others' load (the ratio by up to 2x between runs), this process's CPU time much less.
    start, cpu = time.perf_counter(), time.process_time()
    stub, = simulate(jobs, ctx, ["first-fit"], place_fn=first_fit())
    engine_s, engine_cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"engine alone (first-fit stand-in placer): {engine_s:.1f} s, {stub.jobs:,} jobs placed")
    calls: list[float] = []
    start, cpu = time.perf_counter(), time.process_time()
    result, = simulate(jobs, ctx, ["zone-first"], place_fn=counting(calls))
    total, total_cpu = time.perf_counter() - start, time.process_time() - cpu
    spent = sum(calls)
    print(f"zone-first: {total:.1f} s wall ({n / total:,.0f} jobs/s; target <= 30 s), {len(calls):,} policy calls, "
          f"{spent:.1f} s inside place() = {spent / len(calls) * 1e3:.2f} ms per call, "
          f"{(total - spent):.1f} s elsewhere")
    print(f"replay / engine alone: {total / engine_s:.2f}x (issue 22 target <= 4x; both timed in this run); "
          f"CPU time {total_cpu:.1f} s / {engine_cpu:.1f} s = {total_cpu / engine_cpu:.2f}x")
    print(HEADER)
    print(row(result))


def profile(ctx: PlacementContext, n: int, load: float) -> None:
    capacity = int(ctx.gpus_free[ctx.ready].sum())
    jobs = synthetic_trace(n, shipped_throughputs(), capacity_gpus=capacity, load=load, seed=2)
    profiler = cProfile.Profile()
    profiler.enable()
    simulate(jobs, ctx, ["zone-first"])
    profiler.disable()
    stats = pstats.Stats(profiler)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in raw.values())
    by_file: dict[str, float] = {}
    for (filename, _, _), (_, _, tt, _, _) in raw.items():
        key = filename.split("geosched/")[-1] if "geosched/" in filename else (
            "numpy" if "numpy" in filename else "other")
        by_file[key] = by_file.get(key, 0.0) + tt
    print(f"\n== where the time goes (cProfile, zone-first, {n:,} synthetic jobs, {total:.1f} s own time)")
    for key, tt in sorted(by_file.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {tt / total:6.1%}  {key}")
    cumulative: dict[str, float] = {}
    for (filename, _, func), (_, _, _, ct, _) in raw.items():
        if "geosched/" in filename:
            cumulative[f"{filename.split('geosched/')[-1]}:{func}"] = ct
    print("  cumulative per function (includes callees):")
    for key, ct in sorted(cumulative.items(), key=lambda kv: -kv[1])[:14]:
        print(f"  {ct / total:6.1%}  {key}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000, help="synthetic trace length for the speed run")
    parser.add_argument("--sweep-jobs", type=int, default=20_000, help="synthetic trace length for section 3")
    parser.add_argument("--jitter-copies", type=int, default=5, help="jittered copies per trace for section 2c")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-traces", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    args = parser.parse_args()
    ctx = PlacementContext(default_fleet(), default_network())
    capacity = int(ctx.gpus_free[ctx.ready].sum())
    if not args.skip_traces:
        traces = {p.name: list(read_trace(p).jobs) for p in shipped_traces()}
        compare(ctx, traces, "Gavel traces as shipped, default fleet")
        small = sized_fleet(default_fleet(), GAVEL_NODES, "eks-us-east-1", PINNED_GPU)
        sized = PlacementContext(small, default_network())
        compare(sized, traces, f"Gavel traces on a Gavel-sized fleet ({len(small.nodes)} x 8 {PINNED_GPU} in "
                f"{len(small.zones)} zones of one cluster)")
        if args.jitter_copies > 0:
            robustness(sized, traces, "Gavel traces on the Gavel-sized fleet", args.jitter_copies)
        carbon(ctx, traces, "Gavel traces as shipped, default fleet")
        carbon(ctx, traces, "Gavel traces as shipped, default fleet", gpu=PINNED_GPU)
    if not args.skip_synthetic:
        synthetic = {f"synthetic@{load:.0%}": synthetic_trace(args.sweep_jobs, shipped_throughputs(),
                                                              capacity_gpus=capacity, load=load, seed=3)
                     for load in SWEEP_LOADS}
        compare(ctx, synthetic, f"sensitivity: synthetic trace of {args.sweep_jobs:,} jobs, default fleet")
        first = {k: v for k, v in synthetic.items() if k.endswith(f"{SWEEP_LOADS[0]:.0%}")}
        carbon(ctx, first, "sensitivity: synthetic trace, default fleet")
        # Pinned, the load must be relative to that model's GPUs, or the queue grows without bound.
        pinned_capacity = int(ctx.gpus_free[ctx.ready & (ctx.gpu_of == ctx.gpu_names.index(PINNED_GPU))].sum())
        load = SWEEP_LOADS[0]
        pinned = {f"synthetic@{load:.0%} of {PINNED_GPU}": synthetic_trace(
            args.sweep_jobs, shipped_throughputs(), capacity_gpus=pinned_capacity, load=load, seed=3)}
        carbon(ctx, pinned, "sensitivity: synthetic trace, default fleet", gpu=PINNED_GPU)
    if not args.skip_speed:
        speed(ctx, args.jobs, SWEEP_LOADS[0])
        profile(ctx, min(args.jobs, 5_000), SWEEP_LOADS[0])


if __name__ == "__main__":
    main()
