"""Embodied emissions of GPU nodes, after Cloud Carbon Footprint (CCF); the operational energy of the report is
the one model in `geosched.core.energy`, shared with placement. Pure; METHODOLOGY.md has the formulas.

    gCO2e      = energy kWh (geosched.core.energy) x grid gCO2e/kWh (of the hour, when an hourly series is given)
    embodied   = TE x hours / 35040 h x vcpus / platform vcpus        (optional) CCF / SCI M = TE x TR/EL x RR/TR

Embodied-emission inputs from cloud-carbon-footprint/cloud-carbon-coefficients ccfcoef/constants.py.
"""

from __future__ import annotations

from geosched.core.specs import InstanceSpec

# Embodied emissions (cloud-carbon-coefficients ccfcoef/constants.py; SERVER_EXPECTED_LIFESPAN in the CCF
# constants): a base rack server plus extra sockets, DRAM above 16 GB and GPU cards, over four years.
CCF_BASE_SERVER_KG = 1000.0
CCF_EXTRA_SOCKET_KG = 100.0
CCF_DRAM_THRESHOLD_GB = 16.0
CCF_DRAM_KG_PER_GB = 533.0 / 384.0
CCF_GPU_KG = 150.0
CCF_LIFESPAN_HOURS = 35040.0
# CCF reads the socket count of the instance family's bare-metal platform; the catalog has none, and the GPU
# servers behind every shipped family are two-socket machines.
ASSUMED_SOCKETS = 2


def emissions_g(kwh: float, gco2e_per_kwh: float) -> float:
    return kwh * gco2e_per_kwh


def platform_embodied_kg(platform: InstanceSpec) -> float:
    """TE of the server behind an instance family, from its largest instance."""
    dram = max(0.0, platform.memory_gib - CCF_DRAM_THRESHOLD_GB) * CCF_DRAM_KG_PER_GB
    return (CCF_BASE_SERVER_KG + (ASSUMED_SOCKETS - 1) * CCF_EXTRA_SOCKET_KG + dram
            + platform.gpus * CCF_GPU_KG)


def embodied_g(platform: InstanceSpec, vcpus: float, hours: float) -> float:
    """The server's manufacturing emissions for `hours` of `vcpus` of it (SCI: M = TE x TR/EL x RR/TR)."""
    share = vcpus / platform.vcpus if platform.vcpus > 0 else 1.0
    return platform_embodied_kg(platform) * 1000.0 * hours / CCF_LIFESPAN_HOURS * share
