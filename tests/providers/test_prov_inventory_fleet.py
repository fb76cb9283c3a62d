"""Inventory machines are one fleet with the rest (issue 15, items 1 and 2): leased on-prem machines join
`place --store`, `snapshot export` and the usage ledger at the provider and region their inventory declares;
an inventory file is a fleet for `place --fleet`; the ssh provider's plan knows each zone's free nodes and
prices a gang node by node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from geosched.core.models import Pricing
from geosched.providers.base import Budget
from geosched.providers.config import SshSettings
from geosched.providers.gang import plan_gang
from geosched.providers.plan import GangRequest
from geosched.providers.ssh import SshProvider
from geosched.report.ledger import ledger_intervals
from geosched.store.db import Store
from tests.test_cli import geosched

# Two halls of one on-prem site with its own grid figures (the `regions:` block); hall a holds one free
# DGX, hall b three at different prices (one already paid for: stated $0, else it would cost its amortised
# price, geosched/core/owned.py).
INVENTORY = """
regions: [{provider: onprem, name: oslo, grid_gco2e_per_kwh: 19, pue: 1.15}]
nodes:
  - {name: login, address: 198.18.1.1, zone: osl-a, region: oslo}
  - {name: dgx-a1, address: 198.18.1.11, zone: osl-a, region: oslo, gpu: A100, gpus: 8, instance_type: dgx-a100,
     price_ondemand: 9.0, cluster: hpc}
  - {name: dgx-b1, address: 198.18.1.21, zone: osl-b, region: oslo, gpu: A100, gpus: 8, instance_type: dgx-a100,
     price_ondemand: 12.0, cluster: hpc}
  - {name: dgx-b2, address: 198.18.1.22, zone: osl-b, region: oslo, gpu: A100, gpus: 8, instance_type: dgx-a100,
     price_ondemand: 0, cluster: hpc}
  - {name: dgx-b3, address: 198.18.1.23, zone: osl-b, region: oslo, gpu: A100, gpus: 8, instance_type: dgx-a100,
     price_ondemand: 4.0, cluster: hpc}
"""
JOB = "name: lab-job\nworkers: 2\ngpus_per_worker: 8\ngpu: A100\n"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    (tmp_path / "job.yaml").write_text(JOB)
    return tmp_path / "inventory.yaml", tmp_path / "job.yaml"


def test_leased_inventory_machines_join_place_store_at_their_declared_region(tmp_path: Path,
                                                                            files: tuple[Path, Path]) -> None:
    inventory, job = files
    home = tmp_path / "home"
    run = geosched("provision", "--provider", "ssh", "--inventory", inventory, "--gpu", "A100:8", "--nodes", "2",
                   "--yes", "-o", "json", home=home)
    assert run.returncode == 0, run.stderr

    placed = geosched("place", job, "--store", "-o", "json", home=home)
    # Before: "nodes.X.region: 'ssh:oslo' is neither in the catalog nor in the imported fleet".
    assert placed.returncode == 0, placed.stderr
    doc = json.loads(placed.stdout)
    assert doc["cluster"] == "hpc" and len(doc["zones"]) == 1

    exported = geosched("snapshot", "export", tmp_path / "snap", home=home)
    assert exported.returncode == 0, exported.stderr
    fleet = yaml.safe_load((tmp_path / "snap" / "fleet.yaml").read_text())
    nodes = {n["name"]: n for n in fleet["nodes"]}
    # Leased or not, every inventory machine with GPUs is one node, where the inventory says it is.
    assert set(nodes) == {"dgx-a1", "dgx-b1", "dgx-b2", "dgx-b3"}
    assert {(n["provider"], n["region"]) for n in nodes.values()} == {("onprem", "oslo")}
    assert {"provider": "onprem", "name": "oslo", "grid_gco2e_per_kwh": 19.0, "pue": 1.15} in fleet["regions"]

    with Store(home) as store:
        rows = ledger_intervals(store, None, None)
    # The ledger bills the leased machines at the inventory's site (its grid intensity and PUE), not "ssh:oslo".
    assert rows and {(u.provider, u.region) for u in rows} == {("onprem", "oslo")}

    report = geosched("report", "carbon", "-o", "json", home=home)
    assert report.returncode == 0, report.stderr
    assert "no grid intensity" not in report.stdout + report.stderr


def test_an_inventory_file_is_a_fleet_for_place(files: tuple[Path, Path], tmp_path: Path) -> None:
    inventory, job = files
    run = geosched("place", job, "--fleet", inventory, "-o", "json", home=tmp_path / "home")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    # hall b holds both workers on whole nodes; hall a has one node only.
    assert doc["zones"] == ["osl-b"] and doc["cluster"] == "hpc"


def test_the_plan_counts_free_nodes_and_prices_the_cheapest_ones(files: tuple[Path, Path], tmp_path: Path) -> None:
    inventory, _ = files
    ssh = SshProvider(SshSettings(inventory=inventory, leases=tmp_path / "leases.json"))
    with Store(tmp_path / "home") as store:
        plan = plan_gang(GangRequest("A100", 8, 3, providers=("ssh",)), {"ssh": ssh}, store)
        # Before: osl-a (one node) ranked first at 9 $/h x 3, then NotEnoughFreeNodes at launch.
        assert [c.zone for c in plan.candidates] == ["osl-b"]
        assert plan.candidates[0].usd_per_hour == pytest.approx(0.0 + 4.0 + 12.0)
        assert [(s.candidate.zone, s.reason) for s in plan.skipped] == [("osl-a", "1 free nodes, the gang needs 3")]

        two = plan_gang(GangRequest("A100", 8, 2, providers=("ssh",)), {"ssh": ssh}, store)
        # Two nodes: hall b's two cheapest (0 + 4 $/h) beat hall a, which cannot hold two anyway.
        assert [(c.zone, c.usd_per_hour) for c in two.candidates] == [("osl-b", 4.0)]
        assert two.candidates[0].pricing is Pricing.ON_DEMAND

    # The lease takes the nodes the plan priced: the cheapest free ones.
    from geosched.providers.base import LaunchSpec

    spec = LaunchSpec(gang="g", token="t", owner="o", region="oslo", zone="osl-b", instance_type="dgx-a100",
                      gpu="A100", gpus=8, vcpus=0.0, pricing=Pricing.ON_DEMAND, names=("g-0", "g-1"))
    leased = ssh.launch(spec, Budget(10.0))
    assert [i.provider_id for i in leased] == ["dgx-b2", "dgx-b3"]
    # Leased nodes are no longer free: the next plan sees one node left in hall b.
    offers = {o.zone: o.free_node_prices for o in ssh.offerings("oslo", Budget(10.0))}
    assert offers == {"osl-a": (9.0,), "osl-b": (12.0,)}
