"""Inventory files: SSH targets for machines geosched did not launch, joining the fleet when they have GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.errors import InputError
from geosched.inventory import load_inventory, parse_inventory

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl host"


def doc(**node: object) -> dict[str, object]:
    base = {"name": "n1", "address": "198.18.0.2", "zone": "z1", "region": "lab"}
    return {"regions": [{"provider": "onprem", "name": "lab", "grid_gco2e_per_kwh": 50, "pue": 1.2}],
            "nodes": [{"name": "bastion", "address": "198.18.0.1", "zone": "z0", "region": "lab"}, base | node]}


def test_targets_and_fleet(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(f"""
regions: [{{provider: onprem, name: lab, grid_gco2e_per_kwh: 50, pue: 1.2}}]
nodes:
  - {{name: bastion, address: 198.18.0.1, zone: z0, region: lab}}
  - {{name: gpu-1, address: 198.18.0.2, port: 2222, user: ml, key: keys/id, host_key: "{KEY}",
      proxy_jump: bastion, zone: z1, region: lab, gpu: A100, gpus: 8, cluster: hpc}}
""")
    inv = load_inventory(path)
    gpu = inv.by_name()["gpu-1"]
    assert (gpu.port, gpu.user, gpu.key, gpu.host_key, gpu.proxy_jump) == (2222, "ml", tmp_path / "keys/id", KEY,
                                                                           "bastion")
    assert inv.by_name()["bastion"].port == 22
    assert inv.fleet is not None and [n.name for n in inv.fleet.nodes] == ["gpu-1"]
    node = inv.fleet.nodes[0]
    assert (node.provider, node.addresses, node.cluster, node.gpus) == ("onprem", ("198.18.0.2",), "hpc", 8)


@pytest.mark.parametrize(("node", "message"), [
    ({"host_key": "AAAA"}, "nodes[1].host_key: expected a public host key line"),
    ({"port": 70000}, "nodes[1].port: must be <= 65535"),
    ({"proxy_jump": "ghost"}, "nodes[1].proxy_jump: 'ghost' is neither"),
    ({"gpus": 8, "gpu": "A100", "region": "mars"}, "nodes[1].region: unknown region onprem:mars"),
    ({"gpus": -1, "gpu": "A100"}, "nodes[1].gpus: must be >= 1"),
    ({"password": "x"}, "nodes[1].password: unknown field"),
])
def test_bad_inventory(node: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_inventory(doc(**node), "inv.yaml")
