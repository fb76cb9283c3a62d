"""Where a command's fleet and network come from: files, a snapshot directory, or the embedded default."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from geosched import netmodel
from geosched.default_fleet import default_fleet, default_network
from geosched.documents import load_fleet, load_network
from geosched.errors import InputError
from geosched.models import Fleet, NetworkView
from geosched.store import snapshot_paths


@dataclass(frozen=True)
class Snapshot:
    fleet: Fleet
    network: NetworkView
    origin: str


def resolve(fleet: Path | None, network: Path | None, snapshot: Path | None) -> Snapshot:
    if snapshot is not None:
        if fleet or network:
            raise InputError("--snapshot", "", "give either --snapshot or --fleet/--network, not both")
        if not snapshot.is_dir():
            raise InputError(str(snapshot), "", "not a snapshot directory")
        fleet, network = snapshot_paths(snapshot)
    if fleet is None and network is None:
        return Snapshot(default_fleet(), default_network(), "embedded default")
    if fleet is None:
        raise InputError("--network", "", "a network file needs its fleet (--fleet)")
    loaded = load_fleet(fleet)
    if network is None:
        # A fleet without measurements is placed on the shipped inter-region model.
        view = NetworkView(zone_links=netmodel.zone_links(loaded.zones.values()))
        return Snapshot(loaded, view, f"{fleet} + shipped network model")
    return Snapshot(loaded, load_network(network, loaded), f"{fleet} + {network}")
