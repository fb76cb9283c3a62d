"""Scheduler mode: geosched as a Kubernetes scheduler (`spec.schedulerName: geosched`) binding whole gangs.

Pure core: `pods` (what a pod says), `gangs` (grouping, readiness), `decide` (one gang's bindings). I/O at the
edges: `reflector` (list + watch into `cache`), `lease` (leader election), `binder` (all-or-nothing bindings),
`events`, and `loop`, which runs them. See README.md for the algorithm, gang semantics and limits.
"""

from __future__ import annotations

from geosched.kube.scheduler.loop import Scheduler, Stats, run
from geosched.kube.scheduler.network import FileNetwork, NetworkSource, StoreNetwork, fixed, no_network
from geosched.kube.scheduler.settings import LeaderElection, SchedulerSettings, load_settings, parse_settings

__all__ = ["FileNetwork", "LeaderElection", "NetworkSource", "Scheduler", "SchedulerSettings", "Stats",
           "StoreNetwork", "fixed", "load_settings", "no_network", "parse_settings", "run"]
