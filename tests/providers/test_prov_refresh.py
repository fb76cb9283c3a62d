"""Catalog refresh from the provider APIs (through the emulators) and pricing at the price of the time."""

from __future__ import annotations

import time

import pytest

from geosched.models import Pricing
from geosched.providers.aws import AwsProvider
from geosched.providers.base import PriceObservation
from geosched.providers.gang import plan_gang
from geosched.providers.gcp import GcpProvider
from geosched.providers.plan import GangRequest
from geosched.providers.refresh import price_at, record_prices, refresh_catalog, refreshed_offerings
from geosched.store import Store

pytestmark = pytest.mark.integration


def test_aws_refresh_reads_types_offerings_and_spot_history(aws: AwsProvider, store: Store) -> None:
    result = refresh_catalog(aws, store, regions=("us-east-1",))
    assert result.regions == ("us-east-1",) and not result.errors
    offers = refreshed_offerings(store, "aws")
    assert offers is not None
    p4d = {o.zone: o for o in offers if o.instance_type == "p4d.24xlarge"}
    assert {"use1-az1", "use1-az2", "use1-az6"} <= set(p4d)  # zone ids, as the catalog names them
    sample = p4d["use1-az1"]
    assert (sample.gpu, sample.gpus, sample.vcpus) == ("A100", 8, 96.0)
    assert sample.price_ondemand == pytest.approx(32.7726)  # EC2 has no on-demand price API: the catalog's
    # moto's spot history is a placeholder price with a 2006 timestamp: recorded as valid from then.
    spot_now = price_at(store, "aws", "p4d.24xlarge", "use1-az1", Pricing.SPOT, time.time())
    assert spot_now is not None and spot_now < 1.0
    before_history = price_at(store, "aws", "p4d.24xlarge", "use1-az1", Pricing.SPOT, 0.0)
    assert before_history == pytest.approx(6.7915)  # nothing observed that early: the shipped catalog
    assert result.api_calls >= 3


def test_gcp_refresh_follows_what_the_api_offers(gcp: GcpProvider, store: Store) -> None:
    result = refresh_catalog(gcp, store)
    assert set(result.regions) == {"us-central1", "us-east4", "europe-west4"}
    offers = refreshed_offerings(store, "gcp")
    assert offers is not None
    a3_zones = {o.zone for o in offers if o.instance_type == "a3-highgpu-8g"}
    assert a3_zones == {"us-central1-a", "us-central1-c", "us-east4-a", "us-east4-b", "europe-west4-b"}
    assert {o.gpu for o in offers} == {"A100", "H100", "L4"}
    plan = plan_gang(GangRequest("H100", 8, 2, providers=("gcp",)), {"gcp": gcp}, store)
    assert plan.candidates and {c.zone for c in plan.candidates} <= a3_zones


def test_price_at_prices_usage_at_the_price_of_its_time(store: Store) -> None:
    def seen(price: float, at: float) -> PriceObservation:
        return PriceObservation("aws", "p5.48xlarge", "us-east-2", "use2-az1", Pricing.SPOT, price, at, "test")

    record_prices(store, [seen(20.0, 1000.0), seen(12.0, 2000.0), seen(15.0, 3000.0)])
    assert price_at(store, "aws", "p5.48xlarge", "use2-az1", Pricing.SPOT, 1500.0) == 20.0
    assert price_at(store, "aws", "p5.48xlarge", "use2-az1", Pricing.SPOT, 2000.0) == 12.0
    assert price_at(store, "aws", "p5.48xlarge", "use2-az1", Pricing.SPOT, 10**10) == 15.0
    assert price_at(store, "aws", "p5.48xlarge", "use2-az1", Pricing.SPOT, 10.0) == pytest.approx(14.3773)
    assert price_at(store, "aws", "no-such-type", "use2-az1", Pricing.SPOT, 10.0) is None


def test_without_a_refresh_the_shipped_catalog_is_the_default(aws: AwsProvider, store: Store) -> None:
    assert refreshed_offerings(store, "aws") is None
    plan = plan_gang(GangRequest("A100", 8, 2, providers=("aws",), regions=("us-east-1",)), {"aws": aws}, None)
    assert [c.zone for c in plan.candidates] == ["use1-az1", "use1-az2", "use1-az6"]
