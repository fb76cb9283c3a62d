"""Compute Engine machine prices from Cloud Billing Catalog SKUs. Pure: SKU documents in, prices out.

Google prices an accelerator-optimized machine by its parts (cloud.google.com/compute/gpus-pricing,
/compute/vm-instance-pricing): vCPUs at the family's core rate, memory at its RAM rate (per GiB-hour) and the
GPUs at the GPU's rate, each a SKU of service Compute Engine (6F81-5844-456A) whose description names the part
and the region group, e.g. "A2 Instance Core running in Americas", "A2 Instance Ram running in Americas",
"Nvidia Tesla A100 GPU running in Americas"; spot rates have usageType Preemptible and descriptions of two forms: a
machine's cores and memory prefixed "Spot Preemptible" ("Spot Preemptible A2 Instance Core running in Americas"), a
GPU with "attached to Spot Preemptible VMs" after its name ("Nvidia Tesla A100 GPU attached to Spot Preemptible VMs
running in Americas", SKU 39D4-516A-0317; Google's Cloud Billing client documents "Nvidia Tesla K80 GPU attached to
Spot Preemptible VMs running in Warsaw"). Read as the first form only, no GPU had a spot rate and every machine's spot
price stayed the shipped one (attack5). A SKU applies in the regions of its `serviceRegions`.

    machine $/h = vCPUs x core $/h + memory GiB x RAM $/GiB-h + GPUs x GPU $/h

A part with no SKU in a region (a family or GPU Google files differently) leaves the machine unpriced there:
the shipped catalog's price then stands, shown as shipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from geosched.core.models import Pricing

# Our GPU model names (the catalog's) -> the part name in GPU SKU descriptions.
GPU_PARTS = {"A100": "Nvidia Tesla A100 GPU", "A100-80GB": "Nvidia A100 80GB GPU", "H100": "Nvidia H100 80GB GPU",
             "H200": "Nvidia H200 141GB GPU", "L4": "Nvidia L4 GPU", "T4": "Nvidia Tesla T4 GPU",
             "V100": "Nvidia Tesla V100 GPU"}
_DESCRIPTION_RE = re.compile(r"^(?:Spot Preemptible )?(?P<part>.+?)(?: attached to Spot Preemptible VMs)? running in ")
_USAGE = {"OnDemand": Pricing.ON_DEMAND, "Preemptible": Pricing.SPOT}

# (region, pricing, part) -> USD per unit (hour, or GiB-hour for RAM)
Rates = dict[tuple[str, Pricing, str], float]


def rates(skus: Iterable[Mapping[str, Any]]) -> Rates:
    """Per-unit rates of every on-demand and spot SKU, per region it serves."""
    out: Rates = {}
    for sku in skus:
        pricing = _USAGE.get(str((sku.get("category") or {}).get("usageType", "")))
        match = _DESCRIPTION_RE.match(str(sku.get("description", "")))
        price = _unit_price(sku)
        if pricing is None or match is None or price is None:
            continue
        for region in sku.get("serviceRegions") or ():
            out[(str(region), pricing, match.group("part"))] = price
    return out


def machine_price(table: Rates, region: str, instance_type: str, gpu: str, gpus: int, vcpus: float,
                  memory_gib: float, pricing: Pricing) -> float | None:
    family = instance_type.split("-", 1)[0].upper()
    parts = [(f"{family} Instance Core", vcpus), (f"{family} Instance Ram", memory_gib)]
    if gpu in GPU_PARTS:
        parts.append((GPU_PARTS[gpu], float(gpus)))
    else:
        return None
    total = 0.0
    for part, amount in parts:
        rate = table.get((region, pricing, part))
        if rate is None:
            return None
        total += amount * rate
    return round(total, 6)


def _unit_price(sku: Mapping[str, Any]) -> float | None:
    """The first tier's unit price of the current pricing info (Money: units + nanos)."""
    try:
        info = sku["pricingInfo"][0]["pricingExpression"]
        tier = min(info["tieredRates"], key=lambda t: float(t.get("startUsageAmount", 0)))
        money = tier["unitPrice"]
        if money.get("currencyCode", "USD") != "USD":
            return None
        return int(money.get("units", 0) or 0) + int(money.get("nanos", 0) or 0) / 1e9
    except (KeyError, IndexError, TypeError, ValueError):
        return None
