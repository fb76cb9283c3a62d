"""Placement stability under GitOps edits (issue 11): random edit sequences move no untouched job.

Method: on a realistic snapshot (examples/gitops: three EKS/GKE clusters, six zones, A100 and H100 nodes, some
GPUs already busy; or `--fleet default`, the embedded ~600-node fleet with every cluster), each sequence starts
from a repository of 4-12 random jobs rendered from scratch, then applies `--edits` random edits, one job each:
add a job, delete one, or change one (its gang size, GPU model, region restriction, or only its step profile,
which leaves its nodes valid). After every edit all jobs are decided again with `geosched.policies.stable.place_all`,
each job's current placement being the previous render's (exactly what `gitops render` reads back from
placements.yaml). A job *moved* when it was placed before the edit and is placed elsewhere (other cluster, zones
or nodes) or not at all after it; only the edited job may move. For contrast, the same sequences are also
decided from scratch (every job placed in name order, as render did before stability), and its moves of untouched
jobs counted.

    PYTHONPATH=. python benchmarks/bench_stable.py --sequences 1000
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import CommProfile, Fleet, Job, Placement
from geosched.gitops.load import load_snapshot
from geosched.gitops.plan import initial_free
from geosched.kube.config import load_cluster_config
from geosched.policies import PlacementContext
from geosched.policies.context import IntArray
from geosched.policies.stable import Current, Request, current_of, place_all

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gitops"
Decide = Callable[[dict[str, Job], Mapping[str, Current]], dict[str, Current]]


@dataclass
class Tally:
    sequences: int = 0
    edits: int = 0
    untouched_checked: int = 0
    untouched_moved: int = 0
    sequences_with_a_move: int = 0
    edited_moved: int = 0
    seconds: float = 0.0


def snapshot(which: str) -> tuple[PlacementContext, IntArray]:
    if which == "example":
        fleet, network = load_snapshot(EXAMPLE / "snapshot")
        clusters = load_cluster_config(EXAMPLE / "clusters.yaml")
        ctx = PlacementContext(fleet, network)
        return ctx, initial_free(ctx, clusters)
    fleet, network = default_fleet(), default_network()
    ctx = PlacementContext(fleet, network)
    return ctx, ctx.gpus_free.copy()


def random_job(rng: random.Random, name: str, fleet: Fleet) -> Job:
    workers = rng.choice((1, 1, 2, 2, 3, 4, 8))
    per_worker = 8 if workers > 1 else rng.choice((1, 2, 4, 8))
    gpus = sorted({n.gpu for n in fleet.nodes})
    gpu = rng.choice((None, *gpus))
    regions = (rng.choice(sorted({n.region for n in fleet.nodes})),) if rng.random() < 0.3 else ()
    profile = CommProfile(message_mb=rng.choice((250.0, 1000.0, 4000.0)), compute_ms=rng.choice((500.0, 1000.0)))
    return Job(name=name, workers=workers, gpus_per_worker=per_worker, gpu=gpu, regions=regions, profile=profile)


def change(rng: random.Random, job: Job, fleet: Fleet) -> Job:
    kind = rng.choice(("workers", "gpu", "regions", "profile"))
    if kind == "workers":
        return replace(job, workers=max(1, job.workers + rng.choice((-1, 1, 2))), gpus_per_worker=8)
    if kind == "gpu":
        return replace(job, gpu=rng.choice((None, *sorted({n.gpu for n in fleet.nodes}))))
    if kind == "regions":
        return replace(job, regions=() if job.regions else (rng.choice(sorted({n.region for n in fleet.nodes})),))
    return replace(job, profile=replace(job.profile, compute_ms=job.profile.compute_ms * 1.5))


def stable_decider(ctx: PlacementContext, free: IntArray) -> Decide:
    def decide(jobs: dict[str, Job], current: Mapping[str, Current]) -> dict[str, Current]:
        requests = [Request(key, job, current.get(key)) for key, job in jobs.items()]
        return {d.key: current_of(d.result) for d in place_all(requests, ctx, free)
                if isinstance(d.result, Placement)}
    return decide


def scratch_decider(ctx: PlacementContext, free: IntArray) -> Decide:
    stable = stable_decider(ctx, free)
    return lambda jobs, _current: stable(jobs, {})


def run(sequences: int, edits: int, seed: int, decide: Decide, fleet: Fleet) -> Tally:
    tally = Tally()
    start = time.perf_counter()
    for s in range(sequences):
        rng = random.Random(seed * 1_000_003 + s)
        jobs = {f"job-{i:03d}": random_job(rng, f"job-{i:03d}", fleet) for i in range(rng.randint(4, 12))}
        placed = decide(jobs, {})
        moved_here = 0
        serial = len(jobs)
        for _ in range(edits):
            op = rng.choice(("add", "delete", "change")) if jobs else "add"
            if op == "add":
                key = f"job-{serial:03d}"
                serial += 1
                jobs[key] = random_job(rng, key, fleet)
            else:
                key = rng.choice(sorted(jobs))
                if op == "delete":
                    del jobs[key]
                else:
                    jobs[key] = change(rng, jobs[key], fleet)
            after = decide(jobs, placed)
            untouched = [k for k in placed if k != key and k in jobs]
            moved = [k for k in untouched if after.get(k) != placed[k]]
            tally.edits += 1
            tally.untouched_checked += len(untouched)
            tally.untouched_moved += len(moved)
            moved_here += len(moved)
            tally.edited_moved += int(key in placed and key in jobs and after.get(key) != placed[key])
            placed = after
        tally.sequences += 1
        tally.sequences_with_a_move += int(moved_here > 0)
    tally.seconds = time.perf_counter() - start
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sequences", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--fleet", choices=("example", "default"), default="example")
    parser.add_argument("--no-scratch", action="store_true", help="skip the from-scratch contrast")
    args = parser.parse_args(argv)
    ctx, free = snapshot(args.fleet)
    rows = [("stable (kept first)", stable_decider(ctx, free))]
    if not args.no_scratch:
        rows.append(("from scratch, by name", scratch_decider(ctx, free)))
    print(f"fleet {args.fleet}: {len(ctx.names)} nodes; {args.sequences} sequences x {args.edits} edits, "
          f"seed {args.seed}")
    for label, decide in rows:
        t = run(args.sequences, args.edits, args.seed, decide, ctx.fleet)
        print(f"{label:24} untouched jobs moved {t.untouched_moved} of {t.untouched_checked} checked; sequences "
              f"with a move {t.sequences_with_a_move}/{t.sequences}; edited jobs moved {t.edited_moved}; "
              f"{t.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
