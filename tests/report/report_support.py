"""Helpers for the report tests: a fixed clock, price observations, and ledger intervals in one call."""

from __future__ import annotations

from geosched.core.models import Pricing
from geosched.providers.base import PriceObservation
from geosched.providers.refresh import record_prices
from geosched.report import close_interval, open_interval
from geosched.store.db import Store

# 2024-01-01T00:00:00Z: a UTC midnight, so day and hour boundaries fall on round offsets from it.
T0 = 1_704_067_200.0
H = 3600.0


def price(store: Store, provider: str, instance_type: str, region: str, zone: str, usd: float, at: float,
          pricing: Pricing = Pricing.ON_DEMAND) -> None:
    record_prices(store, [PriceObservation(provider, instance_type, region, zone, pricing, usd, at, "test")], now=at)


def used(store: Store, name: str, start: float, end: float | None, *, kind: str = "node", job: str | None = None,
         provider: str = "aws", region: str = "us-east-1", zone: str = "use1-az1", cluster: str | None = None,
         instance_type: str = "p4d.24xlarge", gpu: str = "A100", gpus: int = 8, source: str = "demo",
         pricing: Pricing = Pricing.ON_DEMAND, utilisation: float | None = None) -> int:
    row = open_interval(store, kind=kind, name=name, job=job, provider=provider, region=region, zone=zone,
                        cluster=cluster, instance_type=instance_type, gpu=gpu, gpus=gpus, source=source,
                        pricing=pricing, start=start, utilisation=utilisation)
    if end is not None:
        close_interval(store, kind=kind, name=name, source=source, end=end)
    return row
