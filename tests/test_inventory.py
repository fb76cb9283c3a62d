"""Inventory files: SSH targets for machines geosched did not launch, joining the fleet when they have GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.core.errors import InputError
from geosched.files.inventory import MAX_JUMP_HOPS, load_inventory, parse_inventory

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


# --- proxy_jump chains (issue 19 item 7) ------------------------------------------------------------
# The shape of tests/data/good/inventory.yaml: nodes reached through a bastion by `proxy_jump: <node name>`.

def chain(jumps: dict[str, str | None]) -> dict[str, object]:
    return {"nodes": [{"name": name, "address": f"198.18.{i >> 8}.{i & 255}", "zone": "z", "region": "r",
                       **({"proxy_jump": via} if via else {})} for i, (name, via) in enumerate(jumps.items())]}


@pytest.mark.parametrize(("jumps", "field", "cycle"), [
    ({"a": "a"}, "nodes[0].proxy_jump", "a -> a"),
    ({"bastion": None, "a": "b", "b": "a"}, "nodes[1].proxy_jump", "a -> b -> a"),
    # A tail leading into a loop: the loop is named, not the tail.
    ({"gpu": "a", "a": "b", "b": "c", "c": "a"}, "nodes[1].proxy_jump", "a -> b -> c -> a"),
])
def test_a_proxy_jump_loop_is_refused_naming_the_cycle(jumps: dict[str, str | None], field: str,
                                                      cycle: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_inventory(chain(jumps), "inv.yaml")
    assert (caught.value.source, caught.value.field) == ("inv.yaml", field)
    assert caught.value.reason == f"proxy_jump chain loops: {cycle}"


def test_a_long_proxy_jump_loop_is_refused_in_linear_time() -> None:
    # 20,000 nodes each jumping through the next, the last through the first: one loop, found by one walk
    # (a walk per node that re-followed the chain would take 200 million steps), and named in a short line.
    names = [f"n{i}" for i in range(20_000)]
    loop = r"n0 -> n1 -> n2 -> \.\.\. 19,995 more -> n19998 -> n19999 -> n0"
    with pytest.raises(InputError, match=rf"nodes\[0\].proxy_jump: proxy_jump chain loops: {loop}$"):
        parse_inventory(chain({n: names[(i + 1) % len(names)] for i, n in enumerate(names)}), "inv.yaml")


def test_a_chain_deeper_than_ssh_hops_is_refused() -> None:
    # Each hop is one nested SSH connection (and one nested await): 17 bastions deep is a mistake, not a site.
    def line(hosts: int) -> dict[str, str | None]:
        """n0 reached through `hosts` jump hosts n1..n<hosts>."""
        return {f"n{i}": (f"n{i + 1}" if i < hosts else None) for i in range(hosts + 1)}

    assert parse_inventory(chain(line(MAX_JUMP_HOPS)), "inv.yaml").by_name()["n0"].proxy_jump == "n1"
    with pytest.raises(InputError, match=rf"nodes\[0\].proxy_jump: n0 is reached through {MAX_JUMP_HOPS + 1} "
                                         rf"jump hosts \(at most {MAX_JUMP_HOPS}\)"):
        parse_inventory(chain(line(MAX_JUMP_HOPS + 1)), "inv.yaml")


# --- proxy_jump outside the inventory (issue 19, untrusted input) ----------------------------------
# The forms OpenSSH reads in `ssh -J` and `ProxyJump` (ssh(1), ssh_config(5)): [user@]host[:port], an IPv6
# address in brackets, ssh://[user@]host[:port] URIs and comma chains. Each spec is checked when the inventory
# loads, so a bad one is one line naming the field, never a failure found when the pool dials.

@pytest.mark.parametrize(("spec", "reason"), [
    ("ops@bastion.example.com:99999", "port 99999 is not between 1 and 65535"),
    ("ops@bastion.example.com:0", "port 0 is not between 1 and 65535"),
    ("ops@bastion.example.com:ssh", "port 'ssh' is not a number"),
    ("ops@bastion.example.com:", "port '' is not a number"),
    ("jump1.example.com,jump2.example.com", "comma-separated jump chain, which geosched does not follow"),
    ("ops@[fe80::1]:99999", "port 99999 is not between 1 and 65535"),
    ("ops@[fe80::1", "'[' without its closing ']'"),
    ("ops@[bastion]:22", "'bastion' in brackets is not an IPv6 address"),
    ("ops@fe80::zz:1", "write an IPv6 address with a port in brackets"),
    ("ssh://ops@bastion.example.com:0", "port 0 is not between 1 and 65535"),
    ("ssh://ops@bastion.example.com/path", "an ssh:// jump host takes no path"),
    ("@bastion.example.com", "user '' is empty"),
    ("ops@-oProxyCommand=x:22", "host '-oProxyCommand=x' is not a host name"),
    ("ops@:22", "host '' is not a host name"),
    ("ops@bastion.example.com\n", "host 'bastion.example.com\\n' is not a host name"),
    # Hostile specs a pull request could carry: a port of more digits than int() reads (a ValueError of its own,
    # once a traceback), a zone id and a user name holding terminal escapes or a right-to-left override.
    ("ops@bastion.example.com:" + "9" * 5000, "port 999999999999... is not between 1 and 65535"),
    ("ops@[fe80::1%\x1b[31mred]:22", "in brackets is not an IPv6 address"),
    ("ops\u202e@bastion.example.com:22", "user 'ops\\u202e' is empty or holds"),
])
def test_an_external_proxy_jump_is_checked_when_the_inventory_loads(spec: str, reason: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_inventory(doc(proxy_jump=spec), "inv.yaml")
    assert (caught.value.source, caught.value.field) == ("inv.yaml", "nodes[1].proxy_jump")
    assert reason in caught.value.reason and "\n" not in str(caught.value)


@pytest.mark.parametrize("spec", [
    "ops@203.0.113.5:2222", "ops@[fe80::1]:2222", "[2001:db8::7]", "ops@2001:db8::7", "ssh://ops@jump.example.com:2200",
    "ssh://jump.example.com", "bastion.example.com:22", "ops@[fe80::1%eth0]:22",
])
def test_the_forms_openssh_reads_are_accepted(spec: str) -> None:
    assert parse_inventory(doc(proxy_jump=spec), "inv.yaml").by_name()["n1"].proxy_jump == spec


# --- chains across the store's inventories ---------------------------------------------------------

def test_the_store_targets_hold_every_inventory_hop_of_a_chain(tmp_path: Path) -> None:
    """A GPU node behind two bastions (an inner one reached through an outer one): the pool must hold both, or
    it takes the inner bastion's node name for an outside host name and dials `bastion-inner` on port 22."""
    from geosched.providers.lifecycle import probe_targets
    from geosched.store.db import Store

    inventory = doc(proxy_jump="bastion-inner", gpu="A100", gpus=8)
    nodes = inventory["nodes"]
    assert isinstance(nodes, list)
    nodes.append({"name": "bastion-inner", "address": "198.18.0.3", "zone": "z0", "region": "lab",
                  "proxy_jump": "bastion"})
    with Store(tmp_path) as store:
        store.save_inventory(parse_inventory(inventory, "inv.yaml"))
        found = probe_targets(store, None, "root", None)
    assert [t.name for t in found.probe] == ["n1"]
    assert [t.name for t in found.jumps] == ["bastion", "bastion-inner"]


def test_targets_built_by_a_library_caller_are_checked_before_dialling(tmp_path: Path) -> None:
    from geosched.files.inventory import SshTarget
    from geosched.probes import service
    from geosched.probes.settings import ProbeSettings
    from geosched.store.db import Store

    looped = [SshTarget(name=a, address=f"198.18.0.{i + 1}", zone="z", region="r", proxy_jump=b)
              for i, (a, b) in enumerate([("a", "b"), ("b", "a")])]
    with Store(tmp_path) as store, pytest.raises(InputError) as caught:
        service.run(store, looped, ProbeSettings(deadline_s=5.0, connect_timeout_s=1.0))
    assert str(caught.value) == "probe targets: a.proxy_jump: proxy_jump chain loops: a -> b -> a"


def test_a_bad_jump_host_is_one_line_exit_2_before_anything_dials(tmp_path: Path) -> None:
    from tests.inputs.inputs_support import in_process

    # tests/data/good/inventory.yaml's shape, its bastion outside the file written as OpenSSH's -J takes it.
    inventory = tmp_path / "site.yaml"
    inventory.write_text("""
regions: [{provider: onprem, name: zurich, grid_gco2e_per_kwh: 30, pue: 1.25}]
nodes:
  - {name: hpc-a1, address: 198.18.0.11, zone: zrh-a, region: zurich, proxy_jump: "ops@[fe80::1]:99999",
     gpu: A100, gpus: 8}
""")
    run = in_process(["probe", "run", "--inventory", inventory, "--deadline", "20"], tmp_path / "home")
    assert run.one_line_error, (run.code, run.stderr[-2000:])
    assert run.stderr == (f"error: {inventory}: nodes[0].proxy_jump: 'ops@[fe80::1]:99999': port 99999 is not "
                          "between 1 and 65535\n")
