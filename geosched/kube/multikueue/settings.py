"""The dispatcher's settings, read strictly from YAML (deploy/multikueue's ConfigMap mounts this file):

```yaml
apiVersion: geosched.io/v1alpha1   # optional
kind: DispatcherConfig             # optional
dispatcher_name: geosched.io/dispatcher   # what Kueue's multiKueue.dispatcherName must say
kueue_namespace: kueue-system      # Kueue's namespace: its Configuration ConfigMap and kubeconfig Secrets
kueue_configmap: kueue-manager-config     # holds controller_manager_config.yaml
field_manager: kueue-admission     # the manager Kueue's docs require for nominatedClusterNames
nominate: 1                        # how many clusters to nominate, best first
renominate_after_s: 300            # no admission by then: the next best cluster is added
policy: zone-first
weights: {network: 1.0, cost: 0.1, carbon: 0.0}
refresh_s: 30                      # each worker cluster's nodes are read again this often
stale_after_s: 120                 # a worker not read successfully for this long is left out
leader_election: {namespace: geosched-system, name: geosched-multikueue, ...}   # as the scheduler's
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import field_validator, model_validator

from geosched import policies
from geosched.core.models import Weights
from geosched.files.decl.base import Refused, SettingsDocument, Text, integer, number
from geosched.files.decl.job import WeightsDecl
from geosched.files.fields import MAX_INTEGER
from geosched.files.gate import Kind, load_document
from geosched.kube.multikueue.kueue import (
    ADMISSION_FIELD_MANAGER,
    ALL_AT_ONCE,
    DEFAULT_DISPATCHER,
    INCREMENTAL,
    KUEUE_CONFIGMAP,
    KUEUE_NAMESPACE,
    MAX_NOMINATED,
)
from geosched.kube.scheduler.settings import LeaderElection, LeaderElectionDecl, election
from geosched.policies.declared import PolicyName

LEASE_NAME = "geosched-multikueue"


@dataclass(frozen=True)
class DispatcherSettings:
    dispatcher_name: str = DEFAULT_DISPATCHER
    kueue_namespace: str = KUEUE_NAMESPACE
    kueue_configmap: str = KUEUE_CONFIGMAP
    field_manager: str = ADMISSION_FIELD_MANAGER
    nominate: int = 1
    renominate_after_s: float = 300.0
    policy: str = policies.DEFAULT_POLICY
    weights: Weights = field(default_factory=Weights)
    refresh_s: float = 30.0
    stale_after_s: float = 120.0
    leader_election: LeaderElection = field(default_factory=lambda: LeaderElection(name=LEASE_NAME))


class DispatcherConfigDoc(SettingsDocument):
    KIND: ClassVar[str] = "DispatcherConfig"
    DESCRIPTION: ClassVar[str] = (
        "The MultiKueue dispatcher's settings (`geosched multikueue dispatch --config`; deploy/multikueue's "
        "ConfigMap mounts it)."
    )

    dispatcher_name: Text = DEFAULT_DISPATCHER  # what Kueue's multiKueue.dispatcherName must say
    kueue_namespace: Text = KUEUE_NAMESPACE
    kueue_configmap: Text = KUEUE_CONFIGMAP
    field_manager: Text = ADMISSION_FIELD_MANAGER  # the manager Kueue's docs require for nominatedClusterNames
    nominate: int = integer(1, MAX_NOMINATED, default=1)  # how many clusters to nominate, best first
    renominate_after_s: float = number(0.0, exclusive_minimum=True, default=300.0)
    policy: PolicyName = policies.DEFAULT_POLICY
    weights: WeightsDecl | None = None
    refresh_s: float = number(0.0, exclusive_minimum=True, default=30.0)
    stale_after_s: float | None = number(None, default=None, json_schema_extra={"exclusiveMinimum": 0})
    leader_election: LeaderElectionDecl | None = None

    @classmethod
    def _header(cls, data: Any) -> None:
        super()._header(data)
        nominate = data.get("nominate")
        if type(nominate) is int and MAX_NOMINATED < nominate <= MAX_INTEGER:  # past it: too large, as any integer
            raise Refused(f"at most {MAX_NOMINATED} (the Workload CRD's maxItems)", "nominate")

    @field_validator("dispatcher_name")
    @classmethod
    def _ours(cls, name: str) -> str:
        if name in (ALL_AT_ONCE, INCREMENTAL):
            raise Refused(f"{name} is one of Kueue's built-in dispatchers; name ours (e.g. {DEFAULT_DISPATCHER})")
        return name

    @model_validator(mode="after")
    def _stale_not_before_a_refresh(self) -> Self:
        if self.stale_after_s is not None and self.stale_after_s < self.refresh_s:
            raise Refused(f"must be >= {self.refresh_s:g}, got {self.stale_after_s:g}", "stale_after_s")
        return self

    def settings(self) -> DispatcherSettings:
        return DispatcherSettings(
            dispatcher_name=self.dispatcher_name,
            kueue_namespace=self.kueue_namespace,
            kueue_configmap=self.kueue_configmap,
            field_manager=self.field_manager,
            nominate=self.nominate,
            renominate_after_s=self.renominate_after_s,
            policy=self.policy,
            weights=self.weights.weights() if self.weights is not None else Weights(),
            refresh_s=self.refresh_s,
            stale_after_s=max(120.0, self.refresh_s) if self.stale_after_s is None else self.stale_after_s,
            leader_election=election(self.leader_election, LEASE_NAME),
        )


def parse_settings(data: Any, source: str) -> DispatcherSettings:
    return DispatcherConfigDoc.read(data or {}, source).settings()


def load_settings(path: Path) -> DispatcherSettings:
    return parse_settings(load_document(path, Kind.SETTINGS), str(path))
