"""What `catalog refresh` keeps of what the APIs answered: the shipped catalog's checks (`pricecheck`) applied to
refreshed rows, each dropped row said in one line.

Dropped: a price of 0, below 0 or not a number; offerings of types ordinary projects cannot launch; a spot price
above the on-demand one of the same type and zone (on-demand as this refresh observed it, else as shipped); an
on-demand price outside `pricecheck.BAND` of its type's median across regions (this refresh's regions and the shipped
catalog's other regions). A dropped price is not recorded, so the price before it (a refresh's, else the shipped
catalog's) stands. A missing on-demand price drops nothing: the shipped one stands and `catalog` says it is
shipped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from geosched.core import catalog, pricecheck
from geosched.core.models import Offering, Pricing
from geosched.providers.base import PriceObservation


@dataclass(frozen=True, slots=True)
class Screened:
    offerings: tuple[Offering, ...]
    prices: tuple[PriceObservation, ...]
    dropped: tuple[str, ...]


def _newest(prices: Sequence[PriceObservation], pricing: Pricing) -> dict[tuple[str, str], PriceObservation]:
    out: dict[tuple[str, str], PriceObservation] = {}
    for p in prices:
        key = (p.instance_type, p.zone)
        if p.pricing is pricing and (key not in out or p.observed_at >= out[key].observed_at):
            out[key] = p
    return out


def _flagged(o: Offering, flag: str) -> bool:
    """Whether the shipped catalog flagged the offering (its note opens with its flags)."""
    return flag in (o.note or "").split(":", 1)[0].split()


def screen(provider: str, offers: Sequence[Offering], prices: Sequence[PriceObservation]) -> Screened:
    dropped: list[str] = []
    kept_offers = []
    for o in offers:
        if pricecheck.launchable(provider, o.instance_type):
            kept_offers.append(o)
        else:
            dropped.append(f"{provider} {o.instance_type} {o.zone}: not-launchable: a machine type ordinary "
                           "projects cannot launch; not offered")
    # A price of 0, below 0 or NaN is a feed error, never a rate (no cloud sells GPU hours for nothing): kept, a
    # zero spot price would make every policy that weighs cost take that zone for free, and NaN passes every
    # comparison the checks below make.
    priced = []
    for p in prices:
        if math.isfinite(p.usd_per_hour) and p.usd_per_hour > 0:
            priced.append(p)
        else:
            dropped.append(f"{provider} {p.instance_type} {p.zone}: not-a-price: {p.pricing.value} "
                           f"{p.usd_per_hour:g} $/h; {p.pricing.value} price dropped")
    prices = priced
    ondemand, spot = _newest(prices, Pricing.ON_DEMAND), _newest(prices, Pricing.SPOT)
    shipped = {(o.instance_type, o.zone): o for o in catalog.offerings() if o.provider == provider}
    refreshed_regions = {p.region for p in prices}
    siblings = [pricecheck.PriceRow(provider, p.instance_type, p.region, p.zone, p.usd_per_hour, None)
                for p in ondemand.values()]
    siblings += [pricecheck.PriceRow(provider, o.instance_type, o.region, o.zone, o.price_ondemand, None)
                 for o in shipped.values() if o.region not in refreshed_regions and not _flagged(o, "out-of-band")]
    rows = []
    for key, od in ondemand.items():
        sp = spot.get(key)
        rows.append(pricecheck.PriceRow(provider, od.instance_type, od.region, od.zone, od.usd_per_hour,
                                        sp.usd_per_hour if sp else None))
    for key, sp in spot.items():
        if key not in ondemand:
            base = shipped.get(key)
            rows.append(pricecheck.PriceRow(provider, sp.instance_type, sp.region, sp.zone,
                                            base.price_ondemand if base else None, sp.usd_per_hour))
    bad: set[tuple[str, str, Pricing]] = set()
    for f in pricecheck.check(rows, siblings):
        if f.flag == "spot-above-ondemand":
            bad.add((f.row.instance_type, f.row.zone, Pricing.SPOT))
            dropped.append(f"{f.line()}; spot price dropped")
        elif f.flag == "out-of-band" and (f.row.instance_type, f.row.zone) in ondemand:
            bad.add((f.row.instance_type, f.row.zone, Pricing.ON_DEMAND))
            dropped.append(f"{f.line()}; on-demand price dropped")
    kept_prices = tuple(p for p in prices if (p.instance_type, p.zone, p.pricing) not in bad
                        and pricecheck.launchable(provider, p.instance_type))
    return Screened(tuple(kept_offers), kept_prices, tuple(dropped))
