"""The `geosched` command: parse arguments, call the library, print. No decisions are made here."""

from __future__ import annotations

import copy
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup
from typer.main import get_command_name

from geosched import clouds, policies, settings
from geosched.cli import config as config_cli
from geosched.cli.probetargets import store_targets
from geosched.cli.up import up_cmd
from geosched.console import catalog_view
from geosched.console.options import (
    DEFAULT_WEIGHTS,
    CarbonBasisOpt,
    CarbonForecastOpt,
    CarbonHourlyOpt,
    CarbonWeightOpt,
    CostWeightOpt,
    GridZonesOpt,
    NetworkWeightOpt,
    RiskWeightOpt,
    Workload,
    ZoneToleranceOpt,
    complete_policy,
    deprecated,
    duration_s,
    finite,
    known_policy,
)
from geosched.console.output import NoHeadersOpt, Output, OutputOpt, TabularOutputOpt
from geosched.core.models import Candidate
from geosched.gitops.cli import app as gitops_app
from geosched.grid.formats import Basis
from geosched.kube import cli as kube_cli
from geosched.kube.kinds import help_names as job_kinds
from geosched.kube.multikueue import cli as multikueue_cli
from geosched.probes import cli as probes_cli
from geosched.providers import cli as providers_cli
from geosched.report import cli as report_cli
from geosched.simulate import shipped as shipped_traces

# The verbs import what computes (numpy, the policies, the cloud and cluster clients, the demo) when they run, so
# `geosched --version` and `-h` load only the declarations (issue 25; tests/test_cli_startup.py).
if TYPE_CHECKING:
    from geosched.core.models import Fleet, Offering, Placement
    from geosched.policies import timeshift
    from geosched.policies.spotrisk import SpotRisk
    from geosched.store.db import Store
    from geosched.store.sources import Snapshot


class RootGroup(TyperGroup):
    """The root command, with the settings (geosched/settings/__init__.py) wired into click: each option a setting
    supplies reads its environment variable, and the config file is the context's `default_map`, so a value comes from
    the flag, else the variable, else the file, else the built-in default."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        settings.bind(self)
        whole_summaries(self)

    def main(self, *args: Any, **extra: Any) -> Any:
        no_coercion_when_unset(self)  # here, not in __init__: typer appends the completion options after that
        for param in self.params:
            if param.name == "home":  # set by $GEOSCHED_HOME too, so processed before every subcommand's -h
                _plain_path(param)
        argv = extra.get("args", args[0] if args else None)
        if not asks_help(sys.argv[1:] if argv is None else list(argv)):
            extra.setdefault("default_map", settings.default_map(self))
        return super().main(*args, **extra)


def asks_help(argv: list[str]) -> bool:
    """Whether the invocation only prints help (`-h`, `--help`, or nothing at all): then the config file is not read
    (its check imports pydantic, a third of a second; docs/settings.md), and the help shows the built-in defaults and
    the variables. `geosched config show` shows the values in force."""
    words = argv[: argv.index("--")] if "--" in argv else argv
    return not words or "-h" in words or "--help" in words


def no_coercion_when_unset(group: TyperGroup) -> None:
    """Before a subcommand runs (`geosched place -h` included), click processes the options of every group on its
    path, most of them unset, and typer coerces each value through a pydantic adapter it builds on first use: for
    `-h` that import is a third of the cost (issue 25). An unset single-valued option is None whether coerced or not,
    so for the groups' options (their -h/--help too) it is passed to the callback as typer would, uncoerced."""
    for param in group.params:
        _pass_unset(param)
    get_help_option = group.get_help_option

    def help_option(ctx: typer.Context) -> Any:
        option = get_help_option(ctx)
        if option is not None:
            _pass_unset(option)
        return option

    group.get_help_option = help_option  # type: ignore[method-assign,assignment]
    for command in group.commands.values():
        if isinstance(command, TyperGroup):
            no_coercion_when_unset(command)


def _plain_path(param: Any) -> None:
    """A path option without checks (no exists=, no resolve_path=) and without a callback: typer's coercion of its
    value is `Path(value)`, done here without the pydantic adapter typer would build first (see
    no_coercion_when_unset)."""
    if getattr(param, "_geosched_plain_path", False):
        return
    process_value = param.process_value

    def process(ctx: typer.Context, value: Any) -> Any:
        return Path(value) if isinstance(value, str) and param.callback is None else process_value(ctx, value)

    param.process_value = process
    param._geosched_plain_path = True


def _pass_unset(param: Any) -> None:
    if getattr(param, "_geosched_unset_as_is", False):
        return
    process_value = param.process_value

    def process(ctx: typer.Context, value: Any) -> Any:
        if value is None and not param.required and param.nargs == 1 and not param.multiple:
            return param.callback(ctx, param, None) if param.callback is not None else None
        return process_value(ctx, value)

    param.process_value = process
    param._geosched_unset_as_is = True


def whole_summaries(group: TyperGroup) -> None:
    """Each command's line in its group's help: the first paragraph of its help, whole and wrapped, where click
    would cut it to the terminal's width with `...` (issue 23 item 8: nothing cut at 80 columns)."""
    for command in group.commands.values():
        if not command.short_help and command.help:
            command.short_help = " ".join(command.help.split("\n\n")[0].split())
        if isinstance(command, TyperGroup):
            whole_summaries(command)


# -h as well as --help on every command (kubectl's habit); `--install-completion` / `--show-completion` on the root.
# Help as click formats it (rich_markup_mode=None, for every command below the root): plain text wrapped at the
# terminal's width, every word whole. typer's rich panels gave an 80-column terminal a 19-column help text with
# environment variable names cut off mid-word (issue 23 item 8), and cost more to import for `-h` (issue 25).
app = typer.Typer(cls=RootGroup, no_args_is_help=True, pretty_exceptions_enable=False, add_completion=True,
                  rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Zone-first placement of distributed training gangs across geo-distributed GPU clusters.")
snapshot_app = typer.Typer(no_args_is_help=True, help="Export and import fleet + network snapshots.")
app.add_typer(snapshot_app, name="snapshot")
app.add_typer(config_cli.app, name="config")
app.add_typer(gitops_app, name="gitops")
app.add_typer(probes_cli.make_app(lambda: State.store(), store_targets), name="probe")
# `report` only reads: it works on a store it cannot write (a read-only mount).
app.add_typer(report_cli.make_app(lambda: State.store(reader=True)), name="report")
# Kubernetes hand-off lives at the top (`geosched submit`, `jobs`, `scheduler run`), like kubectl's verbs.
app.registered_commands.extend(kube_cli.app.registered_commands)
app.add_typer(kube_cli.scheduler_app, name="scheduler")
# `geosched up`: provision --cluster, wait for the nodes, submit onto them (geosched/cli/up.py).
app.command(name="up")(up_cmd)
app.add_typer(multikueue_cli.make_app(lambda: State.home), name="multikueue")
# Provisioning verbs join the top level too: `geosched provision`, `down`, `status`, `check`, `sweep`.
app.registered_commands.extend(providers_cli.app.registered_commands)


class State:
    home: Path | None = None

    @classmethod
    def store(cls, *, reader: bool = False) -> Store:
        from geosched.store.db import Store
        return Store(cls.home, reader=reader)


def _print_version(wanted: bool) -> None:
    from geosched.cli.version import installed_version
    from geosched.console import render
    if wanted:
        render.out.print(f"geosched {installed_version()}")
        raise typer.Exit()


@app.callback()
def _root(home: Annotated[Path | None, typer.Option(
        "--home", help="State directory (default: the config file's home, else the user data directory).")]
          = None,
          version: Annotated[bool, typer.Option("--version", "-V", is_eager=True, callback=_print_version,
                                                help="Print the installed version and exit.")] = False) -> None:
    State.home = home


FleetOpt = Annotated[Path | None, typer.Option("--fleet", help="Fleet file (YAML/JSON); default: embedded.")]
NetworkOpt = Annotated[Path | None, typer.Option("--network", help="Network view file (YAML/JSON).")]
SnapshotOpt = Annotated[Path | None, typer.Option("--snapshot", help="Directory with fleet.yaml and network.yaml.")]
AtOpt = Annotated[str | None, typer.Option(
    "--at", help="When the job starts, RFC 3339 with offset (default: now): the hour of --carbon-hourly used.")]
StoreOpt = Annotated[bool, typer.Option("--store", help="The store's fleet (imported snapshot) plus the machines "
                                        "geosched provisioned that are up, on the store's measured network.")]


@app.command()
def place(
    job_file: Annotated[Path, typer.Argument(metavar="JOB", help="Job file: compact geosched Job (YAML/JSON) "
                                             f"or a {job_kinds()}; - reads it from standard input.")],
    fleet: FleetOpt = None,
    network: NetworkOpt = None,
    snapshot: SnapshotOpt = None,
    from_store: StoreOpt = False,
    policy: Annotated[str, typer.Option(help="Placement policy (see `geosched policies`).", callback=known_policy,
                                        autocompletion=complete_policy)]
    = policies.DEFAULT_POLICY,
    network_weight: NetworkWeightOpt = DEFAULT_WEIGHTS.network,
    cost_weight: CostWeightOpt = DEFAULT_WEIGHTS.cost,
    carbon_weight: CarbonWeightOpt = DEFAULT_WEIGHTS.carbon,
    zone_tolerance: ZoneToleranceOpt = DEFAULT_WEIGHTS.zone_tolerance,
    risk_weight: RiskWeightOpt = DEFAULT_WEIGHTS.spot_risk,
    explain: Annotated[bool, typer.Option(help="Show every term of every candidate and why each lost.")] = False,
    limit: Annotated[int, typer.Option(min=0, help="Candidates and rejections --explain shows (0: all; JSON "
                                       "and YAML always list all).")] = 20,
    output: OutputOpt = Output.TABLE,
    no_headers: NoHeadersOpt = False,
    record: Annotated[bool, typer.Option(help="Record the placement in the store.")] = False,
    carbon_hourly: CarbonHourlyOpt = None,
    carbon_forecast: CarbonForecastOpt = None,
    carbon_basis: CarbonBasisOpt = Basis.LIFECYCLE,
    grid_zones: GridZonesOpt = None,
    at: AtOpt = None,
    waited: Annotated[str | None, typer.Option(
        "--waited", metavar="DURATION", callback=duration_s,
        help="How long the job has already waited (90m, 6h, 2d or seconds). Turns on zone-first's patience: a "
        "multi-node gang whose best placement now is more than 3x slower than a healthy ring of its shape waits "
        "(exit 3, 'waiting for a healthy ring ...') until it has waited the extra run time a slow start costs "
        "(its schedule's runtime x (slowdown - 1); 1 h when it declares none). Without it the gang starts now, "
        "as a stateless call cannot tell how long it has waited (policies/patience.py).")] = None,
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Also draw the decision into FILE.png, .svg or .html: the candidates ranked as stacked bars "
        "of their weighted terms (chosen first) and the gang's zones with the ring's hops; for a flexible job, "
        "the grid over its window per candidate region and where the job was put in time.")] = None,
) -> None:
    """Place one job on a fleet: zone first, score second. Exit 3 when nothing fits, or when the gang waits for a
    healthy ring (--waited). A job with a `schedule:` (runtime and start_within or deadline) also chooses its start
    hour within its slack."""
    from geosched.console import render
    from geosched.console.options import weights_rank
    from geosched.console.output import emit_document
    from geosched.core.errors import EXIT_NO_FIT
    from geosched.core.models import Placement, Weights
    from geosched.grid.carbon import decision_signal, decision_time, forecast_notes, grid_history, load_grid
    from geosched.kube.jobinput import load_job
    from geosched.plots.files import plot_format
    from geosched.policies import timeshift
    from geosched.policies.patience import Waiting
    from geosched.providers.lifecycle import fleet_nodes
    from geosched.providers.sources import planning_risks
    from geosched.store.sources import resolve

    if plot is not None:
        plot_format(plot, "--plot")
    risks = None
    if from_store:
        with State.store() as store:
            snap = resolve(fleet, network, snapshot, store, fleet_nodes(store))
            risks = planning_risks(store, {n.provider for n in snap.fleet.nodes})
    else:
        snap = resolve(fleet, network, snapshot)
    job = load_job(job_file, _gpu_models(snap.fleet))
    grid = load_grid(carbon_hourly or [], carbon_basis, carbon_forecast or [], grid_zones) \
        if carbon_hourly or carbon_forecast else None
    when = decision_time(at)
    carbon = decision_signal(snap.fleet, grid.signal if grid is not None else None, when)
    ctx = policies.PlacementContext(snap.fleet, snap.network, carbon.signal, risks)
    weights_rank(network_weight, cost_weight, carbon_weight)
    weights = Weights(network_weight, cost_weight, carbon_weight, zone_tolerance, risk_weight)
    history = grid_history(snap.fleet, grid) if grid is not None else None
    waiting = None if waited is None else Waiting(float(waited))  # seconds: the callback parsed the duration
    result, shift = timeshift.place_in_time(job, ctx, history, when.timestamp(), policy, weights, waiting=waiting)
    notes = [*(grid.notes if grid is not None else ()), *carbon.notes]
    late = timeshift.deadline_note(job, when.timestamp())
    if late is not None:
        notes.append(late)
        render.warning(late)  # on stderr whatever the output format: the job's own promise is broken
    elif job.flexible and history is None:
        notes.append(f"job {job.name} has a schedule but no --carbon-hourly was given: it starts now")
    from geosched.files.decl.placement import NoFitDoc, PlacementDoc
    start = None if shift is None else timeshift.shift_doc(shift, ctx)
    if isinstance(result, Placement):
        doc: PlacementDoc | NoFitDoc = PlacementDoc.of(result, start)
    else:
        doc = NoFitDoc.of(result)

    def table() -> None:
        if isinstance(result, Placement):
            render.placement(result)
            if explain or output is Output.WIDE:
                _candidates(result, output is Output.WIDE, limit)
            render.prose().print(_inputs_line(result, snap), markup=False)
            if shift is not None:
                for line in timeshift.shift_lines(shift):
                    render.prose().print(line, markup=False)
                if explain:
                    _start_table(shift, ctx, limit)
            if explain:
                ahead = forecast_notes(history) if shift is not None and history is not None else []
                for note in [*notes, *ahead, *_spot_notes(ctx, result)]:
                    render.prose().print(note, markup=False)
        else:
            render.error(result.message)

    emit_document(doc, output, table, no_headers=no_headers)
    if not isinstance(result, Placement):
        raise typer.Exit(EXIT_NO_FIT)
    if plot is not None:
        from geosched.plots.write import placement_plot  # matplotlib only when a picture is asked for

        render.err.print(f"wrote {placement_plot(plot, result, snap.fleet, snap.network, shift=shift)}",
                         markup=False)
    if record:
        with State.store() as store:
            store.record_placement(result, start)


def _start_table(shift: timeshift.Shift, ctx: policies.PlacementContext, limit: int) -> None:
    """`--explain` of a flexible job: each region's predicted grid over the run, now and at its best start."""
    from geosched.console import render
    from geosched.policies import timeshift

    rows = timeshift.region_rows(shift, ctx)
    render.table("start by region (predicted mean gCO2e/kWh over the run)",
                 [{"region": r["region"], "now": f"{r['now_gco2e_per_kwh']:.0f}", "best start": r["best_start"],
                   "at best": f"{r['best_gco2e_per_kwh']:.0f}", "saving": f"{r['saving']:.0%}", "from": r["source"]}
                  for r in rows[:limit or None]], caption=render.more(len(rows), limit))


def _spot_notes(ctx: policies.PlacementContext, placed: Placement) -> list[str]:
    """For a spot job: the interruption risk of each (zone, instance type) it uses and the factor the cost term
    put on its spot price (policies/README.md, "Spot risk")."""
    from geosched.core.models import Pricing
    from geosched.policies import spotrisk
    from geosched.policies.spotrisk import Rework
    if placed.job.pricing is not Pricing.SPOT:
        return []
    index = {name: i for i, name in enumerate(ctx.names)}
    used = {(ctx.fleet.nodes[index[a.node]].zone, ctx.fleet.nodes[index[a.node]].instance_type): index[a.node]
            for a in placed.assignments}
    lines = []
    for (zone, instance_type), i in sorted(used.items()):
        risk, gang = ctx.spot_risk[i], math.ceil(placed.job.gpus / max(1, ctx.fleet.nodes[i].gpus))
        charged = spotrisk.risk_factor(risk, gang, Rework.of(placed.job.profile), placed.weights.spot_risk)
        lines.append(f"spot risk in {zone} ({instance_type}): {catalog_view.risk_text(risk, gang)}; the cost term "
                     f"charges {charged:.4f} x the spot price (--risk-weight {placed.weights.spot_risk:g})")
    return lines


def _candidates(p: Placement, wide: bool, limit: int) -> None:
    """`--explain` (and `-o wide`, with every column): the first `limit` candidates, chosen first, and the
    rejections, drawn from the document's own keys."""
    from geosched.console import lists as kinds
    from geosched.console import output as contract
    from geosched.console import render
    from geosched.files.documents import score_to_dict
    chosen: list[Placement | Candidate] = [p, *p.alternatives]
    rows = [{"zones": list(c.zones), "cluster": c.cluster, **score_to_dict(c.score),
             "bounding_hop": "->".join(c.score.hop) if c.score.hop else None} for c in chosen]
    contract.columns_table("candidates (chosen first)", kinds.CANDIDATES, rows[:limit or None], wide=wide,
                 caption=render.more(len(rows), limit))
    render.table("rejected", [{"subject": r.subject, "reason": r.reason} for r in p.rejected[:limit or None]],
                 caption=render.more(len(p.rejected), limit))


def _inputs_line(result: Placement, snap: Snapshot) -> str:
    """What the decision stood on, so a surprising answer can be traced to its inputs (issue 14)."""
    by_name = snap.fleet.by_name
    models = sorted({by_name[a.node].gpu for a in result.assignments if a.node in by_name})
    return (f"inputs: GPU {', '.join(models) or '-'}; fleet and network: {snap.origin} ({len(snap.fleet.nodes):,} "
            f"nodes in {len(snap.fleet.zones):,} zones)")


def _gpu_models(fleet: Fleet) -> set[str]:
    from geosched.core import catalog
    return catalog.gpu_models() | set(fleet.gpu_power)


catalog_app = typer.Typer(help="GPU offerings per zone with on-demand and spot prices and carbon per hour.")
app.add_typer(catalog_app, name="catalog")


catalog_app.command("refresh")(providers_cli.catalog_refresh)


@catalog_app.callback(invoke_without_command=True)
def catalog_cmd(
    context: typer.Context,
    gpu: Annotated[str | None, typer.Option(help="GPU model, optionally with a count: A100 or A100:8.")] = None,
    min_gpus: Annotated[int | None, typer.Option(min=1, help="At least this many GPUs per instance.")] = None,
    provider: Annotated[str | None, typer.Option(help="A cloud of the catalog: "
                                                      f"{', '.join(clouds.names())}.")] = None,
    region: Annotated[str | None, typer.Option(help="Region name, e.g. us-east-1.")] = None,
    sort: Annotated[str, typer.Option(help=f"One of {', '.join(catalog_view.SORT_KEYS)}.")] = "price",
    limit: Annotated[int, typer.Option(min=0, help="Rows in the table (0: all).")] = 40,
    output: TabularOutputOpt = Output.TABLE,
    no_headers: NoHeadersOpt = False,
) -> None:
    """GPU offerings per zone with on-demand and spot prices and carbon per hour."""
    from geosched.console import lists as kinds
    from geosched.console.output import emit_list, rfc3339
    from geosched.core import catalog, gpus
    from geosched.core.errors import InputError
    if context.invoked_subcommand is not None:
        return
    if sort not in catalog_view.SORT_KEYS:
        raise InputError("--sort", "", f"expected one of {', '.join(catalog_view.SORT_KEYS)}, got {sort!r}")
    count = None
    if gpu and ":" in gpu:
        gpu, _, text = gpu.partition(":")
        if not text.isdigit() or int(text) < 1:
            raise InputError("--gpu", "", f"count after ':' must be a positive integer, got {text!r}")
        count = int(text)
    if gpu:
        try:
            gpu = gpus.resolve(gpu, catalog.gpu_models())
        except gpus.GpuNameError as exc:
            raise InputError("--gpu", "", str(exc)) from None
    offerings, observed, risks = _known_offerings()
    rows = catalog_view.rows(catalog_view.CatalogQuery(gpu, count, min_gpus, provider, region, sort), offerings,
                             observed, risks=risks)
    rows = [{**r, "price_observed_at": rfc3339(r["price_observed_at"]), "price_age": catalog_view.age(
        r["price_observed_at"]), "spot_risk_observed_at": rfc3339(r["spot_risk_observed_at"])} for r in rows]
    emit_list(kinds.GPU_OFFERINGS, rows, output, no_headers=no_headers, title="GPU offerings", limit=limit,
              caption=f"{len(rows)} offerings" + _flagged_caption(rows))


def _flagged_caption(rows: list[dict[str, Any]]) -> str:
    """The table shows prices, not notes: it says how many of them the shipped catalog flagged, and where why."""
    flagged = sum(1 for r in rows if r["price_note"])
    return f"; {flagged} with a price the shipped catalog flags (-o wide: price_note)" if flagged else ""


def _known_offerings() -> tuple[list[Offering], catalog_view.Observed, dict[tuple[str, str, str], SpotRisk]]:
    """The shipped catalog merged with what `catalog refresh` recorded in the store (if there is one): the same
    offerings `provision` plans with, each price with when it was observed, and the stored spot risk signals."""
    from geosched.core import catalog
    from geosched.providers.refresh import current_offerings, price_ages
    from geosched.providers.registry import CLOUDS
    from geosched.providers.sources import planning_risks
    from geosched.store.db import DB_NAME, default_home

    if not (State.home or default_home()).joinpath(DB_NAME).exists():
        return list(catalog.offerings()), {}, {}
    with State.store() as store:
        offerings = [o for name in CLOUDS for o in current_offerings(store, name)]
        observed = {(name, *key): at for name in CLOUDS for key, at in price_ages(store, name).items()}
        risks = planning_risks(store, CLOUDS)
    return offerings, observed, risks


@app.command(name="gpus")
def gpus_cmd(output: TabularOutputOpt = Output.TABLE, no_headers: NoHeadersOpt = False) -> None:
    """GPU models geosched knows, with the names other tools give them (any of which a job file or --gpu takes)."""
    from geosched.console import lists as kinds
    from geosched.console.output import emit_list
    from geosched.core import catalog, gpus
    offered: dict[str, set[str]] = {}
    for o in catalog.offerings():
        offered.setdefault(o.gpu, set()).add(o.provider)
    rows = [{"gpu": model, "gfd_product": part.product, "gke_accelerator": part.gke_accelerator,
             "offered_by": sorted(offered.get(model, ()))}
            for model, part in sorted(gpus.PARTS.items()) if model in offered or model in catalog.gpu_models()]
    emit_list(kinds.GPU_MODELS, rows, output, no_headers=no_headers)


@app.command(name="policies")
def policies_cmd(output: OutputOpt = Output.TABLE, no_headers: NoHeadersOpt = False) -> None:
    """List the placement policies."""
    from geosched.console import lists as kinds
    from geosched.console.output import emit_list
    emit_list(kinds.POLICIES, [{"name": name, "default": name == policies.DEFAULT_POLICY,
                                "description": policies.description(name)} for name in policies.names()],
              output, no_headers=no_headers)


@snapshot_app.command("export")
def snapshot_export(
    directory: Annotated[Path, typer.Argument(help="Directory to write fleet and network files into.")],
    embedded: Annotated[bool, typer.Option("--embedded", help="Export the embedded default instead of the store.")]
    = False,
    from_clusters: Annotated[bool, typer.Option(
        "--from-clusters", help="The live clusters' GPU nodes (free GPUs, labels as they are) on the store's "
        "measured network, the shipped model where nothing was measured: what a GitOps tree renders from.")] = False,
    kubeconfig: Annotated[Path | None, typer.Option("--kubeconfig", help="With --from-clusters: kubeconfig file "
                                                    "(default: $KUBECONFIG, else ~/.kube/config).")] = None,
    context: Annotated[list[str] | None, typer.Option("--context", help="With --from-clusters: only this context "
                                                      "or cluster (repeatable).")] = None,
    clusters: Annotated[Path | None, typer.Option("--clusters", help="With --from-clusters: cluster config naming "
                                                  "the clusters (the GitOps tree's clusters.yaml).")] = None,
    placements: Annotated[Path | None, typer.Option("--placements", help="With --from-clusters: the GitOps tree's "
                                                    "placements.yaml; GPUs its jobs' pods hold count as free.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="yaml or json.")] = "yaml",
) -> None:
    """Write the store's fleet (with the provisioned machines that are up) and measured network view as files."""
    from geosched.console import render
    from geosched.core.default_fleet import default_fleet, default_network
    from geosched.core.errors import InputError
    from geosched.kube.config import load_cluster_config
    from geosched.providers.lifecycle import fleet_nodes
    from geosched.store.db import write_snapshot
    from geosched.store.sources import from_store
    if fmt not in ("yaml", "json"):
        raise InputError("--format", "", f"expected yaml or json, got {fmt!r}")
    if embedded and from_clusters:
        raise InputError("--from-clusters", "", "give either --embedded or --from-clusters, not both")
    if not from_clusters and (kubeconfig or context or clusters or placements):
        raise InputError("--kubeconfig/--context/--clusters/--placements", "", "only with --from-clusters")
    if embedded:
        paths = write_snapshot(directory, default_fleet(), default_network(), fmt)
    elif from_clusters:
        # The API client is imported when used, as by the kube commands (`geosched --help` stays light).
        from geosched.gitops.index import placed_jobs
        from geosched.kube.cluster_inventory import snapshot as cluster_snapshot

        configs = load_cluster_config(clusters) if clusters is not None else None
        released = placed_jobs(placements) if placements is not None else None
        with State.store() as store:
            measured = store.network_view()
        view, network = cluster_snapshot(kubeconfig, tuple(context or ()), configs, measured, released)
        # A skipped node says so: its reason alone ("zone ... is in ... on other nodes") reads like a remark.
        for note in (*(f"{r.subject} left out: {r.reason}" for r in view.skipped), *view.assumptions):
            render.err.print(f"note: {note}", markup=False)
        paths = write_snapshot(directory, view.fleet, network, fmt)
        render.out.print(f"{len(view.fleet.nodes)} GPU nodes from {', '.join(view.clusters)}")
    else:
        with State.store() as store:
            # Measured links only: a re-import must not turn the shipped model into measurements.
            paths = write_snapshot(directory, from_store(store, fleet_nodes(store)).fleet, store.network_view(), fmt)
    for path in paths:
        render.out.print(f"wrote {path}")


@snapshot_app.command("import")
def snapshot_import(directory: Annotated[Path, typer.Argument(help="Directory with fleet and network files.")]) -> None:
    """Load a snapshot into the store (validated first; nothing is written on error)."""
    from geosched.console import render
    with State.store() as store:
        nodes, samples = store.import_snapshot(directory)
    render.out.print(f"imported {nodes} nodes and {samples} network samples into {store.path}")


@app.command()
def placements(job: Annotated[str | None, typer.Option(help="Only this job.")] = None,
               output: TabularOutputOpt = Output.TABLE, no_headers: NoHeadersOpt = False) -> None:
    """Placements recorded in the store."""
    from geosched.console import lists as kinds
    from geosched.console.output import emit_list, rfc3339
    with State.store() as store:
        rows = store.placements(job)
    flat = [{"id": r["id"], "created_at": rfc3339(r["created_at"]), "job": r["job"], "policy": r["policy"],
             "cluster": r["cluster"], "zones": r["zones"], "regions": r["regions"], "gpus": r["gpus"],
             "score": r["score"]["total"], "usd_per_hour": r["score"]["usd_per_hour"],
             "gco2e_per_hour": r["score"]["gco2e_per_hour"], "step_ms": r["score"]["step_ms"]} for r in rows]
    emit_list(kinds.PLACEMENT_RECORDS, flat, output, no_headers=no_headers)


@app.command(name="simulate")
def simulate_cmd(
    trace: Annotated[Path | None, typer.Option("--trace", help="Gavel .trace, Alibaba 2023 pod CSV, Philly "
                                               "cluster_job_log JSON, or CSV submit_time,gpus,duration[,model]; or "
                                               f"a shipped trace by name ({', '.join(shipped_traces.names())}).")]
    = None,
    workload: Annotated[str | None, typer.Option(help="Generate a workload instead of --trace: 'llm' (job sizes, "
                                                 "run times, arrivals from published LLM-cluster statistics).")]
    = None,
    jobs: Annotated[int, typer.Option(help="--workload: number of jobs.")] = Workload.jobs,
    load: Annotated[float, typer.Option(help="--workload: offered load, a fraction of the fleet's GPUs.")]
    = Workload.load,
    min_gpus: Annotated[int, typer.Option(help="--workload: smallest job in GPUs.")] = Workload.min_gpus,
    like: Annotated[str, typer.Option(help="--workload: the cluster whose statistics it follows (kalos, seren, "
                                      "philly, helios).")] = Workload.like,
    seed: Annotated[int, typer.Option(help="--workload: random seed.")] = Workload.seed,
    fleet: Annotated[Path | None, typer.Option("--fleet", help="Fleet file (YAML/JSON), or 'geo' for the shipped "
                                               "geo fleet; default: embedded.")] = None,
    network: NetworkOpt = None,
    snapshot: SnapshotOpt = None,
    policy: Annotated[list[str] | None, typer.Option("--policy", help="Repeat to compare (default: zone-first).",
                                                     callback=known_policy, autocompletion=complete_policy)] = None,
    trace_format: Annotated[str | None, typer.Option("--trace-format", help="The format of --trace: gavel, "
                                                     "alibaba, philly or csv (default: detected from the content).")]
    = None,
    old_format: Annotated[str | None, typer.Option("--format", hidden=True, callback=deprecated("--trace-format"))]
    = None,
    network_weight: NetworkWeightOpt = DEFAULT_WEIGHTS.network,
    cost_weight: CostWeightOpt = DEFAULT_WEIGHTS.cost,
    carbon_weight: CarbonWeightOpt = DEFAULT_WEIGHTS.carbon,
    zone_tolerance: ZoneToleranceOpt = DEFAULT_WEIGHTS.zone_tolerance,
    lenient: Annotated[bool, typer.Option(help="Print bad rows and replay the rest.")] = False,
    backfill: Annotated[bool, typer.Option(help="EASY backfill behind a blocked head of the queue.")] = False,
    gpu: Annotated[str | None, typer.Option(help="Run every gang on this GPU model (default: the fleet's most "
                                            "plentiful; 'any' lets each policy choose).")] = None,
    output: TabularOutputOpt = Output.TABLE,
    no_headers: NoHeadersOpt = False,
    plot: Annotated[Path | None, typer.Option(help="Also draw the comparison into FILE.png, .svg or .html: JCT "
                                              "and slowdown CDFs per policy, cost and emissions.")] = None,
    carbon_hourly: CarbonHourlyOpt = None,
    carbon_basis: CarbonBasisOpt = Basis.LIFECYCLE,
    grid_zones: GridZonesOpt = None,
    at: Annotated[str | None, typer.Option(
        "--at", help="With --carbon-hourly: the time of the trace's start, RFC 3339 (default: the series' first "
        "hour); each job uses the hour it starts.")] = None,
    time_shift: Annotated[bool, typer.Option(
        "--time-shift", help="With --carbon-hourly: give a share of the jobs slack and replay each policy three "
        "ways side by side: started now, shifted by the forecast (grid/README.md), shifted by the oracle.")] = False,
    slack: Annotated[float, typer.Option(
        "--slack", callback=finite, min=0.0, help="With --time-shift: hours a flexible job may finish after submit + "
                                                  "run (its deadline).")] = 24.0,
    flexible_share: Annotated[float, typer.Option(
        "--flexible-share", callback=finite, min=0.0, max=1.0,
        help="With --time-shift: the share of jobs with slack (chosen by a hash of the job id).")] = 0.5,
) -> None:
    """Replay a job trace under placement policies; compare JCT, queueing, utilisation, cost and carbon."""
    from geosched.cli.simulate import run_simulate_command
    from geosched.console.options import one_of, weights_rank
    from geosched.core.models import Weights
    from geosched.simulate.shifting import Flexibility

    generated = Workload(workload, jobs, load, min_gpus, like, seed) if workload is not None else None
    weights_rank(network_weight, cost_weight, carbon_weight)
    flex = Flexibility(slack * 3600.0, flexible_share) if time_shift else None
    run_simulate_command(trace, policy or [policies.DEFAULT_POLICY], workload=generated, fleet=fleet, network=network,
                         snapshot=snapshot,
                         trace_format=one_of("--trace-format", trace_format, "--format", old_format),
                         output=output, no_headers=no_headers, plot=plot, gpu=gpu,
                         weights=Weights(network_weight, cost_weight, carbon_weight, zone_tolerance),
                         strict=not lenient, backfill=backfill, carbon_hourly=carbon_hourly, at=at,
                         carbon_basis=carbon_basis, grid_zones=grid_zones, flex=flex)


@app.command()
def demo() -> None:
    """Run the main job end to end on the embedded default fleet (no cloud account needed)."""
    from geosched.demo import run_demo  # the demo's stages import the cloud and cluster clients
    from geosched.store.db import default_home

    run_demo(State.home or default_home())


# Options of the root command that may also be written after the verb (`geosched place job.yaml --home X`).
GLOBAL_OPTIONS = ("--home",)


def hoist_global_options(argv: list[str]) -> list[str]:
    """Move global options written after the verb to the front, where the root command reads them. Nothing after
    a `--` moves (it belongs to the command)."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        name = arg.split("=", 1)[0]
        if i > 0 and name in GLOBAL_OPTIONS:
            if "=" in arg:
                front.append(arg)
            else:
                front.extend(argv[i:i + 2])
                i += 1
        else:
            rest.append(arg)
        i += 1
    return front + rest


def verb_only(args: list[str]) -> typer.Typer:
    """The root app with only the verb `args` name (after the root's `--home`), or the whole app when they name
    none, ask the root itself (-h, --version) or complete a shell line. typer builds every command's options from
    its signature before parsing anything (a third of what `geosched place -h` costs, issue 25); a run needs its
    own verb's only. The help, the errors and the settings of that verb are the same either way
    (tests/test_cli_startup.py compares every command's help)."""
    if any(name.endswith("_COMPLETE") for name in os.environ):  # typer's completion: the whole tree
        return app
    if args in ([], ["-h"], ["--help"]):  # the root's help lists the verbs: their summaries, not their options
        return _listing(app)
    i = 0
    while i < len(args) and args[i].split("=", 1)[0] in GLOBAL_OPTIONS:
        i += 1 if "=" in args[i] else 2
    if i >= len(args) or args[i].startswith("-"):
        return app
    verb = args[i]
    commands = [c for c in app.registered_commands
                if (c.name or get_command_name(c.callback.__name__ if c.callback else "")) == verb]
    groups = [g for g in app.registered_groups if g.name == verb]
    if len(commands) + len(groups) != 1:
        return app
    one = copy.copy(app)
    one.registered_commands, one.registered_groups = commands, groups
    return one


def _listing(whole: typer.Typer) -> typer.Typer:
    """`whole` with every command's function swapped for one without parameters that carries the same name and
    help: enough for a group's help, which lists its commands by their summaries, without typer building every
    command's options from its signature."""
    listing = copy.copy(whole)
    listing.registered_commands = [_summary_only(info) for info in whole.registered_commands]
    listing.registered_groups = []
    for group in whole.registered_groups:
        group = copy.copy(group)
        if group.typer_instance is not None:
            group.typer_instance = _listing(group.typer_instance)
        listing.registered_groups.append(group)
    return listing


def _summary_only(info: Any) -> Any:
    command = info.callback

    def summary() -> None:
        """Stands in for the command in a listing; never runs."""

    summary.__doc__ = command.__doc__ if command is not None else None
    out = copy.copy(info)
    out.name = info.name or get_command_name(command.__name__ if command is not None else "")
    out.callback = summary
    return out


def main() -> None:
    from geosched.console import logs, redact, render
    from geosched.core.errors import GeoschedError
    from geosched.core.extras import extra_for
    render.scrub_warnings()
    redact.scrub_logging()
    logs.one_shot()  # the daemons' verbs switch to logs.daemon
    try:
        args = hoist_global_options(sys.argv[1:])
        code = verb_only(args)(args=args, prog_name="geosched", standalone_mode=False)
    except typer.TyperException as exc:  # click's usage errors (typer's vendored click)
        # No arguments: typer printed the help already (its own error printer skips this one by name too).
        if type(exc).__name__ != "NoArgsIsHelpError":
            render.error(usage_error(exc))
        sys.exit(exc.exit_code)
    except typer.Abort:  # a confirmation answered no
        render.err.print("aborted", markup=False)
        sys.exit(1)
    except GeoschedError as exc:
        render.error(str(exc))
        sys.exit(exc.exit_code)
    except ModuleNotFoundError as exc:
        # A verb reached a module of an extra the install lacks (geosched.core.extras): one line naming the extra.
        missing = extra_for(exc)
        if missing is None:
            raise
        render.error(str(missing))
        sys.exit(missing.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


def usage_error(exc: typer.TyperException) -> str:
    """click's usage error as one line naming the option and the reason, and where the help is (instead of the
    boxed usage and error panel): `--cost-weight: Input should be greater than or equal to 0 (geosched place
    -h)`."""
    from geosched.console.options import bound_of_non_finite, option_name
    param = getattr(exc, "param", None)
    if isinstance(exc, typer.BadParameter) and param is not None and type(exc).__name__ != "MissingParameter":
        message = f"{option_name(exc.ctx, param)}: {bound_of_non_finite(exc) or exc.message}"
    else:
        message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    where = f" ({ctx.command_path} -h)" if ctx is not None else ""
    return " ".join(message.split()) + where
