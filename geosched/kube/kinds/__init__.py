"""Job kinds: one module per kind of job object geosched reads, places and renders (`base.JobKind`).

A new kind is one module here defining `KIND` (an instance of its `JobKind` subclass); nothing else names it.
The registry below finds every such module, so `jobinput` (reading), `render` (pinning and the gang handoff),
`submit` (the resources `jobs` lists), `flex` (holding), the scheduler (gang sizes of owned pods) and the RBAC
check all ask it.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from geosched.kube.kinds.base import JobKind

_NOT_KINDS = frozenset({"base", "template"})


@cache
def registered() -> tuple[JobKind, ...]:
    """Every kind, in module-name order (stable: it orders error messages and `geosched jobs`' requests)."""
    found: list[JobKind] = []
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        if module in _NOT_KINDS:
            continue
        kind = getattr(importlib.import_module(f"{__name__}.{module}"), "KIND", None)
        assert isinstance(kind, JobKind), f"{__name__}.{module} defines no KIND"
        found.append(kind)
    labels = [k.label for k in found]
    assert len(set(labels)) == len(labels), f"a job kind is registered twice: {labels}"
    return tuple(found)


def lookup(api_version: str, kind: str) -> JobKind | None:
    return next((k for k in registered() if (k.api_version, k.kind) == (api_version, kind)), None)


def served() -> tuple[JobKind, ...]:
    """The kinds a cluster serves (not geosched's compact form)."""
    return tuple(k for k in registered() if k.served)


def by_name(kind: str) -> JobKind | None:
    """The served kind named `kind` (the names differ across served kinds; an object's apiVersion says the rest)."""
    return next((k for k in served() if k.kind == kind), None)


def compact() -> JobKind:
    return next(k for k in registered() if not k.served)


def help_names() -> str:
    """The served kinds as every command's help lists them: `batch/v1 Job, JobSet, ...`. A kind of a built-in API
    group (no dot in the group: `batch`) is named with its apiVersion, as JobSet and TrainJob are Jobs too; a custom
    resource by its kind. Cheap enough for `-h`: the kind modules import no pydantic and no client."""
    return ", ".join(k.label if "." not in k.group else k.kind for k in served())
