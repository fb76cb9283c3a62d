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
from typing import Any

from geosched import policies
from geosched.fields import Fields
from geosched.gate import Kind, load_document
from geosched.kube.multikueue.kueue import (
    ADMISSION_FIELD_MANAGER,
    ALL_AT_ONCE,
    DEFAULT_DISPATCHER,
    INCREMENTAL,
    KUEUE_CONFIGMAP,
    KUEUE_NAMESPACE,
    MAX_NOMINATED,
)
from geosched.kube.scheduler.settings import (
    LeaderElection,
    check_kind,
    parse_leader_election,
    parse_policy,
    parse_weights,
)
from geosched.models import Weights

LEASE_NAME = "geosched-multikueue"
TOP = {"apiVersion", "kind", "dispatcher_name", "kueue_namespace", "kueue_configmap", "field_manager", "nominate",
       "renominate_after_s", "policy", "weights", "refresh_s", "stale_after_s", "leader_election"}


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


def parse_settings(data: Any, source: str) -> DispatcherSettings:
    f = Fields(data or {}, source, "", TOP)
    check_kind(f, "DispatcherConfig")
    policy = parse_policy(f)
    name = f.string("dispatcher_name", default=DEFAULT_DISPATCHER)
    f.check("dispatcher_name", name not in (ALL_AT_ONCE, INCREMENTAL),
            f"{name} is one of Kueue's built-in dispatchers; name ours (e.g. {DEFAULT_DISPATCHER})")
    refresh = f.number("refresh_s", minimum=0.0, exclusive_minimum=True, default=30.0)
    nominate = f.integer("nominate", minimum=1, default=1)
    f.check("nominate", nominate <= MAX_NOMINATED, f"at most {MAX_NOMINATED} (the Workload CRD's maxItems)")
    return DispatcherSettings(
        dispatcher_name=name,
        kueue_namespace=f.string("kueue_namespace", default=KUEUE_NAMESPACE),
        kueue_configmap=f.string("kueue_configmap", default=KUEUE_CONFIGMAP),
        field_manager=f.string("field_manager", default=ADMISSION_FIELD_MANAGER),
        nominate=nominate,
        renominate_after_s=f.number("renominate_after_s", minimum=0.0, exclusive_minimum=True, default=300.0),
        policy=policy,
        weights=parse_weights(f),
        refresh_s=refresh,
        stale_after_s=f.number("stale_after_s", minimum=refresh, default=max(120.0, refresh)),
        leader_election=parse_leader_election(f, LEASE_NAME),
    )


def load_settings(path: Path) -> DispatcherSettings:
    return parse_settings(load_document(path, Kind.SETTINGS), str(path))
