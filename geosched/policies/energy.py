"""Energy per GPU-hour: the one figure the carbon term (`context.job_view`), the time-shift decision
(`timeshift`) and the simulator's measured emissions (`geosched.simulate.shifting`) multiply by the grid's
gCO2e/kWh, so all three count a GPU-hour alike, and as `geosched report` charges it: each node's figure comes
from the one energy model (`geosched.core.energy`: the GPU and its share of the host's vCPUs and memory, times the
region's PUE), with the same resolvers for GPU power, PUE and the instance type's size.

The model is linear in GPU utilisation, so each node keeps its kWh per GPU-hour at utilisation 0 and 1
(`node_kwh_per_gpu_hour`) and a job's utilisation interpolates between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from geosched.core import catalog
from geosched.core import energy as model
from geosched.core.specs import InstanceSpec, spec_index

if TYPE_CHECKING:
    from geosched.core.models import Fleet

# As in context.py and zonepairs.py: the arrays' element types.
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class NodeEnergies(Protocol):
    """What the figures below read of a placement context (`context.PlacementContext` has it all): declared here
    because the context computes its energies with this module, which so imports no context back."""

    @property
    def kwh_idle(self) -> FloatArray: ...
    @property
    def kwh_full(self) -> FloatArray: ...
    @property
    def region_of(self) -> IntArray: ...
    @property
    def region_keys(self) -> Sequence[str]: ...


@cache
def shipped_specs() -> dict[tuple[str, str], InstanceSpec]:
    """(provider, instance type) -> vCPUs and memory, from the shipped catalog (as the report reads it)."""
    return dict(spec_index(catalog.offerings()))


def node_kwh_per_gpu_hour(fleet: Fleet, utilisation: float) -> FloatArray:
    """Each node's kWh per GPU-hour at this GPU utilisation, host and PUE included (`EnergyModel.kwh_per_gpu_hour`),
    computed once per kind of node (provider, instance type, GPU, region)."""
    energy = model.EnergyModel(gpu_power=fleet.gpu_power)
    specs = shipped_specs()
    seen: dict[tuple[str, str, str, str], float] = {}
    out = np.empty(len(fleet.nodes), dtype=np.float64)
    for i, n in enumerate(fleet.nodes):
        key = (n.provider, n.instance_type, n.gpu, n.region_key)
        kwh = seen.get(key)
        if kwh is None:
            power, _ = energy.gpu(n.gpu)
            pue, _ = model.pue(fleet.regions, n.region_key)
            kwh = seen[key] = energy.kwh_per_gpu_hour(power, utilisation, n.provider,
                                                      specs.get((n.provider, n.instance_type)), pue)
        out[i] = kwh
    return out


def kwh_per_gpu_hour(ctx: NodeEnergies, utilisation: float) -> FloatArray:
    """Each node's energy per GPU-hour at this GPU utilisation, host and PUE included."""
    out: FloatArray = (ctx.kwh_idle + utilisation * (ctx.kwh_full - ctx.kwh_idle)).astype(np.float64)
    return out


def kwh_per_hour_by_region(ctx: NodeEnergies, utilisation: float, nodes: IntArray, gpus: IntArray) -> FloatArray:
    """A placement's energy per hour in each region (indexed like `ctx.region_keys`): `gpus[k]` GPUs on `nodes[k]`."""
    per_node = kwh_per_gpu_hour(ctx, utilisation)[nodes] * gpus.astype(np.float64)
    out: FloatArray = np.bincount(ctx.region_of[nodes], weights=per_node,
                                  minlength=len(ctx.region_keys)).astype(np.float64)
    return out
