"""`geosched gitops render | check`: the typer sub-app. Parses arguments, calls the library, prints.

Exit codes: 0 done / up to date; 1 `check` found the tree stale or pods no snapshot node admits, or the tree
could not be written (one line naming the path and the cause); 2 bad input (one line on stderr).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from geosched.console.options import CarbonBasisOpt, CarbonHourlyOpt
from geosched.grid.formats import Basis
from geosched.kube.kinds import help_names as job_kinds
from geosched.policies.stable import DEFAULT_MIN_GAIN

if TYPE_CHECKING:
    from geosched.policies.stable import Rebalance

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  help="Render placed jobs as a GitOps tree (clusters/<cluster>/<namespace>/<job>.yaml) and check it.")

JobsOpt = Annotated[Path, typer.Option(
    "--jobs", help=f"Directory of job specs: {job_kinds()}, compact geosched Job.")]
SnapshotOpt = Annotated[Path, typer.Option("--snapshot", help="Directory with fleet.yaml and network.yaml.")]
ClustersOpt = Annotated[Path, typer.Option("--clusters", help="Cluster config (ClusterConfig YAML).")]
OutOpt = Annotated[Path, typer.Option("--out", help="Root of the tree: clusters/ and placements.yaml go here.")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="GitOpsConfig: policy, weights, compact kind, at.")]
AtOpt = Annotated[str | None, typer.Option(
    "--at", help="Provenance time of new decisions, ISO 8601 with offset (default: the config's `at`, else "
    "1970-01-01T00:00:00Z). Never the clock.")]
RebalanceOpt = Annotated[bool, typer.Option(
    "--rebalance", help="Also move jobs that still fit when the policy's placement beats theirs by --min-gain "
    "(each move restarts a gang). Without it a job moves only when its nodes no longer hold it.")]
MinGainOpt = Annotated[float, typer.Option(
    "--min-gain", help="With --rebalance: the least improvement of a job's total score, in percent, worth a move.")]
ExplainOpt = Annotated[bool, typer.Option("--explain", help="One line per job: kept (still fits), moved: why, new.")]


@contextmanager
def _bad_input() -> Iterator[None]:
    # Handled here as well as in geosched.cli.main.main, so the exit code holds however the sub-app is run.
    from geosched.console import render as console
    from geosched.core.errors import GeoschedError
    try:
        yield
    except GeoschedError as exc:  # bad input (2), a tree that cannot be written (1)
        console.error(str(exc))
        raise typer.Exit(exc.exit_code) from None


def _at(text: str | None) -> datetime | None:
    from geosched.files.fields import parse_time
    return parse_time(text, "--at", "") if text is not None else None


def _rebalance(on: bool, min_gain: float) -> Rebalance | None:
    from geosched.core.errors import InputError
    from geosched.policies.stable import Rebalance
    if not 0.0 <= min_gain < 100.0:
        raise InputError("--min-gain", "", f"expected a percentage from 0 to below 100, got {min_gain:g}")
    return Rebalance(min_gain / 100.0) if on else None


@app.command("render")
def render_cmd(jobs: JobsOpt, snapshot: SnapshotOpt, clusters: ClustersOpt, out: OutOpt,
               config: ConfigOpt = None, at: AtOpt = None, rebalance: RebalanceOpt = False,
               min_gain: MinGainOpt = DEFAULT_MIN_GAIN * 100, explain: ExplainOpt = False,
               carbon_hourly: CarbonHourlyOpt = None, carbon_basis: CarbonBasisOpt = Basis.LIFECYCLE) -> None:
    """Place every job and write the tree; only files whose bytes change are written. Jobs the tree already
    places keep their nodes while they fit."""
    from geosched.core.errors import one_line

    # Rendering places jobs (numpy, the policies): imported by the verb, not by `geosched -h`.
    from geosched.gitops.check import unmatched_pins
    from geosched.gitops.plan import Placed
    from geosched.gitops.render import render_tree
    from geosched.policies.stable import Fate

    with _bad_input():
        result = render_tree(jobs, snapshot, clusters, out, config=config, at=_at(at),
                             rebalance=_rebalance(rebalance, min_gain), carbon_hourly=carbon_hourly,
                             carbon_basis=carbon_basis)
    if result.previous_fault is not None:  # said: the jobs it placed may move
        sys.stderr.write(f"warning: {result.previous_fault}: the index does not read whole, so the jobs of its "
                         "entries that do not read are placed afresh\n")
    if explain:
        for note in result.carbon_notes:
            sys.stdout.write(one_line(note) + "\n")
    for o in result.tree.outcomes:
        if isinstance(o, Placed) and (explain or o.fate is not Fate.KEPT):
            sys.stdout.write(one_line(f"{o.spec.key}: {o.note}") + "\n")  # node names come from the snapshot
    changes = result.changes
    for path in changes.written:
        sys.stdout.write(f"wrote   {path}\n")
    for path in changes.removed:
        sys.stdout.write(f"removed {path}\n")
    for u in result.unplaced:
        reason = f"{u.reasons[0].subject}: {u.reasons[0].reason}" if u.reasons else "no fit"
        sys.stdout.write(f"unplaced {u.spec.key} ({u.spec.input.job.gpus} GPUs): {reason}\n")
    sys.stdout.write(f"{result.placed} placed, {len(result.unplaced)} unplaced; {len(changes.written)} written, "
                     f"{len(changes.removed)} removed, {changes.unchanged} unchanged\n")
    for line in unmatched_pins(result):  # written anyway: the job's own constraint, which `check` fails on
        sys.stderr.write(f"warning: no node of the snapshot admits {line}\n")
    for o in result.tree.outcomes:
        if isinstance(o, Placed) and o.late is not None:
            sys.stderr.write(one_line(f"warning: {o.spec.key}: {o.late}") + "\n")


@app.command("check")
def check_cmd(jobs: JobsOpt, snapshot: SnapshotOpt, clusters: ClustersOpt, out: OutOpt,
              config: ConfigOpt = None, at: AtOpt = None, rebalance: RebalanceOpt = False,
              min_gain: MinGainOpt = DEFAULT_MIN_GAIN * 100, carbon_hourly: CarbonHourlyOpt = None,
              carbon_basis: CarbonBasisOpt = Basis.LIFECYCLE) -> None:
    """Exit 1 with the reasons and a unified diff when the tree is not what its inputs render to, or with the
    pods no node of the snapshot admits (a pinned label value no node carries)."""
    from geosched.gitops.check import check_tree  # as in render_cmd

    with _bad_input():
        result = check_tree(jobs, snapshot, clusters, out, config=config, at=_at(at),
                            rebalance=_rebalance(rebalance, min_gain), carbon_hourly=carbon_hourly,
                            carbon_basis=carbon_basis)
    sys.stdout.write(result.report())
    if not result.passed:
        raise typer.Exit(1)


def main() -> None:
    app(prog_name="geosched gitops")
