"""The shipped price catalog validated as shipped (issue 23, item 4): every row a check flags is labelled in the
CSV with why (and its source), no label outlives its reason, and what placement and provision plans are offered
ignores the labelled-bad prices.

The data are the shipped files themselves (geosched/data/aws_gpu_vms.csv, gcp_gpu_vms.csv: skypilot-catalog v7,
provenance in geosched/data/SOURCES.md and derivation-notes.txt)."""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import pytest

from geosched.core import catalog, pricecheck
from geosched.core.models import Pricing
from geosched.providers.plan import GangRequest, PricingMode, build_plan
from geosched.providers.refresh import current_offerings

FILES = {"aws": "aws_gpu_vms.csv", "gcp": "gcp_gpu_vms.csv"}


def shipped_rows() -> list[dict[str, str]]:
    out = []
    for provider, name in FILES.items():
        with resources.files("geosched.data").joinpath(name).open(encoding="utf-8") as fh:
            out.extend({"provider": provider, **row} for row in csv.DictReader(fh))
    return out


def price_row(row: dict[str, str]) -> pricecheck.PriceRow:
    def opt(text: str) -> float | None:
        return float(text) if text.strip() else None

    return pricecheck.PriceRow(row["provider"], row["instance_type"], row["region"], row["zone_id"],
                               opt(row["price_ondemand_usd_h"]), opt(row["price_spot_usd_h"]))


def test_every_finding_on_the_shipped_catalog_is_labelled_and_every_label_is_still_due() -> None:
    rows = shipped_rows()
    due: dict[tuple[str, str, str], set[str]] = {}
    for provider in FILES:
        mine = [price_row(r) for r in rows if r["provider"] == provider]
        for f in pricecheck.check(mine):
            due.setdefault(f.row.key, set()).add(f.flag)
    labelled = {price_row(r).key: set(r["flags"].split()) for r in rows if r["flags"].strip()}
    assert {k: sorted(v) for k, v in due.items() if labelled.get(k) != v} == {}
    assert sorted(k for k in labelled if k not in due) == []
    # The shipped data has each kind of anomaly the issue names (so the checks above are not vacuous).
    assert {flag for flags in due.values() for flag in flags} >= {"spot-above-ondemand", "no-ondemand",
                                                                   "not-launchable", "out-of-band"}


def test_every_label_says_why_and_cites_its_source() -> None:
    for row in shipped_rows():
        assert set(row["flags"].split()) <= set(pricecheck.FLAGS), row
        if row["flags"].strip():
            assert "source:" in row["note"], row
        else:
            assert not row["note"].strip(), row


def test_one_price_per_type_and_region_and_one_row_per_zone() -> None:
    findings = [f for p in FILES for f in pricecheck.check([price_row(r) for r in shipped_rows()
                                                            if r["provider"] == p])]
    assert [f.line() for f in findings if f.flag in ("split-price", "duplicate")] == []


def test_the_catalog_ignores_labelled_bad_prices() -> None:
    offers = catalog.offerings()
    assert offers
    # Spot above on-demand is a feed error: no spot market rather than a spot price dearer than on-demand.
    assert [o for o in offers if o.price_spot is not None and o.price_ondemand is not None
            and o.price_spot > o.price_ondemand] == []
    asia = catalog.offering_index()[("gcp", "a3-highgpu-8g", "asia-northeast1-b")]
    assert (asia.price_ondemand, asia.price_spot) == (45.7547, None)
    # Types ordinary projects cannot launch are not offered at all.
    assert not [o for o in offers if not pricecheck.launchable(o.provider, o.instance_type)]
    # No on-demand price is kept as none (not invented), and said.
    p5e = [o for o in offers if o.instance_type == "p5e.48xlarge"]
    assert p5e and all(o.price_ondemand is None and o.note and "no-ondemand" in o.note for o in p5e)
    # An out-of-band price is kept, said unverified.
    central = catalog.offering_index()[("gcp", "a3-highgpu-8g", "us-central1-a")]
    assert central.note is not None and "out-of-band" in central.note
    assert catalog.offering_index()[("gcp", "a2-highgpu-8g", "us-central1-a")].note is None


def test_provision_plans_offer_no_type_ordinary_projects_cannot_launch() -> None:
    offers = current_offerings(None, "gcp")
    plan = build_plan(GangRequest("H100", 8, 2, providers=("gcp",), pricing=PricingMode.AUTO), offers,
                      catalog.regions(), catalog.gpu_power())
    types = {c.instance_type for c in plan.candidates}
    assert "a3-highgpu-8g" in types
    assert not {t for t in types if t.startswith("a3-edgegpu")}
    # Nor a spot candidate in the zone whose feed spot price was above on-demand.
    assert not [c for c in plan.candidates if c.zone == "asia-northeast1-b" and c.pricing is Pricing.SPOT]


@pytest.mark.parametrize(("ondemand", "spot", "flag"), [(10.0, 12.0, "spot-above-ondemand"), (None, 3.0, "no-ondemand"),
                                                        (10.0, 3.0, None)])
def test_checks_on_single_rows(ondemand: float | None, spot: float | None, flag: str | None) -> None:
    row = pricecheck.PriceRow("aws", "p4d.24xlarge", "us-east-1", "use1-az1", ondemand, spot)
    assert [f.flag for f in pricecheck.check([row])] == ([flag] if flag else [])


def test_the_band_is_judged_against_the_siblings_median() -> None:
    # Four regions at 32-40 $/h (p4d.24xlarge's shipped range) and one at 90: that one is out of band.
    rows = [pricecheck.PriceRow("aws", "p4d.24xlarge", region, f"{region}-az1", price, None)
            for region, price in (("us-east-1", 32.77), ("us-west-2", 32.77), ("eu-west-1", 35.4),
                                  ("ap-northeast-1", 40.2), ("sa-east-1", 90.0))]
    assert [(f.row.region, f.flag) for f in pricecheck.check(rows)] == [("sa-east-1", "out-of-band")]
    # Two regions say nothing about which one is odd.
    assert pricecheck.check(rows[3:]) == []


def test_the_catalog_table_says_how_many_prices_are_flagged(tmp_path: Path) -> None:
    # The default table has no room for notes; its caption says how many shown prices are flagged and where why.
    from typer.testing import CliRunner

    from geosched.cli.main import app

    h100 = CliRunner().invoke(app, ["--home", str(tmp_path), "catalog", "--gpu", "H100:8", "--provider", "gcp"],
                              env={"COLUMNS": "200"})
    assert h100.exit_code == 0, h100.output
    assert "with a price the shipped catalog flags (-o wide: price_note)" in h100.output
    a100 = CliRunner().invoke(app, ["--home", str(tmp_path), "catalog", "--gpu", "A100:8", "--provider", "gcp"],
                              env={"COLUMNS": "200"})
    assert a100.exit_code == 0 and "flags" not in a100.output
