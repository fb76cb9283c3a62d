"""Machines geosched did not launch (HPC, on-prem, existing VMs), reached over SSH.

An inventory file is a list of nodes with how to reach them; those that declare their GPUs also join the
fleet, as the same `Node` records the providers and probes use:

    regions:                      # optional, for regions not in the shipped data
      - {provider: onprem, name: zurich, grid_gco2e_per_kwh: 30, pue: 1.25}
    nodes:
      - name: hpc-01
        address: 10.0.0.11
        port: 22                  # default 22
        user: ubuntu              # default root
        key: ~/.ssh/id_ed25519    # private key file; default: the SSH agent / default keys
        host_key: "ssh-ed25519 AAAA..."   # the node's public host key, pinned
        proxy_jump: bastion       # another inventory node, or [user@]host[:port] (geosched/files/jumpspec.py);
                                  # no loops, at most 16 hops
        zone: zrh-hall-a
        region: zurich
        provider: onprem          # default onprem
        gpu: A100                 # optional: with gpus, the node joins the fleet
        gpus: 8
        cluster: hpc
        price_ondemand: 5.2       # $/h of the whole node; default for owned machines: amortised purchase plus
                                  # power per GPU model (geosched/core/owned.py), else unpriced
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from geosched.core import catalog, owned
from geosched.core.errors import InputError
from geosched.core.models import Fleet
from geosched.files.decl.inventory import DEFAULT_PROVIDER, InventoryDoc
from geosched.files.documents import parse_fleet
from geosched.files.gate import Kind, load_document
from geosched.files.jumpspec import FORMS, JumpSpecError, looks_external, parse_jump

# Jump hosts on the way to one node. Each is one SSH connection nested in the previous (and one nested await
# in the pool): real sites use one or two bastions; hundreds would exhaust the stack instead of connecting.
MAX_JUMP_HOPS = 16
# A loop longer than this is named by its ends, so the error stays one readable line.
SHOWN_LOOP = 8
FLEET_KEYS = ("name", "provider", "region", "zone", "gpu", "gpus", "gpus_free", "cluster", "instance_type",
              "price_ondemand", "labels")


@dataclass(frozen=True, slots=True)
class SshTarget:
    name: str
    address: str
    zone: str
    region: str
    provider: str = DEFAULT_PROVIDER
    port: int = 22
    user: str = "root"
    key: Path | None = None
    host_key: str | None = None
    proxy_jump: str | None = None
    # Where peers reach it when that differs from where the operator does (a cloud machine's private address).
    peer_address: str | None = None

    @property
    def peer(self) -> str:
        return self.peer_address or self.address


@dataclass(frozen=True)
class ProbeTargets:
    """What `probe run --store` reaches: the machines to measure and the jump hosts on the way to them. Here with
    the SSH targets (not with the providers, which find the provisioned ones) because the probes read it too."""

    probe: tuple[SshTarget, ...]
    jumps: tuple[SshTarget, ...]
    unpinned: tuple[str, ...]


@dataclass(frozen=True)
class Inventory:
    targets: tuple[SshTarget, ...]
    fleet: Fleet | None
    source: str
    # The document as read (validated), and the folder relative key paths are read from: what a store keeps.
    document: Any = None
    base: Path | None = None

    def by_name(self) -> dict[str, SshTarget]:
        return {t.name: t for t in self.targets}


def parse_inventory(data: Any, source: str, base: Path | None = None) -> Inventory:
    doc = InventoryDoc.read(data, source)
    targets: list[SshTarget] = []
    fleet_nodes: list[dict[str, Any]] = []
    origin: list[int] = []
    for index, (n, item) in enumerate(zip(doc.nodes, data["nodes"], strict=True)):
        key_path = Path(n.key).expanduser() if n.key else None
        if key_path is not None and not key_path.is_absolute() and base is not None:
            key_path = base / key_path
        target = SshTarget(name=n.name, address=n.address, zone=n.zone, region=n.region, provider=n.provider,
                           port=n.port, user=n.user, key=key_path, host_key=n.host_key, proxy_jump=n.proxy_jump)
        targets.append(target)
        if n.gpus is not None or n.gpu is not None:
            # The fleet reads the node's own keys again (FleetDoc knows the regions and fills from the catalog).
            node = {k: item[k] for k in FLEET_KEYS if item.get(k) is not None}
            node.setdefault("provider", DEFAULT_PROVIDER)
            node["addresses"] = [target.address]
            fleet_nodes.append(node)
            origin.append(index)
    names: set[str] = set()  # a set, not a list: 40,000 nodes are checked in milliseconds, not 38 s
    for i, t in enumerate(targets):
        if t.name in names:
            raise InputError(source, f"nodes[{i}].name", f"duplicate node name {t.name!r}")
        names.add(t.name)
    for i, t in enumerate(targets):
        if t.proxy_jump and t.proxy_jump not in names:
            check_external_jump(t.proxy_jump, source, f"nodes[{i}].proxy_jump")
    check_jump_chains(targets, source)
    fleet = None
    if fleet_nodes:
        fleet_doc: dict[str, Any] = {"nodes": fleet_nodes}
        if data.get("regions") is not None:
            fleet_doc["regions"] = data["regions"]
        try:
            fleet = parse_fleet(fleet_doc, source)
        except InputError as exc:
            # The fleet saw only the nodes with GPUs: point back at the node's place in this file.
            field = re.sub(r"^nodes\[(\d+)\]", lambda m: f"nodes[{origin[int(m.group(1))]}]", exc.field)
            raise InputError(source, field, exc.reason) from None
        fleet = owned_prices(fleet)
    return Inventory(targets=tuple(targets), fleet=fleet, source=source, document=data, base=base)


def owned_prices(fleet: Fleet) -> Fleet:
    """Owned machines (a provider the catalog does not sell) without `price_ondemand`: their amortised $/h
    (geosched/core/owned.py), so that they are eligible and weighed against the clouds on one scale (issue 23 item 2).
    A stated price wins; a cloud's VM keeps what it states (its price is the cloud's, not a purchase's)."""
    clouds = {o.provider for o in catalog.offerings()}
    nodes = []
    for n in fleet.nodes:
        if n.price_ondemand is None and n.provider not in clouds:
            n = replace(n, price_ondemand=owned.usd_per_hour(n.gpu, n.gpus))
        nodes.append(n)
    return replace(fleet, nodes=tuple(nodes))


def check_external_jump(spec: str, source: str, field: str) -> None:
    """A `proxy_jump` that names no inventory node must be a jump host the pool can dial (geosched.files.jumpspec)."""
    if not looks_external(spec):
        raise InputError(source, field, f"{spec!r} is neither an inventory node nor {FORMS}")
    try:
        parse_jump(spec)
    except JumpSpecError as exc:
        raise InputError(source, field, str(exc)) from None


def check_jump_chains(targets: Sequence[SshTarget], source: str,
                      locate: Callable[[str], tuple[str, str]] | None = None) -> None:
    """Refuse a `proxy_jump` chain that loops (a -> a, a -> b -> a) or is deeper than MAX_JUMP_HOPS, before
    anything dials: the pool would otherwise wait on a connection that waits on itself until the deadline.

    One walk per node that stops at the first node already measured, so every node is visited once: linear
    in the inventory, however long its chains. A jump host that is an inventory node is followed by name,
    as the pool resolves it (even when the name looks like user@host); any other is one last hop.

    `locate` names the file and field of a node's `proxy_jump` when `targets` come from more than one file
    (`check_merged_jump_chains`); by default, `nodes[i]` of `source`."""
    index = {t.name: i for i, t in enumerate(targets)}

    def where(name: str) -> tuple[str, str]:
        return locate(name) if locate is not None else (source, f"nodes[{index[name]}].proxy_jump")

    via = {t.name: t.proxy_jump for t in targets if t.proxy_jump}
    hops: dict[str, int] = {}  # jump hosts between the operator and each node already walked
    for target in targets:
        path: list[str] = []
        on_path: dict[str, int] = {}
        name: str | None = target.name
        while name is not None and name in index and name not in hops:
            if name in on_path:
                loop = path[on_path[name]:]
                raise InputError(*where(loop[0]), f"proxy_jump chain loops: {_loop_text(loop)}")
            on_path[name] = len(path)
            path.append(name)
            name = via.get(name)
        # Where the walk stopped: a node without a jump host (0), one outside the inventory (1), or a known one.
        below = -1 if name is None else hops.get(name, 0)
        for node in reversed(path):
            below += 1
            hops[node] = below
            if below > MAX_JUMP_HOPS:
                raise InputError(*where(node), f"{node} is reached through {below} jump hosts (at most "
                                 f"{MAX_JUMP_HOPS})")


def merged_targets(inventories: Sequence[Inventory]) -> dict[str, SshTarget]:
    """The targets of several inventories by name, their jump chains checked together: each file passed the
    check alone, but a node of one may jump through a node of another (`proxy_jump: ops@h` is a node name in
    one file, an outside host in the other), so together they can loop. Later inventories win a name, as
    they always did; every caller that dials inventory targets of more than one file goes through here."""
    merged: dict[str, SshTarget] = {}
    origin: dict[str, tuple[str, str]] = {}
    for inventory in inventories:
        for i, target in enumerate(inventory.targets):
            merged[target.name] = target
            origin[target.name] = (inventory.source, f"nodes[{i}].proxy_jump")
    sources = ", ".join(inv.source for inv in inventories)
    check_jump_chains(tuple(merged.values()), sources, origin.__getitem__)
    return merged


def jump_hosts_of(reached: Sequence[SshTarget], known: Mapping[str, SshTarget]) -> tuple[SshTarget, ...]:
    """The `known` targets the `reached` ones jump through, however many hops away (a bastion behind a
    bastion), themselves excluded, by name: the pool must hold every inventory hop of a chain, or it would take
    an inner bastion's node name for an outside host name."""
    names = {t.name for t in reached}
    found: dict[str, SshTarget] = {}
    for target in reached:
        via = target.proxy_jump
        # The chains were checked (no loops, at most MAX_JUMP_HOPS), so this walk ends.
        while via is not None and via in known and via not in names and via not in found:
            found[via] = known[via]
            via = known[via].proxy_jump
    return tuple(found[name] for name in sorted(found))


def _loop_text(loop: list[str]) -> str:
    shown = loop if len(loop) <= SHOWN_LOOP else [*loop[:3], f"... {len(loop) - 5:,} more", *loop[-2:]]
    return " -> ".join([*shown, loop[0]])


def load_inventory(path: Path) -> Inventory:
    return parse_inventory(load_document(path, Kind.INVENTORY), str(path), base=path.parent)
