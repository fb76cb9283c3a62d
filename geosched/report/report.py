"""`report(store, ...)`: read the ledger, the journal, prices and placements from the store, compute, and render
as a table's rows or as CSV, JSON, Markdown or HTML text (written atomically to `out` when given).

This is the module of the package that does I/O besides `ledger`, `journal` and `reads`; the numbers come from
the pure modules (`accounting`, `aggregate`, `baseline`, `energy`, `assemble`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from geosched import policies
from geosched.core import catalog
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.energy import DEFAULT_GPU_UTILISATION, EnergyModel
from geosched.core.errors import InputError
from geosched.core.models import CarbonSignal, Fleet, NetworkView, Offering, Pricing
from geosched.core.specs import platforms, spec_index
from geosched.files.csvtext import to_csv
from geosched.files.decl.reports import (
    BaselineJob,
    Baselines,
    CarbonReportDoc,
    CarbonRow,
    CostReportDoc,
    CostRow,
    Saving,
    Total,
)
from geosched.files.documents import Output, document
from geosched.files.fields import dump
from geosched.files.writes import write_file
from geosched.report import formats, html, reads
from geosched.report.accounting import Rates
from geosched.report.aggregate import Grouping, ReportKind
from geosched.report.assemble import ReportData, assemble
from geosched.report.baseline import EMBEDDED, stands_on
from geosched.report.ledger import intervals as ledger_intervals
from geosched.report.prices import PriceBook, PriceKey
from geosched.report.records import Interval, Usage
from geosched.report.window import iso, window
from geosched.store.db import Store
from geosched.store.uncharged import karpenter_renders


@dataclass(frozen=True)
class Rendered:
    """What a report produced: its rows (table and wide, drawn from `kinds.report_columns`), or text (other
    outputs), and the file written, if any."""

    title: str
    output: Output
    rows: list[dict[str, Any]] = field(default_factory=list)
    caption: str | None = None
    text: str | None = None
    path: Path | None = None
    notes: tuple[str, ...] = ()
    data: ReportData | None = None


@dataclass(frozen=True)
class Snapshot:
    """The fleet the baselines are re-placed on."""

    fleet: Fleet
    network: NetworkView
    origin: str


def report(store: Store, kind: ReportKind | str = ReportKind.COST, by: Grouping | str = Grouping.REGION,
           since: str | float | None = None, until: str | float | None = None, output: Output | str = Output.TABLE,
           out: Path | None = None, *, now: float | None = None, carbon: CarbonSignal | None = None,
           snapshot: Snapshot | None = None, usage: Usage | str = Usage.AUTO, embodied: bool = False,
           utilisation: float | None = None, journal: bool = True) -> Rendered:
    """A cost or carbon report of the usage in [since, until), grouped `by`. `since`/`until` are Unix seconds
    or text (ISO date/date-time, naive = UTC, or an age like 7d); `until` defaults to now. The table, HTML, JSON
    and YAML also compare the recorded placements with baseline placements on `snapshot` (default: the embedded
    fleet); CSV and Markdown carry the usage rows alone."""
    kind, by, output, usage = ReportKind(kind), Grouping(by), Output(output), Usage(usage)
    if output.tabular and out is not None:
        raise InputError("--out", "", "a table is for the terminal; write csv, json, md or html to a file")
    if utilisation is not None and not 0.0 <= utilisation <= 1.0:
        raise InputError("--utilisation", "", f"must be within [0, 1], got {utilisation:g}")
    now = time.time() if now is None else now
    win = window(since, until, now)
    compare = output.tabular or output in (Output.HTML, Output.JSON, Output.YAML)
    snap = snapshot or (Snapshot(default_fleet(), default_network(), EMBEDDED) if compare else None)
    used = ledger_intervals(store, win.since, win.until, journal=journal)
    rates = _rates(store, used, snap.fleet if snap else None, carbon, embodied, utilisation)
    data = assemble(used, win, rates, kind=kind, by=by, usage=usage, now=now,
                    groupings=tuple(Grouping) if output is Output.HTML else (),
                    placements=store.placements() if compare else (),
                    ctx=policies.PlacementContext(snap.fleet, snap.network, _fleet_signal(snap.fleet, carbon))
                    if snap else None,
                    snapshot=snap.origin if snap else None,
                    karpenter=karpenter_renders(store, win.until))
    return _render(data, output, out)


def _fleet_signal(fleet: Fleet, carbon: CarbonSignal | None) -> CarbonSignal | None:
    """The policies read a yearly mean for every region of the fleet; a signal that only gives some regions, or
    only hourly values, is completed with the fleet's own grid figures."""
    if carbon is None:
        return None
    return replace(carbon, intensity={**CarbonSignal.from_fleet(fleet).intensity, **carbon.intensity})


def _rates(store: Store, used: list[Interval], fleet: Fleet | None, carbon: CarbonSignal | None, embodied: bool,
           utilisation: float | None) -> Rates:
    shipped = catalog.offerings()
    keys: set[PriceKey] = {(i.provider, i.instance_type, i.zone or "", i.pricing.value) for i in used
                           if i.instance_type}
    extra: list[Offering] = []
    # The store's own fleet (imported snapshot, inventory machines) declares the regions, prices and GPUs of
    # machines the catalog does not know (on-premises sites), as the comparison snapshot does for its nodes.
    fleets = [f for f in (store.load_fleet(), fleet) if f is not None]
    known = {(o.provider, o.instance_type, o.zone) for o in shipped}
    for f in fleets:
        keys |= {(n.provider, n.instance_type, n.zone, p.value) for n in f.nodes for p in Pricing}
        # A node the catalog does not sell (on-premises, a private price) is priced at its own figure.
        extra += [Offering(n.provider, n.instance_type, n.gpu, n.gpus, 0.0, 0.0, n.region, n.zone, n.price_ondemand,
                           n.price_spot) for n in f.nodes if (n.provider, n.instance_type, n.zone) not in known]
    specs = spec_index([*shipped, *reads.refreshed_offerings(store)])
    regions = {k: v for f in fleets for k, v in f.regions.items()} | catalog.regions()
    power = {k: v for f in fleets for k, v in f.gpu_power.items()} | catalog.gpu_power()
    model = EnergyModel(gpu_power=power, embodied=embodied,
                        gpu_utilisation=DEFAULT_GPU_UTILISATION if utilisation is None else utilisation)
    return Rates(prices=PriceBook.build(reads.price_rows(store, keys), [*shipped, *extra]), specs=specs,
                 platforms=platforms(specs), regions=regions, energy=model, carbon=carbon,
                 fixed=reads.block_prices(store))


def _render(data: ReportData, output: Output, out: Path | None) -> Rendered:
    title = f"{data.kind.value} by {data.by.value}"
    declared = [formats.row_doc(g, data.by, data.kind, data.embodied) for g in data.rows]
    rows = [r.dump() for r in declared]
    if output.tabular:
        return Rendered(title, output, rows, _caption(data), notes=data.notes, data=data)
    if output is Output.CSV:
        text = to_csv(rows)
    elif output in (Output.JSON, Output.YAML):
        doc = _document(data, declared)
        text = dump(document(doc.KIND, doc.dump()), output.value)
    elif output is Output.MD:
        text = formats.to_markdown(f"geosched {title}", _meta(data), rows, data.notes)
    else:
        text = html.page(data)
    if out is not None:
        write_file(out, text)
    return Rendered(title, output, text=text, path=out, notes=data.notes, data=data)


def _meta(data: ReportData) -> list[str]:
    t = data.total
    since = iso(data.window.since) if data.window.since is not None else "the first record"
    sources = ", ".join(f"{k} ${v:,.2f}" for k, v in data.usd_by_source.items()) or "nothing priced"
    return [f"window: {since} to {iso(data.window.until)} (UTC)", f"usage counted: {data.usage.value} intervals",
            f"total: {t.gpu_hours:,.2f} GPU-h, ${t.usd:,.2f}, {t.energy_kwh:,.2f} kWh, {t.gco2e / 1000:,.3f} kgCO2e",
            f"priced from: {sources}"]


def _caption(data: ReportData) -> str:
    lines = _meta(data)[2:]
    if any(line.interval.nodegroup for line in data.lines):
        lines.append("node-group capacity charged from create to `down`, idle time included")
    if data.notes:
        lines.append(f"{len(data.notes)} note(s): --output md or json lists them")
    return "; ".join(lines)


def _document(data: ReportData, rows: list[CostRow | CarbonRow]) -> CostReportDoc | CarbonReportDoc:
    t = data.total
    snapshot = data.snapshot or "-"
    kind = CostReportDoc if data.kind is ReportKind.COST else CarbonReportDoc
    return kind.build(
        report=data.kind.value,
        by=data.by.value,
        since=iso(data.window.since) if data.window.since is not None else None,
        until=iso(data.window.until),
        generated_at=iso(data.generated_at),
        usage=data.usage.value,
        rows=rows,
        total=Total.build(intervals=t.intervals, gpu_hours=t.gpu_hours, cost_usd=t.usd,
                          unpriced_gpu_hours=t.unpriced_gpu_hours, energy_kwh=t.energy_kwh, gco2e=t.gco2e,
                          uncounted_kwh=t.uncounted_kwh, embodied_gco2e=t.embodied_gco2e),
        priced_from_usd=dict(data.usd_by_source),
        baselines=Baselines.build(
            snapshot=data.snapshot,
            savings=[Saving.build(baseline=s.label, jobs=s.jobs, baseline_usd=s.baseline_usd,
                                  recorded_usd=s.reference_usd, saved_usd=s.usd_saved,
                                  baseline_gco2e=s.baseline_gco2e, recorded_gco2e=s.reference_gco2e,
                                  saved_gco2e=s.gco2e_saved, run_ratio=s.run_ratio,
                                  saved_usd_at_equal_run_time=s.usd_saved_at_equal_run_time,
                                  saved_gco2e_at_equal_run_time=s.gco2e_saved_at_equal_run_time,
                                  stands_on=stands_on(s, snapshot)) for s in data.savings],
            jobs=[BaselineJob.build(job=o.job, placement=o.label, policy=o.policy, usd=o.usd, gco2e=o.gco2e,
                                    zones=list(o.zones), regions=list(o.regions), run_ratio=o.run_ratio,
                                    bound=o.bound, note=o.note)
                  for o in data.outcomes],
        ),
        notes=list(data.notes),
        methodology="geosched/report/METHODOLOGY.md",
    )
