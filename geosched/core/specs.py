"""What an instance type is made of (GPUs, vCPUs, memory) and which family it belongs to, from the catalog.

The accounting needs it to charge a job its share of a node and to add the node's CPU and memory power; the
embodied-emissions estimate needs the largest instance of the family (CCF's stand-in for the whole server).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from geosched.core.models import Offering


@dataclass(frozen=True, slots=True)
class InstanceSpec:
    provider: str
    instance_type: str
    gpus: int
    vcpus: float
    memory_gib: float

    @property
    def family(self) -> str:
        return family(self.provider, self.instance_type)


def family(provider: str, instance_type: str) -> str:
    """AWS `p4d.24xlarge` -> `p4d`; GCP `a2-highgpu-8g` -> `a2-highgpu` (the size is the last dash part)."""
    if "." in instance_type:
        return instance_type.split(".")[0]
    head, _, _ = instance_type.rpartition("-")
    return head or instance_type


SpecIndex = Mapping[tuple[str, str], InstanceSpec]


def spec_index(offerings: Iterable[Offering]) -> dict[tuple[str, str], InstanceSpec]:
    """(provider, instance type) -> spec; the first offering of a type wins (sizes do not vary by zone)."""
    out: dict[tuple[str, str], InstanceSpec] = {}
    for o in offerings:
        out.setdefault((o.provider, o.instance_type),
                       InstanceSpec(o.provider, o.instance_type, o.gpus, o.vcpus, o.memory_gib))
    return out


def platforms(index: SpecIndex) -> dict[tuple[str, str], InstanceSpec]:
    """(provider, family) -> its largest instance by vCPUs, then GPUs, then memory."""
    out: dict[tuple[str, str], InstanceSpec] = {}
    for spec in index.values():
        key = (spec.provider, spec.family)
        best = out.get(key)
        if best is None or (spec.vcpus, spec.gpus, spec.memory_gib) > (best.vcpus, best.gpus, best.memory_gib):
            out[key] = spec
    return out
