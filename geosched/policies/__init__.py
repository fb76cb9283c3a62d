"""Placement policies: `zone-first` and the baselines it is compared against.

Every module in this package registers its policies on import; `place` runs one by name.
"""

from __future__ import annotations

if __name__ != "geosched.policies":  # executed through the top-level link ./policies: be geosched.policies instead
    from geosched import toplinks

    toplinks.alias(__name__)

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from geosched.core.models import Job, NoFit, Placement, Weights

if TYPE_CHECKING:
    from geosched.policies.context import PlacementContext, job_view
    from geosched.policies.patience import Waiting

DEFAULT_POLICY = "zone-first"


def load_all() -> None:
    """Import every module of the package, each registering its policies (`base.load_all`, once). Done on first use
    rather than with the package: the policies need numpy, which `geosched -h` and the verbs that never place must
    not load."""
    from geosched.policies.base import load_all as load

    load()


def __getattr__(name: str) -> Any:
    if name in ("PlacementContext", "job_view"):
        from geosched.policies import context

        return getattr(context, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def names() -> list[str]:
    from geosched.policies.base import registry

    return sorted(registry())


def description(name: str) -> str:
    """The policy's one-line description (`register`)."""
    from geosched.policies.base import descriptions

    return descriptions()[name]


def place(job: Job, ctx: PlacementContext, policy: str = DEFAULT_POLICY,
          weights: Weights | None = None, explain: bool = True, waiting: Waiting | None = None) -> Placement | NoFit:
    """Place one gang. Pure: the context is a snapshot and is not changed. With `explain=False` the
    placement carries no rejections or alternatives (same decision, less work).

    `waiting`: how long the gang has waited (and its predicted run); with it, a patient policy may answer a
    "waiting" NoFit (`NoFit.waiting`) rather than start a multi-node gang on links far slower than a healthy
    ring's (`patience.py`). None (unknown): no patience, the gang starts as it always did."""
    patience, places, registry, job_view, strictqueue = _placing()
    fn = registry().get(policy)
    if fn is None:
        raise KeyError(f"unknown policy {policy!r}; known: {', '.join(names())}")
    absent = places.unknown(job, ctx.fleet)
    if absent is not None:  # said in one line, not as every zone's filters
        return NoFit(job, policy, (absent,))
    result: Placement | NoFit = fn(job_view(ctx, job, weights or Weights(), explain))
    if waiting is not None and isinstance(result, Placement):
        refused: NoFit | None = patience.check(result, ctx, policy, weights, waiting, placer(policy, weights))
        if refused is not None:
            return refused
        if waiting.behind is not None:
            # A strict queue's head that would start now, weighed against the jobs it holds behind it
            # (strictqueue.py); the placement it moves to is not then refused by patience, having weighed its own
            # slowness already.
            instead: Placement | None = strictqueue.check(result, ctx, policy, _runtime(job, waiting), waiting.behind,
                                                          placer(policy, weights))
            if instead is not None:
                return instead
    return result


def placer(policy: str, weights: Weights | None) -> Callable[[Job, PlacementContext], Placement | NoFit]:
    """`policy` placing a gang on a context, unexplained: what patience (`patience.check`) places the gang with on
    the idle fleet. Handed to it, as patience is consulted by `place` and so does not import this package."""

    def place_on(job: Job, ctx: PlacementContext) -> Placement | NoFit:
        return place(job, ctx, policy, weights, explain=False)

    return place_on


def _runtime(job: Job, waiting: Waiting) -> float | None:
    if waiting.runtime_s is not None:
        return waiting.runtime_s
    return job.schedule.runtime_s if job.schedule is not None else None


@functools.cache
def _placing() -> tuple[Any, Any, Any, Any, Any]:
    """What `place` calls, imported on its first call (they need numpy, which the package must not load: see
    `load_all`) and kept: importing them in `place` itself cost a replay 5 us on every decision."""
    from geosched.policies import patience, places, strictqueue
    from geosched.policies.base import registry
    from geosched.policies.context import job_view

    return patience, places, registry, job_view, strictqueue


__all__ = ["DEFAULT_POLICY", "PlacementContext", "description", "job_view", "load_all", "names", "place", "placer"]
