"""Existing machines from an inventory file provisioned like a cloud: lease, describe, release."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.core import owned
from geosched.providers import journal, lifecycle
from geosched.providers.base import Budget
from geosched.providers.config import SshSettings
from geosched.providers.failover import Ttls
from geosched.providers.gang import provision
from geosched.providers.plan import GangRequest, PricingMode
from geosched.providers.ssh import SshProvider
from geosched.store.db import Store
from tests.providers.prov_support import fast_settings

INVENTORY = """
regions: [{provider: onprem, name: zurich, grid_gco2e_per_kwh: 30, pue: 1.2}]
nodes:
  - {name: bastion, address: 198.18.0.1, zone: zrh-a, region: zurich}
  - {name: hpc-01, address: 198.18.0.11, zone: zrh-a, region: zurich, gpu: A100, gpus: 8, instance_type: dgx-a100}
  - {name: hpc-02, address: 198.18.0.12, zone: zrh-a, region: zurich, gpu: A100, gpus: 8, instance_type: dgx-a100}
  - {name: hpc-03, address: 198.18.0.13, zone: zrh-a, region: zurich, gpu: A100, gpus: 8, instance_type: dgx-a100}
  - {name: hpc-04, address: 198.18.0.14, zone: zrh-b, region: zurich, gpu: A100, gpus: 8, instance_type: dgx-a100}
  - {name: hpc-05, address: 198.18.0.15, zone: zrh-b, region: zurich, gpu: A100, gpus: 8, gpus_free: 4,
     instance_type: dgx-a100}
"""


@pytest.fixture
def ssh(tmp_path: Path) -> SshProvider:
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY)
    return SshProvider(SshSettings(inventory=path, leases=tmp_path / "home" / "ssh-leases.json"))


# Inventory capacity changes as soon as a gang is taken down: remember refusals only for this run.
SETTINGS = fast_settings(ttls=Ttls(capacity_s=0.0))


def request(nodes: int, pricing: PricingMode = PricingMode.ON_DEMAND) -> GangRequest:
    return GangRequest("A100", 8, nodes, pricing, ("ssh",))


def test_gangs_lease_free_nodes_in_one_zone_and_release_them(ssh: SshProvider, store: Store) -> None:
    first = provision(request(2), {"ssh": ssh}, store, SETTINGS)
    assert first.ok and [(n.provider_id, n.zone) for n in first.nodes] == [("hpc-01", "zrh-a"), ("hpc-02", "zrh-a")]
    # No price_ondemand in the inventory: an owned machine costs its amortised purchase and power
    # (geosched/core/owned.py).
    assert first.nodes[0].addresses == ("198.18.0.11",)
    assert first.nodes[0].price_ondemand == owned.usd_per_hour("A100", 8) and first.nodes[0].price_ondemand > 0
    assert first.candidate is not None and first.candidate.gco2e_per_hour is not None

    second = provision(request(2), {"ssh": ssh}, store, SETTINGS)
    # zrh-a has one free node left, zrh-b one whole one (hpc-05 is half busy): nowhere holds two, and the
    # plan knows it from the free-node counts, so nothing is leased or even tried.
    assert not second.ok
    assert [(a.zone, a.outcome, a.message) for a in second.attempts] == [
        ("zrh-a", "skipped", "1 free nodes, the gang needs 2"), ("zrh-b", "skipped", "1 free nodes, the gang needs 2")]

    third = provision(request(1), {"ssh": ssh}, store, SETTINGS)
    assert [n.provider_id for n in third.nodes] == ["hpc-03"]
    assert {i.provider_id for i in ssh.describe(None, (), fast_budget())} == {"hpc-01", "hpc-02", "hpc-03"}

    lifecycle.down(store, {"ssh": ssh}, first.gang, SETTINGS.lifecycle)
    assert {i.provider_id for i in ssh.describe(None, (), fast_budget())} == {"hpc-03"}
    again = provision(request(2), {"ssh": ssh}, store, SETTINGS)
    assert again.ok and {n.provider_id for n in again.nodes} == {"hpc-01", "hpc-02"}
    for gang in (third.gang, again.gang):
        lifecycle.down(store, {"ssh": ssh}, gang, SETTINGS.lifecycle)
    assert ssh.describe(None, (), fast_budget()) == ()
    assert not journal.instances(store, states=journal.OPEN_STATES)


def test_inventory_has_no_spot_market(ssh: SshProvider, store: Store) -> None:
    result = provision(request(1, PricingMode.SPOT), {"ssh": ssh}, store, SETTINGS)
    assert not result.ok and result.attempts == ()  # no spot price: not even a candidate


def test_check_and_missing_inventory(ssh: SshProvider, tmp_path: Path) -> None:
    assert [i.ok for i in ssh.check()] == [True]
    missing = SshProvider(SshSettings(inventory=None, leases=tmp_path / "l.json"))
    assert [i.ok for i in missing.check()] == [False]


def fast_budget() -> Budget:
    return Budget(10.0)


def test_a_second_store_cannot_take_leased_nodes(ssh: SshProvider, store: Store, tmp_path: Path) -> None:
    provision(request(3), {"ssh": ssh}, store, SETTINGS)
    with Store(tmp_path / "other") as other:
        result = provision(request(1), {"ssh": ssh}, other, SETTINGS)
        assert [n.provider_id for n in result.nodes] == ["hpc-04"]
        found = lifecycle.sweep(other, {"ssh": ssh})
        assert found.orphans == () and len(found.foreign) == 3  # the first store's leases are not ours
