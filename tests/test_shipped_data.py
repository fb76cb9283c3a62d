"""The shipped data and the embedded default fleet built from it."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from importlib import resources

import pytest

from geosched import clouds
from geosched.console.catalog_view import CatalogQuery, rows
from geosched.core import catalog, netmodel
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import Zone


def test_every_data_file_ships_with_its_provenance() -> None:
    # Every file of geosched/data (folders hold their own SOURCES/README) and every cloud's catalog, found by
    # listing, not named here: a new cloud's catalog CSV is held to its provenance with this test untouched.
    data = resources.files("geosched.data")
    sources = data.joinpath("SOURCES.md").read_text()
    shipped = {p.name for p in data.iterdir() if p.is_file() and p.name.endswith((".csv", ".txt"))}
    catalogs = {s.catalog_file for s in clouds.all_specs() if s.catalog_file is not None}
    assert {"aws_gpu_vms.csv", "gcp_gpu_vms.csv", "region_carbon.csv", "gpu_power.csv"} <= shipped
    assert catalogs <= shipped
    for name in sorted(shipped - {"derivation-notes.txt"}):
        assert name in sources, f"geosched/data/{name} has no row in data/SOURCES.md"
    assert data.joinpath("derivation-notes.txt").is_file()


def test_catalog_contents() -> None:
    offers = catalog.offerings()
    # Every cloud that ships a catalog has offerings in it (the registry says which; a new cloud needs no line here).
    assert {o.provider for o in offers} == {s.name for s in clouds.all_specs() if s.catalog_file is not None}
    assert {"aws", "gcp"} <= {o.provider for o in offers}
    p5 = catalog.offering_index()[("aws", "p5.48xlarge", "use1-az1")]
    assert (p5.gpu, p5.gpus) == ("H100", 8)
    a2 = next(o for o in offers if o.instance_type == "a2-highgpu-8g" and o.zone == "us-central1-a")
    assert a2.gpus == 8 and a2.price_ondemand and a2.price_ondemand > 20
    assert (
        catalog.regions()["gcp:europe-north1"].grid_gco2e_per_kwh
        < catalog.regions()["aws:us-east-1"].grid_gco2e_per_kwh
    )


def test_a_zone_name_belongs_to_one_cloud() -> None:
    # The shipped catalogs keep their zones apart (read above without error), and a catalog whose zone another cloud
    # already names is refused, naming both: zones are keyed by name, so the newcomer would take the zone over.
    assert catalog.zones()["us-central1-a"].provider == "gcp"
    gcp = next(o for o in catalog.offerings() if o.zone == "us-central1-a")
    catalog.one_cloud_per_zone([gcp, replace(gcp, instance_type="a3-highgpu-8g")])
    clash = replace(gcp, provider="nebius", instance_type="gpu-h100-sxm.8gpu-128vcpu-1600gb")
    with pytest.raises(RuntimeError, match="zone 'us-central1-a' is in both the gcp and the nebius catalog"):
        catalog.one_cloud_per_zone([gcp, clash])


def test_gpu_power_fills_tdp_only_parts_at_the_a100_ratio() -> None:
    power = catalog.gpu_power()
    assert power["A100"].idle_watts == 46 and power["A100"].max_watts == 407
    assert power["H100"].max_watts == 700
    assert power["H100"].idle_watts == pytest.approx(700 * 46 / 407)


def test_network_model_uses_measured_inter_region_values() -> None:
    a, b = Zone("use1-az1", "aws", "us-east-1"), Zone("euc1-az1", "aws", "eu-central-1")
    link = netmodel.zone_link(a, b)
    assert link is not None and 80 < link.rtt_p50_ms < 100
    assert netmodel.zone_link(a, a) == netmodel.SAME_ZONE
    assert netmodel.zone_link(a, Zone("use1-az2", "aws", "us-east-1")) == netmodel.SAME_REGION
    gcp = netmodel.zone_link(Zone("us-central1-b", "gcp", "us-central1"), Zone("europe-west4-a", "gcp", "europe-west4"))
    assert gcp is not None and gcp.rtt_p50_ms > 80


def test_default_fleet_is_realistic_and_deterministic() -> None:
    fleet = default_fleet()
    per_region = Counter(z.region_key for z in fleet.zones.values())
    assert len(per_region) >= 10 and {k.split(":")[0] for k in per_region} == {"aws", "gcp"}
    assert all(2 <= n <= 4 for n in per_region.values())
    assert len(fleet.nodes) >= 300
    assert len({n.instance_type for n in fleet.nodes}) >= 5
    assert any(n.gpus_free < n.gpus for n in fleet.nodes)
    # The fleet's zone is what nodes carry: GKE's zone name, EKS's zone ID (the zone label holds its name).
    assert all(n.labels["topology.kubernetes.io/zone"] == n.zone for n in fleet.nodes if n.provider == "gcp")
    assert all(n.labels["topology.k8s.aws/zone-id"] == n.zone for n in fleet.nodes if n.provider == "aws")
    network = default_network()
    assert all(network.zone_link(a, b) for a in fleet.zones for b in fleet.zones)
    summaries = network.node_summaries({n.name: n.zone for n in fleet.nodes})
    slow = [s for s in summaries.values() if s.rtt_p50_ms > 1 or s.loss > 0]
    assert 0 < len(slow) < len(fleet.nodes) // 10
    default_fleet.cache_clear()
    assert default_fleet().nodes == fleet.nodes


def test_catalog_query_filters_and_sorts() -> None:
    h100 = rows(CatalogQuery(gpu="h100", count=8, provider="aws", sort="price"))
    assert h100 and all(r["gpu"] == "H100" and r["gpus"] == 8 and r["provider"] == "aws" for r in h100)
    prices = [r["usd_per_gpu_hour"] for r in h100 if r["usd_per_gpu_hour"] is not None]
    assert prices == sorted(prices)
    green = rows(CatalogQuery(gpu="L4", sort="carbon"))
    carbon = [r["gco2e_per_hour"] for r in green if r["gco2e_per_hour"] is not None]
    assert carbon == sorted(carbon) and green[0]["region"] in {
        "europe-north1",
        "europe-west1",
        "us-west1",
        "europe-west6",
        "northamerica-northeast1",
        "europe-west9",
        "northamerica-northeast2",
    }
    assert all(r["region"] == "us-east-1" for r in rows(CatalogQuery(region="us-east-1")))
