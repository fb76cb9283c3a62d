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
from typing import Any

from geosched import documents, policies
from geosched.documents import API_VERSION
from geosched.fields import Fields
from geosched.gate import Kind, load_document
from geosched.models import Weights

TOP = {"apiVersion", "kind", "scheduler_name", "namespaces", "policy", "weights", "leader_election",
       "backoff_initial_s", "backoff_max_s", "watch_timeout_s"}
LEADER = {"enabled", "namespace", "name", "lease_duration_s", "renew_deadline_s", "retry_period_s"}
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


def parse_settings(data: Any, source: str) -> SchedulerSettings:
    f = Fields(data or {}, source, "", TOP)
    check_kind(f, "SchedulerConfig")
    policy = parse_policy(f)
    initial = f.number("backoff_initial_s", minimum=0.0, default=1.0)
    return SchedulerSettings(
        scheduler_name=f.string("scheduler_name", default="geosched"),
        namespaces=tuple(f.strings("namespaces")),
        policy=policy,
        weights=parse_weights(f),
        leader_election=parse_leader_election(f),
        backoff_initial_s=initial,
        backoff_max_s=f.number("backoff_max_s", minimum=initial, default=max(60.0, initial)),
        watch_timeout_s=f.integer("watch_timeout_s", minimum=1, default=300),
    )


def check_kind(f: Fields, kind: str) -> None:
    """The optional apiVersion and kind of a geosched settings document."""
    if f.has("apiVersion") and f.raw("apiVersion") != API_VERSION:
        raise f.error("apiVersion", f"expected {API_VERSION!r}, got {f.raw('apiVersion')!r}")
    if f.has("kind") and f.raw("kind") != kind:
        raise f.error("kind", f"expected {kind!r}, got {f.raw('kind')!r}")


def parse_policy(f: Fields) -> str:
    policy = f.string("policy", default=policies.DEFAULT_POLICY)
    f.check("policy", policy in policies.names(), f"unknown policy {policy!r} (known: {', '.join(policies.names())})")
    return policy


def parse_weights(f: Fields) -> Weights:
    """The optional `weights` block (the scheduler's and the MultiKueue dispatcher's settings): one parser for
    every config, `documents.parse_weights`."""
    if not f.has("weights"):
        return Weights()
    return documents.parse_weights(f.raw("weights"), f.source, f.at("weights"))


def parse_leader_election(f: Fields, default_name: str = "geosched-scheduler") -> LeaderElection:
    if not f.has("leader_election"):
        return LeaderElection(name=default_name)
    e = Fields(f.raw("leader_election"), f.source, f.at("leader_election"), LEADER)
    enabled = e.raw("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise e.error("enabled", f"expected true or false, got {enabled!r}")
    retry = e.number("retry_period_s", minimum=0.0, exclusive_minimum=True, default=2.0)
    renew = e.number("renew_deadline_s", minimum=retry, default=max(10.0, retry))
    # client-go's rule: the leader gives up (renew deadline) before anyone else may take over (lease duration).
    duration = e.number("lease_duration_s", minimum=renew, exclusive_minimum=True, default=max(15.0, renew * 1.5))
    return LeaderElection(enabled=True if enabled is None else enabled,
                          namespace=e.string("namespace", default=DEFAULT_NAMESPACE),
                          name=e.string("name", default=default_name),
                          lease_duration_s=duration, renew_deadline_s=renew, retry_period_s=retry)


def load_settings(path: Path) -> SchedulerSettings:
    return parse_settings(load_document(path, Kind.SETTINGS), str(path))
