"""Which catalog prices can be trusted: the checks the shipped catalog is held to and `catalog refresh` applies.

A price row is one offering in one zone with its on-demand and spot USD/h. Each check names a flag; the shipped
CSV files label every row a check flags (columns `flags` and `note`, the note saying why and citing the source),
`tests/test_catalog_validation.py` keeps labels and checks in step, and `catalog.offerings()` acts on the labels:

- `spot-above-ondemand`: a spot price above the on-demand one is a feed error (spot is sold at a discount on
  both clouds); the spot price is ignored (the offering has no spot market).
- `no-ondemand`: the feed has no on-demand price; on-demand is not offered at a made-up price.
- `not-launchable`: a machine type ordinary projects cannot launch (`NOT_LAUNCHABLE`); not offered at all, so
  neither placement nor provision plans propose it.
- `out-of-band`: the on-demand price is outside `BAND` times the median of the same instance type's price across
  regions (`MIN_SIBLINGS` regions or more). Regional list prices of one type differ by tens of percent (the
  shipped AWS rows: 0.82x-1.37x of their type's median); a price half or twice its siblings' says the feed
  mixed SKUs. Which side is right cannot be told from the feed, so the price is kept and shown as unverified
  (`catalog -o json` carries the note) until `catalog refresh` replaces it; a refreshed price out of band is
  dropped, with a warning.
- `split-price`: one instance type with two on-demand prices in one region (prices are regional on both clouds).
- `duplicate`: two rows for one (provider, instance type, zone).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from geosched import clouds

# The band a region's on-demand price must keep around the median of its instance type's regional prices.
BAND = (0.5, 2.0)
# Fewer regions than this and the median says nothing about which price is odd.
MIN_SIBLINGS = 3
# Machine-type name prefixes ordinary projects cannot launch, per cloud (its spec's `not_launchable`). GCP's A3
# Edge (a3-edgegpu-8g, -nolssd) is offered only in the zones and to the projects Google enables it for
# (cloud.google.com/compute/docs/gpus, "A3 Edge"), yet the machineTypes list of the feed (skypilot-catalog v7 gcp
# vms.csv) names it in 13 regions.
NOT_LAUNCHABLE: dict[str, tuple[str, ...]] = {
    s.name: s.not_launchable for s in clouds.all_specs() if s.not_launchable
}

FLAGS = ("spot-above-ondemand", "no-ondemand", "not-launchable", "out-of-band", "split-price", "duplicate")


@dataclass(frozen=True, slots=True)
class PriceRow:
    provider: str
    instance_type: str
    region: str
    zone: str
    ondemand: float | None
    spot: float | None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.provider, self.instance_type, self.zone)


@dataclass(frozen=True, slots=True)
class Finding:
    row: PriceRow
    flag: str
    reason: str

    def line(self) -> str:
        """One line a user reads: which row, which price, why it is not used."""
        r = self.row
        return f"{r.provider} {r.instance_type} {r.zone}: {self.flag}: {self.reason}"


def launchable(provider: str, instance_type: str) -> bool:
    return not instance_type.startswith(NOT_LAUNCHABLE.get(provider, ()))


def regional_medians(rows: Iterable[PriceRow]) -> dict[tuple[str, str], tuple[float, int]]:
    """(provider, instance type) -> (median of its regions' on-demand prices, how many regions)."""
    per_region: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for r in rows:
        if r.ondemand is not None and r.ondemand > 0:
            per_region[(r.provider, r.instance_type)].setdefault(r.region, r.ondemand)
    return {k: (statistics.median(v.values()), len(v)) for k, v in per_region.items()}


def check(rows: Sequence[PriceRow], siblings: Sequence[PriceRow] | None = None) -> list[Finding]:
    """Every finding on `rows`, the band judged against `siblings` (default: the rows themselves)."""
    found: list[Finding] = []
    medians = regional_medians(rows if siblings is None else siblings)
    seen: set[tuple[str, str, str]] = set()
    region_price: dict[tuple[str, str, str], float] = {}
    for r in rows:
        if r.key in seen:
            found.append(Finding(r, "duplicate", "a second row for this instance type and zone"))
        seen.add(r.key)
        if not launchable(r.provider, r.instance_type):
            found.append(Finding(r, "not-launchable", "a machine type ordinary projects cannot launch"))
        if r.ondemand is None:
            found.append(Finding(r, "no-ondemand", "no on-demand price"))
            continue
        if r.spot is not None and r.spot > r.ondemand:
            found.append(Finding(r, "spot-above-ondemand", f"spot {r.spot:g} above on-demand {r.ondemand:g}"))
        first = region_price.setdefault((r.provider, r.instance_type, r.region), r.ondemand)
        if first != r.ondemand:
            found.append(Finding(r, "split-price", f"on-demand {r.ondemand:g} where another zone of {r.region} "
                                                   f"has {first:g}"))
        median, regions = medians.get((r.provider, r.instance_type), (0.0, 0))
        if regions >= MIN_SIBLINGS and not BAND[0] * median <= r.ondemand <= BAND[1] * median:
            found.append(Finding(r, "out-of-band", f"on-demand {r.ondemand:g} is {r.ondemand / median:.2f}x the "
                                                   f"median of its {regions} regions ({median:g}); band "
                                                   f"{BAND[0]:g}x-{BAND[1]:g}x"))
    return found
