"""Everything one report shows, computed from its inputs. Pure: the I/O is in `report.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geosched import policies
from geosched.report import baseline
from geosched.report.accounting import Rates, account, select
from geosched.report.aggregate import Group, Grouping, ReportKind, aggregate, total, usd_by_source
from geosched.report.records import Interval, Line, Origin, Usage
from geosched.report.window import Window
from geosched.store.uncharged import KarpenterRender

# Said wherever the report is read (its notes; the table's caption), since it is not what a job used.
NODEGROUP_NOTE = ("{n} node group(s), node pool(s) or ProvisioningRequest gang(s) geosched created (provision "
                  "--cluster, up) are node-group capacity, charged whole until `down` sees it deleted, idle time "
                  "included: a group from its create request, the nodes an autoscaler made for a ProvisioningRequest "
                  "from their registration (late by their boot); before the job's pods run and after it ends, the "
                  "nodes are the gang's, not free")

# Said whenever the store remembers a Karpenter render up to the window's end: that capacity is left out, not zero.
KARPENTER_NOTE = ("{n} gang(s) of Karpenter capacity geosched rendered for GitOps (provision|up --karpenter: {which}) "
                  "are not charged: geosched does not apply the NodePools, so Karpenter launches and removes their "
                  "nodes (labelled karpenter.sh/nodepool=<pool>) without a ledger row, and their cost, idle time "
                  "included, is in the cloud's bill, not in this report (METHODOLOGY.md)")


def karpenter_note(renders: Sequence[KarpenterRender]) -> str | None:
    """The note naming the rendered gangs (a gang rendered again counts once), or None. Pure."""
    gangs = dict.fromkeys((r.gang, r.cluster) for r in renders)
    if not gangs:
        return None
    named = [f"{gang} in cluster {cluster}" for gang, cluster in list(gangs)[:3]]
    more = f" and {len(gangs) - 3} more" if len(gangs) > 3 else ""
    return KARPENTER_NOTE.format(n=len(gangs), which=", ".join(named) + more)


@dataclass(frozen=True)
class ReportData:
    kind: ReportKind
    by: Grouping
    window: Window
    generated_at: float
    usage: Usage
    embodied: bool
    lines: tuple[Line, ...]
    groups: Mapping[Grouping, list[Group]]
    total: Group
    usd_by_source: Mapping[str, float]
    notes: tuple[str, ...]
    outcomes: tuple[baseline.Outcome, ...] = ()
    savings: tuple[baseline.Savings, ...] = ()
    snapshot: str | None = None

    @property
    def rows(self) -> list[Group]:
        return self.groups[self.by]


def assemble(intervals: Sequence[Interval], window: Window, rates: Rates, *, kind: ReportKind, by: Grouping,
             usage: Usage, now: float, groupings: Sequence[Grouping] = (),
             placements: Sequence[Mapping[str, Any]] = (), ctx: policies.PlacementContext | None = None,
             snapshot: str | None = None, karpenter: Sequence[KarpenterRender] = ()) -> ReportData:
    """The lines of the selected intervals, grouped by `by` (and by every grouping in `groupings`); with a
    placement context, the baseline comparison too."""
    chosen = select(intervals, usage)
    accounted = account(chosen, window, rates)
    lines = accounted.lines
    notes = list(accounted.notes)
    journal = len({id(line.interval) for line in lines if line.interval.origin is Origin.JOURNAL})
    if journal:
        notes.append(f"{journal} interval(s) come from the providers' journal (no ledger row): their start is the "
                     f"launch intent and their end the journal's last write, see METHODOLOGY.md")
    grouped = {(line.interval.cluster, line.interval.job) for line in lines if line.interval.nodegroup}
    if grouped:
        notes.append(NODEGROUP_NOTE.format(n=len(grouped)))
    if (uncharged := karpenter_note(karpenter)) is not None:
        notes.append(uncharged)
    wanted = dict.fromkeys([by, *groupings])
    groups = {g: aggregate(lines, g, kind) for g in wanted}
    outcomes: tuple[baseline.Outcome, ...] = ()
    saved: tuple[baseline.Savings, ...] = ()
    if ctx is not None:
        def costing(spans: Sequence[Interval]) -> tuple[float | None, float | None]:
            modelled = account(spans, window, rates).lines
            if not modelled:
                return None, None
            summed = total(modelled)
            return (summed.usd if not summed.unpriced_gpu_hours else None,
                    summed.gco2e if not summed.uncounted_kwh else None)

        outcomes = tuple(baseline.compare(placements, baseline.job_usage(lines), ctx, costing, window.until))
        saved = tuple(baseline.savings(outcomes))
    return ReportData(kind=kind, by=by, window=window, generated_at=now, usage=usage,
                      embodied=rates.energy.embodied, lines=lines, groups=groups, total=total(lines),
                      usd_by_source=usd_by_source(lines), notes=tuple(notes), outcomes=outcomes, savings=saved,
                      snapshot=snapshot)
