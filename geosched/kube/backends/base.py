"""The values a backend works with: the gang's shape in, the handoff out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from geosched.kube import keys
from geosched.kube.kinds.base import JobKind


@dataclass(frozen=True, slots=True)
class Gang:
    name: str
    namespace: str
    kind: JobKind
    pods: int
    gpus: int
    zones: tuple[str, ...]
    regions: tuple[str, ...]

    @property
    def single_zone(self) -> bool:
        return len(self.zones) == 1

    @property
    def single_region(self) -> bool:
        return len(self.regions) == 1

    @property
    def holding_level(self) -> str | None:
        """The node label whose one domain must hold the whole gang: its zone, else its region. Across regions no
        single domain holds it, and node affinity alone keeps it to its zones."""
        if self.single_zone:
            return keys.ZONE
        if self.single_region:
            return keys.REGION
        return None


@dataclass(frozen=True)
class Handoff:
    object_labels: Mapping[str, str] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    scheduler_name: str | None = None
    # Merged where the kind's operator reads it (`JobKind.scheduling_policy_path`: a PyTorchJob's
    # spec.runPolicy.schedulingPolicy), when that operator builds the PodGroup itself.
    scheduling_policy: Mapping[str, Any] = field(default_factory=dict)
    side_objects: tuple[dict[str, Any], ...] = ()
    # Fields set on every pod spec of the gang (the native API's `schedulingGroup`).
    pod_spec: Mapping[str, Any] = field(default_factory=dict)
    # Pod-level settings the gang cannot do without; a kind that cannot carry them must refuse, not drop them.
    pod_level_required: bool = False
    # Why this job kind cannot be handed over this way at all (the renderer refuses it with this reason).
    refused: str | None = None


def gpu_resources(gang: Gang) -> dict[str, str]:
    # ResourceList values are quantities; strings keep them exact and match what the API server returns.
    return {keys.GPU: str(gang.gpus)}
