"""Existing machines from a geosched inventory file, provisioned like a cloud: launch = lease free nodes,
terminate = release them. Leases live in a JSON file beside the store (the "cloud state" of this provider),
written atomically under a file lock, so two geosched processes never lease the same node.

Only inventory nodes that declare GPUs (and so join the fleet) can be leased; a node the inventory marks as
partly busy (`gpus_free` < `gpus`) is not offered. Offerings are priced at the node's `price_ondemand`, or
0 $/h for machines already paid for.
"""

from __future__ import annotations

import fcntl
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from geosched.core.models import Node, Offering, Pricing, Region
from geosched.files.inventory import Inventory, load_inventory
from geosched.files.writes import PRIVATE, write_file
from geosched.providers.base import (
    Budget,
    CapacityError,
    CheckItem,
    Instance,
    InstanceState,
    LaunchSpec,
    PriceObservation,
    QuotaCheck,
    UnsupportedError,
)
from geosched.providers.config import ENV_INVENTORY, SshSettings

NAME = "ssh"


class SshProvider:
    def __init__(self, settings: SshSettings, inventory: Inventory | None = None) -> None:
        self.settings = settings
        self._inventory = inventory

    @property
    def name(self) -> str:
        return NAME

    @property
    def inventory(self) -> Inventory:
        if self._inventory is None:
            if self.settings.inventory is None:
                raise UnsupportedError(f"no inventory file: pass --inventory or set {ENV_INVENTORY}",
                                       code="NoInventory", region_wide=True)
            self._inventory = load_inventory(self.settings.inventory)
        return self._inventory

    def declared_inventory(self) -> Inventory | None:
        if self._inventory is None and self.settings.inventory is None:
            return None
        return self.inventory

    def _nodes(self) -> tuple[Node, ...]:
        fleet = self.inventory.fleet
        return fleet.nodes if fleet is not None else ()

    @property
    def _leases_path(self) -> Path:
        if self.settings.leases is None:
            raise UnsupportedError("no leases file configured", code="NoLeases", region_wide=True)
        return self.settings.leases

    @contextmanager
    def _locked(self) -> Iterator[dict[str, dict[str, Any]]]:
        """The lease table, locked for the duration; written back (atomically) on a clean exit."""
        path = self._leases_path
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                leases: dict[str, dict[str, Any]] = json.loads(path.read_text()) if path.exists() else {}
                before = json.dumps(leases, sort_keys=True)
                yield leases
                after = json.dumps(leases, sort_keys=True, indent=1)
                if json.dumps(leases, sort_keys=True) != before:
                    write_file(path, after + "\n", mode=PRIVATE)  # store state, beside the store
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    # -- what the inventory offers -----------------------------------------------------------------

    def regions(self, budget: Budget) -> tuple[str, ...]:
        return tuple(sorted({n.region for n in self._nodes()}))

    def zones(self, region: str, budget: Budget) -> tuple[str, ...]:
        return tuple(sorted({n.zone for n in self._nodes() if n.region == region}))

    def region_info(self, region: str) -> Region | None:
        fleet = self.inventory.fleet
        if fleet is None:
            return None
        return next((fleet.regions[n.region_key] for n in fleet.nodes if n.region == region), None)

    def offerings(self, region: str, budget: Budget) -> tuple[Offering, ...]:
        """One offering per (zone, instance type, GPUs) with the price of every node free now (not busy, not
        leased), so a plan knows how many nodes a zone really holds and what the gang's cheapest ones cost."""
        with self._locked() as leases:
            leased = set(leases)
        pools: dict[tuple[str, str, int], list[Node]] = {}
        for n in self._free(leased):
            if n.region == region:
                pools.setdefault((n.zone, n.instance_type, n.gpus), []).append(n)
        out = []
        for (zone, instance_type, gpus), nodes in sorted(pools.items()):
            prices = tuple(sorted(_price(n) for n in nodes))
            first = nodes[0]
            out.append(Offering(NAME, instance_type, first.gpu, gpus, 0.0, 0.0, region, zone, prices[0], None,
                                free_node_prices=prices))
        return tuple(out)

    def _free(self, leased: set[str]) -> list[Node]:
        """Nodes that can be leased now, cheapest first (then by name): whole, and not leased by a gang."""
        free = [n for n in self._nodes() if n.gpus_free == n.gpus and n.name not in leased]
        return sorted(free, key=lambda n: (_price(n), n.name))

    def prices(self, region: str, instance_types: Sequence[str], budget: Budget) -> tuple[PriceObservation, ...]:
        now = time.time()
        return tuple(PriceObservation(NAME, o.instance_type, region, o.zone, Pricing.ON_DEMAND,
                                      o.price_ondemand or 0.0, now, "inventory")
                     for o in self.offerings(region, budget) if o.instance_type in instance_types)

    def check_quota(self, spec: LaunchSpec, budget: Budget) -> QuotaCheck:
        return QuotaCheck(True, "inventory machines have no quota")

    # -- lease and release -------------------------------------------------------------------------

    def launch(self, spec: LaunchSpec, budget: Budget) -> tuple[Instance, ...]:
        if spec.pricing is Pricing.SPOT:
            raise UnsupportedError("inventory machines have no spot market", code="NoSpot", region_wide=True)
        budget.tick()
        with self._locked() as leases:
            mine = sorted((int(v["index"]), k) for k, v in leases.items() if v.get("token") == spec.token)
            if len(mine) == spec.count:  # the same attempt again: idempotent
                return tuple(self._instance(node, leases[node]) for _, node in mine)
            free = [n for n in self._free(set(leases))
                    if n.zone == spec.zone and n.instance_type == spec.instance_type and n.gpus == spec.gpus]
            if len(free) < spec.count:
                raise CapacityError(f"{len(free)} free {spec.instance_type} nodes in {spec.zone}, the gang needs "
                                    f"{spec.count}", code="NotEnoughFreeNodes")
            now = time.time()
            # The cheapest free nodes, as the plan priced them.
            for index, node in enumerate(free[:spec.count]):
                leases[node.name] = {"gang": spec.gang, "token": spec.token, "owner": spec.owner, "index": index,
                                     "name": spec.names[index], "leased_at": now}
            return tuple(self._instance(k, v) for k, v in sorted(leases.items(), key=lambda kv: kv[1]["index"])
                         if v.get("token") == spec.token)

    def _instance(self, node_name: str, lease: dict[str, Any]) -> Instance:
        node = next((n for n in self._nodes() if n.name == node_name), None)
        return Instance(
            provider=NAME, provider_id=node_name, name=str(lease.get("name", node_name)),
            region=node.region if node else "", zone=node.zone if node else "",
            instance_type=node.instance_type if node else "", state=InstanceState.RUNNING,
            gang=lease.get("gang"), token=lease.get("token"), owner=lease.get("owner"),
            index=int(lease["index"]) if "index" in lease else None,
            addresses=node.addresses if node else (), pricing=Pricing.ON_DEMAND,
            launched_at=float(lease["leased_at"]) if isinstance(lease.get("leased_at"), int | float) else None)

    def describe(self, gang: str | None, regions: Iterable[str], budget: Budget) -> tuple[Instance, ...]:
        budget.tick()
        wanted = set(regions)
        with self._locked() as leases:
            found = [self._instance(k, v) for k, v in sorted(leases.items()) if gang is None or v.get("gang") == gang]
        return tuple(i for i in found if not wanted or i.region in wanted)

    def terminate(self, instances: Sequence[Instance], budget: Budget) -> None:
        budget.tick()
        with self._locked() as leases:
            for inst in instances:
                lease = leases.get(inst.provider_id)
                # Release only what this gang holds: a node name alone could be leased by another gang by now.
                if lease is not None and (inst.gang is None or lease.get("gang") == inst.gang):
                    del leases[inst.provider_id]

    def check(self) -> tuple[CheckItem, ...]:
        if self.settings.inventory is None and self._inventory is None:
            return (CheckItem(NAME, "inventory", False, f"none: pass --inventory or set {ENV_INVENTORY}"),)
        try:
            nodes = self._nodes()
        except Exception as exc:  # an unreadable inventory is what check is for
            return (CheckItem(NAME, "inventory", False, str(exc)),)
        return (CheckItem(NAME, "inventory", True, f"{len(nodes)} GPU nodes in {self.inventory.source}"),)


def _price(node: Node) -> float:
    """An inventory machine without a price is already paid for: 0 $/h."""
    return node.price_ondemand if node.price_ondemand is not None else 0.0
