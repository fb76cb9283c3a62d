"""`geosched simulate`: read the trace (or generate a workload) and the snapshot, replay, print. The CLI only
parses arguments.

Outside geosched/simulate/ because it does I/O (snapshot files, the store, the console): the replay itself stays pure.

    run_simulate_command(trace, ["zone-first", "spread"], output="table", plot=Path("out.svg"))
    run_simulate_command(None, ["zone-first", "tas"], workload=Workload(jobs=500), fleet=Path(GEO_FLEET))

`--fleet geo` (when no file of that name exists) is the shipped geo fleet (`fleets.geo_fleet`: 3 clusters,
3 regions, 8 zones, 300 nodes, 3% degraded NICs, two slow zone pairs).

Bad rows: strict (default) stops at the first with exit 2; lenient (`strict=False`) prints each on stderr
and replays the rest. Skipped rows (jobs that never ran, CPU-only pods) are counted on stderr, the first
few shown, in both modes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from geosched import policies
from geosched.console import render
from geosched.console.lists import SIMULATION_RESULTS
from geosched.console.options import Workload
from geosched.console.output import Output, emit_document, transposed_table
from geosched.core.errors import InputError
from geosched.core.models import HOUR_S, Fleet, Weights
from geosched.grid.carbon import decision_time, forecast_notes, grid_history, load_grid, series_start
from geosched.grid.forecast import GridHistory
from geosched.grid.formats import Basis
from geosched.plots.files import plot_format
from geosched.simulate import report, shipped
from geosched.simulate.engine import SimOptions, contexts_by_hour, simulate
from geosched.simulate.fleets import geo_fleet
from geosched.simulate.llm import CLUSTERS, llm_trace
from geosched.simulate.metrics import PolicyResult

if TYPE_CHECKING:  # pydantic is imported when a document is printed, not by `geosched -h`
    from geosched.files.decl.simulation import SimulationReportDoc
from geosched.simulate.shifting import Flexibility, replay
from geosched.simulate.traces import FORMATS, TraceRead, read_trace
from geosched.store.sources import Snapshot, resolve

SHOWN_SKIPPED = 5
ANY_GPU = "any"
GEO_FLEET = "geo"
WORKLOADS = ("llm",)

__all__ = ["GEO_FLEET", "Workload", "run_simulate_command"]


def _shipped_or_file(trace: Path) -> Path:
    """A file that exists is read as given; a bare name that is not a file names a shipped trace."""
    if trace.parent != Path("."):
        return trace
    try:
        exists = trace.exists()
    except OSError:  # a name the OS refuses (too long): reading it says so in one line
        return trace
    if exists:
        return trace
    found = shipped.resolve(trace.name)
    if found is None:
        raise InputError(str(trace), "", f"no such file, nor a shipped trace (shipped: {', '.join(shipped.names())})")
    return found


def run_simulate_command(
    trace: Path | None,
    policy_names: Sequence[str],
    *,
    workload: Workload | None = None,
    fleet: Path | None = None,
    network: Path | None = None,
    snapshot: Path | None = None,
    trace_format: str | None = None,
    output: Output | str = Output.TABLE,
    no_headers: bool = False,
    plot: Path | None = None,
    weights: Weights | None = None,
    strict: bool = True,
    backfill: bool = False,
    gpu: str | None = None,
    carbon_hourly: Path | Sequence[Path] | None = None,
    at: str | None = None,
    carbon_basis: Basis = Basis.LIFECYCLE,
    grid_zones: Path | None = None,
    flex: Flexibility | None = None,
) -> list[PolicyResult]:
    """Validate the arguments, replay the trace once per policy, print the comparison, write the plot."""
    names = list(policy_names) or [policies.DEFAULT_POLICY]
    known = policies.names()
    for name in names:
        if name not in known:
            raise InputError("--policy", "", f"unknown policy {name!r} (known: {', '.join(known)})")
    if output not in report.OUTPUTS:
        raise InputError("--output", "", f"expected one of {', '.join(report.OUTPUTS)}, got {output!r}")
    output = Output(output)
    if trace_format is not None and trace_format not in FORMATS:
        raise InputError("--trace-format", "", f"expected one of {', '.join(FORMATS)}, got {trace_format!r}")
    if plot is not None:
        plot_format(plot, "--plot")
    if (trace is None) == (workload is None):
        raise InputError("--trace", "", "give either --trace or --workload")
    if trace is not None:
        trace = _shipped_or_file(trace)
    if workload is not None:
        _check(workload)
    snap = _snapshot(fleet, network, snapshot)
    # Every input read before anything is said (a note, then an error, would be two lines).
    read = read_trace(trace, trace_format, strict=strict) if trace is not None else None
    models = sorted({n.gpu for n in snap.fleet.nodes})
    if gpu is None:
        gpu = pinned_gpu(snap.fleet)
        _note(f"every gang runs on {gpu}, the fleet's most plentiful GPU: durations do not depend on the GPU "
              "model, so letting policies choose it would reward slow GPUs (--gpu any lets them)")
    elif gpu == ANY_GPU:
        gpu = None
    elif gpu not in models:
        raise InputError("--gpu", "", f"no {gpu} in the fleet (it has: {', '.join(models)}, or {ANY_GPU})")
    read = read if read is not None else _generate(workload, snap, gpu)
    _report_rows(read)
    ctx = policies.PlacementContext(snap.fleet, snap.network)
    paths = [carbon_hourly] if isinstance(carbon_hourly, Path) else list(carbon_hourly or ())
    if flex is not None and not paths:
        raise InputError("--time-shift", "", "needs an hourly series (--carbon-hourly): shifting looks at the grid "
                         "of the hours ahead")
    grid = load_grid(paths, carbon_basis, zone_map=grid_zones) if paths else None
    options = SimOptions(backfill=backfill, gpu=gpu)
    measured: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
    origin = 0.0
    if grid is not None and grid.signal is not None:
        # Trace time 0 is --at, else the series' first hour, so by default the replay runs over the series.
        start = decision_time(at) if at is not None else series_start(grid.signal) or decision_time(None)
        context_at = contexts_by_hour(snap.fleet, snap.network, grid.signal, start)
        history = grid_history(snap.fleet, grid)
        for line in [*grid.notes, *forecast_notes(history)]:
            _note(line)
        _note(f"carbon: each job placed at the grid intensity of the hour it starts (a shifted flexible job: the "
              f"forecast mean of its run), its emissions counted at the measured intensity of every hour it runs; "
              f"trace time 0 = {start:%Y-%m-%dT%H:%M:%SZ}; hours outside the series use the yearly mean")
        if flex is not None:
            _note(f"time shifting: {flex.share:.0%} of the jobs (by a hash of their id) may finish up to "
                  f"{flex.slack_s / 3600:g} h after submit + run; each policy side by side started now, shifted by "
                  "the forecast, and shifted by the oracle (perfect foresight, a bound)")
        results = replay(read.jobs, ctx, names, weights, history, start.timestamp(), options=options,
                         context_at=context_at, flex=flex)
        origin = start.timestamp()
        measured = _measured(history, origin, max((r.makespan_s for r in results), default=0.0))
    else:
        results = simulate(read.jobs, ctx, names, weights, options=options)
    for result in results:
        for job in result.unplaced_jobs:
            _note(f"{read.source}: line {job.line}: job {job.id} not placed by {result.policy}: {job.reason}")
    if output is Output.CSV:
        render.rows_csv(report.rows(results), header=not no_headers)
    else:
        doc = report_doc(results, trace=read.source, format=read.format, fleet=snap.origin, jobs_read=len(read.jobs),
                         rows_with_errors=len(read.errors), rows_skipped=len(read.skipped))
        emit_document(doc, output, lambda: transposed_table(
            f"Trace replay: {read.source} ({read.format}, {len(read.jobs)} jobs) on {snap.origin}",
            SIMULATION_RESULTS, report.rows(results), "policy", wide=output is Output.WIDE), no_headers=no_headers)
    if plot is not None:
        # Imported here: matplotlib costs half a second, paid only when a picture is asked for.
        from geosched.plots.write import simulation_plot

        title = f"{Path(read.source).name} on {snap.origin}"
        _note(f"wrote {simulation_plot(plot, results, title, measured=measured, origin=origin)}")
    return results


def report_doc(results: Sequence[PolicyResult], *, trace: str, format: str, fleet: str, jobs_read: int,
               rows_with_errors: int, rows_skipped: int) -> SimulationReportDoc:
    """The SimulationReport `-o json|yaml` prints: the replay's inputs, each policy's summary, the jobs each left
    unplaced (only the policies that left some)."""
    from geosched.files.decl.simulation import PolicyResultRow, SimulationReportDoc, UnplacedJob
    return SimulationReportDoc.build(
        trace=trace, format=format, fleet=fleet, jobs_read=jobs_read, rows_with_errors=rows_with_errors,
        rows_skipped=rows_skipped, results=[PolicyResultRow.build(**r.summary()) for r in results],
        unplaced={r.policy: [UnplacedJob.build(id=u.id, line=u.line, reason=u.reason) for u in r.unplaced_jobs]
                  for r in results if r.unplaced_jobs})


def _measured(history: GridHistory, origin: float, span_s: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each region's measured hours over the replay, for the picture."""
    first = int(origin // HOUR_S)
    hours = np.arange(first, first + int(span_s // HOUR_S) + 2, dtype=np.int64)
    out = {}
    for region, series in history.series.items():
        values = series.at(hours)
        if not np.isnan(values).all():
            out[region] = (hours, values)
    return out


def _snapshot(fleet: Path | None, network: Path | None, snapshot: Path | None) -> Snapshot:
    if fleet is not None and str(fleet) == GEO_FLEET and not fleet.exists():
        if network is not None or snapshot is not None:
            raise InputError("--fleet", "", "the geo fleet brings its own network; drop --network/--snapshot")
        geo, view = geo_fleet()
        return Snapshot(geo, view, "geo fleet (3 regions, 8 zones, 300 nodes, 3% degraded NICs)")
    return resolve(fleet, network, snapshot)


MAX_JOBS = 1_000_000
MAX_LOAD = 100.0


def _check(workload: Workload) -> None:
    if workload.kind not in WORKLOADS:
        raise InputError("--workload", "", f"expected one of {', '.join(WORKLOADS)}, got {workload.kind!r}")
    if workload.like not in CLUSTERS:
        raise InputError("--like", "", f"expected one of {', '.join(sorted(CLUSTERS))}, got {workload.like!r}")
    # Each flag named on its own. NaN passes `load <= 0` (and then the generator never reaches its load); a
    # hundred million jobs is gigabytes before the replay starts: the largest published traces hold ~1M jobs.
    if not 1 <= workload.jobs <= MAX_JOBS:
        raise InputError("--jobs", "", f"expected 1..{MAX_JOBS:,}, got {workload.jobs}")
    if not (math.isfinite(workload.load) and 0 < workload.load <= MAX_LOAD):
        raise InputError("--load", "", f"expected a number above 0 and at most {MAX_LOAD:g}, got {workload.load}")
    if workload.min_gpus < 1:
        raise InputError("--min-gpus", "", f"expected at least 1, got {workload.min_gpus}")
    if not 0 <= workload.seed < 2**32:  # numpy's seeds
        raise InputError("--seed", "", f"expected 0..{2**32 - 1}, got {workload.seed}")


def _generate(workload: Workload | None, snap: Snapshot, gpu: str | None) -> TraceRead:
    assert workload is not None  # run_simulate_command checked: a trace or a workload
    capacity = sum(n.gpus for n in snap.fleet.nodes if gpu is None or n.gpu == gpu)
    try:
        jobs = llm_trace(workload.jobs, capacity_gpus=capacity, load=workload.load, min_gpus=workload.min_gpus,
                         cluster=workload.like, seed=workload.seed)
    except ValueError as exc:
        raise InputError("--min-gpus", "", str(exc)) from None
    source = (f"llm workload like {workload.like} ({workload.jobs} jobs of >= {workload.min_gpus} GPUs, "
              f"load {workload.load:g}, seed {workload.seed})")
    return TraceRead(source=source, format="llm", jobs=tuple(jobs))


def pinned_gpu(fleet: Fleet) -> str:
    """The GPU model with the most free GPUs (ties by name), so every policy gets the same hardware."""
    free: dict[str, int] = {}
    for node in fleet.nodes:
        free[node.gpu] = free.get(node.gpu, 0) + node.gpus_free
    return min(free, key=lambda g: (-free[g], g))


def _report_rows(read: TraceRead) -> None:
    for issue in read.errors:
        render.error(issue.describe(read.source))
    if read.skipped:
        _note(f"{read.source}: {len(read.skipped)} row(s) skipped, not replayable:")
        for issue in read.skipped[:SHOWN_SKIPPED]:
            _note(f"  {issue.describe(read.source)}")
        if len(read.skipped) > SHOWN_SKIPPED:
            _note(f"  ... and {len(read.skipped) - SHOWN_SKIPPED} more")


def _note(message: str) -> None:
    # Plain text on stderr: messages quote trace content, which must not be read as rich markup.
    render.err.print(message, markup=False, highlight=False, soft_wrap=True)

