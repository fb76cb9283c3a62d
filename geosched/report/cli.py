"""`geosched report cost|carbon`: parse options, call `report`, print. Register with
`app.add_typer(make_app(lambda: State.store()), name="report")`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from geosched.console.options import finite
from geosched.console.output import NoHeadersOpt, Output, ReportOutputOpt
from geosched.report.aggregate import Grouping, ReportKind
from geosched.report.records import Usage

# The report re-places baselines (numpy, the policies) and draws (matplotlib): imported when one is made, so
# `geosched -h` does not load them.
if TYPE_CHECKING:
    from geosched.core.models import CarbonSignal
    from geosched.report.assemble import ReportData
    from geosched.report.report import Rendered
    from geosched.store.db import Store

ByOpt = Annotated[Grouping, typer.Option("--by", help="Group rows by job, cluster, region, provider or (UTC) day.")]
SinceOpt = Annotated[str | None, typer.Option(
    "--since", help="Start: ISO date/time (UTC unless an offset is given) or an age like 7d, 12h, 30m.")]
UntilOpt = Annotated[str | None, typer.Option("--until", help="End, same forms as --since (default: now).")]
OutputOpt = ReportOutputOpt
OutFileOpt = Annotated[Path | None, typer.Option("--out", help="Write to this file (atomically) instead of stdout.")]
UsageOpt = Annotated[Usage, typer.Option(
    "--usage", help="node: what providers bill; job: what jobs used; auto: nodes, plus jobs with no node record.")]
CarbonOpt = Annotated[Path | None, typer.Option(
    "--carbon", help="CSV region,datetime|hour,gco2e_per_kwh: grid intensity per region, hour by hour (see "
    "METHODOLOGY.md).")]
SnapshotOpt = Annotated[Path | None, typer.Option(
    "--snapshot", help="Fleet + network snapshot directory the baselines are re-placed on (default: embedded).")]
FleetOpt = Annotated[Path | None, typer.Option("--fleet", help="Fleet file for the baselines (instead of --snapshot).")]
NetworkOpt = Annotated[Path | None, typer.Option("--network", help="Network file for the baselines.")]
EmbodiedOpt = Annotated[bool, typer.Option("--embodied", help="Add embodied (manufacturing) emissions, CCF's method.")]
UtilisationOpt = Annotated[float | None, typer.Option(
    "--utilisation", min=0.0, max=1.0, callback=finite,
    help="GPU utilisation for intervals that record none (default 0.9).")]


def make_app(store_factory: Callable[[], Store]) -> typer.Typer:
    app = typer.Typer(no_args_is_help=True, help="What recorded usage cost and emitted, and what baselines would have.")

    def run(kind: ReportKind, by: Grouping, since: str | None, until: str | None, output: Output, out: Path | None,
            usage: Usage, carbon: Path | None, snapshot: Path | None, fleet: Path | None, network: Path | None,
            embodied: bool, utilisation: float | None, no_headers: bool) -> None:
        from geosched.console import render
        from geosched.report.report import Snapshot, report
        from geosched.store.sources import resolve

        signal = _signal(carbon)
        snap = None
        if snapshot or fleet or network:
            chosen = resolve(fleet, network, snapshot)
            snap = Snapshot(chosen.fleet, chosen.network, chosen.origin)
        with store_factory() as store:
            result = report(store, kind, by, since, until, output, out, carbon=signal, snapshot=snap, usage=usage,
                            embodied=embodied, utilisation=utilisation)
        with render.headers(not no_headers):
            _show(result)

    @app.command("cost")
    def cost(by: ByOpt = Grouping.REGION, since: SinceOpt = None, until: UntilOpt = None,
             output: OutputOpt = Output.TABLE, out: OutFileOpt = None, usage: UsageOpt = Usage.AUTO,
             carbon: CarbonOpt = None, snapshot: SnapshotOpt = None, fleet: FleetOpt = None,
             network: NetworkOpt = None, embodied: EmbodiedOpt = False, utilisation: UtilisationOpt = None,
             no_headers: NoHeadersOpt = False) -> None:
        """Cost of recorded usage, priced at the price of its time."""
        run(ReportKind.COST, by, since, until, output, out, usage, carbon, snapshot, fleet, network, embodied,
            utilisation, no_headers)

    @app.command("carbon")
    def carbon_cmd(by: ByOpt = Grouping.REGION, since: SinceOpt = None, until: UntilOpt = None,
                   output: OutputOpt = Output.TABLE, out: OutFileOpt = None, usage: UsageOpt = Usage.AUTO,
                   carbon: CarbonOpt = None, snapshot: SnapshotOpt = None, fleet: FleetOpt = None,
                   network: NetworkOpt = None, embodied: EmbodiedOpt = False,
                   utilisation: UtilisationOpt = None, no_headers: NoHeadersOpt = False) -> None:
        """Energy and emissions of recorded usage (Cloud Carbon Footprint's method)."""
        run(ReportKind.CARBON, by, since, until, output, out, usage, carbon, snapshot, fleet, network, embodied,
            utilisation, no_headers)

    return app


def _signal(path: Path | None) -> CarbonSignal | None:
    from geosched.files.gate import Kind, read_text
    from geosched.grid.carbon import parse_carbon_csv
    return parse_carbon_csv(read_text(path, Kind.CARBON), str(path)) if path is not None else None


def _show(result: Rendered) -> None:
    from geosched.console import render
    from geosched.console.lists import report_columns
    from geosched.console.output import columns_table
    if result.path is not None:
        render.out.print(f"wrote {result.path}", markup=False)
    elif result.text is not None:
        # Raw text (CSV, JSON, Markdown, HTML) goes to stdout untouched, so it can be piped.
        typer.echo(result.text, nl=False)
    else:
        data = result.data
        assert data is not None  # a table is always drawn from the report's data
        columns_table(f"geosched {result.title}", report_columns(data.kind.value, data.by.value, data.embodied),
                      result.rows, wide=result.output is Output.WIDE, caption=result.caption)
        show_savings(data)


def show_savings(data: ReportData) -> None:
    """The baselines the JSON document carries, as a table, and one line per baseline saying what its saving
    stands on (how much longer its gangs were predicted to run, and why). Not under --no-headers, where stdout
    carries the usage rows alone, for `awk`."""
    from geosched.console import render
    if not data.savings or not render.headers_shown():
        return
    from geosched.report import formats
    from geosched.report.baseline import stands_on

    render.table(f"against baselines (each re-placed on snapshot '{data.snapshot or '-'}' for the same span; saved = "
                 "baseline - recorded)", formats.savings_rows(data.savings, data.kind))
    for s in data.savings:
        render.out.print(f"  {stands_on(s, data.snapshot or '-')}", markup=False)
