"""Where a command's fleet and network come from: files, a snapshot directory, the store, or the embedded
default."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from geosched.core import catalog, netmodel
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.errors import InputError
from geosched.core.models import Fleet, NetworkView, Node, Zone
from geosched.files.documents import load_network, parse_fleet, parse_network
from geosched.files.gate import Kind, load_document
from geosched.files.inventory import parse_inventory
from geosched.store.db import Store, read_snapshot


@dataclass(frozen=True)
class Snapshot:
    fleet: Fleet
    network: NetworkView
    origin: str


def resolve(fleet: Path | None, network: Path | None, snapshot: Path | None, store: Store | None = None,
            provisioned: Sequence[Node] = ()) -> Snapshot:
    """`provisioned` goes with `store`: see `from_store`."""
    if store is not None:
        if fleet or network or snapshot:
            raise InputError("--store", "", "give either --store or --fleet/--network/--snapshot, not both")
        return from_store(store, provisioned)
    if snapshot is not None:
        if fleet or network:
            raise InputError("--snapshot", "", "give either --snapshot or --fleet/--network, not both")
        if not snapshot.is_dir():
            raise InputError(str(snapshot), "", "not a snapshot directory")
        fleet_doc, network_doc = read_snapshot(snapshot)
        loaded = fleet_from_document(fleet_doc.document, fleet_doc.path)
        return Snapshot(loaded, parse_network(network_doc.document, str(network_doc.path), loaded),
                        f"{fleet_doc.path} + {network_doc.path}")
    if fleet is None and network is None:
        return Snapshot(default_fleet(), default_network(), "embedded default")
    if fleet is None:
        raise InputError("--network", "", "a network file needs its fleet (--fleet)")
    loaded = load_fleet_file(fleet)
    if network is None:
        # A fleet without measurements is placed on the shipped inter-region model.
        view = NetworkView(zone_links=netmodel.zone_links(loaded.zones.values()))
        return Snapshot(loaded, view, f"{fleet} + shipped network model")
    return Snapshot(loaded, load_network(network, loaded), f"{fleet} + {network}")


def load_fleet_file(path: Path) -> Fleet:
    """A fleet file, or an inventory file (its nodes say how to reach them: `address`), whose machines with GPUs
    are the fleet."""
    return fleet_from_document(load_document(path, Kind.FLEET), path)


def fleet_from_document(doc: Any, path: Path) -> Fleet:
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if isinstance(nodes, list) and any(isinstance(n, dict) and "address" in n for n in nodes):
        inventory = parse_inventory(doc, str(path), base=path.parent)
        if inventory.fleet is None:
            raise InputError(str(path), "nodes", "no inventory node declares its GPUs (gpu, gpus), so there is no "
                             "fleet to place on")
        return inventory.fleet
    return parse_fleet(doc, str(path))


def from_store(store: Store, provisioned: Sequence[Node]) -> Snapshot:
    """The store's fleet (an imported snapshot) with the machines geosched provisioned that are up, placed on
    the store's measured network; zone pairs nobody measured fall back to the shipped inter-region model.

    The caller reads `provisioned` from the same store (`geosched.providers.lifecycle.fleet_nodes(store)`): the
    providers journal those machines, and they sit above the store, so the store is handed them, never imports them."""
    base = store.load_fleet()
    if base is None and not provisioned:
        raise InputError(str(store.path), "nodes", "the store holds no fleet and no provisioned machines: "
                         "`geosched snapshot import DIR` or `geosched provision` first")
    fleet = with_nodes(base, provisioned)
    measured = store.network_view()
    model = netmodel.zone_links(fleet.zones.values())
    view = replace(measured, zone_links=netmodel.LayeredLinks(measured.zone_links, model))
    parts = [p for p, on in (("imported fleet", base is not None), (f"{len(provisioned)} provisioned", provisioned))
             if on]
    return Snapshot(fleet, view, f"store {store.path} ({' + '.join(parts)})")


def with_nodes(base: Fleet | None, extra: Sequence[Node]) -> Fleet:
    """`base` with `extra` added. One machine, one node: an `extra` node replaces the base node of the same name,
    and one whose `provider_id` names a base node (an inventory machine leased by the ssh provider) replaces it
    too, keeping where the base says the machine is (its provider, region and zone) and its name."""
    by_name = {n.name: n for n in base.nodes} if base else {}
    merged = {}
    for node in extra:
        same = by_name.get(node.name) or (by_name.get(node.provider_id) if node.provider_id else None)
        if same is not None:
            node = replace(node, name=same.name, provider=same.provider, region=same.region, zone=same.zone,
                           cluster=node.cluster or same.cluster, labels={**same.labels, **node.labels})
        merged[node.name] = node
    nodes = tuple(n for n in by_name.values() if n.name not in merged) + tuple(merged.values())
    zones = {n.zone: Zone(n.zone, n.provider, n.region) for n in nodes}
    known = {**catalog.regions(), **(base.regions if base else {})}
    for n in nodes:
        if n.region_key not in known:
            raise InputError("store", f"nodes.{n.name}.region", f"{n.region_key!r} is neither in the catalog nor in "
                             "the imported fleet, so its grid intensity and PUE are unknown: `geosched snapshot "
                             "import` a fleet that declares the machine")
    return Fleet(regions={z.region_key: known[z.region_key] for z in zones.values()}, zones=zones, nodes=nodes,
                 gpu_power={**catalog.gpu_power(), **(base.gpu_power if base else {})})
