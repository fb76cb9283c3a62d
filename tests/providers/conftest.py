"""Fixtures for the provider tests: moto behind the fault proxy, the GCE double and the GKE double, over real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from geosched.providers.aws import AwsProvider
from geosched.providers.config import ENV_ADMIN_CIDRS
from geosched.providers.gcp import GcpProvider
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, GceDouble, MotoServer
from geosched_emulators.gke import GkeDouble
from tests.providers.gke_support import PROJECT, make_cluster
from tests.providers.prov_support import ADMIN_CIDR, aws_env, aws_provider, gcp_provider, warm


@pytest.fixture(scope="session")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


@pytest.fixture
def proxy(moto: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ec2FaultProxy]:
    with Ec2FaultProxy(moto.url) as p:
        for key, value in aws_env(p.url).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv(ENV_ADMIN_CIDRS, ADMIN_CIDR)  # the CLI's runs: chosen, as prov_support's providers
        for key in ("AWS_PROFILE", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ENDPOINT_URL_EC2"):
            monkeypatch.delenv(key, raising=False)
        yield p


@pytest.fixture
def aws(proxy: Ec2FaultProxy) -> AwsProvider:
    provider = aws_provider()
    warm(provider)
    return provider


@pytest.fixture
def gce() -> Iterator[GceDouble]:
    with GceDouble() as double:
        yield double


@pytest.fixture
def gcp(gce: GceDouble) -> GcpProvider:
    return gcp_provider(gce.endpoint)


@pytest.fixture
def gke(monkeypatch: pytest.MonkeyPatch) -> Iterator[GkeDouble]:
    """The GKE double holding gke_support's cluster, named to the CLI by its environment as a user's shell names
    GKE. Its operations finish at once: the CLI polls every 15 s (GroupSettings), which a test should not wait for.
    Tests that drive the node pool code in-process with a delay of their own define `gke` in their module."""
    with GkeDouble() as double:
        make_cluster(double)
        monkeypatch.setenv("GEOSCHED_GKE_ENDPOINT", double.endpoint)
        monkeypatch.setenv("GEOSCHED_GCP_PROJECT", PROJECT)
        yield double


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "home") as s:
        yield s
