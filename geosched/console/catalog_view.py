"""`geosched catalog`: what the shipped (or refreshed) catalog offers, filtered and sorted, like
`sky show-gpus`. Pure: rows in, rows out."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from geosched.core.models import Pricing

if TYPE_CHECKING:
    from geosched.core.models import Offering
    from geosched.policies.spotrisk import SpotRisk

SORT_KEYS = ("price", "spot", "carbon", "gpus", "name")
UTILISATION = 0.9


@dataclass(frozen=True)
class CatalogQuery:
    gpu: str | None = None
    count: int | None = None
    min_gpus: int | None = None
    provider: str | None = None
    region: str | None = None
    sort: str = "price"


def carbon_g_per_hour(o: Offering) -> float | None:
    from geosched.core import catalog
    region = catalog.regions().get(f"{o.provider}:{o.region}")
    if region is None or o.gpu_idle_watts is None or o.gpu_max_watts is None:
        return None
    watts = o.gpu_idle_watts + UTILISATION * (o.gpu_max_watts - o.gpu_idle_watts)
    return o.gpus * watts / 1000.0 * region.pue * region.grid_gco2e_per_kwh


# (provider, instance type, zone, pricing) -> when that price was observed (Unix seconds).
Observed = Mapping[tuple[str, str, str, Pricing], float]


def rows(query: CatalogQuery, offerings: Iterable[Offering] | None = None, observed: Observed | None = None,
         now: float | None = None, risks: Mapping[tuple[str, str, str], SpotRisk] | None = None
         ) -> list[dict[str, Any]]:
    """`offerings` default to the shipped catalog; `observed` says which prices a refresh observed and when, so
    each row says how old its on-demand price is (None: the shipped catalog's list price). A spot offering's
    interruption risk comes from `risks` (the store's signals), else `spotrisk.resolve`'s rule, as the plan's."""
    from geosched.core import catalog
    from geosched.policies import spotrisk
    out: list[dict[str, Any]] = []
    observed = observed or {}
    risks = risks or {}
    for o in catalog.offerings() if offerings is None else offerings:
        if query.gpu and o.gpu.lower() != query.gpu.lower():
            continue
        if query.count is not None and o.gpus != query.count:
            continue
        if query.min_gpus is not None and o.gpus < query.min_gpus:
            continue
        if query.provider and o.provider != query.provider:
            continue
        if query.region and o.region != query.region:
            continue
        carbon = carbon_g_per_hour(o)
        risk = (risks.get((o.provider, o.instance_type, o.zone)) or spotrisk.resolve(o.provider)
                if o.price_spot is not None else None)
        out.append({
            "provider": o.provider, "region": o.region, "zone": o.zone, "instance_type": o.instance_type,
            "gpu": o.gpu, "gpus": o.gpus, "vcpus": o.vcpus, "memory_gib": o.memory_gib,
            "usd_per_hour": o.price_ondemand, "spot_usd_per_hour": o.price_spot,
            "usd_per_gpu_hour": round(o.price_ondemand / o.gpus, 4) if o.price_ondemand else None,
            "gco2e_per_hour": round(carbon, 1) if carbon is not None else None,
            "price_observed_at": observed.get((o.provider, o.instance_type, o.zone, Pricing.ON_DEMAND)),
            # Flat, for the CSV: the spot market's interruption risk, its source and when it was observed.
            "spot_risk_source": risk.source if risk else None, "spot_risk_detail": risk.detail if risk else None,
            "spot_hazard_per_node_hour": risk.hazard_per_hour if risk else None,
            "spot_risk_observed_at": risk.observed_at if risk else None,
            "price_note": o.note,
        })
    key = {"price": "usd_per_gpu_hour", "spot": "spot_usd_per_hour", "carbon": "gco2e_per_hour",
           "gpus": "gpus", "name": "instance_type"}[query.sort]
    inf = float("inf")
    out.sort(key=lambda r: (r[key] if r[key] is not None else inf, r["provider"], r["zone"], r["instance_type"]))
    if query.sort == "gpus":
        out.sort(key=lambda r: -r["gpus"])
    return out


def age(at: float | None, now: float | None = None) -> str:
    """How old an observed price is, for people; `shipped` for the catalog's list price."""
    if at is None:
        return "shipped"
    hours = max(0.0, ((time.time() if now is None else now) - at) / 3600.0)
    return f"{hours:.0f} h ago" if hours < 48 else f"{hours / 24:.0f} d ago"


def risk_text(risk: SpotRisk, nodes: int, now: float | None = None) -> str:
    """A spot risk as the plan and `place --explain` show it: the signal, its source and age, and the chance
    that a gang of `nodes` is interrupted within an hour ("placement score 3/10 (aws:spot-placement-score,
    seen 2 h ago): 1.4%/h")."""
    from geosched.policies import spotrisk
    seen = f", seen {age(risk.observed_at, now)}" if risk.observed_at is not None else ""
    return f"{risk.detail} ({risk.source}{seen}): {spotrisk.gang_interruption_per_hour(risk, nodes):.1%}/h"
