"""Host keys of machines geosched launched, read over the cloud's API and pinned before the first probe (issue 15):
EC2's console output (cloud-init's host key block), Compute Engine's guest attributes (namespace hostkeys/).
Against moto behind the fault proxy and the GCE double, over real HTTP; the keys are real keys made here."""

from __future__ import annotations

from pathlib import Path

import asyncssh
import pytest

from geosched.cli.probetargets import store_targets
from geosched.probes.hostkeys import KNOWN_HOSTS_NAME
from geosched.providers import journal, lifecycle
from geosched.providers.aws import AwsProvider, console_host_keys
from geosched.providers.gang import provision
from geosched.providers.gcp import GcpProvider
from geosched.providers.plan import GangRequest
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, GceDouble
from tests.providers.prov_support import AWS_REGIONS, GCP_REGIONS, PROJECT, fast_settings

pytestmark = pytest.mark.integration

# What cloud-init's cc_keys_to_console prints at first boot (its format: one "<type> <blob> <comment>" per key).
CONSOLE = """[   12.345678] cloud-init[1021]: Cloud-init v. 24.1 running 'modules:final'
-----BEGIN SSH HOST KEY KEYS-----
ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBFakeKey= root@ip-10-0-0-1
ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl root@ip-10-0-0-1
-----END SSH HOST KEY KEYS-----
[   13.000000] cloud-init[1021]: Cloud-init v. 24.1 finished
"""


def test_console_host_keys_reads_cloud_inits_block() -> None:
    assert console_host_keys(CONSOLE) == (
        "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBFakeKey=",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl")
    assert console_host_keys("Linux version 2.6.16-xenU ... no block yet") == ()


def _key() -> str:
    text = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode()
    return " ".join(text.split()[:2])


def test_probe_targets_of_an_aws_gang_get_the_keys_ec2_reports(aws: AwsProvider, proxy: Ec2FaultProxy,
                                                               tmp_path: Path) -> None:
    with Store(tmp_path / "home") as store:
        result = provision(GangRequest("A100", 8, 2, providers=("aws",), regions=AWS_REGIONS), {"aws": aws}, store,
                           fast_settings())
        assert result.ok, result.message
        rows = journal.instances(store, gang=result.gang, states=("launched",))
        keys = {r.name: _key() for r in rows}
        for r in rows[:1]:  # the second machine's console shows no host key block yet (still booting)
            assert r.provider_id is not None
            proxy.set_host_keys(r.provider_id, (keys[r.name],))
        found = store_targets(store, result.gang, None)
        pinned = (store.home / KNOWN_HOSTS_NAME).read_text().splitlines()
        first = next(t for t in found.probe if t.name == rows[0].name)
        # Pinned under the address the probe connects to; the machine still booting stays unpinned, never trusted.
        assert pinned == [f"{first.address} {keys[rows[0].name]}"]
        assert found.unpinned == (rows[1].name,)
        lifecycle.down(store, {"aws": aws}, result.gang, fast_settings().lifecycle)


def test_gce_guest_attributes_give_the_host_keys(gcp: GcpProvider, gce: GceDouble, tmp_path: Path) -> None:
    with Store(tmp_path / "home") as store:
        result = provision(GangRequest("A100", 8, 2, providers=("gcp",), regions=GCP_REGIONS), {"gcp": gcp}, store,
                           fast_settings())
        assert result.ok, result.message
        rows = journal.instances(store, gang=result.gang, states=("launched",))
        # Every machine asks its guest agent to publish its host keys.
        inst = next(i for i in gce.instances(project=PROJECT) if i["name"] == rows[0].provider_id)
        assert {"key": "enable-guest-attributes", "value": "TRUE"} in inst["metadata"]["items"]
        key = _key()
        gce.set_guest_host_keys(PROJECT, rows[0].zone, str(rows[0].provider_id), (key,))
        found, errors = lifecycle.reported_host_keys(store, {"gcp": gcp}, [r.name for r in rows])
        # The second machine's agent has not published yet (404): no key, and no error either.
        assert found == {rows[0].name: (key,)} and errors == []
        lifecycle.down(store, {"gcp": gcp}, result.gang, fast_settings().lifecycle)
