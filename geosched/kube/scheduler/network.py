"""Where the scheduler's latest network view comes from: a function it calls now and then.

The scheduler overlays what a source returns on the shipped network model of its cluster's zones
(`cluster_inventory.network_for`). A source returns the same object while nothing changed, so the scheduler
rebuilds its placement context only when there is something new.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from geosched.core.errors import GeoschedError
from geosched.core.models import NetworkView
from geosched.files.documents import load_network
from geosched.store.db import Store

log = logging.getLogger(__name__)
NetworkSource = Callable[[], NetworkView | None]


def no_network() -> NetworkView | None:
    """The shipped model alone."""
    return None


def fixed(view: NetworkView) -> NetworkSource:
    return lambda: view


class FileNetwork:
    """A NetworkView file (`geosched snapshot export`, or written by the probes), read again when it changes.
    A file that cannot be read keeps the last good view: a half-written file must not blind the scheduler."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mtime: int | None = None
        self._view: NetworkView | None = None

    def __call__(self) -> NetworkView | None:
        try:
            mtime = self.path.stat().st_mtime_ns
        except OSError as exc:
            log.warning("network view %s: %s", self.path, exc)
            return self._view
        if mtime != self._mtime:
            try:
                self._view = load_network(self.path)
                self._mtime = mtime
            except GeoschedError as exc:
                log.warning("network view %s: %s (keeping the previous view)", self.path, exc)
        return self._view


class StoreNetwork:
    """The store's aggregated probe samples, read at most every `every_s` seconds."""

    def __init__(self, home: Path | None = None, *, every_s: float = 60.0) -> None:
        self.home = home
        self.every_s = every_s
        self._at = float("-inf")
        self._view: NetworkView | None = None

    def __call__(self) -> NetworkView | None:
        now = time.monotonic()
        if now - self._at >= self.every_s:
            with Store(self.home) as store:
                self._view = store.network_view()
            self._at = now
        return self._view
