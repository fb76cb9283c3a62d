"""Catalog refresh and price history: what a provider offers now, and what a price was at a given time.

`refresh_catalog` asks a provider for its GPU offerings per zone (AWS: DescribeInstanceTypes and
DescribeInstanceTypeOfferings; GCP: machineTypes) and its prices (AWS: DescribeSpotPriceHistory and the Price
List API's GetProducts for on-demand, each price valid from its own time; GCP: the Cloud Billing Catalog's
Compute Engine SKUs). Only prices a price API answered are recorded; the shipped catalog's stand for the
rest and are shown as shipped. Offerings replace the provider's refreshed rows for the regions refreshed and
merge with the shipped catalog for the others (`current_offerings`: a refresh of one region never hides
another); prices are appended to `price_history`, never overwritten, so `price_at` can price past usage at the
price of its time. Spot interruption signals (AWS Spot placement scores and spot price volatility) are appended
to `spot_signals` the same way; `spot_risks` resolves the newest into each offering's risk. Without a refresh
the shipped catalog is the (offline) default.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from geosched.core import catalog
from geosched.core.models import Offering, Pricing
from geosched.core.retry import RetryPolicy
from geosched.policies import spotrisk
from geosched.policies.spotrisk import SpotRisk
from geosched.providers import pricescreen
from geosched.providers.base import (
    AuthError,
    Budget,
    PriceObservation,
    Provider,
    ProviderError,
    ReportsSpotSignals,
    SpotSignal,
)
from geosched.providers.retry import call
from geosched.store.db import Store


@dataclass(frozen=True, slots=True)
class RefreshResult:
    provider: str
    regions: tuple[str, ...]
    offerings: int
    prices: int
    api_calls: int
    errors: tuple[str, ...]
    signals: int = 0
    # One line per refreshed row the price checks dropped (`pricescreen`).
    dropped: tuple[str, ...] = ()


def refresh_catalog(provider: Provider, store: Store, *, regions: Sequence[str] = (), budget_s: float = 900.0,
                    call_timeout_s: float = 60.0, policy: RetryPolicy | None = None) -> RefreshResult:
    policy = policy or RetryPolicy()
    budget = Budget(budget_s, call_timeout_s)
    wanted = tuple(regions) or call(lambda: provider.regions(budget), budget, policy)
    offers: list[Offering] = []
    prices: list[PriceObservation] = []
    signals: list[SpotSignal] = []
    done: list[str] = []
    errors: list[str] = []
    for region in wanted:
        try:
            found = call(partial(provider.offerings, region, budget), budget, policy)
            types = sorted({o.instance_type for o in found})
            seen = call(partial(provider.prices, region, types, budget), budget, policy)
        except AuthError:
            raise
        except ProviderError as exc:
            errors.append(f"{region}: {exc.kind}: {exc}")
            continue
        offers.extend(found)
        prices.extend(seen)
        done.append(region)
        if isinstance(provider, ReportsSpotSignals):
            # A missing risk signal does not undo the region's offerings and prices: it is said, and planning
            # falls back to the next signal, else to the documented rule for an unknown risk.
            for what, read in (("spot placement scores", provider.placement_scores),
                               ("spot price volatility", provider.price_volatility)):
                try:
                    signals.extend(call(partial(read, region, types, budget), budget, policy))
                except ProviderError as exc:
                    errors.append(f"{region}: {what}: {exc.kind}: {exc}")
    # The shipped catalog's checks hold for what an API answers too: a refresh replaces flagged prices with
    # checked ones, never with a new feed error.
    kept = pricescreen.screen(provider.name, offers, prices)
    # A refresh of every region the provider lists makes its list authoritative: a shipped region it no longer
    # lists is gone. One of some regions only replaces those.
    write_refresh(store, provider.name, done, kept.offerings, kept.prices,
                  complete=not regions and len(done) == len(wanted), signals=signals)
    return RefreshResult(provider.name, tuple(done), len(kept.offerings), len(kept.prices), budget.calls,
                         tuple(errors), len(signals), kept.dropped)


def write_refresh(store: Store, provider: str, regions: Sequence[str], offers: Sequence[Offering],
                  prices: Sequence[PriceObservation], now: float | None = None, *, complete: bool = False,
                  signals: Sequence[SpotSignal] = ()) -> None:
    now = time.time() if now is None else now
    with store.transaction() as db:
        if complete:
            db.execute("INSERT OR REPLACE INTO prov_meta (key, value) VALUES (?, ?)", (_complete_key(provider),
                                                                                         str(now)))
        db.executemany("DELETE FROM catalog_offerings WHERE provider = ? AND region = ?",
                       [(provider, r) for r in regions])
        db.executemany(
            "INSERT OR REPLACE INTO catalog_offerings (provider, instance_type, region, zone, gpu, gpus, vcpus, "
            "memory_gib, refreshed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(provider, o.instance_type, o.region, o.zone, o.gpu, o.gpus, o.vcpus, o.memory_gib, now)
             for o in offers])
        record_prices_in(db, prices, now)
        db.executemany(
            "INSERT INTO spot_signals (provider, instance_type, region, zone, signal, value, target, changes, "
            "observed_at, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(g.provider, g.instance_type, g.region, g.zone, g.signal, g.value, g.target, g.changes, g.observed_at,
              g.source) for g in signals])


def record_prices(store: Store, prices: Sequence[PriceObservation], now: float | None = None) -> None:
    with store.transaction() as db:
        record_prices_in(db, prices, time.time() if now is None else now)


def record_prices_in(db: sqlite3.Connection, prices: Sequence[PriceObservation], now: float) -> None:
    db.executemany(
        "INSERT INTO price_history (provider, instance_type, region, zone, pricing, usd_per_hour, observed_at, "
        "source, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(p.provider, p.instance_type, p.region, p.zone, p.pricing.value, p.usd_per_hour, p.observed_at, p.source,
          now) for p in prices])


def price_at(store: Store, provider: str, instance_type: str, zone: str, pricing: Pricing,
             when: float) -> float | None:
    """USD per hour of one node at time `when`: the newest observation at or before it, else the shipped
    catalog's price (None if neither knows the offering)."""
    row = store.db.execute(
        "SELECT usd_per_hour FROM price_history WHERE provider = ? AND instance_type = ? AND zone = ? "
        "AND pricing = ? AND observed_at <= ? ORDER BY observed_at DESC, id DESC LIMIT 1",
        (provider, instance_type, zone, pricing.value, when)).fetchone()
    if row is not None:
        return float(row[0])
    shipped = catalog.offering_index().get((provider, instance_type, zone))
    return shipped.price(pricing) if shipped else None


def current_offerings(store: Store | None, provider: str, now: float | None = None) -> tuple[Offering, ...]:
    """What the provider offers as far as geosched knows: the refreshed offerings of every region a refresh read,
    priced as of `now`, merged with the shipped catalog for the regions no refresh read (a refresh of one region
    never removes the others). The one source `catalog`, `provision` plans and reports share."""
    refreshed = refreshed_offerings(store, provider, now) if store is not None else None
    shipped = [o for o in catalog.offerings() if o.provider == provider]
    if refreshed is None:
        return tuple(shipped)
    assert store is not None
    complete = store.db.execute("SELECT 1 FROM prov_meta WHERE key = ?", (_complete_key(provider),)).fetchone()
    read = refreshed_regions(store, provider)
    kept = [] if complete else [o for o in shipped if o.region not in read]
    return tuple(sorted([*refreshed, *kept], key=lambda o: (o.region, o.zone, o.instance_type)))


def _complete_key(provider: str) -> str:
    return f"catalog-complete:{provider}"


def refreshed_regions(store: Store, provider: str) -> set[str]:
    return {str(r[0]) for r in store.db.execute("SELECT DISTINCT region FROM catalog_offerings WHERE provider = ?",
                                                (provider,))}


def price_ages(store: Store, provider: str, now: float | None = None) -> dict[tuple[str, str, Pricing], float]:
    """(instance type, zone, pricing) -> when geosched last read the price in force at `now` from a price API
    (prices a refresh observed only; the rest are the shipped catalog's)."""
    now = time.time() if now is None else now
    rows = store.db.execute(
        "SELECT instance_type, zone, pricing, MAX(recorded_at) FROM price_history WHERE provider = ? AND "
        "observed_at <= ? AND source NOT IN ('launch', 'catalog') GROUP BY instance_type, zone, pricing",
        (provider, now))
    return {(str(t), str(z), Pricing(p)): float(at) for t, z, p, at in rows}


def spot_risks(store: Store | None, provider: str) -> dict[tuple[str, str], SpotRisk]:
    """(instance type, zone) -> the interruption risk of its spot offering from the newest stored signals
    (`spotrisk.resolve`: a placement score before the price volatility). Offerings without a stored signal are
    absent: the caller resolves them by the provider's default or as unknown."""
    if store is None:
        return {}
    rows = store.db.execute(
        "SELECT instance_type, zone, signal, value, target, changes, observed_at FROM spot_signals s "
        "WHERE provider = ? AND id = (SELECT id FROM spot_signals t WHERE t.provider = s.provider "
        "AND t.instance_type = s.instance_type AND t.zone = s.zone AND t.signal = s.signal "
        "ORDER BY observed_at DESC, id DESC LIMIT 1)",
        (provider,)).fetchall()
    seen: dict[tuple[str, str], dict[str, SpotRisk]] = {}
    for instance_type, zone, signal, value, target, changes, observed_at in rows:
        key = (str(instance_type), str(zone))
        risk = (spotrisk.from_score(float(value), float(observed_at), target) if signal == "score" else
                spotrisk.from_volatility(spotrisk.Volatility(float(value), int(changes or 0), 0), float(observed_at)))
        seen.setdefault(key, {})[str(signal)] = risk
    return {key: spotrisk.resolve(provider, found.get("score"), found.get("volatility"))
            for key, found in seen.items()}


def refreshed_offerings(store: Store, provider: str, now: float | None = None) -> tuple[Offering, ...] | None:
    """The provider's offerings from its last refresh, priced as of `now`; None when never refreshed."""
    now = time.time() if now is None else now
    rows = store.db.execute("SELECT instance_type, region, zone, gpu, gpus, vcpus, memory_gib "
                            "FROM catalog_offerings WHERE provider = ? ORDER BY zone, instance_type",
                            (provider,)).fetchall()
    if not rows:
        return None
    out = []
    for instance_type, region, zone, gpu, gpus, vcpus, memory in rows:
        ondemand = price_at(store, provider, instance_type, zone, Pricing.ON_DEMAND, now)
        spot = price_at(store, provider, instance_type, zone, Pricing.SPOT, now)
        power = catalog.gpu_power().get(gpu)
        out.append(Offering(provider, instance_type, gpu, int(gpus), float(vcpus), float(memory), region, zone,
                            ondemand, spot, power.idle_watts if power else None, power.max_watts if power else None))
    return tuple(out)
