"""Patience with aging (issue 22): a multi-node gang whose best placement now is far slower than a healthy ring of
the same shape waits for one, for a while, instead of starting on the slow links at once.

**Rule.** Zone-first's placement of a gang of two or more nodes is refused, as a "waiting" `NoFit`, when its step
time is more than `SLOWDOWN_LIMIT` (3x) the step of the same gang placed by the same policy on the fleet with every
GPU free (the *reference*, placed once per gang shape and snapshot, cached on the context) — unless the gang has
already waited long enough (*aging*):

    patience = min(AGING x runtime x (slowdown - 1), MAX_WAIT_S)     runtime known (the job's, or the replay's)
    patience = UNKNOWN_RUNTIME_WAIT_S                                runtime unknown

`runtime x (slowdown - 1)` is the extra run time a slow start costs. Waiting exactly that long before taking the
slow placement is the deterministic ski-rental rule (Karlin, Manasse, Rudolph, Sleator, "Competitive snoopy
caching", 1988): whenever healthy capacity comes, the gang finishes no later than twice the best it could have
done knowing when it would come (`AGING` = 1, the break-even point). Without a runtime the extra cannot be weighed,
so the wait is a fixed hour; and no gang waits more than a day whatever its runtime says.

**Waited since when.** The choice (wait, or start slow) begins when the slow placement is first offered: the
queueing before it is sunk, the same whatever the gang does next, so the ski-rental clock starts there. The replay
tracks that moment (the first "waiting" answer). A caller that does not (scheduler mode and the dispatcher pass the
time since the pods' or Workload's creationTimestamp) over-states the wait, which can only shorten the patience,
never lengthen it. Measured on the geo replay's seed 8: counted from submission, a 512-GPU gang that had queued
14,209 s for any capacity had used up its patience before the slow ring was offered and started on it 14.2x slower;
counted from the offer, it waited for the healthy ring (policies/README.md).

**Why 3x.** It must be above what a healthy placement that is merely not the best costs, and below what a bad
link costs. In the shipped network model one more zone boundary makes a ring ~1.2x slower, a cross-region ring of
the geo fleet up to ~2x; a degraded node (1-5% loss) makes it 3.6-7x slower and the slow us-central1 a/c pair of
the geo fleet 10x (policies/README.md). 3x waits for none of the first and for every one of the second. Measured
(policies/README.md, "Patience"): it is what removes the healthy-link losses of the traced seeds.

**When the wait is unknown** (`waiting` None: a `place` without `--waited`, a render without a submit time), there is
no patience: the gang starts as it always did. A stateless decision that refuses free capacity without knowing how
long the gang has waited would refuse it on every ask, for ever, while other schedulers sharing the cluster hold the
healthy nodes; only aging bounds that, and aging needs the wait. Every path that knows it passes it: the replay
(submit time), scheduler mode (the pods' creationTimestamp), the MultiKueue dispatcher (the Workload's).

**Which policies.** `PATIENT`: zone-first only. The baselines stay the schedulers they imitate.

Cost: nothing for a gang on one node or whose step is within 3x its compute (the reference step is at least the
compute, so it cannot be 3x slower than the reference); otherwise one placement on the idle fleet per gang shape,
cached on the snapshot (its copies with other free GPUs share the cache).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from geosched.core.models import Job, NoFit, Placement, Rejection, Weights

if TYPE_CHECKING:
    from geosched.policies.context import PlacementContext
    from geosched.policies.strictqueue import Behind

# Assumptions, measured and justified in the module docstring and policies/README.md ("Patience").
SLOWDOWN_LIMIT = 3.0
AGING = 1.0
UNKNOWN_RUNTIME_WAIT_S = 3600.0
MAX_WAIT_S = 86400.0
PATIENT = frozenset({"zone-first"})


@dataclass(frozen=True, slots=True)
class Waiting:
    """How long the gang has waited (s: since it was first told to wait for a healthy ring, or, from a caller that
    does not track that, since it was submitted), and its predicted run on a healthy ring (s; None: the job's
    `schedule` runtime if it declares one, else unknown)."""

    waited_s: float
    runtime_s: float | None = None
    behind: Behind | None = None


def patience_s(slowdown: float, runtime_s: float | None) -> float:
    """How long a gang whose best placement is `slowdown` x its healthy step may wait for a healthy ring."""
    if runtime_s is None or not np.isfinite(runtime_s) or runtime_s <= 0:
        return UNKNOWN_RUNTIME_WAIT_S
    return float(min(AGING * runtime_s * (slowdown - 1.0), MAX_WAIT_S))


PlaceOn = Callable[[Job, "PlacementContext"], Placement | NoFit]
"""The policy placing a gang on a context: `geosched.policies.place`, handed in, as it is the one asking here."""


def check(
    placement: Placement, ctx: PlacementContext, policy: str, weights: Weights | None, waiting: Waiting | None,
    place_on: PlaceOn,
) -> NoFit | None:
    """A "waiting" NoFit when the rule above refuses `placement` now, else None (start it). `place_on` places the
    gang the same way on the idle fleet, for the reference step."""
    if waiting is None or policy not in PATIENT or len(placement.assignments) < 2:
        return None
    job = placement.job
    step = placement.score.step_ms
    if step <= SLOWDOWN_LIMIT * job.profile.compute_ms:  # the reference step is at least the compute
        return None
    reference = reference_step_ms(job, ctx, policy, weights, place_on)
    if reference is None or step <= SLOWDOWN_LIMIT * reference:
        return None
    slowdown = step / reference
    runtime = waiting.runtime_s
    if runtime is None and job.schedule is not None:
        runtime = job.schedule.runtime_s
    limit = patience_s(slowdown, runtime)
    if waiting.waited_s >= limit - 1e-6:  # a replay's wake-up lands at the limit, give or take the last bits
        return None
    basis = (
        f"{runtime:,.0f} s of run x ({slowdown:.1f} - 1), the extra a slow start costs"
        if runtime is not None and limit < MAX_WAIT_S and limit != UNKNOWN_RUNTIME_WAIT_S
        else "its run time unknown"
        if limit == UNKNOWN_RUNTIME_WAIT_S
        else "the cap"
    )
    reason = (
        f"waiting for a healthy ring: best now is {slowdown:.1f}x slower than on the idle fleet (step "
        f"{step:,.0f} ms in {', '.join(placement.zones)} vs {reference:,.0f} ms); starts anyway once it has "
        f"waited {limit:,.0f} s ({basis}), waited {waiting.waited_s:,.0f} s"
    )
    return NoFit(job, policy, (Rejection("patience", reason),), retry_after_s=limit - waiting.waited_s)


def reference_step_ms(job: Job, ctx: PlacementContext, policy: str, weights: Weights | None,
                      place_on: PlaceOn) -> float | None:
    """The step of the gang placed by `policy` (`place_on`) on the snapshot with every GPU free (None: it fits
    nowhere even then), cached per gang shape on the snapshot (`policy` and `weights` are part of the key)."""

    key = (
        job.workers,
        job.gpus_per_worker,
        job.gpu,
        job.max_zones,
        job.max_regions,
        job.providers,
        job.regions,
        job.zones,
        job.clusters,
        job.pricing,
        job.profile,
        policy,
        weights,
    )
    cache = ctx.reference_steps
    if key not in cache:
        idle = ctx.with_free(ctx.gpus_total.copy())
        result = place_on(job, idle)
        cache[key] = result.score.step_ms if isinstance(result, Placement) else None
    return cache[key]
