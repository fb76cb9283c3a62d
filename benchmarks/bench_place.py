"""Decision latency and decision quality of `zone-first` (run by hand: python benchmarks/bench_place.py).

1. Latency on a synthetic fleet of 10,000 nodes in 200 zones of 40 regions, for 8-, 64- and 512-GPU gangs:
   p50/p99 per decision (explain=False, as the simulator decides) and with every candidate explained (as
   `place --explain` and the JSON output), and the speed-up against a straightforward per-node Python loop
   doing the same single-zone search (ring model, tolerance band, best fit) in the same run.
2. Quality against the exact solver (`geosched.policies.exact`, every node set under the same objective and
   rule) on small random instances (8-18 nodes) with slow, 1%-loss and 3-5%-loss nodes, about half of them
   with a multi-zone optimum: the gap in total score, and the gap to the lowest total of any assignment.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from geosched.core.catalog import gpu_power
from geosched.core.comm import comm_ms
from geosched.core.models import (
    Fleet,
    Job,
    LinkStats,
    NetworkView,
    Node,
    NodeState,
    Placement,
    Region,
    Weights,
    Zone,
    pair_key,
)
from geosched.policies import PlacementContext, job_view, place
from geosched.policies.exact import solve_exact

# The hand-made fleets are the tests' (tests/handmade.py, not in the product wheel): run as `python
# benchmarks/bench_place.py` from a checkout, the checkout's root is not on the path by itself.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.handmade import LOSSY, SLOW, degrade, fleet, network, node

GPUS = (("H100", 98.3), ("H100", 98.3), ("A100", 32.8), ("L4", 14.0))


def synthetic(nodes: int, zones: int, regions: int, seed: int = 1) -> tuple[Fleet, NetworkView]:
    rng = random.Random(seed)
    per_region = zones // regions
    coords = {r: (rng.uniform(-60, 60), rng.uniform(-180, 180)) for r in range(regions)}
    zone_list = [Zone(f"r{r}-z{z}", "synth", f"r{r}") for r in range(regions) for z in range(per_region)]
    region_objs = {f"synth:r{r}": Region("synth", f"r{r}", rng.uniform(20, 700), 1.1) for r in range(regions)}
    node_list = []
    for i in range(nodes):
        zone = zone_list[rng.randrange(len(zone_list))]
        gpu, price = GPUS[rng.randrange(len(GPUS))]
        free = 8 if rng.random() > 0.3 else rng.choice([0, 2, 4, 6])
        node_list.append(Node(f"n{i:05d}", "synth", zone.region, zone.name, "synth.8x", gpu, 8, free,
                              price * rng.uniform(0.9, 1.2), None, f"k8s-{zone.region}"))
    links: dict[tuple[str, str], LinkStats] = {}
    for za in zone_list:
        for zb in zone_list:
            if za.name > zb.name:
                continue
            if za.name == zb.name:
                link = LinkStats(0.2, 0.4, 0.0, 50.0)
            elif za.region == zb.region:
                link = LinkStats(1.0, 1.6, 0.0, 25.0)
            else:
                (la, oa), (lb, ob) = coords[int(za.region[1:])], coords[int(zb.region[1:])]
                km = math.dist((la, oa), (lb, ob)) * 111
                link = LinkStats(2 + km / 100, 3 + km / 90, 0.0, max(0.5, 10 - km / 2000))
            links[pair_key(za.name, zb.name)] = link
    by_zone: dict[str, list[Node]] = {}
    for n in node_list:
        by_zone.setdefault(n.zone, []).append(n)
    node_links: dict[tuple[str, str], LinkStats] = {}
    for members in by_zone.values():
        for k, a in enumerate(members):
            for step in (1, 2):
                if len(members) > step:
                    b = members[(k + step) % len(members)]
                    bad = rng.random() < 0.04
                    node_links[pair_key(a.name, b.name)] = (LinkStats(2.5, 6.0, 0.0, 4.0) if bad else
                                                            LinkStats(0.2 * rng.uniform(0.9, 1.15), 0.4, 0.0, 48.0))
    zones_map = {z.name: z for z in zone_list}
    return Fleet(region_objs, zones_map, tuple(node_list), gpu_power()), NetworkView(links, node_links)


def naive_zone_first(fleet: Fleet, network: NetworkView, job: Job, weights: Weights) -> float:
    """The same single-zone search as zone-first, written as a plain loop over `Node` records."""
    summaries = network.node_summaries({n.name: n.zone for n in fleet.nodes})
    utilisation = job.profile.utilisation
    eligible = []
    for n in fleet.nodes:
        if n.state is not NodeState.READY or n.gpus_free < job.gpus_per_worker or (job.gpu and n.gpu != job.gpu):
            continue
        if n.price_ondemand is None:
            continue
        own = network.zone_link(n.zone, n.zone) or LinkStats(300.0, 300.0, 0.0, 1.0)
        summary = summaries.get(n.name)
        link = own.worst(summary) if summary else own
        region = fleet.regions[n.region_key]
        power = fleet.gpu_power[n.gpu]
        carbon = power.watts(utilisation) / 1000 * region.pue * region.grid_gco2e_per_kwh
        eligible.append((n, link, n.price_ondemand / n.gpus, carbon, n.gpus_free // job.gpus_per_worker))
    price_ref = statistics.median(e[2] for e in eligible)
    carbon_ref = statistics.median(e[3] for e in eligible)
    if max(e[4] for e in eligible) >= job.workers:
        ideal = job.profile.compute_ms
    else:
        links = [e[1] for e in eligible] + list(network.node_links.values())
        ideal = job.profile.compute_ms + comm_ms(job.workers, job.profile.message_mb,
                                                 min(x.rtt_p50_ms for x in links), min(x.loss for x in links),
                                                 max(x.throughput_gbps for x in links))
    cells: dict[tuple[str | None, str], list[tuple[float, str, int, LinkStats, float, float, Node]]] = {}
    for n, link, price, carbon, cap in eligible:
        step = job.profile.compute_ms + comm_ms(job.workers, job.profile.message_mb, link.rtt_p50_ms, link.loss,
                                                link.throughput_gbps)
        score = weights.network * step / ideal + weights.cost * price / price_ref + weights.carbon * carbon / carbon_ref
        cells.setdefault((n.cluster, n.zone), []).append((score, n.name, cap, link, price, carbon, n))
    options: list[tuple[float, int, int, float]] = []  # (total, pool's free workers left, whole nodes left, $/h)
    pool_room: dict[str | None, int] = {}
    for (cluster, _), members in cells.items():
        pool_room[cluster] = pool_room.get(cluster, 0) + sum(m[2] for m in members)
    for (cluster, _), members in cells.items():
        if sum(m[2] for m in members) < job.workers:
            continue
        members.sort(key=lambda m: (m[0], m[6].gpus_free, m[1]))
        need, usd, gco2e, taken = job.workers, 0.0, 0.0, []
        for _, _, cap, link, price, carbon, n in members:
            take = min(cap, need)
            need -= take
            taken.append((link, n))
            usd += take * job.gpus_per_worker * price
            gco2e += take * job.gpus_per_worker * carbon
            if need == 0:
                break
        # The ring: best-linked node first, second best last, the rest between; slowest hop bounds the step.
        ranked = sorted(taken, key=lambda t: (comm_ms(job.workers, job.profile.message_mb, t[0].rtt_p50_ms,
                                                      t[0].loss, t[0].throughput_gbps), t[1].name))
        ring = [ranked[0][1], *(t[1] for t in ranked[2:]), *(t[1] for t in ranked[1:2])]
        comm = 0.0
        for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
            if a is not b:
                hop = network.link(a, b, summaries)
                assert hop is not None
                comm = max(comm, comm_ms(job.workers, job.profile.message_mb, hop.rtt_p50_ms, hop.loss,
                                         hop.throughput_gbps))
        total = (weights.network * (job.profile.compute_ms + comm) / ideal
                 + weights.cost * usd / (job.gpus * price_ref) + weights.carbon * gco2e / (job.gpus * carbon_ref))
        whole = sum(m[6].gpus_free == m[6].gpus for m in members) - sum(n.gpus_free == n.gpus for _, n in taken)
        options.append((total, pool_room[cluster] - job.workers, whole, usd))
    if not options:
        return math.inf
    lowest = min(o[0] for o in options)
    band = [o for o in options if o[0] <= lowest * (1 + weights.zone_tolerance) + 1e-12]
    return min(band, key=lambda o: (o[1], o[2], o[0], o[3]))[0]


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def latency(repeats: int) -> None:
    t0 = time.perf_counter()
    f, net = synthetic(10_000, 200, 40)
    t1 = time.perf_counter()
    ctx = PlacementContext(f, net)
    t2 = time.perf_counter()
    print(f"synthetic fleet: {len(f.nodes)} nodes, {len(f.zones)} zones, {len(f.regions)} regions "
          f"(built in {t1 - t0:.2f} s; context compiled once in {(t2 - t1) * 1000:.0f} ms)")
    weights = Weights()
    print(f"{'gang':>10} {'p50 ms':>8} {'p99 ms':>8} {'explain p50':>12} {'explain p99':>12} {'naive p50 ms':>13} "
          f"{'speed-up':>9}  zones")
    for workers in (1, 8, 64):
        job = Job(f"bench-{workers}", workers, 8, gpu="H100")
        times: dict[bool, list[float]] = {False: [], True: []}
        naive_times = []
        result = place(job, ctx, weights=weights)
        for _ in range(repeats):
            for explain in (False, True):
                t = time.perf_counter()
                result = place(job, ctx, weights=weights, explain=explain)
                times[explain].append((time.perf_counter() - t) * 1000)
        for _ in range(max(3, repeats // 20)):
            t = time.perf_counter()
            naive_best = naive_zone_first(f, net, job, weights)
            naive_times.append((time.perf_counter() - t) * 1000)
        zones = len(result.zones) if isinstance(result, Placement) else 0
        if isinstance(result, Placement) and zones == 1:
            assert abs(result.score.total - naive_best) < 1e-9, (result.score.total, naive_best)
        p50, naive = percentile(times[False], 50), percentile(naive_times, 50)
        print(f"{workers * 8:>6} GPU {p50:8.2f} {percentile(times[False], 99):8.2f} "
              f"{percentile(times[True], 50):12.2f} {percentile(times[True], 99):12.2f} {naive:13.1f} "
              f"{naive / p50:8.0f}x  {zones}")


# A NIC losing 3-5% of its packets: the degradation that used to keep a gang in one zone.
DEGRADED = (LinkStats(0.3, 0.6, 0.03, 40.0), LinkStats(0.3, 0.6, 0.05, 40.0))


def quality_instance(seed: int) -> tuple[PlacementContext, Job, Weights]:
    """A small random fleet of 5 zones in 2 regions where zones are often too small or degraded for the gang:
    slow, 1%-loss and 3-5%-loss nodes, so the optimum is often multi-zone."""
    rng = np.random.default_rng(seed)
    zones = [("za", "r1"), ("zb", "r1"), ("zc", "r1"), ("zd", "r2"), ("ze", "r2")]
    nodes = []
    for k in range(int(rng.integers(8, 19))):
        z, r = zones[int(rng.integers(len(zones)))]
        nodes.append(node(f"n{k}", z, r, free=int(rng.choice([0, 2, 4, 8, 8])),
                          price=float(rng.choice([8, 10, 12, 16]))))
    kinds = (SLOW, LOSSY, *DEGRADED)
    bad = {f"n{k}": kinds[int(rng.integers(len(kinds)))]
           for k in rng.choice(len(nodes), int(rng.integers(0, 5)), replace=False)}
    f = fleet(nodes, {"r1": 400.0, "r2": float(rng.choice([50, 400, 700]))})
    ctx = PlacementContext(f, network(f, degrade(f, bad)))
    job = Job("q", int(rng.integers(2, 7)), int(rng.choice([4, 8])))
    weights = Weights(1.0, float(rng.choice([0.0, 0.1, 0.5])), float(rng.choice([0.0, 0.3])))
    return ctx, job, weights


def quality(instances: int) -> None:
    gaps, to_lowest, fewer, multi, degraded, solved = [], [], 0, 0, 0, 0
    for seed in range(instances):
        ctx, job, weights = quality_instance(seed)
        heuristic = place(job, ctx, weights=weights)
        exact = solve_exact(job_view(ctx, job, weights))
        if exact is None or not isinstance(heuristic, Placement):
            assert (exact is None) == (not isinstance(heuristic, Placement))
            continue
        solved += 1
        multi += exact.zones > 1
        degraded += bool(ctx.node_loss.max() > 0 or ctx.node_rtt.max() > 0.2)
        fewer += len(heuristic.zones) < exact.zones
        gaps.append(heuristic.score.total / exact.score.total - 1)
        to_lowest.append(heuristic.score.total / exact.lowest_total - 1)
    print(f"quality on {solved} solvable instances (8-18 nodes, 5 zones, 2 regions; {degraded} with degraded "
          f"nodes, {multi} with a multi-zone optimum): gap to the exact optimum under the same rule: mean "
          f"{statistics.mean(gaps) * 100:.3f}%, p99 {percentile(gaps, 99) * 100:.3f}%, max {max(gaps) * 100:.3f}%, "
          f"optimal in {sum(abs(g) < 1e-9 for g in gaps)}; fewer zones than the optimum in {fewer}; "
          f"above the lowest total of any assignment: max {max(to_lowest) * 100:.3f}% (the zone tolerance allows "
          f"{Weights().zone_tolerance:.0%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--instances", type=int, default=300)
    args = parser.parse_args()
    latency(args.repeats)
    quality(args.instances)


if __name__ == "__main__":
    main()
