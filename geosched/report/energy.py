"""Energy and emissions of GPU nodes, after Cloud Carbon Footprint (CCF). Pure; METHODOLOGY.md has the formulas.

    GPU watts  = gpus x (idle + u_gpu x (max - idle))                 per-GPU idle/max: catalog gpu_power.csv
    CPU watts  = vcpus x (min + u_cpu x (max - min))                  CCF per-vCPU min/max watts per provider
    memory kWh = memory GB x hours x 0.000392                         CCF memory coefficient, kWh per GB-hour
    energy kWh = ((GPU watts + CPU watts) x hours / 1000 + memory kWh) x PUE
    gCO2e      = energy kWh x grid gCO2e/kWh (of the hour, when an hourly series is given)
    embodied   = TE x hours / 35040 h x vcpus / platform vcpus        (optional) CCF / SCI M = TE x TR/EL x RR/TR

CCF constants are from cloud-carbon-footprint/cloud-carbon-footprint at commit 0656d555:
packages/aws/src/domain/AwsFootprintEstimationConstants.ts (AWS_CLOUD_CONSTANTS) and
packages/gcp/src/domain/GcpFootprintEstimationConstants.ts (GCP_CLOUD_CONSTANTS); embodied-emission inputs
from cloud-carbon-footprint/cloud-carbon-coefficients ccfcoef/constants.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from geosched.models import CommProfile, GpuPower
from geosched.report.specs import InstanceSpec


@dataclass(frozen=True, slots=True)
class CpuCoefficients:
    """Watts per vCPU at 0% and 100% utilisation."""

    min_watts: float
    max_watts: float

    def watts(self, utilisation: float) -> float:
        return self.min_watts + utilisation * (self.max_watts - self.min_watts)


# AWS: MIN_WATTS_AVG / MAX_WATTS_AVG. GCP: MIN_WATTS_MEDIAN / MAX_WATTS_MEDIAN of the constants file (CCF's
# methodology page still prints 0.71 / 4.26 for GCP; the code's values are the ones CCF computes with).
CCF_CPU: Mapping[str, CpuCoefficients] = {
    "aws": CpuCoefficients(0.74, 3.5),
    "gcp": CpuCoefficients(0.68, 4.11),
}
# A provider CCF does not cover (an SSH inventory, on-premises) is counted with the AWS averages, the set CCF
# derives from the most processor types.
CCF_CPU_DEFAULT = CCF_CPU["aws"]
# AVG_CPU_UTILIZATION_2020 = 50: CCF's fallback when a provider reports no CPU utilisation, which it never does
# for the nodes geosched records.
CCF_CPU_UTILISATION = 0.5
CCF_MEMORY_KWH_PER_GB_HOUR = 0.000392
# For a region neither the catalog nor the fleet knows: CCF's AWS PUE_AVG, the higher of the two clouds'
# averages, so an unknown region's energy is not understated through its PUE.
DEFAULT_PUE = 1.135
# The project's own default for training gangs (CommProfile.utilisation), which the policies' carbon term also
# uses, so the report and the placement decision count a GPU-hour the same way.
DEFAULT_GPU_UTILISATION = CommProfile().utilisation

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


@dataclass(frozen=True)
class EnergyModel:
    gpu_power: Mapping[str, GpuPower]
    gpu_utilisation: float = DEFAULT_GPU_UTILISATION
    cpu_utilisation: float = CCF_CPU_UTILISATION
    cpu: Mapping[str, CpuCoefficients] = field(default_factory=lambda: dict(CCF_CPU))
    memory_kwh_per_gb_hour: float = CCF_MEMORY_KWH_PER_GB_HOUR
    embodied: bool = False

    def gpu(self, model: str) -> tuple[GpuPower, bool]:
        """The GPU's power figures, and whether they are its own. A GPU missing from the table is counted at
        the most power-hungry known part, as the policies do: emissions are overstated, never hidden."""
        known = self.gpu_power.get(model)
        if known is not None:
            return known, True
        return max(self.gpu_power.values(), key=lambda p: p.max_watts), False

    def cpu_for(self, provider: str) -> CpuCoefficients:
        return self.cpu.get(provider, CCF_CPU_DEFAULT)


@dataclass(frozen=True, slots=True)
class Energy:
    gpu_kwh: float
    cpu_kwh: float
    memory_kwh: float
    pue: float

    @property
    def it_kwh(self) -> float:
        return self.gpu_kwh + self.cpu_kwh + self.memory_kwh

    @property
    def kwh(self) -> float:
        return self.it_kwh * self.pue


def energy(hours: float, gpus: float, gpu: GpuPower, gpu_utilisation: float, vcpus: float, cpu: CpuCoefficients,
           cpu_utilisation: float, memory_gb: float, memory_kwh_per_gb_hour: float, pue: float) -> Energy:
    return Energy(
        gpu_kwh=gpus * gpu.watts(gpu_utilisation) * hours / 1000.0,
        cpu_kwh=vcpus * cpu.watts(cpu_utilisation) * hours / 1000.0,
        memory_kwh=memory_gb * hours * memory_kwh_per_gb_hour,
        pue=pue,
    )


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
