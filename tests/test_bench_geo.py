"""benchmarks/bench_geo.py's `--queues` (issue 22 item 5): every policy replayed under each queue a user can run,
and each baseline's best queue against zone-first's best. A tiny geo fleet (60 nodes) so it runs in seconds."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from benchmarks import bench_geo
from geosched.policies import PlacementContext
from geosched.simulate import PolicyResult, TraceJob, simulate
from geosched.simulate.fleets import geo_fleet
from geosched.simulate.llm import llm_trace

# 40 LLM-shaped gangs offered at twice the tiny fleet's GPUs: enough for a blocked head on seeds 1 and 2.
TINY = ["--nodes", "60", "--jobs", "40", "--load", "2", "--seeds", "2", "--first-seed", "1", "--fleets", "clean"]
ALL = ",".join(bench_geo.QUEUES)


def tiny_jobs(seed: int) -> tuple[list[TraceJob], PlacementContext]:
    fleet, network = geo_fleet(nodes=60, degraded=0.0)
    ctx = PlacementContext(fleet, network)
    return llm_trace(40, capacity_gpus=sum(n.gpus for n in fleet.nodes), load=2.0, seed=seed), ctx


def passes(jobs: list[TraceJob], result: PolicyResult) -> int:
    """How many placed jobs started before an older one (queue order: submit time, then trace line)."""
    order = {j.id: (j.submit_time_s, j.line) for j in jobs}
    starts = [r.start_s for r in sorted(result.records, key=lambda r: order[r.id])]
    return sum(1 for a, b in pairwise(starts) if b < a)


@pytest.mark.parametrize("policy", ["tas", "zone-first"])
def test_each_queue_admits_as_the_strategy_it_is_named_after(policy: str) -> None:
    jobs, ctx = tiny_jobs(seed=1)
    (strict,) = simulate(jobs, ctx, [policy], options=bench_geo.QUEUES["strict"].options)
    (best_effort,) = simulate(jobs, ctx, [policy], options=bench_geo.QUEUES["best-effort"].options)
    (reserved,) = simulate(jobs, ctx, [policy], options=bench_geo.QUEUES["reservations"].options)
    # StrictFIFO: "older workloads that can't be admitted will block admitting newer workloads even if they fit".
    assert passes(jobs, strict) == 0
    # BestEffortFIFO lets newer workloads that fit past a blocked one; here some do.
    assert passes(jobs, best_effort) > 0
    # The reservations hold back some of what BestEffortFIFO lets through: a different queue, not a duplicate.
    assert [r.start_s for r in reserved.records] != [r.start_s for r in best_effort.records]


def test_bench_replays_every_policy_under_every_queue_and_compares_best_with_best(
        capsys: pytest.CaptureFixture[str]) -> None:
    args = bench_geo.parse([*TINY, "--queues", ALL])
    jct = bench_geo.run_fleet("tiny", 0.0, args)
    assert list(jct) == list(bench_geo.QUEUES)
    # Each figure is that queue's replay of that seed (checked for two policies, replayed here on their own).
    for i, seed in enumerate((1, 2)):
        jobs, ctx = tiny_jobs(seed)
        for q, queue in bench_geo.QUEUES.items():
            for r in simulate(jobs, ctx, ["zone-first", "tas"], options=queue.options):
                assert jct[q][r.policy][i] == r.avg_jct_s
    # The queues do not all agree on this workload, else the comparison would show nothing.
    assert len({jct[q]["tas"][0] for q in jct}) > 1
    best = bench_geo.best_queues(jct)
    for p in bench_geo.POLICIES:
        for i in range(2):
            queues, v = best[p][i]
            assert v == min(jct[x][p][i] for x in jct)
            assert queues == tuple(q for q in jct if jct[q][p][i] == v)
    capsys.readouterr()
    names = ["seed 1", "seed 2"]
    bench_geo.cross_queue("tiny", jct, None, names)
    out = capsys.readouterr().out
    zf = np.array([v for _, v in best["zone-first"]])
    for b in bench_geo.BASELINES:
        ratio = np.array([v for _, v in best[b]]) / zf
        pooled = sum(v for _, v in best[b]) / zf.sum()
        line = next(line for line in out.splitlines() if line.startswith(f"{b} ") and "median" in line)
        assert line.split()[1:4] == [f"{pooled:.3f}x", f"{ratio.min():.3f}x", f"{ratio.max():.3f}x"]
        counts = next(line for line in out.splitlines() if line.startswith(f"{b} ") and "strict" in line)
        named = [int(n) for n in counts.replace(",", "").split()[2::2]]
        assert named == [sum(1 for queues, _ in best[b] if q in queues) for q in jct] and sum(named) >= 2


def test_an_unknown_queue_is_one_line_naming_the_known_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench_geo.parse(["--queues", "strict,fifo"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "unknown queue fifo; known: strict, best-effort, reservations" in err
    assert "Traceback" not in err
