"""Spot interruption risk (geosched.policies.spotrisk): the score mapping, price volatility, the adjusted cost
and the rule for a missing signal."""

from __future__ import annotations

import json
import math
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from geosched import policies
from geosched.core.models import Fleet, Job, NetworkView, Placement, Pricing, Weights
from geosched.policies import spotrisk
from geosched.policies.spotrisk import Rework
from geosched.providers.aws import volatility_signals
from tests import handmade as testing

DAY = 24 * 3600.0


def test_placement_scores_map_to_a_falling_hazard_between_the_documented_anchors() -> None:
    hazards = [spotrisk.hazard_from_score(s) for s in range(1, 11)]
    assert hazards == sorted(hazards, reverse=True)
    # Score 10: the Spot Instance Advisor's best band, <5% a month; score 1: half the nodes gone within a day.
    assert 1 - math.exp(-hazards[-1] * spotrisk.HOURS_PER_MONTH) == pytest.approx(0.05)
    assert 1 - math.exp(-hazards[0] * 24) == pytest.approx(0.50)
    assert spotrisk.hazard_from_score(0) == hazards[0] and spotrisk.hazard_from_score(11) == hazards[-1]


def test_risk_adjusted_cost_charges_the_expected_rework_and_weight_zero_is_price_alone() -> None:
    risk = spotrisk.from_score(1, observed_at=None)
    rework = Rework(checkpoint_interval_h=1.0, restart_h=0.25)
    p_gang = 1 - math.exp(-4 * risk.hazard_per_hour)
    assert spotrisk.adjusted_usd_per_hour(40.0, risk, 4, rework) == pytest.approx(40.0 * (1 + p_gang * 0.75))
    assert spotrisk.adjusted_usd_per_hour(40.0, risk, 4, rework, weight=0.0) == 40.0
    # A larger gang is interrupted more often (any member stops it), a longer checkpoint interval loses more.
    assert spotrisk.risk_factor(risk, 8) > spotrisk.risk_factor(risk, 4)
    assert spotrisk.risk_factor(risk, 4, Rework(4.0, 0.25)) > spotrisk.risk_factor(risk, 4, rework)


def test_no_signal_is_never_zero_risk() -> None:
    unknown = spotrisk.resolve("aws")
    assert unknown.source == spotrisk.SOURCE_UNKNOWN and not unknown.known
    assert unknown.hazard_per_hour == spotrisk.hazard_from_score(1)
    gcp = spotrisk.resolve("gcp")
    assert gcp.source == f"gcp:{spotrisk.DOCUMENTED_DEFAULT}" and gcp.known
    assert 1 - math.exp(-gcp.hazard_per_hour * 24) == pytest.approx(0.15)
    score = spotrisk.from_score(8, 1.0)
    vol = spotrisk.from_volatility(spotrisk.Volatility(0.5, 3, 4), 1.0)
    assert spotrisk.resolve("aws", score, vol) is score and spotrisk.resolve("aws", None, vol) is vol


def test_volatility_is_time_weighted_over_the_window() -> None:
    start, end = 0.0, 7 * DAY
    # In force at the start (set a day before), changed half way: 1.0 for 3.5 d, 1.2 for 3.5 d.
    v = spotrisk.volatility([(-DAY, 1.0), (3.5 * DAY, 1.2)], start, end)
    assert v is not None and v.changes == 1
    assert v.cv == pytest.approx(0.1 / 1.1)
    flat = spotrisk.volatility([(-DAY, 2.0), (DAY, 2.0)], start, end)
    assert flat is not None and flat.cv == 0.0 and flat.changes == 0
    assert spotrisk.volatility([], start, end) is None
    assert spotrisk.score_from_volatility(spotrisk.Volatility(spotrisk.CV_WORST * 2, 9, 9)) == 1.0


def test_volatility_from_a_describe_spot_price_history_response() -> None:
    # DescribeSpotPriceHistory as boto3 parses it (EC2 API reference, API_DescribeSpotPriceHistory.html: items of
    # `SpotPriceHistory` with AvailabilityZone, InstanceType, ProductDescription, SpotPrice as a string, Timestamp),
    # newest first, with the last change before StartTime that EC2 includes.
    now = datetime(2026, 12, 3, 12, tzinfo=UTC).timestamp()
    start = now - 7 * DAY

    def item(zone: str, price: str, at: float) -> dict[str, object]:
        return {"AvailabilityZone": zone, "InstanceType": "p4d.24xlarge", "ProductDescription": "Linux/UNIX",
                "SpotPrice": price, "Timestamp": datetime.fromtimestamp(at, UTC)}

    response = {"SpotPriceHistory": [
        item("us-east-1a", "12.000000", start + 3.5 * DAY),
        item("us-east-1b", "8.000000", start + DAY),
        item("us-east-1a", "10.000000", start - 3600),
        item("us-east-1b", "8.000000", start - 3600),
    ], "NextToken": ""}
    signals = {s.zone: s for s in volatility_signals("us-east-1", response["SpotPriceHistory"],
                                                     {"us-east-1a": "use1-az6", "us-east-1b": "use1-az1"}, now)}
    assert set(signals) == {"use1-az6", "use1-az1"}
    assert signals["use1-az6"].value == pytest.approx(1.0 / 11.0) and signals["use1-az6"].changes == 1
    assert signals["use1-az1"].value == 0.0 and signals["use1-az1"].changes == 0
    assert all(s.signal == "volatility" and s.observed_at == now for s in signals.values())


def _spot_fleet() -> tuple[Fleet, NetworkView]:

    # Two zones of one region, two 8-GPU nodes each; spot 4.00 in za (placement score 1), 4.08 in zb (score 9).
    nodes = [testing.node(f"{z}-{i}", z, provider="aws", spot=price)
             for z, price in (("za", 4.00), ("zb", 4.08)) for i in range(2)]
    f = testing.fleet(nodes)
    return f, testing.network(f)


@pytest.mark.parametrize("policy", ["zone-first", "cheapest"])
def test_the_placement_cost_term_weighs_spot_prices_by_their_risk(policy: str) -> None:
    fleet, network = _spot_fleet()
    risks = {("aws", "custom", "za"): spotrisk.from_score(1, 1.0), ("aws", "custom", "zb"): spotrisk.from_score(9, 1.0)}
    job = Job("train", workers=2, gpus_per_worker=8, pricing=Pricing.SPOT)
    ctx = policies.PlacementContext(fleet, network, spot_risks=risks)

    def zone(weights: Weights, context: policies.PlacementContext = ctx) -> str:
        placed = policies.place(job, context, policy, weights)
        assert isinstance(placed, Placement)
        assert placed.score.usd_per_hour == pytest.approx(2 * (4.00 if placed.zones == ("za",) else 4.08))
        return placed.zones[0]

    assert zone(Weights(network=1.0, cost=1.0)) == "zb"  # the risk-adjusted cost
    assert zone(Weights(network=1.0, cost=1.0, spot_risk=0.0)) == "za"  # price alone
    # Without stored signals both are unknown (the same worst score): the cheaper one wins, at a charged risk.
    blind = policies.PlacementContext(fleet, network)
    assert zone(Weights(network=1.0, cost=1.0), blind) == "za"
    assert blind.spot_risk[0].source == spotrisk.SOURCE_UNKNOWN
    # An on-demand job is not touched.
    on_demand = policies.job_view(ctx, Job("od", 2, 8), Weights())
    assert on_demand.cost_gpu is on_demand.price_gpu


def test_place_from_the_store_charges_the_stored_risk_and_explains_it(tmp_path: Path) -> None:
    """`place --store --explain` on a spot job: the store's refreshed signal reaches the cost term, named with
    its source and age; `--risk-weight 0` charges the price alone."""
    from typer.testing import CliRunner

    from geosched.cli.main import app
    from geosched.core.default_fleet import default_fleet
    from geosched.providers.base import SpotSignal
    from geosched.providers.refresh import write_refresh
    from geosched.store.db import Store

    home = tmp_path / "home"
    with Store(home) as store:
        store.save_fleet(default_fleet())
        write_refresh(store, "aws", (), (), (), signals=[SpotSignal(
            "aws", "p5.48xlarge", "us-east-1", "use1-az4", "score", 2.0, time.time(), "aws:get-spot-placement-scores",
            target=4)])
    job = tmp_path / "spot.yaml"
    job.write_text("name: spot-64\nworkers: 8\ngpus_per_worker: 8\ngpu: H100\npricing: spot\nzones: [use1-az4]\n")

    def explain(*extra: str) -> str:
        result = CliRunner().invoke(app, ["--home", str(home), "place", str(job), "--store", "--explain", *extra],
                                    env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        return " ".join(result.output.split())

    charged = spotrisk.risk_factor(spotrisk.from_score(2, None), 8)
    shown = explain()
    assert ("spot risk in use1-az4 (p5.48xlarge): placement score 2/10 for 4 instances "
            "(aws:spot-placement-score, seen 0 h ago)") in shown
    assert f"charges {charged:.4f} x the spot price (--risk-weight 1)" in shown
    assert "charges 1.0000 x the spot price (--risk-weight 0)" in explain("--risk-weight", "0")
    # The job's own checkpoint interval and restart time set the rework: 4 h between checkpoints loses more.
    job.write_text(job.read_text() + "profile: {checkpoint_minutes: 240, restart_minutes: 30}\n")
    longer = spotrisk.risk_factor(spotrisk.from_score(2, None), 8, Rework(4.0, 0.5))
    assert longer > charged and f"charges {longer:.4f} x the spot price" in explain()


def test_a_journalled_request_resumes_with_its_risk_weighting() -> None:
    from geosched.providers.journal import read_request, request_json
    from geosched.providers.plan import GangRequest, PricingMode

    request = GangRequest("A100", 8, 2, PricingMode.AUTO, weights=Weights(network=0.0, cost=1.0, spot_risk=0.0),
                          rework=Rework(2.0, 0.5))
    again = read_request(request_json(request), "store", "g")
    assert again is not None and again.weights.spot_risk == 0.0 and again.rework == Rework(2.0, 0.5)
    # A gang journalled before risk weighting existed resumes with the defaults.
    old = {k: v for k, v in json.loads(request_json(request)).items() if k != "rework"}
    old["weights"] = {"cost": 1.0, "carbon": 0.0}
    legacy = read_request(json.dumps(old), "store", "g")
    assert legacy is not None
    assert legacy.weights.spot_risk == 1.0 and legacy.rework == Rework()


def test_config_files_set_the_spot_risk_weight() -> None:
    from geosched.core.errors import InputError
    from geosched.files.documents import parse_weights

    assert parse_weights({"spot_risk": 0}, "gitops.yaml", "weights").spot_risk == 0.0
    assert parse_weights({}, "gitops.yaml", "weights").spot_risk == 1.0
    with pytest.raises(InputError, match="spot_risk"):
        parse_weights({"spot_risk": -1}, "gitops.yaml", "weights")


@pytest.mark.parametrize("bad", ["abc", "", "NaN", "0", "-1.5", None])
def test_a_spot_price_that_is_not_a_price_is_skipped(bad: object) -> None:
    # The audit's input: a DescribeSpotPriceHistory item whose SpotPrice is not a decimal string raised ValueError
    # from float(); zero read as free capacity. The other zone's series stays.
    now = datetime(2026, 12, 3, 12, tzinfo=UTC).timestamp()
    history = [{"AvailabilityZone": z, "InstanceType": "p4d.24xlarge", "ProductDescription": "Linux/UNIX",
                "SpotPrice": price, "Timestamp": datetime.fromtimestamp(now - 3600, UTC)}
               for z, price in (("us-east-1a", bad), ("us-east-1b", "8.000000"))]
    signals = volatility_signals("us-east-1", history, {"us-east-1a": "use1-az6", "us-east-1b": "use1-az1"}, now)
    assert [s.zone for s in signals] == ["use1-az1"]
