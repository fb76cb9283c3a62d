"""Catalog refresh from the provider APIs (through the emulators) and pricing at the price of the time."""

from __future__ import annotations

import time

import pytest

from geosched.core import catalog
from geosched.core.models import Pricing
from geosched.providers.aws import AwsProvider
from geosched.providers.base import PriceObservation
from geosched.providers.gang import plan_gang
from geosched.providers.gcp import GcpProvider
from geosched.providers.plan import GangRequest
from geosched.providers.refresh import price_ages, price_at, record_prices, refresh_catalog, refreshed_offerings
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, GceDouble
from geosched_emulators.billing import Sku

pytestmark = pytest.mark.integration


def test_aws_refresh_reads_types_offerings_and_spot_history(aws: AwsProvider, proxy: Ec2FaultProxy,
                                                             store: Store) -> None:
    # The Price List API lists p4d.24xlarge in us-east-1 at a price the shipped catalog (32.7726) does not have.
    proxy.set_ondemand_price("p4d.24xlarge", "us-east-1", 21.9576)
    proxy.set_ondemand_price("p4d.24xlarge", "us-east-2", 23.0)  # another region: not asked for
    result = refresh_catalog(aws, store, regions=("us-east-1",))
    assert result.regions == ("us-east-1",) and not result.errors
    offers = refreshed_offerings(store, "aws")
    assert offers is not None
    p4d = {o.zone: o for o in offers if o.instance_type == "p4d.24xlarge"}
    assert {"use1-az1", "use1-az2", "use1-az6"} <= set(p4d)  # zone ids, as the catalog names them
    sample = p4d["use1-az1"]
    assert (sample.gpu, sample.gpus, sample.vcpus) == ("A100", 8, 96.0)
    assert sample.price_ondemand == pytest.approx(21.9576)  # from GetProducts, every zone of the region
    assert all(o.price_ondemand == pytest.approx(21.9576) for o in p4d.values())
    # Valid from the on-demand term's effective date; before that, the shipped price.
    assert price_at(store, "aws", "p4d.24xlarge", "use1-az1", Pricing.ON_DEMAND, 1.7e9) == pytest.approx(32.7726)
    # A type the price list does not list keeps the shipped price, and no observation claims otherwise.
    p5 = next(o for o in offers if o.instance_type == "p5.48xlarge" and o.zone == "use1-az6")
    shipped = catalog.offering_index()[("aws", "p5.48xlarge", "use1-az6")]
    assert p5.price_ondemand == shipped.price_ondemand
    ages = price_ages(store, "aws")
    assert ("p4d.24xlarge", "use1-az1", Pricing.ON_DEMAND) in ages
    assert ("p5.48xlarge", "use1-az6", Pricing.ON_DEMAND) not in ages
    # Refreshing us-east-1 keeps us-east-2 in the plans (shipped), and `catalog` and the plan agree.
    plan = plan_gang(GangRequest("A100", 8, 2, providers=("aws",)), {"aws": aws}, store)
    assert {"use1-az1", "use2-az1"} <= {c.zone for c in plan.candidates}
    planned = {c.zone: c.node_usd_per_hour for c in plan.candidates}
    assert planned["use1-az1"] == pytest.approx(21.9576) and planned["use2-az1"] == pytest.approx(32.7726)
    # moto's spot history is a placeholder price with a 2006 timestamp: recorded as valid from then.
    spot_now = price_at(store, "aws", "p4d.24xlarge", "use1-az1", Pricing.SPOT, time.time())
    assert spot_now is not None and spot_now < 1.0
    before_history = price_at(store, "aws", "p4d.24xlarge", "use1-az1", Pricing.SPOT, 0.0)
    assert before_history == pytest.approx(6.7915)  # nothing observed that early: the shipped catalog
    assert result.api_calls >= 3


# Compute Engine SKUs as the Cloud Billing Catalog lists them (descriptions, usage types and us-central1 rates
# of cloud.google.com/compute/gpus-pricing and /vm-instance-pricing), with the A100 rate changed from 2.933908
# to 2.5 so that a price read from the API is told apart from the shipped one (29.38708 for a2-highgpu-8g).
AMERICAS = ("us-central1", "us-east4")
SKUS = [
    Sku("A2 Instance Core running in Americas", "CPU", "OnDemand", AMERICAS, 0.031611),
    Sku("A2 Instance Ram running in Americas", "RAM", "OnDemand", AMERICAS, 0.004237, "GiBy.h"),
    Sku("Nvidia Tesla A100 GPU running in Americas", "GPU", "OnDemand", AMERICAS, 2.5),
    Sku("Spot Preemptible A2 Instance Core running in Americas", "CPU", "Preemptible", AMERICAS, 0.0095),
    Sku("Spot Preemptible A2 Instance Ram running in Americas", "RAM", "Preemptible", AMERICAS, 0.0013, "GiBy.h"),
    # A spot GPU is "<GPU> attached to Spot Preemptible VMs running in <place>", not "Spot Preemptible <GPU> ...":
    # Google's own Cloud Billing client documents "Nvidia Tesla K80 GPU attached to Spot Preemptible VMs running in
    # Warsaw" as a SKU (googleapis google-api-nodejs-client, cloudbilling v1beta), and the A100's is SKU 39D4-516A-0317
    # "Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Americas". Written the other way, every GCP
    # machine's spot price was left at the shipped one (attack5).
    Sku("Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Americas", "GPU", "Preemptible", AMERICAS,
        1.1),
    Sku("Commitment v1: A2 Cpu in Americas for 1 Year", "CPU", "Commit1Yr", AMERICAS, 0.02),
]


def test_gcp_prices_from_the_cloud_billing_catalog(gcp: GcpProvider, gce: GceDouble, store: Store) -> None:
    gce.billing.set_skus(SKUS)
    result = refresh_catalog(gcp, store, regions=("us-central1",))
    assert result.regions == ("us-central1",) and not result.errors
    offers = {(o.instance_type, o.zone): o for o in refreshed_offerings(store, "gcp") or ()}
    a2 = offers[("a2-highgpu-8g", "us-central1-a")]
    assert a2.price_ondemand == pytest.approx(96 * 0.031611 + 680 * 0.004237 + 8 * 2.5)
    assert a2.price_spot == pytest.approx(96 * 0.0095 + 680 * 0.0013 + 8 * 1.1)
    # No SKU for the H100 machines' parts here: their shipped prices stand, and no observation claims otherwise.
    a3 = offers[("a3-highgpu-8g", "us-central1-a")]
    assert a3.price_ondemand == catalog.offering_index()[("gcp", "a3-highgpu-8g", "us-central1-a")].price_ondemand
    ages = price_ages(store, "gcp")
    assert ("a2-highgpu-8g", "us-central1-a", Pricing.ON_DEMAND) in ages
    assert not any(key[0].startswith("a3-") for key in ages)
    assert gce.call_count("services.skus.list") == 1


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
