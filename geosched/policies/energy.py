"""Energy per GPU-hour: the one figure the carbon term (`context.job_view`), the time-shift decision
(`timeshift`) and the simulator's measured emissions (`geosched.simulate.shifting`) multiply by the grid's
gCO2e/kWh, so all three count a GPU-hour alike. Another energy model (host power, idle nodes) replaces this
function and nothing else.

    kWh per GPU-hour = (idle + utilisation x (max - idle)) W / 1000 x PUE
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from geosched.policies.context import FloatArray, IntArray, PlacementContext


def kwh_per_gpu_hour(ctx: PlacementContext, utilisation: float) -> FloatArray:
    """Each node's energy per GPU-hour at this GPU utilisation, PUE included."""
    watts = ctx.idle_watts + utilisation * (ctx.max_watts - ctx.idle_watts)
    out: FloatArray = (watts / 1000.0 * ctx.pue).astype(np.float64)
    return out


def kwh_per_hour_by_region(ctx: PlacementContext, utilisation: float, nodes: IntArray, gpus: IntArray) -> FloatArray:
    """A placement's energy per hour in each region (indexed like `ctx.region_keys`): `gpus[k]` GPUs on `nodes[k]`."""
    per_node = kwh_per_gpu_hour(ctx, utilisation)[nodes] * gpus.astype(np.float64)
    out: FloatArray = np.bincount(ctx.region_of[nodes], weights=per_node,
                                  minlength=len(ctx.region_keys)).astype(np.float64)
    return out
