"""geosched as MultiKueue's external dispatcher: it chooses the worker clusters of pending Workloads.

Pure core: `kueue` (what Kueue's objects say; the status write), `rank` (worker clusters ranked by the placement
policy). I/O at the edges: `workers` (worker clusters through their kubeconfig Secrets), `dispatcher` (watches,
leader election, writes, Events), `metrics`, `settings`. See README.md.
"""

from __future__ import annotations

from geosched.kube.multikueue.dispatcher import Dispatcher
from geosched.kube.multikueue.metrics import Metrics
from geosched.kube.multikueue.settings import DispatcherSettings, load_settings, parse_settings

__all__ = ["Dispatcher", "DispatcherSettings", "Metrics", "load_settings", "parse_settings"]
