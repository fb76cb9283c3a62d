"""A flexible job in Kubernetes: its slack in annotations, and a job held until its start (issue 24 item 4). Pure.

**Declaring slack.** On the job object (batch/v1 Job, JobSet, PyTorchJob, TrainJob: `metadata.annotations`) or on
its GPU pods' template (`...template.metadata.annotations`: what pods, and a Kueue Workload's podSets, carry):

    geosched.io/runtime: 6h                          the predicted run (required with either below)
    geosched.io/start-within: 24h                    may start up to 24 h after it was submitted (created)
    geosched.io/deadline: "2025-03-02T18:00:00Z"     must finish by then

The compact geosched Job says the same with `schedule: {runtime, start_within, deadline}`.

**Holding a job** (`hold`): its object is rendered suspended, as Kubernetes and Kueue suspend jobs: `spec.suspend:
true` (batch/v1 Job since 1.21, JobSet, TrainJob) or `spec.runPolicy.suspend: true` (Kubeflow PyTorchJob), with
`geosched.io/start-at` naming the hour it starts. A suspended Job creates no pods; Kueue also keeps a queued job
suspended until it admits it, so the two compose: geosched's hold comes first, Kueue's admission after.

**Releasing it.** `released(obj, now)`: whether its hour has come. In GitOps the tree is rendered again at a later
`--at` (a CI job rendering hourly with `--at "$(date -u +%FT%TZ)"` is the controller: docs in
geosched/gitops/README.md), and a render at or after `start-at` writes the object unsuspended; `release` does the
same to a live object for any other controller. In scheduler mode and the MultiKueue dispatcher the job is not
held in its manifest: its pods (its Workload) are not bound (nominated) before the start hour they decide.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Any

from geosched.core.errors import InputError
from geosched.core.models import Schedule
from geosched.files.fields import parse_time
from geosched.kube import kinds
from geosched.kube.keys import PREFIX

RUNTIME = PREFIX + "runtime"
START_WITHIN = PREFIX + "start-within"
DEADLINE = PREFIX + "deadline"
START_AT = PREFIX + "start-at"
SUBMITTED_AT = PREFIX + "submitted-at"
KEYS = (RUNTIME, START_WITHIN, DEADLINE)

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MAX_DURATION_S = 366 * 86400.0


def duration_s(text: str, source: str, where: str) -> float:
    """`90m`, `6h`, `2d` or seconds."""
    m = _DURATION_RE.match(text)
    if m is None:
        raise InputError(source, where, f"expected a duration such as 90m, 6h or 2d, got {text!r:.60}")
    seconds = float(m.group(1)) * _UNIT_S[m.group(2)]
    if not 0 < seconds <= MAX_DURATION_S:
        raise InputError(source, where, f"must be more than 0 and at most 366 days, got {text!r:.60}")
    return seconds


def schedule_of(annotations: Mapping[str, Any], source: str, where: str) -> Schedule | None:
    """The schedule the annotations declare, None when they declare none."""
    if not any(k in annotations for k in KEYS):
        return None
    values = {k: annotations.get(k) for k in KEYS}
    for key, value in values.items():
        if value is not None and not isinstance(value, str):
            raise InputError(source, f"{where}.{key}", f"expected a string, got {type(value).__name__}")
    if values[RUNTIME] is None:
        raise InputError(source, f"{where}.{RUNTIME}", "is required with start-within or deadline (the predicted "
                         "run time, e.g. 6h: carbon is counted over it)")
    runtime = duration_s(str(values[RUNTIME]), source, f"{where}.{RUNTIME}")
    within = values[START_WITHIN]
    deadline = values[DEADLINE]
    return Schedule(
        runtime_s=runtime,
        start_within_s=duration_s(str(within), source, f"{where}.{START_WITHIN}") if within is not None else None,
        deadline=parse_time(str(deadline), source, f"{where}.{DEADLINE}").timestamp() if deadline is not None
        else None,
    )


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_kinds() -> tuple[str, ...]:
    """The names of the job kinds a cluster serves (kube/kinds/)."""
    return tuple(k.kind for k in kinds.served())


def suspend_path(kind: str, source: str = "job") -> tuple[str, ...]:
    """Where a kind's suspend flag lives (`JobKind.suspend_path`); a kind without one cannot be held (`source`
    names the job's file in that one-line error)."""
    adapter = kinds.by_name(kind)
    path = adapter.suspend_path if adapter is not None else ("spec", "suspend")
    if path is None:
        assert adapter is not None
        raise InputError(source, "metadata.annotations", f"{adapter.label} has no suspend field, so geosched cannot "
                         "hold it until its start hour; drop geosched.io/start-within and geosched.io/deadline to "
                         "start it now")
    return path


def hold(obj: MutableMapping[str, Any], start_at: float, submitted_at: float, *, source: str = "job") -> None:
    """Render the job object held until `start_at`: suspended, with `geosched.io/start-at` and the time the slack
    counts from (`geosched.io/submitted-at`, so a later render keeps counting from there)."""
    *parents, leaf = suspend_path(str(obj.get("kind") or "Job"), source)
    here: MutableMapping[str, Any] = obj
    for key in parents:
        here = here.setdefault(key, {})
    here[leaf] = True
    meta = obj.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), START_AT: stamp(start_at),
                           SUBMITTED_AT: stamp(submitted_at)}


def held_until(obj: Mapping[str, Any]) -> tuple[float, float] | None:
    """The start a held object waits for and when it was first held (None: not held by geosched)."""
    meta = obj.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(notes, Mapping):  # a manifest read back from a tree anyone may have edited
        return None
    values = [notes.get(START_AT), notes.get(SUBMITTED_AT)]
    if not all(isinstance(v, str) for v in values):
        return None
    try:
        start, submitted = (parse_time(v, "", "annotation").timestamp() for v in values)
    except InputError:
        return None
    return start, submitted


def submitted_of(obj: Mapping[str, Any] | None, source: str) -> float | None:
    """When the job object says it was submitted (`geosched.io/submitted-at`, RFC 3339; None: it does not say):
    what zone-first's patience counts a GitOps job's wait from (policies/patience.py)."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    notes = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(notes, Mapping) or notes.get(SUBMITTED_AT) is None:
        return None
    return parse_time(notes[SUBMITTED_AT], source, f"metadata.annotations.{SUBMITTED_AT}").timestamp()


def released(obj: Mapping[str, Any], now: float) -> bool:
    """Whether a held object's hour has come (an object geosched did not hold is never released by it)."""
    at = held_until(obj)
    return at is not None and now >= at[0]


def release(obj: MutableMapping[str, Any]) -> None:
    """The object as its hour comes: unsuspended (a controller's patch; in GitOps, a later render)."""
    adapter = kinds.by_name(str(obj.get("kind") or "Job"))
    if adapter is not None and adapter.suspend_path is None:
        return  # a kind without a suspend field was never held
    *parents, leaf = suspend_path(str(obj.get("kind") or "Job"))
    here: Any = obj
    for key in parents:
        here = here.get(key) if isinstance(here, MutableMapping) else None
    if isinstance(here, MutableMapping):
        here[leaf] = False
