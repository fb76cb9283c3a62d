"""The demo's offline stages: the embedded fleet and network, placement against every baseline, the Kueue
hand-off, and a trace replay. Each prints what it did and what is real about it."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from geosched import policies
from geosched.console import render
from geosched.console.lists import SIMULATION_RESULTS
from geosched.console.output import transposed_table
from geosched.core.models import Fleet, Job, NetworkView, Placement, Weights
from geosched.files.documents import job_to_dict, parse_job
from geosched.files.gate import Kind, load_document
from geosched.files.writes import write_file
from geosched.kube.config import Backend, ClusterConfig
from geosched.kube.jobinput import parse_job_object
from geosched.kube.render import RenderOptions, to_yaml
from geosched.kube.render import render as render_manifests
from geosched.policies import PlacementContext
from geosched.simulate import read_trace, simulate
from geosched.simulate.engine import SimOptions
from geosched.simulate.fleets import GAVEL_NODES, sized_fleet
from geosched.simulate.report import rows as policy_rows

DEMO_JOBS = ("train-8.yaml", "train-64.yaml", "train-512.yaml")
DEMO_TRACE = "seed0_b436b2.trace"
TRACE_CLUSTER, TRACE_GPU = "eks-us-east-1", "H100"
TRACE_POLICIES = ("zone-first", "spread", "pack")


def demo_jobs() -> list[Job]:
    folder = resources.files("geosched.data").joinpath("jobs")
    jobs = []
    for name in DEMO_JOBS:
        with resources.as_file(folder.joinpath(name)) as path:
            jobs.append(parse_job(load_document(path, Kind.JOB), f"examples/jobs/{name}"))
    return jobs


def show_fleet(n: int, fleet: Fleet) -> None:
    gpus = sum(node.gpus for node in fleet.nodes)
    free = sum(node.gpus_free for node in fleet.nodes)
    providers = sorted({r.provider for r in fleet.regions.values()})
    render.out.print(f"[bold]{n}. Fleet[/] (embedded default, built from the shipped catalog): {len(fleet.nodes)} "
                     f"nodes, {gpus} GPUs ({free} free) in {len(fleet.zones)} zones of {len(fleet.regions)} regions "
                     f"on {', '.join(providers)}", markup=True)


def show_network(n: int, network: NetworkView) -> None:
    render.out.print(f"[bold]{n}. Network[/] (the shipped model, not live probes: `geosched probe run` measures real "
                     f"nodes): {len(network.zone_links)} zone pairs from measured inter-region RTT and throughput, "
                     f"{len(network.node_links)} modelled intra-zone node pairs", markup=True)


def place(n: int, ctx: PlacementContext) -> list[Placement]:
    """Every demo job under every policy; the default policy's placements are returned (the demo records them in
    its own store, never the user's)."""
    placed: list[Placement] = []
    render.out.print(f"[bold]{n}. Placement[/], zone first, score second, against every baseline:", markup=True)
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
            else:
                rows.append({"policy": name, "cluster": "no fit", "zones": 0, "step ms": None, "vs ideal": None,
                             "$/h": None, "kgCO2e/h": None})
        render.table(f"{job.name}: {job.workers} x {job.gpus_per_worker} {job.gpu or 'GPU'}", rows)
    for p in placed:
        render.out.print(f"  {p.job.name} -> {p.cluster} {', '.join(p.zones)}: step {p.score.step_ms:.0f} ms, "
                         f"${p.score.usd_per_hour:,.2f}/h")
    return placed


def handoff(n: int, placed: list[Placement], fleet: Fleet, out: Path) -> None:
    """Each placed job as the manifests its cluster would get (Kueue backend): written, not applied."""
    now = datetime.now(UTC).replace(microsecond=0)
    written = []
    for p in placed:
        job = parse_job_object(job_to_dict(p.job), f"examples/jobs ({p.job.name})")
        cluster = ClusterConfig(name=p.cluster or "default", context=p.cluster or "default", backend=Backend.KUEUE,
                                queue="training")
        manifests = render_manifests(job, p, cluster, RenderOptions(now=now, nodes=fleet.by_name))
        path = out / cluster.name / p.job.namespace / f"{p.job.name}.yaml"
        write_file(path, to_yaml(manifests))
        kinds = ", ".join(m["kind"] for m in manifests)
        written.append(f"  {path} ({kinds})")
    render.out.print(f"[bold]{n}. Hand-off[/] (rendered for the chosen clusters with the Kueue backend; not applied: "
                     "no cluster here, `geosched submit` applies them):", markup=True)
    for line in written:
        render.out.print(line, markup=False)


def replay(n: int, fleet: Fleet, network: NetworkView) -> None:
    """A shipped Gavel trace replayed on a fleet of the size it was written for, under three policies."""
    small = sized_fleet(fleet, GAVEL_NODES, TRACE_CLUSTER, TRACE_GPU)
    folder = resources.files("geosched.data").joinpath("gavel")
    with resources.as_file(folder.joinpath(DEMO_TRACE)) as path:
        jobs = list(read_trace(path).jobs)
    ctx = PlacementContext(small, network)
    results = simulate(jobs, ctx, list(TRACE_POLICIES), options=SimOptions(gpu=TRACE_GPU))
    render.out.print(f"[bold]{n}. Trace replay[/] (simulated): Gavel trace {DEMO_TRACE}, {len(jobs)} jobs, on "
                     f"{len(small.nodes)} x 8 {TRACE_GPU} over {len(small.zones)} zones of {TRACE_CLUSTER}:",
                     markup=True)
    transposed_table("policy comparison", SIMULATION_RESULTS, policy_rows(results), "policy")
    render.out.print("  This trace has many multi-node gangs; on the other shipped traces zone-first's gain over "
                     "spread and pack is smaller, and on one it trails pack: `python benchmarks/bench_simulate.py` "
                     "compares all five.")
