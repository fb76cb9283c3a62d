"""Fixtures of the live-API tests: emulated clusters over real HTTP, driven by the unmodified official client."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubeemu import MultiCluster


@pytest.fixture(autouse=True)
def _quiet_access_log() -> None:
    # aiohttp logs every request of the emulator at INFO; the scheduler's own lines are what a failure needs.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


@pytest.fixture
def clusters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MultiCluster]:
    with MultiCluster(3, directory=tmp_path) as mc:
        monkeypatch.setenv("KUBECONFIG", str(mc.kubeconfig))
        for cluster in mc:
            cluster.add_namespace("geosched-system")
        yield mc
        # An exception inside the emulator must fail the test, not pass for an API error.
        for cluster in mc:
            assert cluster.server_errors == [], cluster.server_errors
