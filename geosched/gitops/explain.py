"""Why the tree changed, job by job, in words: the "before" from the previous index, the "after" from the
new decisions. Pure.

For a job that moved, the placement it had is looked up among the new decision's alternatives (scored on
the same, new, inputs), so the lines show which score terms of the old zones changed: a slow zone shows as
its network term and worst RTT going up. When the old zones are no longer a candidate, the policy's own
rejection reason says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from geosched.files.documents import score_to_dict
from geosched.gitops.index import Entry, Index
from geosched.gitops.plan import Outcome, Placed

# The terms worth naming, most telling first; score_to_dict rounds them, so equal means equal as written.
TERMS = ("total", "network", "cost", "carbon", "step_ms", "comm_ms", "worst_rtt_ms", "worst_loss",
         "min_throughput_gbps", "usd_per_hour", "gco2e_per_hour")
INPUT_NAMES = {"fleet": "fleet snapshot", "network": "network snapshot", "clusters": "cluster config",
               "config": "policy settings", "carbon": "hourly carbon"}


def explain(previous: Index, inputs: Mapping[str, str], outcomes: Sequence[Outcome],
            decisions: Mapping[str, str]) -> list[str]:
    """One paragraph per job whose decision changed; `decisions` maps job key -> new decision digest."""
    lines: list[str] = []
    changed = [INPUT_NAMES.get(k, k) for k in sorted(inputs) if previous.inputs and previous.inputs.get(k) != inputs[k]]
    if changed:
        lines.append("inputs changed: " + ", ".join(changed))
    now = {o.spec.key: o for o in outcomes}
    for key in sorted(set(now) | set(previous.entries)):
        before, after = previous.entries.get(key), now.get(key)
        if after is None:
            assert before is not None
            if before.cluster is not None:
                lines.append(f"{key}: removed from the job specs; its manifest {before.file} goes")
            continue
        lines.extend(_job(key, before, after, decisions.get(key)))
    return lines


def _job(key: str, before: Entry | None, after: Outcome, decision: str | None) -> list[str]:
    spec_note = [] if before is None or before.job_sha256 == after.spec.digest else ["  the job spec changed"]
    if not isinstance(after, Placed):
        if before is not None and before.cluster is None:
            return []
        head = f"{key}: no longer fits" if before is not None else f"{key}: new, does not fit"
        return [head + (f", was on {_where(before.cluster, before.zones)}" if before else ""), *spec_note,
                *(f"  {r.subject}: {r.reason}" for r in after.reasons[:5])]
    p = after.placement
    new_score = score_to_dict(p.score)
    place = _where(after.cluster.name, p.zones)
    if before is None:
        return [f"{key}: new, placed on {place} ({_terms(new_score)})"]
    if before.cluster is None:
        return [f"{key}: now fits, placed on {place} ({_terms(new_score)})", *spec_note]
    if before.cluster == after.cluster.name and before.zones == p.zones:
        if before.decision_sha256 == decision:
            return []
        nodes = [f"{a.node}={a.workers}" for a in p.assignments]
        delta = _delta(before.score, new_score)
        if tuple(nodes) != before.assignments:
            # Typically the jobs placed before this one took or left other nodes of the zone.
            delta = ", ".join(x for x in (f"nodes {','.join(before.assignments)} -> {','.join(nodes)}", delta) if x)
        return [f"{key}: re-rendered in place on {place}" + (f": {delta}" if delta else ""), *spec_note]
    out = [f"{key}: moved {_where(before.cluster, before.zones)} -> {place}", *spec_note]
    if after.note.startswith("moved: "):
        out.append(f"  why: {after.note.removeprefix('moved: ')}")
    old = next((c for c in p.alternatives if c.zones == before.zones and c.cluster == before.cluster), None)
    if old is not None:
        delta = _delta(before.score, score_to_dict(old.score))
        out.append(f"  {_where(before.cluster, before.zones)} before -> now: {delta or 'no term changed'}")
    else:
        reasons = [r.reason for r in p.rejected if r.subject in before.zones]
        out.append(f"  {', '.join(before.zones)}: {reasons[0] if reasons else 'no longer a candidate'}"
                   f" (was {_terms(before.score)})")
    out.append(f"  chosen {place}: {_terms(new_score)}")
    return out


def _where(cluster: str | None, zones: Sequence[str]) -> str:
    return f"{cluster} [{', '.join(zones)}]"


def _terms(score: Mapping[str, Any]) -> str:
    return " ".join(f"{t}={score.get(t)}" for t in ("total", "network", "cost", "carbon"))


def _delta(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    return ", ".join(f"{t} {before.get(t)} -> {after.get(t)}" for t in TERMS
                     if t in before and before.get(t) != after.get(t))
