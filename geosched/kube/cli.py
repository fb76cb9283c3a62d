"""`geosched submit | jobs | scheduler run`: the typer sub-app the top-level CLI mounts. Parses, calls, prints.

geosched/cli/main.py puts these commands at the top level: `geosched submit`, `geosched jobs`, `geosched scheduler run`.

Exit codes: 0 done (or the job already runs somewhere); 1 the cluster refused, submitting could duplicate the
job, or a cluster could not be read (no cluster at all, a no-fit that a cluster not read might have held, a `jobs`
listing that lacks a cluster's jobs: each named with its context and the cause); 2 bad input; 3 no fit. Human
summaries go to stderr when stdout carries data (a YAML stream, JSON).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from geosched import policies
from geosched.console.options import (
    DEFAULT_WEIGHTS,
    CarbonBasisOpt,
    CarbonHourlyOpt,
    CarbonWeightOpt,
    CostWeightOpt,
    GridZonesOpt,
    NetworkWeightOpt,
    ZoneToleranceOpt,
    known_policy,
)
from geosched.console.output import NoHeadersOpt, Output, OutputOpt
from geosched.grid.formats import Basis
from geosched.kube.compact import CompactKind
from geosched.kube.kinds import help_names as job_kinds

if TYPE_CHECKING:
    from geosched.files.decl.submit import SubmitOutcomeDoc
    from geosched.kube.cluster_inventory import Unreachable
    from geosched.kube.config import ClusterConfig
    from geosched.kube.scheduler import SchedulerSettings
    from geosched.kube.submit import PlacedJob, SubmitOutcome

# The commands import the API client (kubernetes) when they run: `geosched --help` and the other
# commands neither pay for it nor need it installed.

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  help="Place gangs on live Kubernetes clusters: submit, list, or run as a scheduler.")
scheduler_app = typer.Typer(no_args_is_help=True, help="geosched as an in-cluster gang scheduler.")
app.add_typer(scheduler_app, name="scheduler")



KubeconfigOpt = Annotated[Path | None, typer.Option(
    "--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG, else ~/.kube/config).")]
ContextOpt = Annotated[list[str] | None, typer.Option(
    "--context", help="Only this context or cluster (repeatable; default: every one).")]
ClustersOpt = Annotated[Path | None, typer.Option(
    "--clusters", help="Cluster config (ClusterConfig YAML): which contexts, backends, queues.")]


@contextmanager
def _errors(context: str | None = None, in_cluster: bool = False) -> Iterator[None]:
    """Errors as one line and their exit code. `context`/`in_cluster`: the one cluster the command talks to, named
    in the line when it cannot be reached."""
    # Mapped here as well as in geosched.cli.main.main, so exit codes hold however the sub-app is run.
    from geosched.console import render
    from geosched.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, GeoschedError, InputError
    try:
        yield
    except InputError as exc:
        render.error(str(exc))
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except GeoschedError as exc:
        render.error(str(exc))
        raise typer.Exit(exc.exit_code) from None
    except Exception as exc:
        if not _unreachable(exc):
            raise
        from geosched.kube.client import describe

        which = " (in-cluster)" if in_cluster else f" of context {context}" if context else ""
        render.error(f"cannot reach the cluster{which}: {describe(exc)}")
        raise typer.Exit(EXIT_FAILED) from None


def _unreachable(exc: Exception) -> bool:
    """A cluster that cannot be reached. The client's exception types are looked up, not imported: the kubernetes
    package loads its whole client (0.3 s, which `geosched -h` must not pay), and neither it nor urllib3 can have
    raised unless it was loaded."""
    if isinstance(exc, OSError):
        return True
    api, http = sys.modules.get("kubernetes.client.exceptions"), sys.modules.get("urllib3.exceptions")
    return (api is not None and isinstance(exc, api.ApiException)) or (
        http is not None and isinstance(exc, http.HTTPError))


def _clusters(path: Path | None) -> dict[str, ClusterConfig] | None:
    from geosched.kube.config import load_cluster_config
    return load_cluster_config(path) if path is not None else None


def _warn(unreachable: tuple[Unreachable, ...] | list[Unreachable], assumptions: tuple[str, ...] = ()) -> None:
    from geosched.console import render
    for u in unreachable:
        render.err.print(f"warning: cluster {u.cluster} (context {u.context}) unreachable: {u.reason}", markup=False)
    for note in assumptions:
        render.err.print(f"note: {note}", markup=False)


@app.command("submit")
def submit_cmd(
    job_file: Annotated[Path, typer.Argument(metavar="JOB", help=f"Job file: {job_kinds()} or compact "
                                             "geosched Job.")],
    clusters: ClustersOpt = None,
    kubeconfig: KubeconfigOpt = None,
    context: ContextOpt = None,
    apply: Annotated[bool, typer.Option("--apply/--dry-run", help="Apply (default), or only render and print "
                                        "the manifests.")] = True,
    policy: Annotated[str, typer.Option(help="Placement policy.", callback=known_policy)] = policies.DEFAULT_POLICY,
    network_weight: NetworkWeightOpt = DEFAULT_WEIGHTS.network,
    cost_weight: CostWeightOpt = DEFAULT_WEIGHTS.cost,
    carbon_weight: CarbonWeightOpt = DEFAULT_WEIGHTS.carbon,
    zone_tolerance: ZoneToleranceOpt = DEFAULT_WEIGHTS.zone_tolerance,
    network: Annotated[Path | None, typer.Option("--network", help="Measured NetworkView file (default: the "
                                                 "shipped network model).")] = None,
    compact_kind: Annotated[CompactKind, typer.Option(help="What a compact job becomes.")] = CompactKind.JOB,
    force_conflicts: Annotated[bool, typer.Option(help="Take over fields another field manager owns.")] = False,
    skip_unreachable: Annotated[bool, typer.Option(
        help="Submit even if a cluster cannot be checked for an existing copy of the job.")] = False,
    check_queues: Annotated[bool, typer.Option(
        help="On a Kueue cluster, first check its LocalQueue, ClusterQueue, ResourceFlavors and Topology, and "
        "refuse, saying what is missing.")] = False,
    kueue_objects: Annotated[bool, typer.Option(
        help="On a Kueue cluster, also render (and apply first) its Topology, a ResourceFlavor per GPU model, a "
        "ClusterQueue holding its nodes' capacity and the config's LocalQueue (kueue.x-k8s.io/v1beta2).")] = False,
    output: OutputOpt = Output.TABLE,
    no_headers: NoHeadersOpt = False,
    carbon_hourly: Annotated[Path | None, typer.Option(
        "--carbon-hourly", help="CSV region,datetime,gco2e_per_kwh (format in geosched/grid/carbon.py): place at the "
        "grid intensity of the hour the job starts, not the yearly mean.")] = None,
    at: Annotated[str | None, typer.Option(
        "--at", help="When the job starts, RFC 3339 with offset (default: now): the carbon hour and the "
        "geosched.io/placed-at stamp.")] = None,
) -> None:
    """Place a job on the live clusters and apply it there, once. Jobs geosched placed that have not started keep
    their nodes: the new job is placed around them."""
    from geosched.console import render
    from geosched.console.output import emit_document
    from geosched.core.errors import EXIT_FAILED, EXIT_NO_FIT
    from geosched.core.models import Weights
    from geosched.files.documents import load_network
    from geosched.grid.carbon import decision_time, load_carbon
    from geosched.kube import submit as submitting
    from geosched.kube.cluster_inventory import unreachable_list

    with _errors():
        options = submitting.SubmitOptions(policy=policy, weights=Weights(network_weight, cost_weight, carbon_weight,
                                                                                 zone_tolerance),
                                           compact_kind=compact_kind, dry_run=not apply, force=force_conflicts,
                                           skip_unreachable=skip_unreachable, carbon=load_carbon(carbon_hourly),
                                           check_queues=check_queues, kueue_objects=kueue_objects)
        outcome = submitting.submit(job_file, kubeconfig=kubeconfig, contexts=tuple(context or ()),
                                    clusters=_clusters(clusters), network=load_network(network) if network else None,
                                    options=options, now=decision_time(at))
    _warn(outcome.unreachable, outcome.assumptions)
    emit_document(outcome_doc(outcome), output, lambda: _print_outcome(outcome), no_headers=no_headers)
    if outcome.status == "no-fit" and outcome.unreachable:
        # Not a no-fit: a cluster that could not be read might hold the job (docs/exit-codes.md: 1).
        render.error(f"no fit on the clusters that answered; {len(outcome.unreachable)} could not be read: "
                     f"{unreachable_list(outcome.unreachable)}")
        raise typer.Exit(EXIT_FAILED)
    if outcome.status == "no-fit":
        raise typer.Exit(EXIT_NO_FIT)


def _print_outcome(outcome: SubmitOutcome) -> None:
    from geosched.console import render
    if outcome.status == "no-fit":
        assert outcome.nofit is not None
        render.error(outcome.nofit.message)
    elif outcome.status == "exists":
        render.out.print(f"{outcome.job} already placed on cluster {outcome.cluster} (zones "
                         f"{', '.join(outcome.zones) or 'unknown'}); nothing applied", markup=False)
    elif outcome.status == "dry-run":
        render.err.print(f"{outcome.job} -> cluster {outcome.cluster}, zones {', '.join(outcome.zones)} "
                         "(dry run: nothing applied)", markup=False)
        from geosched.kube.render import to_yaml  # the renderer and its backends: only when it prints

        # The manifests alone on stdout, so `... --dry-run | kubectl apply -f -` works.
        sys.stdout.write(to_yaml(outcome.manifests))
    else:
        render.table(f"{outcome.job} -> cluster {outcome.cluster} ({outcome.context}), zones "
                     f"{', '.join(outcome.zones)}",
                     [{"kind": a.kind, "namespace": a.namespace, "name": a.name, "action": a.action,
                       "resource_version": a.resource_version} for a in outcome.applied])


def outcome_doc(outcome: SubmitOutcome) -> SubmitOutcomeDoc:
    """What `submit` and `up` print: the outcome, its placement (or why none), what was applied or would be."""
    from geosched.files.decl import submit as decl
    from geosched.files.decl.placement import NoFitDoc, PlacementDoc
    return decl.SubmitOutcomeDoc.build(
        job=outcome.job, status=outcome.status, cluster=outcome.cluster, context=outcome.context,
        zones=list(outcome.zones),
        placement=PlacementDoc.of(outcome.placement) if outcome.placement else None,
        nofit=NoFitDoc.of(outcome.nofit) if outcome.nofit else None,
        applied=[decl.Applied.build(api_version=a.api_version, kind=a.kind, name=a.name, namespace=a.namespace,
                                    action=a.action, resource_version=a.resource_version) for a in outcome.applied],
        manifests=list(outcome.manifests) if outcome.status == "dry-run" else [],
        unreachable=[decl.Unreachable.build(cluster=u.cluster, context=u.context, reason=u.reason)
                     for u in outcome.unreachable],
        assumptions=list(outcome.assumptions),
    )


@app.command("jobs")
def jobs_cmd(ctx: typer.Context, clusters: ClustersOpt = None, kubeconfig: KubeconfigOpt = None,
             context: ContextOpt = None, output: OutputOpt = Output.TABLE, no_headers: NoHeadersOpt = False,
             record: Annotated[bool, typer.Option(
                 "--record", help="Also write each job's start and end (from its status) into the usage ledger "
                 "that `geosched report` prices (a read-only command otherwise).")] = False) -> None:
    """Jobs geosched placed, on every cluster, with their zones and state."""
    from geosched.console import lists as kinds
    from geosched.console import render
    from geosched.console.output import emit_list, rfc3339
    from geosched.core.errors import EXIT_FAILED
    from geosched.kube import cluster_inventory
    from geosched.kube import submit as submitting

    with _errors():
        configs = _clusters(clusters)
        asked = cluster_inventory.candidates(kubeconfig, tuple(context or ()), configs)
        found, unreachable = submitting.jobs(kubeconfig, tuple(context or ()), configs, with_usage=record)
        if record:
            # The clusters that answered: only there is a job missing from the listing really gone.
            down = {u.cluster for u in unreachable}
            _record(_home(ctx), found, {r.name for r in asked} - down)
    if unreachable and len(unreachable) == len(asked):
        render.error(f"cannot list placed jobs: {cluster_inventory.unreachable_list(unreachable)}")
        raise typer.Exit(EXIT_FAILED)
    _warn(unreachable)
    rows = [{"cluster": j.cluster, "namespace": j.namespace, "kind": j.kind, "name": j.name, "zones": list(j.zones),
             "state": j.state, "policy": j.policy, "placed_at": j.placed_at,
             "started": rfc3339(j.usage.start if j.usage else None), "ended": rfc3339(j.usage.end if j.usage else None)}
            for j in found]
    emit_list(kinds.PLACED_JOBS, rows, output, no_headers=no_headers)
    if unreachable:  # the listing lacks their jobs (docs/exit-codes.md: 1)
        raise typer.Exit(EXIT_FAILED)


def _home(ctx: typer.Context) -> Path:
    # The root `--home` of `geosched` when there is one (as the provisioning verbs read it), else the default.
    from geosched.store.db import default_home

    home = ctx.find_root().params.get("home")
    return Path(home) if home else default_home()


def _record(home: Path, found: list[PlacedJob], read: set[str]) -> None:
    """Sync the jobs' runs into the store's usage ledger. A store is only created when there is a run to write:
    without one, the only work is closing rows of jobs that are gone, which needs a ledger that exists."""
    from geosched.console import render
    from geosched.kube.submit import sync_usage
    from geosched.store.db import DB_NAME, Store

    if not any(j.usage and j.usage.shares and (j.usage.start, j.usage.end) != (None, None) for j in found) \
            and not (home / DB_NAME).exists():
        return
    with Store(home) as store:
        synced = sync_usage(store, found, read)
    for note in synced.skipped:
        render.err.print(f"warning: not in the usage ledger: {note}", markup=False)
    if synced.opened or synced.closed or synced.recorded or synced.gone:
        render.err.print(f"usage ledger: {synced.opened} run(s) started, {synced.closed} ended, {synced.recorded} "
                         f"recorded whole, {synced.gone} closed as gone", markup=False)


@scheduler_app.command("run")
def scheduler_run(
    context: Annotated[str | None, typer.Option("--context", help="The cluster's kubeconfig context.")] = None,
    kubeconfig: KubeconfigOpt = None,
    in_cluster: Annotated[bool, typer.Option(help="Use the pod's service account (inside the cluster).")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="SchedulerConfig YAML (the deploy ConfigMap).")]
    = None,
    network: Annotated[Path | None, typer.Option("--network", help="NetworkView file, re-read when it changes.")]
    = None,
    namespace: Annotated[list[str] | None, typer.Option("--namespace", help="Only pods of this namespace "
                                                        "(repeatable; default: all).")] = None,
    leader_elect: Annotated[bool | None, typer.Option(
        "--leader-elect/--no-leader-elect", help="Hold a Lease so only one replica binds (default: the config's, "
        "else on).")] = None,
    scheduler_name: Annotated[str | None, typer.Option(help="spec.schedulerName of our pods.")] = None,
    lease_namespace: Annotated[str | None, typer.Option(help="Namespace of the Lease.")] = None,
    carbon_hourly: CarbonHourlyOpt = None,
    carbon_basis: CarbonBasisOpt = Basis.LIFECYCLE,
    grid_zones: GridZonesOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Bind pending pods with schedulerName geosched, whole gangs at a time, until SIGTERM or Ctrl-C. With
    --carbon-hourly, a gang whose pods declare slack (geosched.io/runtime with start-within or deadline) is bound
    at the start hour it chooses, never after its latest start."""
    from geosched.console import redact, render
    from geosched.core.errors import InputError
    from geosched.grid.carbon import load_grid
    from geosched.kube.scheduler import FileNetwork, no_network
    from geosched.kube.scheduler import run as run_scheduler

    with _errors(context, in_cluster):
        if context is None and not in_cluster:
            raise InputError("--context", "", "required (or --in-cluster inside the cluster)")
        settings = _settings(config, namespace, leader_elect, scheduler_name, lease_namespace)
        source = FileNetwork(network) if network is not None else no_network
        from geosched.console import logs

        logs.daemon(verbose)
        redact.scrub_logging()  # no credential in a log line, whichever library wrote it
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        grid = load_grid(carbon_hourly, carbon_basis, zone_map=grid_zones) if carbon_hourly else None
        stats = run_scheduler(context, kubeconfig=kubeconfig, in_cluster=in_cluster, settings=settings,
                              network=source, stop=stop, grid=grid)
    render.err.print(f"stopped: {stats.gangs_bound} gang(s), {stats.pods_bound} pod(s) bound, {stats.rollbacks} "
                     f"rollback(s), {stats.refusals} refusal(s)", markup=False)


def _settings(config: Path | None, namespaces: list[str] | None, leader_elect: bool | None,
              scheduler_name: str | None, lease_namespace: str | None) -> SchedulerSettings:
    from geosched.kube.scheduler import SchedulerSettings, load_settings

    settings = load_settings(config) if config is not None else SchedulerSettings()
    election = settings.leader_election
    if leader_elect is not None:
        election = replace(election, enabled=leader_elect)
    if lease_namespace is not None:
        election = replace(election, namespace=lease_namespace)
    return replace(settings, leader_election=election,
                   namespaces=tuple(namespaces) if namespaces else settings.namespaces,
                   scheduler_name=scheduler_name or settings.scheduler_name)


def main() -> None:
    app(prog_name="geosched kube")
