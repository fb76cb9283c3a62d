"""Spot with eyes open (issue 15, item 5): `catalog refresh` reads AWS Spot placement scores and spot price
volatility through real boto3 (moto behind the fault proxy, which answers GetSpotPlacementScores and the spot
price history in the EC2 API reference's shapes), and `provision --auto` ranks spot by the risk-adjusted cost."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from geosched.policies import spotrisk
from geosched.providers.aws import AwsProvider
from geosched.providers.refresh import refresh_catalog, spot_risks
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, MotoServer
from tests.providers.prov_support import AWS_ZONES, aws_alive
from tests.providers.test_prov_cli import home, run  # noqa: F401  (the CLI fixture and runner)

pytestmark = pytest.mark.integration

HOUR = 3600.0


def spot_market(proxy: Ec2FaultProxy, now: float) -> None:
    """p4d.24xlarge spot in us-east-1: use1-az1 the cheapest (4.00) but with a placement score of 1, use1-az2 2%
    dearer (4.08) with a score of 9, use1-az6 dearer still (4.60) with no score and a moving price."""
    az = AWS_ZONES
    proxy.set_spot_price_history("us-east-1", [
        (az["use1-az1"], "p4d.24xlarge", now - 30 * 24 * HOUR, 4.00),
        (az["use1-az2"], "p4d.24xlarge", now - 30 * 24 * HOUR, 4.08),
        (az["use1-az6"], "p4d.24xlarge", now - 30 * 24 * HOUR, 4.00),
        (az["use1-az6"], "p4d.24xlarge", now - 84 * HOUR, 4.60),
    ])
    proxy.set_placement_score("us-east-1", "use1-az1", 1, instance_type="p4d.24xlarge")
    proxy.set_placement_score("us-east-1", "use1-az2", 9, instance_type="p4d.24xlarge")


def test_refresh_stores_placement_scores_and_volatility_with_their_time(aws: AwsProvider, proxy: Ec2FaultProxy,
                                                                        store: Store) -> None:
    before = time.time()
    spot_market(proxy, before)
    result = refresh_catalog(aws, store, regions=("us-east-1",))
    after = time.time()
    assert not result.errors and result.signals > 0
    assert proxy.call_count("GetSpotPlacementScores") >= 1
    rows = store.db.execute("SELECT zone, signal, value, target, observed_at, source FROM spot_signals WHERE "
                            "instance_type = 'p4d.24xlarge' ORDER BY zone, signal").fetchall()
    scores = {z: (v, t, at, src) for z, sig, v, t, at, src in rows if sig == "score"}
    assert {z: v for z, (v, *_) in scores.items()} == {"use1-az1": 1.0, "use1-az2": 9.0}
    assert all(t == 4 and before <= at <= after and src == "aws:get-spot-placement-scores"
               for _, t, at, src in scores.values())
    vol = {z: v for z, sig, v, *_ in rows if sig == "volatility"}
    assert vol["use1-az1"] == 0.0 and vol["use1-az2"] == 0.0
    # use1-az6: 4.00 for 3.5 days of the 7-day window, then 4.60: cv = 0.3 / 4.3.
    assert vol["use1-az6"] == pytest.approx(0.3 / 4.3, rel=1e-3)

    risks = spot_risks(store, "aws")
    assert risks[("p4d.24xlarge", "use1-az1")].source == spotrisk.SOURCE_SCORE
    assert risks[("p4d.24xlarge", "use1-az1")].hazard_per_hour == spotrisk.hazard_from_score(1)
    assert before <= (risks[("p4d.24xlarge", "use1-az2")].observed_at or 0) <= after
    assert risks[("p4d.24xlarge", "use1-az6")].source == spotrisk.SOURCE_VOLATILITY
    assert "cv 0.070, 1 changes" in risks[("p4d.24xlarge", "use1-az6")].detail


def test_auto_prefers_a_slightly_dearer_spot_zone_with_a_high_placement_score(
        home: Path, proxy: Ec2FaultProxy, moto: MotoServer) -> None:  # noqa: F811
    spot_market(proxy, time.time())
    refreshed = run(home, "catalog", "refresh", "--provider", "aws", "--regions", "us-east-1")
    assert refreshed.exit_code == 0 and "spot risk signals" in refreshed.output, refreshed.output
    args = ("provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--regions", "us-east-1", "--auto")

    dry = run(home, *args, "--dry-run", "-o", "json")
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.output)["plan"]
    first, second = plan[0], next(c for c in plan if c["zone"] == "use1-az1" and c["pricing"] == "spot")
    assert (first["zone"], first["pricing"]) == ("use1-az2", "spot")
    assert first["usd_per_hour"] == pytest.approx(2 * 4.08) and second["usd_per_hour"] == pytest.approx(2 * 4.00)
    assert first["adjusted_usd_per_hour"] < second["adjusted_usd_per_hour"]
    assert second["risk"]["source"] == spotrisk.SOURCE_SCORE and "placement score 1/10" in second["risk"]["detail"]
    assert 0 <= second["risk"]["age_s"] < 600
    # `geosched catalog` shows the same risk beside the spot price (and CSV keeps it flat).
    from typer.testing import CliRunner

    from geosched.cli.main import app as geosched_app

    shown = CliRunner().invoke(geosched_app, ["--home", str(home), "catalog", "--gpu", "A100:8", "--provider", "aws",
                                              "--region", "us-east-1", "-o", "json"])
    listed = {r["zone"]: r for r in json.loads(shown.output)["items"] if r["instance_type"] == "p4d.24xlarge"}
    assert listed["use1-az1"]["spot_risk_source"] == spotrisk.SOURCE_SCORE
    assert listed["use1-az1"]["spot_risk_detail"] == second["risk"]["detail"]
    assert listed["use1-az6"]["spot_risk_source"] == spotrisk.SOURCE_VOLATILITY
    csv = CliRunner().invoke(geosched_app, ["--home", str(home), "catalog", "--gpu", "A100:8", "-o", "csv"])
    assert csv.exit_code == 0 and "spot_risk_source" in csv.output.splitlines()[0]

    # Risk weight 0: price alone, the cheapest spot zone first.
    cheapest = json.loads(run(home, *args, "--risk-weight", "0", "--dry-run", "-o", "json").output)["plan"][0]
    assert (cheapest["zone"], cheapest["pricing"]) == ("use1-az1", "spot")
    assert cheapest["adjusted_usd_per_hour"] == pytest.approx(cheapest["usd_per_hour"])

    launched = run(home, *args, "--yes", "--name", "gang-risk0001", "-o", "json")
    assert launched.exit_code == 0, launched.output
    doc = json.loads(launched.output)
    assert (doc["chosen"]["zone"], doc["chosen"]["pricing"]) == ("use1-az2", "spot")
    assert set(aws_alive(moto.url, "gang-risk0001")) == {n["provider_id"] for n in doc["nodes"]}
    assert run(home, "down", "gang-risk0001", "--yes").exit_code == 0
    assert aws_alive(moto.url, "gang-risk0001") == {}


def test_dry_run_without_credentials_uses_the_stored_signals_and_names_their_source(
        home: Path, proxy: Ec2FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    args = ("provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws,gcp", "--auto", "--dry-run")
    # Nothing stored yet: the risk is unknown, priced at the worst score, and the plan says so.
    fresh = run(home, *args)
    assert fresh.exit_code == 0, fresh.output
    assert "spot risk unknown for aws (no stored signal)" in " ".join(fresh.output.split())
    doc = json.loads(run(home, *args, "-o", "json").output)
    aws_spot = [c for c in doc["plan"] if c["provider"] == "aws" and c["pricing"] == "spot"]
    gcp_spot = [c for c in doc["plan"] if c["provider"] == "gcp" and c["pricing"] == "spot"]
    assert aws_spot and all(c["risk"]["source"] == "unknown" and c["adjusted_usd_per_hour"] > c["usd_per_hour"]
                            for c in aws_spot)
    assert gcp_spot and all(c["risk"]["source"] == "gcp:documented-default" for c in gcp_spot)

    spot_market(proxy, time.time())
    assert run(home, "catalog", "refresh", "--provider", "aws", "--regions", "us-east-1").exit_code == 0
    calls = len(proxy.calls)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home.parent / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home.parent / "no-config"))
    doc = json.loads(run(home, *args, "-o", "json").output)
    assert len(proxy.calls) == calls  # no API call
    by_zone = {c["zone"]: c for c in doc["plan"] if c["pricing"] == "spot" and c["instance_type"] == "p4d.24xlarge"}
    assert by_zone["use1-az1"]["risk"]["source"] == spotrisk.SOURCE_SCORE
    assert by_zone["use1-az6"]["risk"]["source"] == spotrisk.SOURCE_VOLATILITY
    table = run(home, *args)
    assert table.exit_code == 0, table.output
    flat = " ".join(table.output.split())
    # The note under the table (the table's cells wrap with the terminal's width; the JSON above has every
    # source in full): what the adjusted price charges, and us-east-2 (not refreshed) still unknown, GCP not.
    assert "--risk-weight 0 ranks by price alone" in flat
    assert "spot risk unknown for aws (no stored signal)" in flat and "unknown for aws, gcp" not in flat


def test_an_account_denied_placement_scores_keeps_the_volatility_and_says_so(
        aws: AwsProvider, proxy: Ec2FaultProxy, store: Store) -> None:
    spot_market(proxy, time.time())
    proxy.inject(Ec2Fault.unauthorized_operation(), action="GetSpotPlacementScores", times="always")
    result = refresh_catalog(aws, store, regions=("us-east-1",))
    assert result.regions == ("us-east-1",)  # offerings and prices kept
    assert [e.split(":")[:3] for e in result.errors] == [["us-east-1", " spot placement scores", " auth"]]
    risks = spot_risks(store, "aws")
    assert risks[("p4d.24xlarge", "use1-az1")].source == spotrisk.SOURCE_VOLATILITY
    assert store.db.execute("SELECT COUNT(*) FROM spot_signals WHERE signal = 'score'").fetchone()[0] == 0
