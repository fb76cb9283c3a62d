"""Where a plan's offerings and region data come from: the refreshed catalog in the store when there is
one, else the shipped catalog (offline); inventory-backed providers answer for themselves (no API)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from geosched.core import catalog
from geosched.core.models import Offering, Region, region_key
from geosched.policies.spotrisk import SpotRisk
from geosched.providers.base import Budget, Provider
from geosched.providers.refresh import current_offerings, spot_risks
from geosched.providers.registry import CLOUDS
from geosched.store.db import Store


def planning_offerings(store: Store | None, providers: Mapping[str, Provider]) -> list[Offering]:
    out: list[Offering] = []
    for name, provider in providers.items():
        if name in CLOUDS:
            out.extend(current_offerings(store, name))
        else:
            budget = Budget(60.0)
            for region in provider.regions(budget):
                out.extend(provider.offerings(region, budget))
    return out


def planning_regions(providers: Mapping[str, Provider], offerings: list[Offering]) -> dict[str, Region]:
    """Grid carbon and PUE keyed like the plan looks them up (`provider:region`)."""
    regions = dict(catalog.regions())
    for o in offerings:
        key = region_key(o.provider, o.region)
        if key not in regions and o.provider in providers:
            info = providers[o.provider].region_info(o.region)
            if info is not None:
                regions[key] = info
    return regions


def planning_risks(store: Store | None, providers: Iterable[str]) -> dict[tuple[str, str, str], SpotRisk]:
    """(provider, instance type, zone) -> the spot risk the store's newest signals give (for the plan and the
    placement context alike); offerings without one are left to `spotrisk.resolve` (provider default, else
    unknown)."""
    out: dict[tuple[str, str, str], SpotRisk] = {}
    for provider in sorted(set(providers)):
        for (instance_type, zone), risk in spot_risks(store, provider).items():
            out[(provider, instance_type, zone)] = risk
    return out
