"""A test controller's loop: `sync` against one cluster of the plane every `poll_s` seconds, in a thread while
the controller is `with`-ed. What the node group, node pool and ProvisioningRequest stand-ins share
(tests/realkube/nodegroups.py, tests/realkube/provreq.py)."""

from __future__ import annotations

import threading
from typing import Any, Self

from geosched.kube.client import Kube


class Poller:
    def __init__(self, plane: Any, context: str, name: str, poll_s: float) -> None:
        self.plane, self.context, self.poll_s = plane, context, poll_s
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        with self.plane.kube(self.context) as kube:
            while not self._stop.is_set():
                try:
                    self.sync(kube)
                except Exception as exc:  # kept for the test to show; the loop goes on, as a controller's does
                    self.errors.append(repr(exc))
                self._stop.wait(self.poll_s)

    def sync(self, kube: Kube) -> None:
        raise NotImplementedError
