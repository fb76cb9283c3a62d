"""The one energy model: kWh of GPU nodes, after Cloud Carbon Footprint (CCF). Pure.

`place` (the carbon term, through `geosched.policies.energy`), the time-shift decision, the simulator and
`geosched report` all count energy here, with the same inputs resolved the same way (`gpu_power`, `pue`, the
instance type's vCPUs and memory from `geosched.core.specs`), so a placement's kgCO2e per hour times its hours is what
the report charges for the same job, zone and hour (geosched/report/METHODOLOGY.md section 3 has the formulas):

    GPU watts  = gpus x (idle + u_gpu x (max - idle))                 per-GPU idle/max: catalog gpu_power.csv
    CPU watts  = vcpus x (min + u_cpu x (max - min))                  CCF per-vCPU min/max watts per provider
    memory kWh = memory GB x hours x 0.000392                         CCF memory coefficient, kWh per GB-hour
    energy kWh = ((GPU watts + CPU watts) x hours / 1000 + memory kWh) x PUE

A GPU's host (its share of the node's vCPUs and memory) is charged with it: an instance type with no vCPU or
memory figures (an on-premises machine the catalog does not sell) is counted by its GPUs alone, in both.

CCF constants are from cloud-carbon-footprint/cloud-carbon-footprint at commit 0656d555:
packages/aws/src/domain/AwsFootprintEstimationConstants.ts (AWS_CLOUD_CONSTANTS) and
packages/gcp/src/domain/GcpFootprintEstimationConstants.ts (GCP_CLOUD_CONSTANTS).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from geosched import clouds
from geosched.core.models import CommProfile, GpuPower, Region
from geosched.core.specs import InstanceSpec


@dataclass(frozen=True, slots=True)
class CpuCoefficients:
    """Watts per vCPU at 0% and 100% utilisation."""

    min_watts: float
    max_watts: float

    def watts(self, utilisation: float) -> float:
        return self.min_watts + utilisation * (self.max_watts - self.min_watts)


# Per cloud, its spec's `ccf_cpu_watts`. AWS: MIN_WATTS_AVG / MAX_WATTS_AVG. GCP: MIN_WATTS_MEDIAN /
# MAX_WATTS_MEDIAN of the constants file (CCF's methodology page still prints 0.71 / 4.26 for GCP; the code's
# values are the ones CCF computes with).
CCF_CPU: Mapping[str, CpuCoefficients] = {
    s.name: CpuCoefficients(*s.ccf_cpu_watts) for s in clouds.all_specs() if s.ccf_cpu_watts is not None
}
# A provider CCF does not cover (an SSH inventory, on-premises, a cloud CCF has no constants for) is counted with
# the AWS averages, the set CCF derives from the most processor types (MIN_WATTS_AVG / MAX_WATTS_AVG of
# AwsFootprintEstimationConstants.ts, as geosched.clouds.aws states them): named here, so a new cloud is no edit.
CCF_CPU_DEFAULT = CpuCoefficients(0.74, 3.5)
# AVG_CPU_UTILIZATION_2020 = 50: CCF's fallback when a provider reports no CPU utilisation, which it never does
# for the nodes geosched records.
CCF_CPU_UTILISATION = 0.5
CCF_MEMORY_KWH_PER_GB_HOUR = 0.000392
# For a region neither the catalog nor the fleet knows: CCF's AWS PUE_AVG, the higher of the two clouds'
# averages, so an unknown region's energy is not understated through its PUE.
DEFAULT_PUE = 1.135
# The project's own default for training gangs (CommProfile.utilisation): a job that records no utilisation is
# counted at the figure its placement was scored with.
DEFAULT_GPU_UTILISATION = CommProfile().utilisation


def gpu_power(table: Mapping[str, GpuPower], model: str) -> tuple[GpuPower, bool]:
    """The GPU's power figures, and whether they are its own. A GPU missing from the table is counted at the
    most power-hungry known part: emissions are overstated, never hidden."""
    known = table.get(model)
    if known is not None:
        return known, True
    return max(table.values(), key=lambda p: p.max_watts), False


def pue(regions: Mapping[str, Region], region_key: str) -> tuple[float, bool]:
    """The region's PUE, and whether it is the region's own (else `DEFAULT_PUE`)."""
    region = regions.get(region_key)
    return (region.pue, True) if region is not None else (DEFAULT_PUE, False)


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


@dataclass(frozen=True)
class EnergyModel:
    gpu_power: Mapping[str, GpuPower]
    gpu_utilisation: float = DEFAULT_GPU_UTILISATION
    cpu_utilisation: float = CCF_CPU_UTILISATION
    cpu: Mapping[str, CpuCoefficients] = field(default_factory=lambda: dict(CCF_CPU))
    memory_kwh_per_gb_hour: float = CCF_MEMORY_KWH_PER_GB_HOUR
    embodied: bool = False

    def gpu(self, model: str) -> tuple[GpuPower, bool]:
        return gpu_power(self.gpu_power, model)

    def cpu_for(self, provider: str) -> CpuCoefficients:
        return self.cpu.get(provider, CCF_CPU_DEFAULT)

    def use(self, hours: float, gpus: float, gpu: GpuPower, gpu_utilisation: float, provider: str,
            spec: InstanceSpec | None, share: float, pue: float) -> Energy:
        """`gpus` GPUs for `hours` with `share` of the node's vCPUs and memory (none without a spec)."""
        return energy(hours, gpus, gpu, gpu_utilisation, spec.vcpus * share if spec else 0.0, self.cpu_for(provider),
                      self.cpu_utilisation, spec.memory_gib * share if spec else 0.0, self.memory_kwh_per_gb_hour,
                      pue)

    def kwh_per_gpu_hour(self, gpu: GpuPower, gpu_utilisation: float, provider: str, spec: InstanceSpec | None,
                         pue: float) -> float:
        """One GPU-hour with its host: the GPU and 1 / (the node's GPUs) of the node's vCPUs and memory, as the
        report charges a job interval on that node."""
        share = 1.0 / spec.gpus if spec is not None and spec.gpus > 0 else 1.0
        return self.use(1.0, 1.0, gpu, gpu_utilisation, provider, spec, share, pue).kwh
