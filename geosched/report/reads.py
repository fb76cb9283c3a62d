"""The store reads the report needs besides the ledger: price observations and the providers' refreshed
catalog (instance sizes the shipped catalog may not have)."""

from __future__ import annotations

from collections.abc import Iterable

from geosched.core.models import Offering
from geosched.report.prices import PriceKey, PriceRow
from geosched.store.db import Store


def price_rows(store: Store, keys: Iterable[PriceKey]) -> list[PriceRow]:
    """Every observation of the given (provider, instance type, zone, pricing) keys, oldest write first."""
    rows: list[PriceRow] = []
    for provider, instance_type, zone, pricing in sorted(set(keys)):
        found = store.db.execute(
            "SELECT observed_at, usd_per_hour FROM price_history WHERE provider = ? AND instance_type = ? "
            "AND zone = ? AND pricing = ? ORDER BY id", (provider, instance_type, zone, pricing))
        rows.extend((provider, instance_type, zone, pricing, float(at), float(usd)) for at, usd in found)
    return rows


def block_prices(store: Store) -> dict[tuple[str, str], float]:
    """USD per node-hour of each node of a node group on a Capacity Block, by (cluster, ledger node name): the
    block's upfront fee (journalled with its purchase, providers/nodegroups/blocks.py) over its nodes and its hours.
    A gang buys at most one block; its groups of the block's type and size on Capacity Blocks ran on it."""
    found = store.db.execute(
        "SELECT g.cluster, g.name, g.nodes, b.upfront_usd, b.nodes, b.start_at, b.end_at FROM prov_nodegroups g "
        "JOIN prov_capacity_blocks b ON b.gang = g.gang AND b.instance_type = g.instance_type AND b.nodes = g.nodes "
        "WHERE g.capacity_type = 'CAPACITY_BLOCK' AND b.state = 'bought' AND b.upfront_usd IS NOT NULL "
        "AND b.start_at IS NOT NULL AND b.end_at > b.start_at AND b.nodes > 0")
    out: dict[tuple[str, str], float] = {}
    for cluster, name, nodes, fee, block_nodes, start, end in found:
        usd = float(fee) / int(block_nodes) / ((float(end) - float(start)) / 3600.0)
        # The ledger's node names of a group (providers/nodegroups/journal.py node_name).
        out.update({(str(cluster), f"{name}#{i}"): usd for i in range(int(nodes))})
    return out


def refreshed_offerings(store: Store) -> list[Offering]:
    """Sizes from `geosched catalog refresh` (no prices: those come from price_history)."""
    rows = store.db.execute("SELECT provider, instance_type, region, zone, gpu, gpus, vcpus, memory_gib "
                            "FROM catalog_offerings ORDER BY provider, instance_type, zone")
    return [Offering(provider=p, instance_type=t, gpu=g, gpus=int(n), vcpus=float(v), memory_gib=float(m), region=r,
                     zone=z, price_ondemand=None, price_spot=None) for p, t, r, z, g, n, v, m in rows]
