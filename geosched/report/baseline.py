"""What other placements of the same jobs would have cost and emitted. Pure: a snapshot in, numbers out.

Method. For every job with recorded usage in the window and a recorded placement (the newest one made before
the window's end, else the oldest), the gang is rebuilt from the placement (workers, GPUs per worker, the GPU
model of its nodes, the pricing of its usage) and placed again with each baseline policy on the snapshot fleet;
each re-placement holds its nodes for the same wall-clock span as the job's recorded usage (first start to last
end inside the window) and is costed by the very accounting the report uses (prices of that time, same energy
model, same grid intensities). The reference it is compared with is the recorded placement costed the same way
on the snapshot when all its nodes are in it, else the ledger's own figures for the job.

Run time. A baseline does the job's work, not its hours: its placement's predicted step time (the shared
score's compute plus ring all-reduce on the snapshot's measured links) over the recorded placement's, both for
the rebuilt gang, scales what it is charged. Its cost and emissions are those of its nodes over the recorded
span times that ratio (`run_ratio`), i.e. at the average prices and grid intensities of the span: a placement
whose steps are 40x slower runs 40x longer and pays 40x. When the recorded nodes are not in the snapshot
there is no predicted step to compare with: the ratio is 1 and the outcome says so.

Time shifting. A job decided with a later start (`place --record` of a flexible job stores its `start` block) is
also compared with itself started when it was decided (`start-now`): the same nodes for the same span, earlier by
the deferral, at the grid and prices of those hours; the difference is what waiting saved.

Limits: jobs are re-placed one at a time on the snapshot's free capacity, not against each other; the job's
zone, region and cluster limits are not in the recorded placement, so baselines may go where the job was not
allowed to; a baseline that finds no fit is reported, not guessed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geosched import policies
from geosched.core.models import Fleet, Job, Placement, Pricing, Score, Weights
from geosched.policies.scoring import evaluate
from geosched.report.records import Interval, Kind, Line, Origin, Source


@dataclass(frozen=True, slots=True)
class Baseline:
    label: str
    policy: str
    weights: Weights


# The default weights already give carbon no weight; the label says what the comparison is about.
BASELINES: tuple[Baseline, ...] = (
    Baseline("spread", "spread", Weights()),
    Baseline("tas", "tas", Weights()),
    Baseline("cheapest", "cheapest", Weights()),
    Baseline("carbon-blind", policies.DEFAULT_POLICY, Weights(carbon=0.0)),
)

# (usd, gco2e) of a set of intervals, from the report's accounting.
Costing = Callable[[Sequence[Interval]], tuple[float | None, float | None]]


@dataclass(frozen=True, slots=True)
class JobUsage:
    job: str
    start: float
    end: float
    usd: float | None
    gco2e: float | None
    gpu: str | None
    pricing: Pricing


@dataclass(frozen=True, slots=True)
class Outcome:
    job: str
    label: str
    policy: str
    usd: float | None
    gco2e: float | None
    zones: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    note: str | None = None
    run_ratio: float | None = None  # predicted run time over the recorded placement's (1.0 for the recorded)
    bound: str | None = None  # what bounds a baseline's step: its slowest ring hop (`hop_text`)


@dataclass(frozen=True, slots=True)
class Savings:
    """Totals over the jobs both the baseline and the reference could cost; positive = the recorded placements
    cost or emitted less than the baseline would have."""

    label: str
    jobs: int
    baseline_usd: float
    reference_usd: float
    baseline_gco2e: float
    reference_gco2e: float
    # What the saving stands on: the baseline's cost and emissions before its run time was scaled (its nodes for
    # the recorded span), and its slowest job (the largest run ratio, and the hop that bounds its step).
    unscaled_usd: float = 0.0
    unscaled_gco2e: float = 0.0
    run_ratio: float = 1.0
    slowest_job: str | None = None
    slowest_bound: str | None = None

    @property
    def usd_saved(self) -> float:
        return self.baseline_usd - self.reference_usd

    @property
    def gco2e_saved(self) -> float:
        return self.baseline_gco2e - self.reference_gco2e

    @property
    def usd_saved_at_equal_run_time(self) -> float:
        return self.unscaled_usd - self.reference_usd

    @property
    def gco2e_saved_at_equal_run_time(self) -> float:
        return self.unscaled_gco2e - self.reference_gco2e


def stands_on(s: Savings, snapshot: str) -> str:
    """One line saying what a saving against a baseline stands on: how much longer the baseline's gangs were
    predicted to run (and why, by the hop that bounds the slowest), and what is left at equal run time."""
    if s.run_ratio <= 1.0 + 1e-9:
        return (f"against {s.label}: run time as recorded (no gang predicted slower): the saving is prices and "
                "grid alone")
    why = f"; {s.slowest_bound}" if s.slowest_bound else ""
    model = " (the shipped network model, not measurements)" if snapshot == EMBEDDED else ""
    usd = s.usd_saved_at_equal_run_time
    return (f"against {s.label}: its gangs predicted to run up to {s.run_ratio:.2f}x as long ({s.slowest_job}"
            f"{why}) on the links of snapshot '{snapshot}'{model}; at equal run time the saving is "
            f"{'-' if usd < 0 else ''}${abs(usd):,.0f} and {s.gco2e_saved_at_equal_run_time / 1000:,.1f} kgCO2e")


def hop_text(score: Score) -> str | None:
    """The ring hop that bounds a placement's step, by the figures the score read for it (one node pair)."""
    if score.hop is None:
        return None
    loss = f"{score.worst_loss:.1%} loss, " if score.worst_loss > 0 else ""
    return (f"slowest ring hop: {loss}{score.worst_rtt_ms:.2f} ms RTT, {score.min_throughput_gbps:g} Gbit/s"
            f" ({score.hop[0]} -> {score.hop[1]})")


REFERENCE = "recorded"
# The snapshot the baselines are re-placed on when the user names none: the embedded fleet and network model.
EMBEDDED = "embedded default"


def job_usage(lines: Iterable[Line]) -> dict[str, JobUsage]:
    per_job: dict[str, list[Line]] = {}
    for line in lines:
        per_job.setdefault(line.interval.job_name, []).append(line)
    out = {}
    for job, items in per_job.items():
        priced = [x.usd for x in items if x.usd is not None]
        emitted = [x.gco2e for x in items if x.gco2e is not None]
        gpus = [x.interval.gpu for x in items]
        pricing = [x.interval.pricing for x in items]
        out[job] = JobUsage(job, min(x.start for x in items), max(x.end for x in items),
                            math.fsum(priced) if priced else None, math.fsum(emitted) if emitted else None,
                            max(set(gpus), key=gpus.count), max(set(pricing), key=pricing.count))
    return out


def rebuild_job(doc: Mapping[str, Any], fleet: Fleet, usage: JobUsage) -> Job | None:
    nodes = doc.get("nodes") or []
    workers = sum(int(n.get("workers", 0)) for n in nodes)
    gpus = int(doc.get("gpus") or 0)
    if workers <= 0 or gpus <= 0 or gpus % workers:
        return None
    known = [fleet.by_name[n["node"]].gpu for n in nodes if n.get("node") in fleet.by_name]
    gpu = known[0] if known else usage.gpu
    return Job(name=str(doc["job"]), workers=workers, gpus_per_worker=gpus // workers, gpu=gpu,
               pricing=usage.pricing)


def placement_intervals(job: Job, assignments: Iterable[tuple[str, int]], fleet: Fleet, start: float,
                        end: float) -> list[Interval] | None:
    """The job's GPUs on each assigned node for [start, end); None if a node is not in the fleet."""
    out = []
    for name, workers in assignments:
        node = fleet.by_name.get(name)
        if node is None:
            return None
        # Source is a ledger field; a modelled interval is marked by its origin instead.
        out.append(Interval(kind=Kind.JOB, name=node.name, job=job.name, provider=node.provider, region=node.region,
                            zone=node.zone, cluster=node.cluster, instance_type=node.instance_type, gpu=node.gpu,
                            gpus=workers * job.gpus_per_worker, pricing=job.pricing, start=start, end=end,
                            source=Source.DEMO, origin=Origin.MODEL))
    return out


def recorded_placements(placements: Sequence[Mapping[str, Any]], until: float) -> dict[str, Mapping[str, Any]]:
    """Per job, the placement its usage in the window ran under: the newest one recorded before the window's
    end; failing that (a clock or an import moved it later), the oldest one."""
    chosen: dict[str, Mapping[str, Any]] = {}
    # Oldest first: every placement before `until` replaces the one before it; one after it only fills a gap.
    for placed in sorted(placements, key=lambda p: (float(p["created_at"]), int(p["id"]))):
        job = str(placed["job"])
        if float(placed["created_at"]) < until or job not in chosen:
            chosen[job] = placed
    return chosen


def compare(placements: Sequence[Mapping[str, Any]], usage: Mapping[str, JobUsage], ctx: policies.PlacementContext,
            costing: Costing, until: float, baselines: Sequence[Baseline] = BASELINES) -> list[Outcome]:
    """For each job with usage and a placement: the reference outcome first, then one per baseline. Jobs with
    usage but no placement get one outcome with a note."""
    fleet = ctx.fleet
    latest = recorded_placements(placements, until)
    out: list[Outcome] = []
    for name in sorted(usage):
        used = usage[name]
        doc = latest.get(name)
        if not doc:
            out.append(Outcome(name, REFERENCE, "-", used.usd, used.gco2e, note="no recorded placement"))
            continue
        job = rebuild_job(doc, fleet, used)
        if job is None:
            out.append(Outcome(name, REFERENCE, str(doc.get("policy")), used.usd, used.gco2e,
                               note="recorded placement has no usable assignment"))
            continue
        assigned = [(str(n["node"]), int(n["workers"])) for n in doc["nodes"]]
        recorded = placement_intervals(job, assigned, fleet, used.start, used.end)
        if recorded is None:
            out.append(Outcome(name, REFERENCE, str(doc.get("policy")), used.usd, used.gco2e,
                               tuple(doc.get("zones") or ()), tuple(doc.get("regions") or ()),
                               note="ledger figures (its nodes are not in the snapshot)", run_ratio=1.0))
            step = None
        else:
            usd, gco2e = costing(recorded)
            out.append(Outcome(name, REFERENCE, str(doc.get("policy")), usd, gco2e, tuple(doc.get("zones") or ()),
                               tuple(doc.get("regions") or ()), note="modelled on the snapshot", run_ratio=1.0))
            step = step_ms(job, assigned, ctx)
            deferred = float((doc.get("start") or {}).get("deferred_s") or 0.0)
            if deferred > 0:
                out.append(_started_now(job, assigned, fleet, used, costing, deferred, doc))
        for b in baselines:
            out.append(_replace(job, b, ctx, used, costing, step))
    return out


START_NOW = "start-now"


def _started_now(job: Job, assigned: Sequence[tuple[str, int]], fleet: Fleet, used: JobUsage, costing: Costing,
                 deferred: float, doc: Mapping[str, Any]) -> Outcome:
    """A time-shifted job (its placement's `start` block: policies/timeshift.py) had it started when it was
    decided: the same nodes for the same span, `deferred` seconds earlier, costed by the same accounting at the
    prices and grid intensities of those hours. What the shift saved is this less the recorded outcome."""
    spans = placement_intervals(job, assigned, fleet, used.start - deferred, used.end - deferred)
    assert spans is not None  # the reference was costed on the same nodes
    usd, gco2e = costing(spans)
    start = doc.get("start") or {}
    return Outcome(job.name, START_NOW, str(doc.get("policy")), usd, gco2e, tuple(doc.get("zones") or ()),
                   tuple(doc.get("regions") or ()), run_ratio=1.0,
                   note=f"the same nodes from {start.get('decided_at', '?')}, when it was decided, instead of "
                        f"{start.get('at', '?')}")


def step_ms(job: Job, assigned: Sequence[tuple[str, int]], ctx: policies.PlacementContext) -> float:
    """The predicted step time of `job` on these (node, workers), by the score every policy is judged by."""
    index = {name: i for i, name in enumerate(ctx.names)}
    nodes = np.array([index[name] for name, _ in assigned], dtype=np.int64)
    workers = np.array([k for _, k in assigned], dtype=np.int64)
    return evaluate(policies.job_view(ctx, job, Weights(), explain=False), nodes, workers).step_ms


def _replace(job: Job, baseline: Baseline, ctx: policies.PlacementContext, used: JobUsage,
             costing: Costing, recorded_step_ms: float | None) -> Outcome:
    result = policies.place(job, ctx, baseline.policy, baseline.weights, explain=False)
    if not isinstance(result, Placement):
        return Outcome(job.name, baseline.label, baseline.policy, None, None, note=result.message)
    spans = placement_intervals(job, [(a.node, a.workers) for a in result.assignments], ctx.fleet, used.start,
                                used.end)
    assert spans is not None  # a policy only assigns nodes of its own fleet
    usd, gco2e = costing(spans)
    if recorded_step_ms is None or recorded_step_ms <= 0:
        return Outcome(job.name, baseline.label, baseline.policy, usd, gco2e, result.zones, result.regions,
                       note="run time not scaled: the recorded nodes are not in the snapshot", run_ratio=1.0)
    ratio = result.score.step_ms / recorded_step_ms
    return Outcome(job.name, baseline.label, baseline.policy, None if usd is None else usd * ratio,
                   None if gco2e is None else gco2e * ratio, result.zones, result.regions, run_ratio=ratio,
                   bound=hop_text(result.score))


def savings(outcomes: Sequence[Outcome]) -> list[Savings]:
    reference = {o.job: o for o in outcomes if o.label == REFERENCE}
    totals: dict[str, list[float]] = {}
    slowest: dict[str, tuple[float, Outcome]] = {}
    for o in outcomes:
        ref = reference.get(o.job)
        if o.label == REFERENCE or ref is None or None in (o.usd, o.gco2e, ref.usd, ref.gco2e):
            continue
        acc = totals.setdefault(o.label, [0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
        ratio = o.run_ratio if o.run_ratio and o.run_ratio > 0 else 1.0
        acc[0] += 1
        acc[1] += o.usd or 0.0
        acc[2] += ref.usd or 0.0
        acc[3] += o.gco2e or 0.0
        acc[4] += ref.gco2e or 0.0
        acc[5] += (o.usd or 0.0) / ratio
        acc[6] += (o.gco2e or 0.0) / ratio
        if ratio > slowest.get(o.label, (1.0, o))[0]:
            slowest[o.label] = (ratio, o)
    order = [b.label for b in BASELINES] + [START_NOW] + sorted(set(totals) - {b.label for b in BASELINES}
                                                                - {START_NOW})
    out = []
    for label in order:
        if not (t := totals.get(label)):
            continue
        ratio, worst = slowest.get(label, (1.0, None))
        out.append(Savings(label, int(t[0]), t[1], t[2], t[3], t[4], t[5], t[6], ratio,
                           worst.job if worst else None, worst.bound if worst else None))
    return out
