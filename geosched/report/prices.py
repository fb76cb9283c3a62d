"""The price of one node at a moment: the newest `price_history` observation at or before it; before the first
observation, the earliest one; with no history for the offering at all, the shipped catalog's price.

Pure: built from rows someone else read (`reads.price_rows`) and the catalog's offerings.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from geosched.core.models import Offering, Pricing
from geosched.report.records import PricedFrom

# (provider, instance type, zone, pricing)
PriceKey = tuple[str, str, str, str]
# (provider, instance type, zone, pricing, observed_at, usd per hour); rows in id order
PriceRow = tuple[str, str, str, str, float, float]


@dataclass(frozen=True)
class PriceBook:
    history: Mapping[PriceKey, tuple[tuple[float, ...], tuple[float, ...]]]
    catalog: Mapping[tuple[str, str, str], Offering] = field(default_factory=dict)
    catalog_by_region: Mapping[tuple[str, str, str], Offering] = field(default_factory=dict)

    @staticmethod
    def build(rows: Iterable[PriceRow], offerings: Iterable[Offering] = ()) -> PriceBook:
        per_key: dict[PriceKey, dict[float, float]] = {}
        for provider, instance_type, zone, pricing, observed_at, usd in rows:
            # Rows come in id order, so of two observations at the same moment the later write wins, as in
            # providers.refresh.price_at.
            per_key.setdefault((provider, instance_type, zone, pricing), {})[observed_at] = usd
        history = {key: (tuple(sorted(obs)), tuple(obs[t] for t in sorted(obs))) for key, obs in per_key.items()}
        offers = list(offerings)
        by_zone = {(o.provider, o.instance_type, o.zone): o for o in offers}
        by_region: dict[tuple[str, str, str], Offering] = {}
        for o in offers:
            by_region.setdefault((o.provider, o.instance_type, o.region), o)
        return PriceBook(history, by_zone, by_region)

    def changes(self, key: PriceKey, start: float, end: float) -> list[float]:
        """Moments strictly inside (start, end) at which the price of `key` changes."""
        times, _ = self.history.get(key, ((), ()))
        lo = bisect.bisect_right(times, start)
        hi = bisect.bisect_left(times, end)
        return list(times[lo:hi])

    def price(self, key: PriceKey, when: float, region: str | None = None) -> tuple[float | None, PricedFrom]:
        """USD per node-hour at `when`, and where that number came from."""
        times, prices = self.history.get(key, ((), ()))
        if times:
            i = bisect.bisect_right(times, when)
            return (prices[i - 1], PricedFrom.HISTORY) if i else (prices[0], PricedFrom.HISTORY_EARLIEST)
        provider, instance_type, zone, pricing = key
        offer = self.catalog.get((provider, instance_type, zone))
        if offer is None and region is not None:
            # A job row may know its region but not its zone: any zone's catalog price of the region stands in.
            offer = self.catalog_by_region.get((provider, instance_type, region))
        usd = offer.price(Pricing(pricing)) if offer else None
        return (usd, PricedFrom.CATALOG) if usd is not None else (None, PricedFrom.NONE)
