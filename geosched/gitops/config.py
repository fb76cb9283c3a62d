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
from typing import Any

from geosched import policies
from geosched.documents import API_VERSION, parse_weights
from geosched.fields import Fields, parse_time
from geosched.gate import Kind, load_document
from geosched.kube.compact import CompactKind
from geosched.models import Weights

TOP_FIELDS = {"apiVersion", "kind", "policy", "weights", "compact_kind", "at"}
COMPACT_KINDS = {k.value: k for k in CompactKind}
# The stamp of a decision when no time was given: obviously not a real time, and the same on every host.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class GitOpsConfig:
    policy: str = policies.DEFAULT_POLICY
    weights: Weights = field(default_factory=Weights)
    compact_kind: CompactKind = CompactKind.JOB
    at: datetime | None = None


def parse_config(data: Any, source: str) -> GitOpsConfig:
    f = Fields(data if data is not None else {}, source, "", TOP_FIELDS)
    if f.has("apiVersion") and f.raw("apiVersion") != API_VERSION:
        raise f.error("apiVersion", f"expected {API_VERSION!r}, got {f.raw('apiVersion')!r}")
    if f.has("kind") and f.raw("kind") != "GitOpsConfig":
        raise f.error("kind", f"expected 'GitOpsConfig', got {f.raw('kind')!r}")
    policy = f.string("policy", default=policies.DEFAULT_POLICY)
    if policy not in policies.names():
        raise f.error("policy", f"unknown policy {policy!r} (known: {', '.join(policies.names())})")
    weights = parse_weights(f.raw("weights"), source, "weights") if f.has("weights") else Weights()
    at = parse_time(f.raw("at"), source, "at") if f.has("at") else None
    return GitOpsConfig(policy=policy, weights=weights,
                        compact_kind=f.choice("compact_kind", COMPACT_KINDS, CompactKind.JOB.value), at=at)


def config_to_dict(config: GitOpsConfig) -> dict[str, Any]:
    """What shapes the decisions (not `at`, which only stamps them), for the inputs digest."""
    w = config.weights
    return {"policy": config.policy, "weights": {"network": w.network, "cost": w.cost, "carbon": w.carbon,
                                                 "zone_tolerance": w.zone_tolerance},
            "compact_kind": config.compact_kind.value}


def load_config(path: Path | None) -> GitOpsConfig:
    return GitOpsConfig() if path is None else parse_config(load_document(path, Kind.SETTINGS), str(path))
