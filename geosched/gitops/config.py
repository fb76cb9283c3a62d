"""The tree's own settings, read strictly from an optional YAML file; every field has a default.

```yaml
apiVersion: geosched.io/v1alpha1   # optional
kind: GitOpsConfig                 # optional
policy: zone-first                 # any name `geosched policies` lists
weights: {network: 1.0, cost: 0.1, carbon: 0.0, zone_tolerance: 0.05}   # tolerance 0..1; not all weights 0
compact_kind: job                  # job | jobset: what a compact geosched job renders as
at: 2025-03-01T12:00:00Z           # provenance time of new decisions (`--at` overrides it)
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

from geosched import policies
from geosched.core.models import Weights
from geosched.files.decl.base import SettingsDocument, one_of
from geosched.files.decl.job import Instant, WeightsDecl
from geosched.files.gate import Kind, load_document
from geosched.kube.compact import CompactKind
from geosched.policies.declared import PolicyName

# The stamp of a decision when no time was given: obviously not a real time, and the same on every host.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CompactName = Literal["job", "jobset"]


@dataclass(frozen=True)
class GitOpsConfig:
    policy: str = policies.DEFAULT_POLICY
    weights: Weights = field(default_factory=Weights)
    compact_kind: CompactKind = CompactKind.JOB
    at: datetime | None = None


class GitOpsConfigDoc(SettingsDocument):
    KIND: ClassVar[str] = "GitOpsConfig"
    DESCRIPTION: ClassVar[str] = (
        "A GitOps repository's own settings (`gitops.yaml`; `geosched gitops render --config`): the policy, the "
        "weights, what a compact job renders as, the provenance time of new decisions."
    )

    policy: PolicyName = policies.DEFAULT_POLICY
    weights: WeightsDecl | None = None
    compact_kind: Annotated[CompactName, one_of(CompactName)] = "job"
    at: Instant | None = None

    def config(self) -> GitOpsConfig:
        return GitOpsConfig(
            policy=self.policy,
            weights=self.weights.weights() if self.weights is not None else Weights(),
            compact_kind=CompactKind(self.compact_kind),
            at=self.at,
        )


assert set(get_args(CompactName)) == {k.value for k in CompactKind}


def parse_config(data: Any, source: str) -> GitOpsConfig:
    return GitOpsConfigDoc.read(data if data is not None else {}, source).config()


def config_to_dict(config: GitOpsConfig) -> dict[str, Any]:
    """What shapes the decisions (not `at`, which only stamps them), for the inputs digest."""
    w = config.weights
    return {
        "policy": config.policy,
        "weights": {"network": w.network, "cost": w.cost, "carbon": w.carbon, "zone_tolerance": w.zone_tolerance},
        "compact_kind": config.compact_kind.value,
    }


def load_config(path: Path | None) -> GitOpsConfig:
    return GitOpsConfig() if path is None else parse_config(load_document(path, Kind.SETTINGS), str(path))
