"""Spot interruption risk (geosched.policies.spotrisk): the score mapping, price volatility, the adjusted cost
and the rule for a missing signal."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from geosched.policies import spotrisk
from geosched.policies.spotrisk import Rework
from geosched.providers.aws import volatility_signals

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
    assert gcp.source == spotrisk.SOURCE_GCP_DEFAULT and gcp.known
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
