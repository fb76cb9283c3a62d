"""`catalog refresh` holds what the APIs answer to the shipped catalog's price checks (issue 23, item 4): a spot
price above on-demand, an on-demand price far outside its siblings' band and a type ordinary projects cannot
launch are dropped, one warning line each, and the price before them stands. Real boto3 against moto behind the
fault proxy (Price List GetProducts, DescribeSpotPriceHistory) and the GCE double over HTTP."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from geosched.core import catalog
from geosched.core.models import Pricing
from geosched.providers.refresh import price_at, refresh_catalog, refreshed_offerings
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, GceDouble
from geosched_emulators.gce import DEFAULT_MACHINE_TYPES, MachineTypeSpec
from tests.providers.prov_support import AWS_ZONES, gcp_provider
from tests.providers.test_prov_cli import home, run  # noqa: F401  (the CLI fixture and runner)

pytestmark = pytest.mark.integration


def test_refresh_drops_spot_above_ondemand_and_out_of_band_prices_one_line_each(
        home: Path, proxy: Ec2FaultProxy) -> None:  # noqa: F811
    now = time.time()
    # p4d.24xlarge lists at 32.77-45.2 $/h in the shipped regions; 400 $/h is a feed error of the kind the
    # shipped GCP a3 rows show (a price in another SKU's units), and spot 40.0 above on-demand 21.9576 in use1-az2
    # is the kind of asia-northeast1-b's H100 rows.
    proxy.set_ondemand_price("p4d.24xlarge", "us-east-1", 21.9576)
    proxy.set_ondemand_price("p5.48xlarge", "us-east-1", 400.0)
    proxy.set_spot_price_history("us-east-1", [
        (AWS_ZONES["use1-az1"], "p4d.24xlarge", now - 3600.0, 5.5),
        (AWS_ZONES["use1-az2"], "p4d.24xlarge", now - 3600.0, 40.0),
    ])
    result = run(home, "catalog", "refresh", "--provider", "aws", "--regions", "us-east-1")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning: ")]
    spot = [w for w in warnings if "spot-above-ondemand" in w]
    assert spot == ["warning: dropped aws p4d.24xlarge use1-az2: spot-above-ondemand: spot 40 above on-demand "
                    "21.9576; spot price dropped"]
    # One line per p5.48xlarge zone moto lists in us-east-1, nothing else.
    band = [w for w in warnings if "p5.48xlarge" in w and "out-of-band" in w and "on-demand price dropped" in w]
    assert band and len(band) + len(spot) == len(warnings), result.output
    assert len({w.split(":")[1] for w in band}) == len(band)
    with Store(home) as store:
        def price(instance_type: str, zone: str, pricing: Pricing) -> float | None:
            return price_at(store, "aws", instance_type, zone, pricing, time.time())

        # Kept: the sane refreshed prices.
        assert price("p4d.24xlarge", "use1-az1", Pricing.SPOT) == pytest.approx(5.5)
        assert price("p4d.24xlarge", "use1-az2", Pricing.ON_DEMAND) == pytest.approx(21.9576)
        # Dropped: the shipped prices stand.
        shipped = catalog.offering_index()
        assert price("p4d.24xlarge", "use1-az2", Pricing.SPOT) == \
            shipped[("aws", "p4d.24xlarge", "use1-az2")].price_spot
        assert price("p5.48xlarge", "use1-az6", Pricing.ON_DEMAND) == \
            shipped[("aws", "p5.48xlarge", "use1-az6")].price_ondemand


def test_refresh_drops_a_zero_or_nan_price_one_line_each(home: Path, proxy: Ec2FaultProxy) -> None:  # noqa: F811
    # DescribeSpotPriceHistory answers SpotPrice as a string (botocore's ec2 model); "0.000000" and "NaN" are what
    # a broken feed or a hostile endpoint can send. Before: both were stored, a zero spot price taken as free
    # capacity and NaN passing every check (NaN > on-demand is False).
    now = time.time()
    proxy.set_ondemand_price("p4d.24xlarge", "us-east-1", 21.9576)
    proxy.set_spot_price_history("us-east-1", [
        (AWS_ZONES["use1-az1"], "p4d.24xlarge", now - 3600.0, 0.0),
        (AWS_ZONES["use1-az2"], "p4d.24xlarge", now - 3600.0, float("nan")),
        (AWS_ZONES["use1-az6"], "p4d.24xlarge", now - 3600.0, 6.25),
    ])
    result = run(home, "catalog", "refresh", "--provider", "aws", "--regions", "us-east-1")
    assert result.exit_code == 0, result.output
    warnings = sorted(line for line in result.output.splitlines() if "not-a-price" in line)
    assert warnings == ["warning: dropped aws p4d.24xlarge use1-az1: not-a-price: spot 0 $/h; spot price dropped",
                        "warning: dropped aws p4d.24xlarge use1-az2: not-a-price: spot nan $/h; spot price dropped"]
    shipped = catalog.offering_index()
    with Store(home) as store:
        for zone in ("use1-az1", "use1-az2"):
            assert price_at(store, "aws", "p4d.24xlarge", zone, Pricing.SPOT, time.time()) == \
                shipped[("aws", "p4d.24xlarge", zone)].price_spot
        assert price_at(store, "aws", "p4d.24xlarge", "use1-az6", Pricing.SPOT, time.time()) == pytest.approx(6.25)


def test_refresh_does_not_offer_a_type_ordinary_projects_cannot_launch(store: Store) -> None:
    # A3 Edge as the machineTypes list names it (the shipped catalog's feed lists it in 13 regions).
    edge = MachineTypeSpec("a3-edgegpu-8g", 208, 1916928, "nvidia-h100-80gb", 8, ("us-central1-a",),
                           "Accelerator Optimized: 8 NVIDIA H100 80GB GPUs, 208 vCPUs, 1872GB RAM")
    with GceDouble(machine_types=(*DEFAULT_MACHINE_TYPES, edge)) as gce:
        result = refresh_catalog(gcp_provider(gce.endpoint), store, regions=("us-central1",))
    assert result.dropped == ("gcp a3-edgegpu-8g us-central1-a: not-launchable: a machine type ordinary projects "
                              "cannot launch; not offered",)
    offers = refreshed_offerings(store, "gcp") or ()
    assert {o.instance_type for o in offers} >= {"a3-highgpu-8g", "a2-highgpu-8g"}
    assert not [o for o in offers if o.instance_type.startswith("a3-edgegpu")]
