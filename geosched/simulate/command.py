"""`geosched simulate`: read the trace and the snapshot, replay, print. The CLI only parses arguments.

    run_simulate_command(trace, ["zone-first", "spread"], output="table", plot=Path("out.png"))

Bad rows: strict (default) stops at the first with exit 2; lenient (`strict=False`) prints each on stderr
and replays the rest. Skipped rows (jobs that never ran, CPU-only pods) are counted on stderr, the first
few shown, in both modes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from geosched import policies, render
from geosched.errors import InputError
from geosched.inputs import resolve
from geosched.models import Fleet, Weights
from geosched.simulate import report
from geosched.simulate.engine import SimOptions, simulate
from geosched.simulate.metrics import PolicyResult
from geosched.simulate.traces import FORMATS, TraceRead, read_trace

SHOWN_SKIPPED = 5
ANY_GPU = "any"


def run_simulate_command(
    trace: Path,
    policy_names: Sequence[str],
    *,
    fleet: Path | None = None,
    network: Path | None = None,
    snapshot: Path | None = None,
    trace_format: str | None = None,
    output: str = "table",
    plot: Path | None = None,
    weights: Weights | None = None,
    strict: bool = True,
    backfill: bool = False,
    gpu: str | None = None,
) -> list[PolicyResult]:
    """Validate the arguments, replay the trace once per policy, print the comparison, write the plot."""
    names = list(policy_names) or [policies.DEFAULT_POLICY]
    known = policies.names()
    for name in names:
        if name not in known:
            raise InputError("--policy", "", f"unknown policy {name!r} (known: {', '.join(known)})")
    if output not in report.OUTPUTS:
        raise InputError("--output", "", f"expected one of {', '.join(report.OUTPUTS)}, got {output!r}")
    if trace_format is not None and trace_format not in FORMATS:
        raise InputError("--format", "", f"expected one of {', '.join(FORMATS)}, got {trace_format!r}")
    snap = resolve(fleet, network, snapshot)
    read = read_trace(trace, trace_format, strict=strict)  # every input read before anything is said
    models = sorted({n.gpu for n in snap.fleet.nodes})
    if gpu is None:
        gpu = pinned_gpu(snap.fleet)
        _note(f"every gang runs on {gpu}, the fleet's most plentiful GPU: durations do not depend on the GPU "
              "model, so letting policies choose it would reward slow GPUs (--gpu any lets them)")
    elif gpu == ANY_GPU:
        gpu = None
    elif gpu not in models:
        raise InputError("--gpu", "", f"no {gpu} in the fleet (it has: {', '.join(models)}, or {ANY_GPU})")
    _report_rows(read)
    ctx = policies.PlacementContext(snap.fleet, snap.network)
    results = simulate(read.jobs, ctx, names, weights, options=SimOptions(backfill=backfill, gpu=gpu))
    for result in results:
        for job in result.unplaced_jobs:
            _note(f"{read.source}: line {job.line}: job {job.id} not placed by {result.policy}: {job.reason}")
    if output == "json":
        meta = {"trace": read.source, "format": read.format, "fleet": snap.origin, "jobs_read": len(read.jobs),
                "rows_with_errors": len(read.errors), "rows_skipped": len(read.skipped)}
        render.data(report.document(results, meta), "json")
    elif output == "csv":
        render.rows_csv(report.rows(results))
    else:
        render.table(f"Trace replay: {read.source} ({read.format}, {len(read.jobs)} jobs) on {snap.origin}",
                     report.table_rows(results))
    if plot is not None:
        report.write_plot(results, plot, title=f"{Path(read.source).name} on {snap.origin}")
    return results


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

