"""A double of the Cloud Billing Catalog API's SKU list for Compute Engine, served by the GCE double.

`GET /v1/services/6F81-5844-456A/skus` (services.skus.list) answers the SKUs set with `set_sku`, in the
documented shape (cloud.google.com/billing/docs/reference/rest/v1/services.skus: `skuId`, `description`,
`category {resourceFamily, resourceGroup, usageType}`, `serviceRegions`, `pricingInfo[].pricingExpression
{usageUnit, tieredRates[].unitPrice {currencyCode, units, nanos}}`), paged by `pageSize`/`pageToken`.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from ._http import HttpRequest, HttpResponse

COMPUTE_SERVICE = "6F81-5844-456A"  # Compute Engine's service id in the Cloud Billing Catalog
SKUS_PATH = f"/v1/services/{COMPUTE_SERVICE}/skus"


@dataclass(frozen=True)
class Sku:
    description: str  # e.g. "Nvidia Tesla A100 GPU running in Americas", "A2 Instance Core running in Americas"
    resource_group: str  # GPU, CPU, RAM (what Google files the SKU under)
    usage_type: str  # OnDemand, Preemptible (spot), Commit1Yr, ...
    regions: tuple[str, ...]
    usd_per_unit: float
    usage_unit: str = "h"  # h for cores and GPUs, GiBy.h for memory

    def to_json(self) -> dict[str, Any]:
        sku_id = uuid.uuid5(uuid.NAMESPACE_URL, f"{self.description}/{self.usage_type}").hex[:12].upper()
        sku_id = f"{sku_id[:4]}-{sku_id[4:8]}-{sku_id[8:]}"
        units = int(self.usd_per_unit)
        return {
            "name": f"services/{COMPUTE_SERVICE}/skus/{sku_id}", "skuId": sku_id, "description": self.description,
            "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                         "resourceGroup": self.resource_group, "usageType": self.usage_type},
            "serviceRegions": list(self.regions),
            "pricingInfo": [{
                "summary": "", "effectiveTime": "2026-11-01T00:00:00Z", "currencyConversionRate": 1,
                "pricingExpression": {
                    "usageUnit": self.usage_unit, "displayQuantity": 1, "baseUnit": "s",
                    "usageUnitDescription": "hour" if self.usage_unit == "h" else "gibibyte hour",
                    "baseUnitDescription": "second" if self.usage_unit == "h" else "byte second",
                    "baseUnitConversionFactor": 3600 if self.usage_unit == "h" else 3865470566400,
                    "tieredRates": [{"startUsageAmount": 0, "unitPrice": {
                        "currencyCode": "USD", "units": str(units),
                        "nanos": round((self.usd_per_unit - units) * 1e9)}}],
                },
            }],
            "serviceProviderName": "Google",
            "geoTaxonomy": {"type": "REGIONAL" if len(self.regions) == 1 else "MULTI_REGIONAL",
                            "regions": list(self.regions)},
        }


class BillingCatalog:
    """Compute Engine's SKUs, in memory, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._skus: list[Sku] = []

    def set_skus(self, skus: list[Sku]) -> None:
        with self._lock:
            self._skus = list(skus)

    def reset(self) -> None:
        self.set_skus([])

    def answer(self, req: HttpRequest) -> HttpResponse | None:
        if req.method != "GET" or req.path != SKUS_PATH:
            return None
        args = req.query
        size = int((args.get("pageSize") or ["5000"])[0])
        start = int((args.get("pageToken") or ["0"])[0] or 0)
        with self._lock:
            page = self._skus[start:start + size]
            more = start + size < len(self._skus)
        body = {"skus": [s.to_json() for s in page], "nextPageToken": str(start + size) if more else ""}
        return HttpResponse(200, json.dumps(body).encode(), [("Content-Type", "application/json; charset=UTF-8")])
