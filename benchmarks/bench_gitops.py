"""GitOps render speed: 1,000 jobs on the embedded default fleet (run by hand: python benchmarks/bench_gitops.py).

The fleet and network are exported as a snapshot with `geosched.store.db.write_snapshot`, a cluster config names
its 12 clusters, and `--jobs` job specs (compact jobs and batch/v1 Jobs of 1 to 32 GPUs, some asking for a GPU
model) are generated with a fixed seed. Measured, each the best of `--repeat` runs:

1. a first render into an empty directory;
2. a render again with nothing changed (every file compared, none written);
3. `check` on the up-to-date tree (which also matches every pod's node constraints against the snapshot's nodes);
4. a render after one zone's own links became slow: the jobs placed there still fit, so they stay (their files
   are re-rendered in place with the new scores); then the same with `--rebalance` (the 10% minimum gain),
   which moves the ones the slow zone now costs at least that much.

Each render is also split into its phases: reading inputs, placing, rendering manifests, comparing/writing.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import yaml

from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.gpus import part
from geosched.core.models import LinkStats, NetworkView, pair_key
from geosched.files.fields import parse_time
from geosched.gitops import check_tree, render_tree
from geosched.gitops import files as tree_files
from geosched.gitops.index import INDEX, parse_index
from geosched.gitops.load import load_inputs
from geosched.gitops.plan import plan
from geosched.gitops.tree import build_tree
from geosched.policies.stable import Rebalance
from geosched.store.db import write_snapshot

T = TypeVar("T")
AT = parse_time("2025-03-01T12:00:00Z", "bench", "")
SLOW = LinkStats(rtt_p50_ms=3.0, rtt_p95_ms=5.0, loss=0.0, throughput_gbps=4.0)
GPUS = (None, None, "H100", "A100", "L4", "A10G")
NAMESPACES = ("research", "vision", "speech", None)


def write_jobs(directory: Path, count: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    directory.mkdir(parents=True)
    for i in range(count):
        shape = rng.random()
        workers, per_worker = ((1, rng.choice((1, 2, 4))) if shape < 0.75 else
                               (2, rng.choice((1, 2))) if shape < 0.97 else (4, 8))
        gpu, namespace = rng.choice(GPUS), rng.choice(NAMESPACES)
        name = f"job-{i:05d}"
        if i % 10 == 0:
            text = batch_job(name, namespace or "default", workers, per_worker, gpu)
        else:
            lines = [f"name: {name}", f"workers: {workers}", f"gpus_per_worker: {per_worker}",
                     "image: ghcr.io/example/train:1"]
            lines += [f"gpu: {gpu}"] if gpu else []
            lines += [f"namespace: {namespace}"] if namespace else []
            text = "\n".join(lines) + "\n"
        (directory / f"{name}.yaml").write_text(text, encoding="utf-8")


def batch_job(name: str, namespace: str, workers: int, per_worker: int, gpu: str | None) -> str:
    # The product name GPU feature discovery writes on the nodes (a short name like `L4` matches no node).
    selector = f"      nodeSelector:\n        nvidia.com/gpu.product: {part(gpu).product}\n" if gpu else ""
    return (f"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n"
            f"  completionMode: Indexed\n  completions: {workers}\n  parallelism: {workers}\n  template:\n"
            f"    spec:\n      restartPolicy: Never\n{selector}      containers:\n        - name: trainer\n"
            f"          image: ghcr.io/example/train:1\n          resources:\n            limits:\n"
            f"              nvidia.com/gpu: {per_worker}\n")


def write_clusters(path: Path) -> list[str]:
    names = sorted({n.cluster for n in default_fleet().nodes if n.cluster})
    lines = ["apiVersion: geosched.io/v1alpha1", "kind: ClusterConfig", "clusters:"]
    for name in names:
        backend = "  {backend: kueue, queue: team-a, namespace: ml}" if name.startswith("eks") else \
            "  {backend: coscheduling}"
        lines.append(f"  {name}:{backend}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return names


def best(repeat: int, run: Callable[[], T]) -> tuple[str, T]:
    """Best wall time and best CPU time of `repeat` runs (on a shared machine the CPU time is the steadier)."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    assert result is not None
    return f"{min(walls):6.2f} s wall, {min(cpus):6.2f} s CPU", result


def busiest_gang_zone(out: Path) -> str:
    """The zone holding the most multi-node gangs: the one whose slowing costs jobs most."""
    index = yaml.safe_load((out / INDEX).read_text(encoding="utf-8"))
    counts: dict[str, int] = {}
    for entry in index["placed"].values():
        if len(entry["assignments"]) > 1:
            for zone in entry["zones"]:
                counts[zone] = counts.get(zone, 0) + 1
    return max(sorted(counts), key=lambda z: counts[z])


def phases(root: Path, out: Path) -> str:
    """One render split into its steps (in memory, nothing written)."""
    t0 = time.perf_counter()
    inputs = load_inputs(root / "jobs", root / "snapshot", root / "clusters.yaml")
    on_disk = tree_files.read_tree(out)
    previous, _ = parse_index(on_disk.owned.get(INDEX, b"").decode())
    t1 = time.perf_counter()
    outcomes = plan(inputs, previous.before())
    t2 = time.perf_counter()
    tree = build_tree(inputs, outcomes, previous, AT)
    t3 = time.perf_counter()
    tree_files.compare(tree.files, on_disk)
    t4 = time.perf_counter()
    return (f"read inputs + tree {t1 - t0:.2f} s, place {t2 - t1:.2f} s, render manifests + index {t3 - t2:.2f} s, "
            f"compare {t4 - t3:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-gitops-") as tmp:
        root = Path(tmp)
        fleet, network = default_fleet(), default_network()
        write_snapshot(root / "snapshot", fleet, network)
        clusters = write_clusters(root / "clusters.yaml")
        write_jobs(root / "jobs", args.jobs)
        print(f"{args.jobs} jobs, {len(fleet.nodes)} nodes, {len(fleet.zones)} zones, {len(clusters)} clusters, "
              f"{sum(n.gpus_free for n in fleet.nodes)} free GPUs")

        def render(out: Path, rebalance: Rebalance | None = None) -> Callable[[], tuple[int, int, int, int]]:
            def run() -> tuple[int, int, int, int]:
                r = render_tree(root / "jobs", root / "snapshot", root / "clusters.yaml", out, at=AT,
                                rebalance=rebalance)
                return r.placed, len(r.unplaced), len(r.changes.written), len(r.changes.removed)
            return run

        fresh = iter(root / f"out{i}" for i in range(args.repeat))
        cold, (placed, unplaced, written, _) = best(args.repeat, lambda: render(next(fresh))())
        print(f"first render:            {cold}  ({placed} placed, {unplaced} unplaced, {written} files)")
        out = root / "out0"
        again, (_, _, written, removed) = best(args.repeat, render(out))
        print(f"render, nothing changed: {again}  ({written} written, {removed} removed)")
        checked, result = best(args.repeat, lambda: check_tree(root / "jobs", root / "snapshot",
                                                               root / "clusters.yaml", out))
        print(f"check, up to date:       {checked}  (up to date: {result.up_to_date})")
        print(f"  phases of a no-change render: {phases(root, out)}")

        zone = busiest_gang_zone(out)
        links = dict(network.zone_links)
        links[pair_key(zone, zone)] = SLOW
        write_snapshot(root / "snapshot", fleet, NetworkView(zone_links=links, node_links=network.node_links,
                                                             stale_after_s=network.stale_after_s))
        slow, (_, _, written, removed) = best(1, render(out))
        print(f"render, {zone} slow: {slow}  ({written} written, {removed} removed)")
        moved, (_, _, written, removed) = best(1, render(out, Rebalance()))
        print(f"  again with --rebalance: {moved}  ({written} written, {removed} removed)")


if __name__ == "__main__":
    main()
