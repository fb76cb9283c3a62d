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


def refreshed_offerings(store: Store) -> list[Offering]:
    """Sizes from `geosched catalog refresh` (no prices: those come from price_history)."""
    rows = store.db.execute("SELECT provider, instance_type, region, zone, gpu, gpus, vcpus, memory_gib "
                            "FROM catalog_offerings ORDER BY provider, instance_type, zone")
    return [Offering(provider=p, instance_type=t, gpu=g, gpus=int(n), vcpus=float(v), memory_gib=float(m), region=r,
                     zone=z, price_ondemand=None, price_spot=None) for p, t, r, z, g, n, v, m in rows]
