"""The MultiKueue dispatcher at scale against the Kubernetes API emulator (run by hand from the repository root:
`python -m benchmarks.bench_multikueue`).

A manager cluster and 5 worker clusters (tests/kubeemu, real HTTP), 2,000 GPU nodes of 8 H100 each per worker
(10,000 in all) in the zones of real GKE and EKS offerings (a3-highgpu-8g, p5.48xlarge; providerIDs and labels as
GKE and EKS set them, so the catalog prices them and each region's grid weighs its carbon). Pods of the workers'
own tenants already hold GPUs, a different share per cluster (`BUSY`), in chunks of 2, 4 or 8 GPUs, so free
capacity differs between clusters and is fragmented. 1,000 pending Workloads in the manager, each holding its
quota reservation with the MultiKueue admission check Pending, shaped as Kueue's batch/Job integration creates
them: mostly 2 to 8 pods of 2 to 8 GPUs, a few of 16 and 32 whole nodes (the shapes of bench_scheduler).

The dispatcher runs in its own process, long-running (`Dispatcher.run`, what `geosched multikueue dispatch`
runs: watches, Events, the store recording each decision), as in a deployment; the emulated API servers run in
this one. Once it has read every worker cluster (its warm-up, reported), the 1,000 Workloads are created at once.
Measured:

- end to end: from the first Workload created to the last one's nominatedClusterNames written, through the
  watches and the API; Workloads nominated / s;
- per-decision latency, two ways: the decision alone (the Workload read to its write sent: parsing, ranking on
  10,000 nodes, the apply body) and with the write (to the API server's answer, queueing behind other writes
  included);
- correctness, checked independently of the policy: every nomination replayed in order against a ledger of
  each node's free GPUs (the tenants' pods, then the nodes the dispatcher chose for earlier Workloads, from the
  store): a Workload nominated to a cluster whose free slots (sum over nodes of free // GPUs per pod) cannot
  hold it while another cluster's could is a miss; so is a Workload not nominated though a cluster could hold it.

Before and after on the same load: the dispatcher runs several times on the same clusters and the same 1,000
Workloads (deleted between runs), alternating `exhaustive` (every worker cluster given to the policy for every
decision, the ranking before it was bounded) and `bounded` (the shipped ranking, `rank.rank(need=...)`); each
run reports its throughput, the dispatcher process's CPU per Workload and the load average, then the same-run
ratios and how many Workloads got the same first cluster from both.

Both processes share this machine's cores (and the emulated API servers are Python): the figures are for that
setup, and the write-inclusive latency is mostly the emulator's.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from geosched.kube import keys
from geosched.kube.client import Kube
from geosched.kube.multikueue.dispatcher import Dispatcher
from geosched.kube.multikueue.settings import DispatcherSettings
from geosched.kube.scheduler.settings import LeaderElection
from geosched.store.db import Store
from tests.kubeapi.multikueue_support import manager_setup, register_kueue_crds, workload
from tests.kubeemu import EmulatedCluster, MultiCluster, node_manifest, pod_manifest

H100 = "NVIDIA-H100-80GB-HBM3"


@dataclass(frozen=True)
class Worker:
    name: str
    provider: str
    region: str
    instance_type: str
    zones: tuple[tuple[str, str | None], ...]  # (zone name, AWS zone ID)
    busy: float  # share of GPUs the cluster's own tenants hold


WORKERS = (
    Worker("gke-us-central1", "gcp", "us-central1", "a3-highgpu-8g",
           (("us-central1-a", None), ("us-central1-b", None), ("us-central1-c", None)), 0.85),
    Worker("gke-europe-west4", "gcp", "europe-west4", "a3-highgpu-8g",
           (("europe-west4-b", None), ("europe-west4-c", None)), 0.6),
    Worker("gke-asia-southeast1", "gcp", "asia-southeast1", "a3-highgpu-8g",
           (("asia-southeast1-b", None), ("asia-southeast1-c", None)), 0.45),
    Worker("eks-us-east-1", "aws", "us-east-1", "p5.48xlarge",
           (("us-east-1a", "use1-az1"), ("us-east-1b", "use1-az2"), ("us-east-1c", "use1-az4")), 0.55),
    Worker("eks-eu-north-1", "aws", "eu-north-1", "p5.48xlarge",
           (("eu-north-1a", "eun1-az1"), ("eu-north-1b", "eun1-az2")), 0.35),
)
SHAPES = (((2, 2), 15), ((2, 4), 15), ((4, 2), 15), ((4, 4), 15), ((2, 8), 7.5), ((4, 8), 7.5), ((8, 4), 7.5),
          ((8, 2), 7.5), ((8, 8), 7), ((16, 8), 1.5), ((32, 8), 1.5))
CHUNKS = (2, 4, 8)


def seed_worker(cluster: EmulatedCluster, w: Worker, nodes: int, rng: random.Random) -> dict[str, int]:
    """Nodes with providerIDs as GKE / EKS set them, and tenants' pods; returns each node's free GPUs."""
    free: dict[str, int] = {}
    for i in range(nodes):
        zone, zone_id = w.zones[i % len(w.zones)]
        name = f"{w.name}-{i:04d}"
        node = node_manifest(name, region=w.region, zone=zone, instance_type=w.instance_type, gpu_product=H100,
                             gpus=8, labels={keys.AWS_ZONE_ID: zone_id} if zone_id else None)
        node["spec"]["providerID"] = (f"aws:///{zone}/i-{i:017x}" if w.provider == "aws"
                                      else f"gce://bench-project/{zone}/{name}")
        cluster.create(node)
        held = 0
        while held < 8 and rng.random() < w.busy:
            chunk = min(rng.choice(CHUNKS), 8 - held)
            cluster.create(pod_manifest(f"tenant-{i:04d}-{held}", node_name=name, phase="Running", gpus=chunk))
            held += chunk
        free[name] = 8 - held
    return free


def seed_workloads(manager: EmulatedCluster, count: int, rng: random.Random,
                   prefix: str = "w") -> list[tuple[str, int, int]]:
    shapes = [s for s, _ in SHAPES]
    weights = [w for _, w in SHAPES]
    out = []
    for i in range(count):
        pods, gpus = rng.choices(shapes, weights)[0]
        wl = workload(f"{prefix}{i:04d}", pods, gpus)
        wl["metadata"]["creationTimestamp"] = f"2026-12-03T08:{i // 60 % 60:02d}:{i % 60:02d}Z"
        wl["status"] = {
            "admission": {"clusterQueue": "cluster-queue", "podSetAssignments": [
                {"name": "main", "count": pods, "flavors": {keys.GPU: "default-flavor"},
                 "resourceUsage": {keys.GPU: str(pods * gpus)}}]},
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                            "lastTransitionTime": "2026-12-03T08:00:00Z"}],
            "admissionChecks": [{"name": "multikueue-check", "state": "Pending", "message": "",
                                 "lastTransitionTime": "2026-12-03T08:00:00Z"}],
        }
        manager.create(wl, keep_status=True)
        out.append((wl["metadata"]["name"], pods, gpus))
    return out


def check(workloads: list[tuple[str, int, int]], free: dict[str, dict[str, int]],
          nominated: dict[str, list[str]], placements: dict[str, dict[str, Any]]) -> Counter[str]:
    """Replay the nominations in decision order against an independent ledger (see the module doc)."""
    ledger = {c: dict(nodes) for c, nodes in free.items()}
    result: Counter[str] = Counter()
    for name, pods, gpus in workloads:
        slots = {c: sum(f // gpus for f in nodes.values()) for c, nodes in ledger.items()}
        can = {c for c, s in slots.items() if s >= pods}
        chosen = nominated.get(name)
        if can and len(can) < len(ledger):
            result["(of which some cluster could no longer hold it)"] += 1
        if not chosen:
            result["not nominated, none could hold it" if not can else "MISS: not nominated, one could hold it"] += 1
            continue
        first = chosen[0]
        if first in can:
            result["nominated to a cluster that holds it"] += 1
        else:
            result["MISS: nominated where it does not fit" + (", another could" if can else "")] += 1
        for a in placements[name]["nodes"]:
            node = a["node"]
            ledger[first][node] -= a["workers"] * gpus
            if ledger[first][node] < 0:
                result["MISS: node over-committed"] += 1
    return result


def raw_writes(kubeconfig: str, names: list[str], results: Any) -> None:
    """The baseline, in a process of its own as the dispatcher is: the same status writes, 4 in flight, and
    nothing else (no watch, no decision, no Event): how fast the emulated API server takes them right now."""
    from concurrent.futures import ThreadPoolExecutor

    from geosched.kube.client import APPLY_PATCH
    from geosched.kube.multikueue import kueue

    path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads/"
    manager = kueue.ADMISSION_FIELD_MANAGER
    with Kube.open("manager", Path(kubeconfig)) as kube, ThreadPoolExecutor(4) as pool:
        bodies = [kueue.nomination_apply(kube.request("GET", path + n), ["baseline"], manager) for n in names]
        started = time.perf_counter()
        list(pool.map(lambda b: kube.request("PATCH", f"{path}{b['metadata']['name']}/status", body=b,
                                             query={"fieldManager": manager, "force": True},
                                             content_type=APPLY_PATCH), bodies))
        results.put(len(names) / (time.perf_counter() - started))


def run_dispatcher(kubeconfig: str, home: str, exhaustive: bool, warm: Any, stop: Any, results: Any,
                   progress: Any) -> None:
    """The dispatcher in its own process, as in a deployment (`geosched multikueue dispatch`, long-running).
    `exhaustive`: every cluster given to the policy for every decision (the ranking before it was bounded)."""
    import functools
    import logging
    import threading

    from geosched.kube.multikueue import dispatcher, rank

    if exhaustive:  # the dispatcher module's own name for the ranking, in this process only
        vars(dispatcher)["rank"] = functools.partial(_exhaustive, rank.rank)
    logging.basicConfig(level=logging.WARNING)
    settings = replace(DispatcherSettings(), leader_election=LeaderElection(enabled=False))
    started = time.perf_counter()
    with Store(Path(home)) as store, \
            Dispatcher(Kube.open("manager", Path(kubeconfig)), settings, recorder=store.record_placements) as d:
        def warming() -> None:
            while not stop.is_set():
                readings, _ = d.workers.usable()
                if len(readings) == len(WORKERS) and d._context is not None:
                    results.put(("warm", time.perf_counter() - started))
                    warm.set()
                    break
                time.sleep(0.05)
            # Progress for the parent, which must not poll the API servers it is measuring.
            cpu = time.process_time()
            while not stop.is_set():
                count = d.metrics.stats.outcomes["nominated"]
                if count != progress[0]:
                    progress[0], progress[1], progress[2] = count, time.time(), time.process_time() - cpu
                time.sleep(0.01)

        threading.Thread(target=warming, daemon=True).start()
        d.run(stop)
        events = d.events
        results.put(("stats", list(d.metrics.stats.latencies_s), list(d.metrics.stats.decide_s),
                     dict(d.metrics.stats.outcomes), d.metrics.stats.passes,
                     (events.sent, events.dropped) if events is not None else (0, 0)))


def _exhaustive(rank: Any, *args: Any, need: int | None = None, **kw: Any) -> Any:
    return rank(*args, **kw)


@dataclass(frozen=True)
class Run:
    variant: str
    rate: float
    done: int
    seconds: float
    cpu_s: float
    passes: int
    deciding: list[float]
    latencies: list[float]
    outcomes: dict[str, int]
    events: tuple[int, int]
    load: tuple[float, float]
    check: Counter[str]
    first: dict[str, str]  # Workload number -> first nominated cluster


def measure(mc: MultiCluster, home: Path, variant: str, free: dict[str, dict[str, int]], count: int, seed: int,
            settle: float) -> Run:
    """One dispatcher process on `count` fresh pending Workloads; they are deleted again afterwards."""
    ctx = multiprocessing.get_context("spawn")
    manager = mc["manager"]
    warm, stop, results = ctx.Event(), ctx.Event(), ctx.Queue()
    progress = ctx.Array("d", [0.0, 0.0, 0.0])  # Workloads nominated, wall time of the latest, CPU s until then
    proc = ctx.Process(target=run_dispatcher, args=(str(mc.kubeconfig), str(home), variant == "exhaustive", warm, stop,
                                                    results, progress))
    proc.start()
    if not warm.wait(300):
        raise SystemExit("the dispatcher did not read the worker clusters within 300 s")
    print(f"[{variant}] dispatcher warm (lists, {len(WORKERS)} worker clusters read, placement context) in "
          f"{results.get()[1]:.1f}s")
    load_before = os.getloadavg()[0]
    t0 = time.time()
    workloads = seed_workloads(manager, count, random.Random(seed), prefix=f"{variant[0]}")
    last_change, seen = time.time(), -1.0
    while progress[0] < len(workloads) and time.time() - last_change < settle:
        time.sleep(0.1)
        if progress[0] != seen:
            seen, last_change = progress[0], time.time()
    done, last, cpu = int(progress[0]), progress[1], progress[2]
    stop.set()
    _, latencies, deciding, outcomes, passes, events = results.get(timeout=60)
    proc.join(30)
    load_after = os.getloadavg()[0]
    names = {name for name, _, _ in workloads}
    objects = {o["metadata"]["name"]: o for o in manager.list("kueue.x-k8s.io/v1beta2/workloads")
               if o["metadata"]["name"] in names}
    nominated = {n: list(o.get("status", {}).get("nominatedClusterNames") or []) for n, o in objects.items()}
    with Store(Path(home)) as store:
        placements = {p["job"]: p for p in store.placements()}
    for name in names:
        manager.delete("kueue.x-k8s.io/v1beta2/workloads", name, "default")
    return Run(variant, done / (last - t0), done, last - t0, cpu, passes, deciding, latencies, outcomes, events,
               (load_before, load_after), check(workloads, free, nominated, placements),
               {n.split("-")[1][1:]: v[0] for n, v in nominated.items() if v})  # job-<variant><number>-3f9a2


def report(run: Run, baseline: float) -> None:
    print(f"[{run.variant}] load average {run.load[0]:.1f} -> {run.load[1]:.1f}; {run.done} nominated "
          f"{run.seconds:.2f}s after the first was created: {run.rate:.0f} Workloads/s end to end ({run.passes} "
          f"passes), {run.rate / baseline:.0%} of the bare write rate; dispatcher CPU "
          f"{run.cpu_s / max(run.done, 1) * 1000:.1f} ms per Workload")
    for what, values in (("decision alone (Workload read to its write sent)", run.deciding),
                         ("end to end per Workload (read to its status written, queueing included)", run.latencies)):
        if values:
            ordered = sorted(values)
            p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
            print(f"[{run.variant}]   latency, {what}: p50 {statistics.median(ordered) * 1000:.1f} ms, "
                  f"p99 {p99 * 1000:.1f} ms, max {ordered[-1] * 1000:.1f} ms over {len(ordered)}")
    print(f"[{run.variant}]   outcomes {run.outcomes}; Events sent {run.events[0]}, dropped {run.events[1]}")
    for line, count in sorted(run.check.items()):
        print(f"[{run.variant}]   {count:5d}  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=2000, help="nodes per worker cluster")
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--settle", type=float, default=20.0, help="give up after this long without progress")
    parser.add_argument("--variants", default="exhaustive,bounded,exhaustive,bounded",
                        help="dispatcher runs in order, on the same clusters: bounded (the shipped ranking) and "
                             "exhaustive (every cluster scored for every decision); alternated so load drifts "
                             "hit both")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    ctx = multiprocessing.get_context("spawn")
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp, \
            MultiCluster(1 + len(WORKERS), names=["manager", *(w.name for w in WORKERS)],
                         directory=Path(tmp)) as mc:
        started = time.perf_counter()
        for cluster in mc:
            register_kueue_crds(cluster)
        manager = mc["manager"]
        manager.add_namespace("geosched-system")
        manager_setup(mc, "manager", [w.name for w in WORKERS])
        free = {w.name: seed_worker(mc[w.name], w, args.nodes, rng) for w in WORKERS}
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (other work on this machine)")
        print(f"seeded in {time.perf_counter() - started:.1f}s: {len(WORKERS)} workers x {args.nodes} nodes; "
              "free GPUs per worker: " + ", ".join(f"{c} {sum(f.values())}" for c, f in free.items()))

        # Baseline first: the same number of Workloads, written to and deleted before the dispatcher starts.
        base = [name for name, _, _ in seed_workloads(manager, args.workloads, random.Random(args.seed), "base")]
        queue = ctx.Queue()
        writer = ctx.Process(target=raw_writes, args=(str(mc.kubeconfig), base, queue))
        writer.start()
        baseline = queue.get(timeout=600)
        writer.join(30)
        for name in base:
            manager.delete("kueue.x-k8s.io/v1beta2/workloads", name, "default")
        print(f"baseline: the emulated API server takes {baseline:.0f} of these status writes/s from a bare client "
              "(same process layout, 4 in flight, nothing else)")
        for i, variant in enumerate(args.variants.split(",")):
            # The same Workloads (same seed) for every run, so each variant decides the same sequence.
            run = measure(mc, Path(tmp) / f"home-{i}", variant, free, args.workloads, args.seed + 1, args.settle)
            report(run, baseline)
            runs.append(run)
    by: dict[str, list[Run]] = {}
    for run in runs:
        by.setdefault(run.variant, []).append(run)
    if {"bounded", "exhaustive"} <= set(by):
        pairs = list(zip(by["exhaustive"], by["bounded"], strict=False))
        print("same-run ratios, bounded / exhaustive (pairs in run order): " + "; ".join(
            f"throughput x{b.rate / e.rate:.2f}, CPU per Workload x{b.cpu_s / b.done / (e.cpu_s / e.done):.2f}"
            for e, b in pairs))
        same = [sum(b.first.get(k) == v for k, v in e.first.items()) for e, b in pairs]
        print("same first cluster chosen, bounded vs exhaustive: " + ", ".join(
            f"{n} of {len(e.first)}" for n, (e, _) in zip(same, pairs, strict=True)))
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
