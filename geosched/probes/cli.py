"""`geosched probe ...`: parse options, call probes.service, print through geosched.console.render.

Register with `app.add_typer(probes.cli.make_app(State.store, store_targets), name="probe")`: the factory is
called when a command runs, so the root `--home` option is honoured. `store_targets` finds the store's machines
(`geosched.cli.probetargets`: it reads the providers' journal and the host keys the clouds report); it is handed
in because the providers are another edge, which the probes do not import.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from geosched.console.options import finite
from geosched.console.output import NoHeadersOpt, OutputOpt
from geosched.probes.aggregate import NodeScope
from geosched.probes.settings import PlanKind, ProbeSettings, RttMethod

# The probing engine (asyncssh) is imported by the verbs that probe, so `geosched -h` does not load it.
if TYPE_CHECKING:
    from geosched.files.inventory import ProbeTargets, SshTarget
    from geosched.probes import service
    from geosched.store.db import Store


DEFAULTS = ProbeSettings()


class Scope(StrEnum):
    node = "node"
    zone = "zone"


HEATMAP_NODES = 24  # beyond this many nodes a node-pair heatmap is unreadable: zone pairs by default


InventoryOpt = Annotated[Path | None, typer.Option("--inventory", "-i", help="Inventory file (YAML/JSON).")]


class RichProgress:
    """The engine's progress callbacks as a rich bar on stderr (stdout stays clean for --output json)."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from geosched.console import render
        self.bar = Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=render.err, transient=False)
        self.task: Any = None

    def phase(self, name: str, total: int) -> None:
        if self.task is not None:
            self.bar.update(self.task, completed=self.bar.tasks[-1].total)
        self.task = self.bar.add_task(name, total=total)

    def advance(self) -> None:
        if self.task is not None:
            self.bar.advance(self.task)


StoreTargets = Callable[["Store", str | None, Path | None], "ProbeTargets"]
"""(store, gang, private key) -> the store's machines as probe targets (`geosched.cli.probetargets.store_targets`)."""


def make_app(store_factory: Callable[[], Store], store_targets: StoreTargets) -> typer.Typer:
    from geosched.console.output import Output
    from geosched.probes import exports
    app = typer.Typer(no_args_is_help=True, help="Measure the network between nodes over SSH (ping, iperf3).")

    @app.command("run")
    def run_cmd(
        inventory: InventoryOpt = None,
        gang: Annotated[str | None, typer.Option(help="Probe this provisioned gang's machines (from the store).")]
        = None,
        key: Annotated[Path | None, typer.Option(help="Private key for machines geosched launched (default: the "
                                                 "SSH agent and ~/.ssh keys, as provision installs ~/.ssh/*.pub).")]
        = None,
        plan: Annotated[PlanKind, typer.Option(help="full mesh, sampled (O(N + Z^2)), or auto by fleet size.")]
        = PlanKind.AUTO,
        kinds: Annotated[str, typer.Option(help="Comma-separated: rtt, loss, throughput.")] = "rtt,loss,throughput",
        concurrency: Annotated[int, typer.Option(min=1, help="Probes and connection attempts at once.")]
        = DEFAULTS.concurrency,
        deadline: Annotated[float, typer.Option(callback=finite, min=1.0, help="Seconds the whole run may take.")]
        = DEFAULTS.deadline_s,
        connect_timeout: Annotated[float, typer.Option(callback=finite, min=0.5,
                                                       help="Seconds per SSH connection attempt.")]
        = DEFAULTS.connect_timeout_s,
        trust_on_first_use: Annotated[bool, typer.Option(
            "--trust-on-first-use", help="Accept and pin the host key of nodes with none pinned or known.")] = False,
        known_hosts: Annotated[list[Path] | None, typer.Option(
            "--known-hosts", help="Extra known_hosts file (repeatable; default ~/.ssh/known_hosts).")] = None,
        rtt_method: Annotated[RttMethod, typer.Option(help="icmp, tcp, or auto (TCP where ICMP is filtered).")]
        = RttMethod.AUTO,
        ping_count: Annotated[int, typer.Option(min=1, help="Echo requests per pair.")] = DEFAULTS.ping_count,
        throughput_seconds: Annotated[int, typer.Option(min=1, help="Length of each iperf3 test.")]
        = DEFAULTS.throughput_seconds,
        per_zone_pair: Annotated[int, typer.Option(min=1, help="Sampled plan: node pairs per zone pair.")] = 2,
        run_number: Annotated[int | None, typer.Option("--run", min=0, help="Rotation of the sampled plan "
                                                       "(default: the next run number).")] = None,
        node_links: Annotated[NodeScope, typer.Option(help="Node pairs stored per pair (others via their zone "
                                                      "pair).")] = NodeScope.ALL,
        output: OutputOpt = Output.TABLE,
        no_headers: NoHeadersOpt = False,
    ) -> None:
        """Probe nodes and add the measurements to the store: an inventory file's, or (without --inventory) the
        machines the store knows: kept inventories and provisioned gangs that are up (`--gang` for one)."""
        from geosched.console import render
        from geosched.console.output import emit_document
        from geosched.core.errors import InputError
        from geosched.files.inventory import load_inventory
        from geosched.probes.results import run_doc
        from geosched.probes.settings import parse_kinds
        if inventory is not None and gang is not None:
            raise InputError("--gang", "", "give either --inventory or --gang, not both")
        jumps: tuple[SshTarget, ...] = ()
        if inventory is not None:
            targets = load_inventory(inventory).targets
        else:
            with store_factory() as store:
                found = store_targets(store, gang, key)
            targets, jumps = found.probe, found.jumps
            if not targets:
                why = (f"no machines of gang {gang!r} are up in the store" if gang else
                       "the store knows no machines: pass --inventory, or provision first")
                raise InputError("--gang" if gang else "--inventory", "", why)
            if found.unpinned and not trust_on_first_use:
                render.err.print(f"{len(found.unpinned)} machine(s) have no pinned host key "
                                 f"({', '.join(found.unpinned[:5])}): they are reached only if known_hosts has "
                                 "them, or with --trust-on-first-use", markup=False, highlight=False, soft_wrap=True)
        try:
            chosen = parse_kinds(kinds)
        except ValueError as exc:
            raise InputError("--kinds", "", str(exc)) from None
        try:
            settings = ProbeSettings(kinds=chosen, concurrency=concurrency, deadline_s=deadline,
                                     connect_timeout_s=connect_timeout, trust_on_first_use=trust_on_first_use,
                                     rtt_method=rtt_method, ping_count=ping_count,
                                     throughput_seconds=throughput_seconds)
        except ValueError as exc:
            raise InputError("probe run", "", str(exc)) from None
        from geosched.probes import service
        from geosched.probes.engine import PlanOptions

        options = PlanOptions(kind=plan, run=-1 if run_number is None else run_number, per_zone_pair=per_zone_pair)
        from geosched.files.gate import Kind, check_file
        for path in known_hosts or ():  # a FIFO or a device is refused before the progress bar starts (the
            if path.exists():  # service reads each through the gate again, before dialling)
                check_file(path, Kind.KNOWN_HOSTS)
        progress = RichProgress()
        with store_factory() as store, progress.bar:
            outcome = service.run(store, targets, settings, options, known_hosts=known_hosts,
                                  progress=progress, node_scope=node_links, jumps=jumps)
        doc = run_doc(outcome.report, outcome.node_samples, outcome.zone_samples, outcome.slow)
        emit_document(doc, output, lambda: _print_run(outcome), no_headers=no_headers)
        if outcome.report.measured_pairs == 0:
            raise typer.Exit(1)

    @app.command("show")
    def show_cmd(
        inventory: InventoryOpt = None,
        output: OutputOpt = Output.TABLE,
        no_headers: NoHeadersOpt = False,
        scope: Annotated[Scope | None, typer.Option(help="node pairs or zone pairs (default: node pairs in the "
                                                    f"table; the heatmap by zone beyond {HEATMAP_NODES} nodes).")]
        = None,
        heatmap: Annotated[Path | None, typer.Option(help="Also draw an RTT heatmap into FILE.png, .svg or .html: "
                                                     "zone pairs (median RTT, worst loss) or node pairs.")] = None,
    ) -> None:
        """The aggregated network view in the store: medians, p95, loss, throughput, age, samples."""
        from geosched.console import lists as kinds
        from geosched.console import render
        from geosched.console.output import emit_list
        from geosched.core.errors import InputError
        from geosched.files.inventory import load_inventory
        from geosched.plots.files import plot_format
        if heatmap is not None:
            plot_format(heatmap, "--heatmap")
        from geosched.probes import service

        inv = load_inventory(inventory) if inventory is not None else None
        with store_factory() as store:
            nodes = service.known_nodes(store, inv)
            rows = service.show(store, nodes, (scope or Scope.node).value)
            view = store.network_view()
        emit_list(kinds.ZONE_LINKS if scope is Scope.zone else kinds.NODE_LINKS, rows, output, no_headers=no_headers,
                  title=f"measured {(scope or Scope.node).value} pairs")
        if output.tabular:
            slow = service.slow_in_view(view, nodes)
            if slow:
                render.table("slow among zone peers", [{"node": x.name, "zone": x.zone, "reason": x.reason}
                                                       for x in slow])
        if heatmap is not None:
            if not nodes:
                raise InputError("--heatmap", "", "no nodes known: pass --inventory (or import a fleet)")
            # Imported here: matplotlib costs every other geosched command half a second of start-up.
            from geosched.plots.write import heatmap_plot

            drawn = scope or (Scope.zone if len(nodes) > HEATMAP_NODES else Scope.node)
            render.err.print(f"wrote {heatmap_plot(heatmap, view, nodes, drawn.value)}", markup=False)

    @app.command("export")
    def export_cmd(
        networktopology: Annotated[Path | None, typer.Option(help="NetworkTopology object (YAML, or JSON by "
                                                             ".json).")] = None,
        configmap: Annotated[Path | None, typer.Option(help="netperf ConfigMap for the NetworkTopology "
                                                       "controller.")] = None,
        snapshot: Annotated[Path | None, typer.Option(help="geosched network view file.")] = None,
        inventory: InventoryOpt = None,
        name: Annotated[str, typer.Option(help="NetworkTopology name.")] = exports.DEFAULT_NT_NAME,
        namespace: Annotated[str, typer.Option(help="Namespace of both objects.")] = exports.DEFAULT_NAMESPACE,
        configmap_name: Annotated[str, typer.Option(help="ConfigMap name.")] = exports.DEFAULT_CONFIGMAP,
        weights_name: Annotated[str, typer.Option(help="Weights name the plugins select.")]
        = exports.DEFAULT_WEIGHTS,
    ) -> None:
        """Write the store's view as a NetworkTopology, its netperf ConfigMap and/or a snapshot file."""
        from geosched.console import render
        from geosched.core.errors import InputError
        from geosched.files.inventory import load_inventory
        paths = {k: v for k, v in (("networktopology", networktopology), ("configmap", configmap),
                                   ("snapshot", snapshot)) if v is not None}
        if not paths:
            raise InputError("probe export", "", "nothing to write: give --networktopology, --configmap or --snapshot")
        from geosched.probes import service

        inv = load_inventory(inventory) if inventory is not None else None
        with store_factory() as store:
            nodes = service.known_nodes(store, inv)
            if not nodes and ("networktopology" in paths or "configmap" in paths):
                raise InputError("--inventory", "", "no nodes known: pass --inventory (or import a fleet)")
            try:
                written = service.export(store, nodes, paths,
                                         service.ExportNames(name, namespace, configmap_name, weights_name))
            except ValueError as exc:
                raise InputError("probe export", "", str(exc)) from None
        for path in written:
            render.out.print(f"wrote {path}")

    return app


def _print_run(outcome: service.RunOutcome) -> None:
    from geosched.console import render
    r = outcome.report
    render.out.print(
        f"run {r.plan.run} ({r.plan.kind.value} plan): {len(r.echoes)}/{len(r.plan.echo_pairs)} echo pairs, "
        f"{len(r.throughputs)}/{len(r.plan.throughput_pairs)} throughput tests in {r.wall_s:.1f}s; stored "
        f"{outcome.node_samples} node and {outcome.zone_samples} zone samples; "
        f"{sum(r.connections.values())} SSH connections to {len(r.connections)} hosts")
    if outcome.slow:
        render.table("slow among zone peers", [{"node": s.name, "zone": s.zone, "reason": s.reason}
                                               for s in outcome.slow])
    if r.failures:
        render.table("failures", [{"subject": f.subject, "kind": f.kind.value, "reason": f.reason}
                                  for f in r.failures])
    else:
        render.out.print("no failures")
