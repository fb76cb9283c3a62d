"""`geosched place --store` and `snapshot export`: the store's fleet includes the machines geosched provisioned.

Everything runs as real processes on one state directory: the ssh provider leases inventory machines
(`geosched provision --provider ssh`), then placement sees them as fleet nodes with one identity.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.test_cli import geosched

INVENTORY = """
regions: [{provider: onprem, name: zurich, grid_gco2e_per_kwh: 30, pue: 1.2}]
nodes:
  - {name: hpc-01, address: 198.18.0.11, zone: zrh-a, region: zurich, gpu: A100, gpus: 8, instance_type: dgx-a100}
  - {name: hpc-02, address: 198.18.0.12, zone: zrh-a, region: zurich, gpu: A100, gpus: 8, instance_type: dgx-a100}
  - {name: hpc-03, address: 198.18.0.13, zone: zrh-b, region: zurich, gpu: A100, gpus: 8, instance_type: dgx-a100}
"""

# The site's fleet as imported: the zurich region (its grid and PUE), a workstation, and the HPC machines, busy
# (someone else's jobs) until geosched leases them.
SNAPSHOT_FLEET = {
    "kind": "Fleet",
    "regions": [{"provider": "onprem", "name": "zurich", "grid_gco2e_per_kwh": 30, "pue": 1.2}],
    "nodes": [{"name": "ws-01", "provider": "onprem", "region": "zurich", "zone": "zrh-c", "instance_type": "ws",
               "gpu": "A100", "gpus": 2, "gpus_free": 2}] + [
        {"name": f"hpc-0{i}", "provider": "onprem", "region": "zurich", "zone": zone, "instance_type": "dgx-a100",
         "gpu": "A100", "gpus": 8, "gpus_free": 0} for i, zone in ((1, "zrh-a"), (2, "zrh-a"), (3, "zrh-b"))],
}
JOB = {"kind": "Job", "name": "pretrain-16", "workers": 2, "gpus_per_worker": 8, "gpu": "A100"}


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(JOB))
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "fleet.yaml").write_text(yaml.safe_dump(SNAPSHOT_FLEET))
    (snap / "network.yaml").write_text(yaml.safe_dump({"kind": "NetworkView", "zones": [], "nodes": []}))
    return tmp_path


def provision_two(site: Path, home: Path) -> tuple[str, list[str]]:
    """The gang and its node names (geosched names a machine after its gang; `provider_id` is the host)."""
    run = geosched("provision", "--provider", "ssh", "--inventory", site / "inventory.yaml", "--gpu", "A100:8",
                   "--nodes", "2", "--yes", "-o", "json", home=home)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert sorted(n["provider_id"] for n in doc["nodes"]) == ["hpc-01", "hpc-02"], doc
    return str(doc["gang"]), sorted(n["name"] for n in doc["nodes"])


def test_place_from_the_store_uses_provisioned_machines(site: Path) -> None:
    home = site / "home"
    assert geosched("snapshot", "import", site / "snap", home=home).returncode == 0
    before = geosched("place", site / "job.yaml", "--store", "-o", "json", home=home)
    assert before.returncode == 3  # the DGX machines are busy; the 2-GPU workstation holds no 8-GPU worker

    gang, machines = provision_two(site, home)
    run = geosched("place", site / "job.yaml", "--store", "-o", "json", home=home)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["zones"] == ["zrh-a"]
    assert sorted(n["node"] for n in doc["nodes"]) == ["hpc-01", "hpc-02"]  # one machine, one node

    exported = geosched("snapshot", "export", site / "out", home=home)
    assert exported.returncode == 0, exported.stderr
    fleet = yaml.safe_load((site / "out" / "fleet.yaml").read_text())
    names = {n["name"]: n for n in fleet["nodes"]}
    assert set(names) == {"ws-01", "hpc-01", "hpc-02", "hpc-03"} and machines
    assert all(names[m]["labels"]["geosched.io/gang"] == gang for m in ("hpc-01", "hpc-02"))
    assert names["hpc-01"]["gpus_free"] == 8 and names["hpc-01"]["provider"] == "onprem"

    down = geosched("down", gang, "--yes", "--inventory", site / "inventory.yaml", home=home)
    assert down.returncode == 0, down.stderr
    after = geosched("place", site / "job.yaml", "--store", "-o", "json", home=home)
    assert after.returncode == 3  # the machines went back: the store's fleet no longer holds them


def test_leased_machines_need_no_import_the_inventory_declares_their_region(site: Path) -> None:
    home = site / "home"
    # Nothing imported: the store kept what the inventory declares (zurich's grid and PUE) when it leased.
    # (Before issue 15 this was "'ssh:zurich' is neither in the catalog nor in the imported fleet".)
    provision_two(site, home)
    run = geosched("place", site / "job.yaml", "--store", "-o", "json", home=home)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["zones"] == ["zrh-a"]


def test_an_empty_store_says_how_to_fill_it(site: Path) -> None:
    run = geosched("place", site / "job.yaml", "--store", home=site / "home")
    assert run.returncode == 2
    assert "no fleet and no provisioned machines" in run.stderr and run.stderr.count("\n") == 1
    both = geosched("place", site / "job.yaml", "--store", "--snapshot", site / "snap", home=site / "home")
    assert both.returncode == 2 and "--store" in both.stderr


def test_cloud_machines_need_no_import_their_regions_are_in_the_catalog() -> None:
    from geosched.store.sources import with_nodes
    from tests.handmade import node

    fleet = with_nodes(None, [node("g-1-0", "use1-az1", "us-east-1", provider="aws", gpu="A100")])
    assert list(fleet.regions) == ["aws:us-east-1"] and fleet.regions["aws:us-east-1"].grid_gco2e_per_kwh > 0
    assert fleet.zones["use1-az1"].region == "us-east-1"
