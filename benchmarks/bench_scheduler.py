"""Scheduler mode at scale against the Kubernetes API emulator (run by hand from the repository root:
`python -m benchmarks.bench_scheduler`).

5 emulated clusters (tests/kubeemu, real HTTP), 2,000 GPU nodes in all (400 per cluster, 4 zones of 100 nodes of
8 GPUs), and 500 pending gangs (100 per cluster), each a coscheduling PodGroup (seeded: mostly 2 to 8 pods of
2 to 8 GPUs, 3% of 16 or 32 whole nodes; about 70% of all GPUs). Before the gangs, pods of another scheduler
already run on the nodes, 2 GPUs per node on average in chunks of 2, 4 or 8 (`--background`), so free capacity
is fragmented and not every gang can have one zone, or a place at all. One geosched scheduler per cluster,
each in its own process as in a deployment, with leader election and events on. The run ends when every gang
is bound or, once binding began, nothing was bound for `--settle` seconds. Measured:

- gangs placed per second: gangs bound / time from the first to the last binding request the API servers saw,
  and end to end from the schedulers' start (their first list of nodes and pods included);
- the share of bound gangs whose pods all sit in one zone;
- that no node holds more GPUs than it has, and no gang is left part bound.

The emulators run in this process and the schedulers in five others, all on the same machine: the figures are
for that setup (on a 2-core machine the emulated API servers, not the scheduler, are the bottleneck).
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geosched.kube import keys
from geosched.kube.scheduler import SchedulerSettings, Stats, run
from tests.kubeemu import EmulatedCluster, MultiCluster, pod_manifest

H100 = "NVIDIA-H100-80GB-HBM3"
REGIONS = ("us-east1", "europe-west4", "asia-southeast1", "us-west1", "europe-west1")
# (pods, GPUs per pod) with weights: mostly small gangs, a few of 16 and 32 whole nodes, as in shared clusters.
SHAPES = (((2, 2), 15), ((2, 4), 15), ((4, 2), 15), ((4, 4), 15), ((2, 8), 7.5), ((4, 8), 7.5), ((8, 4), 7.5),
          ((8, 2), 7.5), ((8, 8), 7), ((16, 8), 1.5), ((32, 8), 1.5))
# GPUs another scheduler's pod holds on a node: 2 per node on average (25%), in chunks that fragment it.
BACKGROUND = (0, 0, 0, 0, 0, 2, 2, 4, 4, 8)


@dataclass(frozen=True)
class Gang:
    cluster: str
    name: str
    pods: int
    gpus: int


def seed(clusters: MultiCluster, nodes_per_zone: int, zones: int, gangs_per_cluster: int, background: bool,
         rng: random.Random) -> list[Gang]:
    gangs: list[Gang] = []
    for c, cluster in enumerate(clusters):
        region = REGIONS[c % len(REGIONS)]
        cluster.add_namespace("geosched-system")
        for z in range(zones):
            for i in range(nodes_per_zone):
                node = f"{cluster.name}-z{z}-{i:03d}"
                cluster.add_node(node, region=region, zone=f"{region}-{'abcdefgh'[z]}", gpus=8, gpu_product=H100,
                                 instance_type="a3-highgpu-8g")
                used = rng.choice(BACKGROUND) if background else 0
                if used:
                    cluster.add_pod(f"other-{node}", node_name=node, phase="Running", gpus=used)
        for g in range(gangs_per_cluster):
            pods, gpus = rng.choices([shape for shape, _ in SHAPES], [w for _, w in SHAPES])[0]
            gang = Gang(cluster.name, f"gang-{g:03d}", pods, gpus)
            cluster.create({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": gang.name, "namespace": "default"}, "spec": {"minMember": pods}})
            for p in range(pods):
                cluster.create(pod_manifest(f"{gang.name}-{p}", scheduler_name="geosched", gpus=gpus,
                                            labels={keys.COSCHED_POD_GROUP: gang.name}))
            gangs.append(gang)
    return gangs


def schedule(context: str, kubeconfig: str, stop: Any, results: Any) -> None:
    """One scheduler process: run until `stop`, then report its stats."""
    stats: Stats = run(context, kubeconfig=Path(kubeconfig), settings=SchedulerSettings(), stop=stop,
                       identity=f"bench-{context}")
    results.put((context, stats))


def bound_pods(cluster: EmulatedCluster) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in cluster.list("v1/pods", "default",
                                                                                  field_selector="spec.nodeName!=")}


def ours(placed: dict[str, str]) -> dict[str, str]:
    return {pod: node for pod, node in placed.items() if pod.startswith("gang-")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clusters", type=int, default=5)
    parser.add_argument("--nodes-per-zone", type=int, default=100)
    parser.add_argument("--zones", type=int, default=4)
    parser.add_argument("--gangs-per-cluster", type=int, default=100)
    parser.add_argument("--background", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    with MultiCluster(args.clusters, event_window=200_000) as clusters:
        started = time.monotonic()
        gangs = seed(clusters, args.nodes_per_zone, args.zones, args.gangs_per_cluster, args.background,
                     random.Random(args.seed))
        nodes = args.clusters * args.zones * args.nodes_per_zone
        asked = sum(g.pods * g.gpus for g in gangs)
        held = sum(int(p["spec"]["containers"][0]["resources"]["limits"][keys.GPU]) for c in clusters
                   for p in c.list("v1/pods", "default", field_selector="spec.nodeName!="))
        print(f"{args.clusters} clusters, {nodes} nodes ({nodes * 8} GPUs, {held / (nodes * 8):.0%} held by other "
              f"pods), {len(gangs)} gangs ({sum(g.pods for g in gangs)} pods, {asked} GPUs = "
              f"{asked / (nodes * 8):.0%}); seeded in {time.monotonic() - started:.1f}s")
        for cluster in clusters:
            cluster.clear_requests()

        ctx = multiprocessing.get_context("spawn")
        stop, results = ctx.Event(), ctx.Queue()
        workers = [ctx.Process(target=schedule, args=(c.name, str(clusters.kubeconfig), stop, results))
                   for c in clusters]
        began = time.monotonic()
        for w in workers:
            w.start()
        wanted = sum(g.pods for g in gangs)
        done_at, last_count, last_change = None, -1, time.monotonic()
        while time.monotonic() - began < args.timeout:
            count = sum(len(ours(bound_pods(c))) for c in clusters)
            now = time.monotonic()
            if count != last_count:
                last_count, last_change = count, now
            # Settled: something was bound, then nothing more for a while (processes take seconds to start).
            if count >= wanted or (count > 0 and now - last_change > args.settle):
                done_at = last_change
                break
            time.sleep(0.5)
        stop.set()
        stats = dict(results.get(timeout=60) for _ in workers)
        for w in workers:
            w.join(30)

        bound_gangs = single_zone = 0
        overcommitted = partial = would_fit = 0
        first_bind = last_bind = None
        for cluster in clusters:
            placed = bound_pods(cluster)
            zone_of = {n["metadata"]["name"]: n["metadata"]["labels"][keys.ZONE] for n in cluster.list("v1/nodes")}
            use: Counter[str] = Counter()
            for pod in cluster.list("v1/pods", "default", field_selector="spec.nodeName!="):
                use[pod["spec"]["nodeName"]] += int(pod["spec"]["containers"][0]["resources"]["limits"][keys.GPU])
            for gang in (g for g in gangs if g.cluster == cluster.name):
                on = [placed.get(f"{gang.name}-{p}") for p in range(gang.pods)]
                if all(on):
                    bound_gangs += 1
                    single_zone += len({zone_of[n] for n in on if n}) == 1
                elif any(on):
                    partial += 1
            overcommitted += sum(1 for used in use.values() if used > 8)
            # An unplaced gang that the cluster's final free GPUs could hold, zones aside, would be a miss.
            for gang in (g for g in gangs if g.cluster == cluster.name):
                if not any(placed.get(f"{gang.name}-{p}") for p in range(gang.pods)):
                    slots = sum((8 - use[node]) // gang.gpus for node in zone_of)
                    would_fit += slots >= gang.pods
            binds = [r.at for r in cluster.requests if r.method == "POST" and r.path.endswith("/binding")]
            if binds:
                first_bind = min(binds) if first_bind is None else min(first_bind, min(binds))
                last_bind = max(binds) if last_bind is None else max(last_bind, max(binds))

        total = (done_at or time.monotonic()) - began
        window = (last_bind - first_bind) if first_bind is not None and last_bind is not None else float("nan")
        print(f"bound {bound_gangs}/{len(gangs)} gangs in {total:.1f}s end to end "
              f"({bound_gangs / total:.1f} gangs/s); binding window {window:.1f}s "
              f"({bound_gangs / window if window else float('nan'):.1f} gangs/s)")
        print(f"gangs in one zone: {single_zone}/{bound_gangs} = {single_zone / max(bound_gangs, 1):.1%}")
        print(f"not placed: {len(gangs) - bound_gangs - partial} ({would_fit} of them would fit the final free GPUs "
              f"across zones); part-bound gangs: {partial}; overcommitted nodes: {overcommitted}")
        for name in sorted(stats):
            s = stats[name]
            print(f"  {name}: {s.gangs_bound} gangs, {s.pods_bound} pods, {s.refusals} refusals, {s.rollbacks} "
                  f"rollbacks, {s.cycles} cycles; deciding {s.decide_s:.2f}s, binding {s.bind_s:.2f}s")


if __name__ == "__main__":
    main()
