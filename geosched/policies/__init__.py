"""Placement policies: `zone-first` and the baselines it is compared against.

Every module in this package registers its policies on import; `place` runs one by name.
"""

from __future__ import annotations

import importlib
import pkgutil

from geosched.models import Job, NoFit, Placement, Weights
from geosched.policies import places
from geosched.policies.base import descriptions, registry
from geosched.policies.context import PlacementContext, job_view

DEFAULT_POLICY = "zone-first"

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def names() -> list[str]:
    return sorted(registry())


def description(name: str) -> str:
    """The policy's one-line description (`register`)."""
    return descriptions()[name]


def place(job: Job, ctx: PlacementContext, policy: str = DEFAULT_POLICY,
          weights: Weights | None = None, explain: bool = True) -> Placement | NoFit:
    """Place one gang. Pure: the context is a snapshot and is not changed. With `explain=False` the
    placement carries no rejections or alternatives (same decision, less work)."""
    fn = registry().get(policy)
    if fn is None:
        raise KeyError(f"unknown policy {policy!r}; known: {', '.join(names())}")
    absent = places.unknown(job, ctx.fleet)
    if absent is not None:  # said in one line, not as every zone's filters
        return NoFit(job, policy, (absent,))
    return fn(job_view(ctx, job, weights or Weights(), explain))


__all__ = ["DEFAULT_POLICY", "PlacementContext", "description", "job_view", "names", "place"]
