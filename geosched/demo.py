"""`geosched demo`: the main job, end to end, on the embedded default fleet. Each stage says what is real."""

from __future__ import annotations

from importlib import resources

from geosched import policies, render
from geosched.default_fleet import default_fleet, default_network
from geosched.documents import parse_job
from geosched.fields import load_document
from geosched.models import Job, Placement, Weights
from geosched.store import Store

DEMO_JOBS = ("train-8.yaml", "train-64.yaml", "train-512.yaml")


def demo_jobs() -> list[Job]:
    folder = resources.files("geosched.data").joinpath("jobs")
    jobs = []
    for name in DEMO_JOBS:
        with resources.as_file(folder.joinpath(name)) as path:
            jobs.append(parse_job(load_document(path), f"examples/jobs/{name}"))
    return jobs


def run_demo(store: Store) -> list[Placement]:
    fleet, network = default_fleet(), default_network()
    gpus = sum(n.gpus for n in fleet.nodes)
    free = sum(n.gpus_free for n in fleet.nodes)
    providers = sorted({r.provider for r in fleet.regions.values()})
    render.out.print(f"[bold]1. Fleet[/] (embedded default, built from the shipped catalog): {len(fleet.nodes)} nodes, "
                     f"{gpus} GPUs ({free} free) in {len(fleet.zones)} zones of {len(fleet.regions)} regions "
                     f"on {', '.join(providers)}")
    render.out.print(f"[bold]2. Network[/] (shipped model, not live probes): {len(network.zone_links)} zone pairs from "
                     f"measured inter-region RTT and throughput, {len(network.node_links)} modelled intra-zone "
                     "node pairs")
    ctx = policies.PlacementContext(fleet, network)
    placed: list[Placement] = []
    render.out.print("[bold]3. Placement[/], zone first, score second, against every baseline:")
    for job in demo_jobs():
        rows = []
        for name in policies.names():
            result = policies.place(job, ctx, name, Weights())
            if isinstance(result, Placement):
                s = result.score
                rows.append({"policy": name, "cluster": result.cluster, "zones": len(result.zones),
                             "step ms": s.step_ms, "vs ideal": s.network, "$/h": s.usd_per_hour,
                             "kgCO2e/h": s.gco2e_per_hour / 1000})
                if name == policies.DEFAULT_POLICY:
                    placed.append(result)
                    store.record_placement(result)
            else:
                rows.append({"policy": name, "cluster": "no fit", "zones": 0, "step ms": None, "vs ideal": None,
                             "$/h": None, "kgCO2e/h": None})
        render.table(f"{job.name}: {job.workers} x {job.gpus_per_worker} {job.gpu or 'GPU'}", rows)
    for p in placed:
        render.out.print(f"  {p.job.name} -> {p.cluster} {', '.join(p.zones)}: step {p.score.step_ms:.0f} ms, "
                         f"${p.score.usd_per_hour:,.2f}/h")
    render.out.print(f"[bold]4. Recorded[/] {len(placed)} placements in {store.path} (`geosched placements`)")
    render.out.print("Not in this build yet: live probes, provisioning, Kubernetes hand-off, reports "
                     "(see the open issues).")
    return placed
