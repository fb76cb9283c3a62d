"""The scheduler's settings, read strictly from YAML (the ConfigMap in deploy/ mounts this file):

```yaml
apiVersion: geosched.io/v1alpha1   # optional
kind: SchedulerConfig              # optional
scheduler_name: geosched           # pods with this spec.schedulerName are ours
namespaces: []                     # schedule pods of these namespaces only (default: all)
policy: zone-first
weights: {network: 1.0, cost: 0.1, carbon: 0.0}
leader_election:
  enabled: true
  namespace: geosched-system       # where the Lease lives
  name: geosched-scheduler
  lease_duration_s: 15             # client-go's and kube-scheduler's defaults
  renew_deadline_s: 10
  retry_period_s: 2
backoff_initial_s: 1               # a gang that did not fit or failed to bind waits, doubling up to max
backoff_max_s: 60
watch_timeout_s: 300               # each watch is re-listed at least this often
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import model_validator

from geosched import policies
from geosched.core.models import Weights
from geosched.files.decl.base import Declared, Refused, SettingsDocument, Strings, Text, integer, number
from geosched.files.decl.job import WeightsDecl
from geosched.files.gate import Kind, load_document
from geosched.policies.declared import PolicyName

DEFAULT_NAMESPACE = "geosched-system"


@dataclass(frozen=True, slots=True)
class LeaderElection:
    enabled: bool = True
    namespace: str = DEFAULT_NAMESPACE
    name: str = "geosched-scheduler"
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0


@dataclass(frozen=True)
class SchedulerSettings:
    scheduler_name: str = "geosched"
    namespaces: tuple[str, ...] = ()
    policy: str = policies.DEFAULT_POLICY
    weights: Weights = field(default_factory=Weights)
    leader_election: LeaderElection = field(default_factory=LeaderElection)
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 60.0
    watch_timeout_s: int = 300


class LeaderElectionDecl(Declared):
    """The Lease replicas take turns by (the scheduler's and the MultiKueue dispatcher's)."""

    enabled: bool | None = None
    namespace: Text = DEFAULT_NAMESPACE
    name: Text | None = None  # absent: the component's own Lease name
    lease_duration_s: float | None = number(None, default=None, json_schema_extra={"exclusiveMinimum": 0})
    renew_deadline_s: float | None = number(None, default=None, json_schema_extra={"exclusiveMinimum": 0})
    retry_period_s: float = number(0.0, exclusive_minimum=True, default=2.0)

    @model_validator(mode="after")
    def _renew_before_the_lease_lapses(self) -> Self:
        # client-go's rule: the leader gives up (renew deadline) before anyone else may take over (lease duration).
        renew = self.renew_deadline_s
        if renew is not None and renew < self.retry_period_s:
            raise Refused(f"must be >= {self.retry_period_s:g}, got {renew:g}", "renew_deadline_s")
        renew = max(10.0, self.retry_period_s) if renew is None else renew
        if self.lease_duration_s is not None and self.lease_duration_s <= renew:
            raise Refused(f"must be > {renew:g}, got {self.lease_duration_s:g}", "lease_duration_s")
        return self

    def election(self, default_name: str) -> LeaderElection:
        renew = max(10.0, self.retry_period_s) if self.renew_deadline_s is None else self.renew_deadline_s
        return LeaderElection(
            enabled=True if self.enabled is None else self.enabled,
            namespace=self.namespace,
            name=self.name or default_name,
            lease_duration_s=max(15.0, renew * 1.5) if self.lease_duration_s is None else self.lease_duration_s,
            renew_deadline_s=renew,
            retry_period_s=self.retry_period_s,
        )


def election(decl: LeaderElectionDecl | None, default_name: str) -> LeaderElection:
    return LeaderElection(name=default_name) if decl is None else decl.election(default_name)


class SchedulerConfigDoc(SettingsDocument):
    KIND: ClassVar[str] = "SchedulerConfig"
    DESCRIPTION: ClassVar[str] = (
        "The scheduler mode's settings (`geosched scheduler run --config`; the ConfigMap in deploy/ mounts it)."
    )

    scheduler_name: Text = "geosched"  # pods with this spec.schedulerName are ours
    namespaces: Strings | None = None  # schedule pods of these namespaces only (default: all)
    policy: PolicyName = policies.DEFAULT_POLICY
    weights: WeightsDecl | None = None
    leader_election: LeaderElectionDecl | None = None
    backoff_initial_s: float = number(0.0, default=1.0)  # a gang that did not fit waits, doubling up to max
    backoff_max_s: float | None = number(None, default=None, json_schema_extra={"minimum": 0})
    watch_timeout_s: int = integer(1, default=300)  # each watch is re-listed at least this often

    @model_validator(mode="after")
    def _max_not_below_initial(self) -> Self:
        if self.backoff_max_s is not None and self.backoff_max_s < self.backoff_initial_s:
            raise Refused(f"must be >= {self.backoff_initial_s:g}, got {self.backoff_max_s:g}", "backoff_max_s")
        return self

    def settings(self) -> SchedulerSettings:
        initial = self.backoff_initial_s
        return SchedulerSettings(
            scheduler_name=self.scheduler_name,
            namespaces=tuple(self.namespaces or ()),
            policy=self.policy,
            weights=self.weights.weights() if self.weights is not None else Weights(),
            leader_election=election(self.leader_election, "geosched-scheduler"),
            backoff_initial_s=initial,
            backoff_max_s=max(60.0, initial) if self.backoff_max_s is None else self.backoff_max_s,
            watch_timeout_s=self.watch_timeout_s,
        )


def parse_settings(data: Any, source: str) -> SchedulerSettings:
    return SchedulerConfigDoc.read(data or {}, source).settings()


def load_settings(path: Path) -> SchedulerSettings:
    return parse_settings(load_document(path, Kind.SETTINGS), str(path))
