"""Probe runs on a 24-host, 6-zone testbed: full mesh against the sampled plan, and a projection to 1,000 nodes.

Run by hand as root (it builds a network-namespace testbed; see tests/testbed/README.md):

    python benchmarks/bench_probes.py [--hosts-per-zone 4] [--no-throughput] [--json out.json]

1. Cost of each plan: wall time per phase, controller CPU, pairs, SSH connections per host (from the
   pool's counter and, independently, from every sshd's log of accepted logins from the controller).
2. Accuracy of the view `place` reads (Store.network_view(), measured or estimated per node pair) against
   the testbed's ground truth, over every node pair.
3. Targets: sampled error <= 2x full-mesh error at <= 1/4 of its pairs; one connection per host per run.
4. Projection to a 1,000-node, 50-zone fleet from the measured per-pair and per-connection costs:

       T_connect = max(N x cpu_conn, ceil(N / C) x t_conn)          one event loop, C connections at once
       T_echo    = max(P x cpu_echo, ceil(P / C) x t_echo)          P = N + k Z(Z-1)/2 sampled pairs
       T_tput    = ceil(Zp / min(C, Z(Z+1)/2)) x t_tput             Zp zone pairs tested this run

   cpu_* is controller CPU per connection / per echo run, t_* the median wall time of one (measured here,
   with sshd, ping, iperf3 and the delay stage all on this machine, so they are upper bounds).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from geosched.core.models import NetworkView, pair_key
from geosched.files.inventory import Inventory, load_inventory
from geosched.probes import service
from geosched.probes.engine import PlanOptions
from geosched.probes.plan import PlanNode, full_mesh, make_plan, sampled
from geosched.probes.results import RunReport
from geosched.probes.settings import Kind, PlanKind, ProbeSettings
from geosched.store.db import Store
from tests.testbed import Link, Testbed, missing_requirements

# Six zones in four regions; one-way delays in ms, roughly cloud geography.
ZONES = ("use1-a", "use1-b", "usw2-a", "euw1-a", "euc1-a", "apne1-a")
REGION = {"use1-a": "us-east-1", "use1-b": "us-east-1", "usw2-a": "us-west-2", "euw1-a": "eu-west-1",
          "euc1-a": "eu-central-1", "apne1-a": "ap-northeast-1"}
ONE_WAY_MS = {
    ("use1-a", "use1-b"): 0.6, ("use1-a", "usw2-a"): 31.0, ("use1-b", "usw2-a"): 31.5,
    ("use1-a", "euw1-a"): 38.0, ("use1-b", "euw1-a"): 38.5, ("use1-a", "euc1-a"): 45.0, ("use1-b", "euc1-a"): 45.5,
    ("usw2-a", "euw1-a"): 68.0, ("usw2-a", "euc1-a"): 75.0, ("euw1-a", "euc1-a"): 12.0,
    ("apne1-a", "use1-a"): 80.0, ("apne1-a", "use1-b"): 80.5, ("apne1-a", "usw2-a"): 50.0,
    ("apne1-a", "euw1-a"): 110.0, ("apne1-a", "euc1-a"): 115.0,
}
LOSSY = {("apne1-a", "euw1-a"): 0.01, ("apne1-a", "euc1-a"): 0.01}


def links() -> dict[tuple[str, str], Link]:
    out = {}
    for (a, b), delay in ONE_WAY_MS.items():
        same_region = REGION[a] == REGION[b]
        out[(a, b)] = Link(delay, loss=LOSSY.get((a, b), 0.0), rate_mbit=200.0 if same_region else 50.0)
    for z in ZONES:
        out[(z, z)] = Link(0.2, rate_mbit=300.0)
    return out


@dataclass
class PlanResult:
    plan: str
    pairs: int
    report: RunReport
    wall_s: float
    logins: dict[str, int]
    abs_err_ms: list[float]
    rel_err: list[float]
    direct_rel_err: list[float]


def write_inventory(tb: Testbed, path: Path) -> Inventory:
    regions = sorted(set(REGION.values()))
    doc = {"regions": [{"provider": "onprem", "name": r, "grid_gco2e_per_kwh": 300, "pue": 1.2} for r in regions],
           "nodes": [{"name": h.name, "address": h.address, "port": h.port, "user": h.user, "key": str(h.key_path),
                      "host_key": h.host_key, "zone": h.zone, "region": REGION[h.zone], "gpu": "A100", "gpus": 8}
                     for h in tb.hosts.values()]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_inventory(path)


def logins_from(tb: Testbed, source: str) -> dict[str, int]:
    assert tb.workdir is not None
    pattern = re.compile(r"Accepted publickey for \S+ from (\S+) port")
    out = {}
    for i, name in enumerate(tb.hosts):
        log = tb.workdir / f"h{i}" / "sshd.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        out[name] = sum(1 for m in pattern.finditer(text) if m.group(1) == source)
    return out


def accuracy(tb: Testbed, inventory: Inventory, view: NetworkView) -> tuple[list[float], list[float]]:
    nodes = service.inventory_nodes(inventory)
    abs_err, rel_err = [], []
    summaries = view.node_summaries({n.name: n.zone for n in nodes})
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            link = view.link(a, b, summaries)
            truth = tb.rtt_ms(a.zone, b.zone)
            estimate = link.rtt_p50_ms if link is not None else math.inf
            abs_err.append(abs(estimate - truth))
            rel_err.append(abs(estimate - truth) / truth)
    return abs_err, rel_err


async def run_plan(tb: Testbed, inventory: Inventory, home: Path, kind: PlanKind, settings: ProbeSettings,
                   run: int = 0) -> PlanResult:
    before = logins_from(tb, tb.controller_address)
    started = time.monotonic()
    with Store(home) as store:
        outcome = await service.run_async(store, inventory.targets, settings, PlanOptions(kind=kind, run=run),
                                          known_hosts=[])
        view = store.network_view()
    wall = time.monotonic() - started
    after = logins_from(tb, tb.controller_address)
    abs_err, rel_err = accuracy(tb, inventory, view)
    zone_of = {t.name: t.zone for t in inventory.targets}
    direct = [abs(r.echo.p50_ms - tb.rtt_ms(zone_of[r.src], zone_of[r.dst])) / tb.rtt_ms(zone_of[r.src], zone_of[r.dst])
              for r in outcome.report.echoes if r.echo.received]
    return PlanResult(kind.value, len(outcome.report.plan.echo_pairs), outcome.report, wall,
                      {n: after[n] - before[n] for n in after}, abs_err, rel_err, direct)


def describe(r: PlanResult) -> dict[str, Any]:
    rep = r.report
    conns = list(rep.connections.values())
    return {
        "plan": r.plan, "pairs": r.pairs, "wall_s": round(r.wall_s, 2),
        "phases_s": {k: round(v, 2) for k, v in rep.phase_s.items()},
        "cpu_s": {k: round(v, 3) for k, v in rep.phase_cpu_s.items()},
        "failures": len(rep.failures),
        "ssh_connections_per_host": {"min": min(conns), "max": max(conns)} if conns else {},
        "sshd_logins_per_host": {"min": min(r.logins.values()), "max": max(r.logins.values())},
        "view_abs_err_ms": {"mean": round(statistics.fmean(r.abs_err_ms), 3),
                            "p95": round(_pct(r.abs_err_ms, 95), 3), "max": round(max(r.abs_err_ms), 3)},
        "view_rel_err": {"median": round(statistics.median(r.rel_err), 4), "p95": round(_pct(r.rel_err, 95), 4)},
        "direct_rel_err_median": round(statistics.median(r.direct_rel_err), 4) if r.direct_rel_err else None,
        "median_task_s": {k: round(statistics.median(v), 3) for k, v in rep.durations_s.items()},
    }


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def projection(costs: dict[str, float], nodes: int = 1000, zones: int = 50, k: int = 2,
               concurrency: Sequence[int] = (32, 64, 128, 256),
               tput_zone_pairs: int | None = None) -> list[dict[str, Any]]:
    pairs = nodes + k * zones * (zones - 1) // 2
    zone_pairs = zones * (zones + 1) // 2 if tput_zone_pairs is None else tput_zone_pairs
    rows = []
    for c in concurrency:
        t_connect = max(nodes * costs["cpu_conn"], math.ceil(nodes / c) * costs["t_conn"])
        t_echo = max(pairs * costs["cpu_echo"], math.ceil(pairs / c) * costs["t_echo"])
        row = {"concurrency": c, "pairs": pairs, "connect_s": round(t_connect, 1), "echo_s": round(t_echo, 1),
               "rtt_loss_total_s": round(t_connect + t_echo, 1),
               "rtt_loss_within_60s": t_connect + t_echo <= 60.0}
        if "t_tput" in costs:
            t_tput = math.ceil(zone_pairs / min(c, zone_pairs)) * costs["t_tput"]
            row |= {"throughput_zone_pairs": zone_pairs, "throughput_s": round(t_tput, 1),
                    "all_within_60s": t_connect + t_echo + t_tput <= 60.0}
        rows.append(row)
    return rows


def rotation_coverage(nodes: Sequence[PlanNode], k: int = 2, runs: int = 4) -> list[float]:
    """Share of nodes that have represented their zone towards another zone after 1..runs sampled runs
    (every node is in its zone's ring each run anyway)."""
    zone_of = {n.name: n.zone for n in nodes}
    seen: set[str] = set()
    out = []
    for run in range(runs):
        for a, b in sampled(nodes, run, k):
            if zone_of[a] != zone_of[b]:
                seen |= {a, b}
        out.append(len(seen) / len(nodes))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--hosts-per-zone", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--ping-count", type=int, default=20)
    parser.add_argument("--no-throughput", action="store_true", help="skip the throughput run")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    missing = missing_requirements()
    if missing:
        print("testbed unavailable: " + "; ".join(missing), file=sys.stderr)
        return 2
    echo = ProbeSettings(kinds=frozenset({Kind.RTT, Kind.LOSS}), concurrency=args.concurrency,
                         ping_count=args.ping_count, deadline_s=600.0, connect_timeout_s=20.0)
    figures: dict[str, Any] = {"hosts": len(ZONES) * args.hosts_per_zone, "zones": len(ZONES)}
    with tempfile.TemporaryDirectory(prefix="bench-probes-") as tmp:
        started = time.monotonic()
        with Testbed(zones=dict.fromkeys(ZONES, args.hosts_per_zone), links=links(), seed=5) as tb:
            figures["testbed_setup_s"] = round(time.monotonic() - started, 2)
            inventory = write_inventory(tb, Path(tmp) / "inventory.yaml")
            full = asyncio.run(run_plan(tb, inventory, Path(tmp) / "full", PlanKind.FULL, echo))
            samp = asyncio.run(run_plan(tb, inventory, Path(tmp) / "sampled", PlanKind.SAMPLED, echo))
            tput = None
            if not args.no_throughput:
                both = ProbeSettings(concurrency=args.concurrency, ping_count=args.ping_count, deadline_s=600.0,
                                     connect_timeout_s=20.0, throughput_seconds=3, throughput_omit_s=1)
                tput = asyncio.run(run_plan(tb, inventory, Path(tmp) / "tput", PlanKind.SAMPLED, both, run=1))
    figures["full"], figures["sampled"] = describe(full), describe(samp)
    if tput is not None:
        figures["sampled_with_throughput"] = describe(tput)
        figures["sampled_with_throughput"]["throughput_tests"] = len(tput.report.throughputs)

    n = len(inventory.targets)
    nodes = [PlanNode(t.name, t.zone) for t in inventory.targets]
    ratio = len(sampled(nodes, 0)) / len(full_mesh(nodes))
    err_ratio = statistics.fmean(samp.abs_err_ms) / max(statistics.fmean(full.abs_err_ms), 1e-9)
    one_conn = all(set(r.report.connections.values()) == {1} and set(r.logins.values()) == {1} for r in (full, samp))
    figures["targets"] = {
        "sampled_pairs_over_full": round(ratio, 3), "pairs_target": "<= 0.25", "pairs_ok": ratio <= 0.25,
        "sampled_err_over_full_err": round(err_ratio, 3), "accuracy_target": "<= 2.0", "accuracy_ok": err_ratio <= 2.0,
        "one_connection_per_host": one_conn,
    }
    costs = {
        "cpu_conn": samp.report.phase_cpu_s["connect"] / n,
        "t_conn": statistics.median(samp.report.durations_s["connect"]),
        "cpu_echo": samp.report.phase_cpu_s["echo"] / len(samp.report.echoes),
        "t_echo": statistics.median(samp.report.durations_s["echo"]),
    }
    if tput is not None and tput.report.durations_s.get("throughput"):
        costs["t_tput"] = statistics.median(tput.report.durations_s["throughput"])
    figures["measured_costs"] = {k: round(v, 4) for k, v in costs.items()}
    figures["projection_1000_nodes_50_zones"] = projection(costs)
    figures["projection_throughput_window_300"] = projection(costs, tput_zone_pairs=300) if "t_tput" in costs else []
    figures["rotation_node_coverage"] = [round(x, 3) for x in rotation_coverage(nodes)]
    big = [PlanNode(f"z{i % 50:02d}-n{i:04d}", f"z{i % 50:02d}") for i in range(1000)]
    mark = time.perf_counter()
    big_plan = make_plan(big, PlanKind.SAMPLED)
    figures["plan_1000_nodes_50_zones"] = {
        "echo_pairs": len(big_plan.echo_pairs), "throughput_pairs": len(big_plan.throughput_pairs),
        "full_mesh_pairs": 1000 * 999 // 2, "plan_ms": round((time.perf_counter() - mark) * 1000, 1),
        "rotation_node_coverage": [round(x, 3) for x in rotation_coverage(big)]}
    check = make_plan(nodes, PlanKind.SAMPLED)
    figures["sampled_plan_pairs"] = {"echo": len(check.echo_pairs), "throughput": len(check.throughput_pairs),
                                     "full_mesh": len(full_mesh(nodes)),
                                     "pairs_with_direct_measure": len({pair_key(*p) for p in check.echo_pairs})}
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if all(figures["targets"][k] for k in ("pairs_ok", "accuracy_ok", "one_connection_per_host")) else 1


if __name__ == "__main__":
    sys.exit(main())
