"""The pure core of provisioning: the ordered plan, the failover table, the retry policy."""

from __future__ import annotations

import pytest

from geosched.core import catalog
from geosched.core.models import Offering, Pricing, Weights
from geosched.core.retry import RetryPolicy
from geosched.providers.base import (
    AuthError,
    Budget,
    CapacityError,
    QuotaError,
    RateError,
    StallError,
    TransientError,
    UnsupportedError,
    redact,
)
from geosched.providers.failover import Ttls, blocks_for, retry_in_place
from geosched.providers.journal import read_request, request_json
from geosched.providers.plan import Block, GangRequest, PricingMode, build_plan
from geosched.providers.retry import call
from tests.clock import FakeClock


def offer(zone: str, price: float, spot: float | None = None, region: str = "us-east-1", provider: str = "aws",
          gpu: str = "A100", gpus: int = 8, instance_type: str = "p4d.24xlarge") -> Offering:
    return Offering(provider, instance_type, gpu, gpus, 96, 1152, region, zone, price, spot)


def plan_zones(request: GangRequest, offers: list[Offering], blocks: list[Block] | None = None) -> list[str]:
    plan = build_plan(request, offers, catalog.regions(), catalog.gpu_power(), blocks or [])
    return [f"{c.zone}/{c.pricing.value}" for c in plan.candidates]


def test_plan_ranks_by_gang_price_and_keeps_only_offerings_that_fit() -> None:
    offers = [offer("z-b", 30.0), offer("z-a", 30.0), offer("z-c", 20.0), offer("z-d", 10.0, gpus=4),
              offer("z-e", 5.0, gpu="H100"), offer("z-f", None, 3.0)]  # type: ignore[arg-type]
    request = GangRequest("A100", 8, 4)
    assert plan_zones(request, offers) == ["z-c/on-demand", "z-a/on-demand", "z-b/on-demand"]
    plan = build_plan(request, offers, catalog.regions(), catalog.gpu_power())
    assert plan.candidates[0].usd_per_hour == pytest.approx(80.0)
    assert plan.candidates[0].gco2e_per_hour is not None and plan.candidates[0].gco2e_per_hour > 0


def test_auto_puts_both_markets_in_one_ranking() -> None:
    offers = [offer("z-a", 30.0, 9.0), offer("z-b", 20.0, 12.0)]
    assert plan_zones(GangRequest("A100", 8, 2, PricingMode.AUTO), offers) == [
        "z-a/spot", "z-b/spot", "z-b/on-demand", "z-a/on-demand"]
    assert plan_zones(GangRequest("A100", 8, 2, PricingMode.SPOT), offers) == ["z-a/spot", "z-b/spot"]


def test_carbon_weight_prefers_the_cleaner_grid() -> None:
    dirty = offer("use1-az1", 30.0, region="us-east-1")  # SERC grid
    clean = offer("eun1-az1", 33.0, region="eu-north-1")  # Swedish grid
    cheap_first = GangRequest("A100", 8, 2)
    green_first = GangRequest("A100", 8, 2, weights=Weights(network=0.0, cost=1.0, carbon=1.0))
    assert plan_zones(cheap_first, [dirty, clean])[0].startswith("use1-az1")
    assert plan_zones(green_first, [dirty, clean])[0].startswith("eun1-az1")


def test_blocks_skip_candidates_and_say_why() -> None:
    offers = [offer("z-a", 10.0), offer("z-b", 20.0), offer("z-c", 30.0, region="us-east-2")]
    blocks = [Block("aws", "us-east-1", "z-a", "p4d.24xlarge", Pricing.ON_DEMAND, "no capacity", "capacity", 60.0)]
    plan = build_plan(GangRequest("A100", 8, 2), offers, catalog.regions(), catalog.gpu_power(), blocks)
    assert [c.zone for c in plan.candidates] == ["z-b", "z-c"]
    assert plan.skipped[0].candidate.zone == "z-a" and "capacity (zone z-a)" in plan.skipped[0].reason


def test_request_round_trips_through_its_document() -> None:
    request = GangRequest("H100", 8, 16, PricingMode.AUTO, ("aws",), ("us-east-1",), (), ("p5.48xlarge",),
                          Weights(0.0, 0.5, 2.0))
    assert read_request(request_json(request), "store", "g") == request


CANDIDATE = build_plan(GangRequest("A100", 8, 2), [offer("z-a", 10.0)], catalog.regions(),
                       catalog.gpu_power()).candidates[0]


@pytest.mark.parametrize(("error", "scope", "remembered", "in_place"), [
    (CapacityError("x"), "zone", True, False),
    (QuotaError("x"), "region", True, False),
    (QuotaError("x", all_regions=True), "provider", True, False),
    (UnsupportedError("x"), "zone", True, False),
    (UnsupportedError("x", region_wide=True), "region", True, False),
    (AuthError("x"), "provider", False, False),
    (StallError("x"), "zone", False, False),
    (RateError("x"), "zone", False, True),
    (TransientError("x"), "zone", False, True),
])
def test_failover_table(error: Exception, scope: str, remembered: bool, in_place: bool) -> None:
    assert isinstance(error, (CapacityError, QuotaError, UnsupportedError, AuthError, StallError, RateError,
                              TransientError))
    (block,) = blocks_for(error, CANDIDATE, 2, Ttls())
    assert block.scope == scope
    assert (block.ttl_s is not None) is remembered
    assert retry_in_place(error) is in_place
    assert block.covers(CANDIDATE, 2)
    assert block.covers(CANDIDATE, 1) is not isinstance(error, CapacityError)


def test_capacity_blocks_only_that_market_quota_only_that_market_unsupported_both() -> None:
    spot = build_plan(GangRequest("A100", 8, 2, PricingMode.SPOT), [offer("z-a", 10.0, 3.0)], catalog.regions(),
                      catalog.gpu_power()).candidates[0]
    assert not blocks_for(CapacityError("x"), CANDIDATE, 2)[0].covers(spot, 2)
    assert not blocks_for(QuotaError("x"), CANDIDATE, 2)[0].covers(spot, 2)
    assert blocks_for(UnsupportedError("x"), CANDIDATE, 2)[0].covers(spot, 2)


def test_retry_in_place_backs_off_and_gives_up() -> None:
    sleeps: list[float] = []
    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise RateError("slow down", code="RequestLimitExceeded")
        return "ok"

    policy = RetryPolicy(attempts=5, initial_s=0.5, max_s=4.0)
    assert call(flaky, Budget(60.0), policy, sleep=sleeps.append) == "ok"
    assert len(sleeps) == 2 and all(0 <= s <= 4.0 for s in sleeps)

    def always() -> str:
        raise TransientError("500")

    with pytest.raises(TransientError):
        call(always, Budget(60.0), policy, sleep=sleeps.append)
    assert len(sleeps) == 2 + 4  # five attempts, four waits

    with pytest.raises(CapacityError):  # not retried in place
        call(lambda: (_ for _ in ()).throw(CapacityError("full")), Budget(60.0), policy, sleep=sleeps.append)
    assert len(sleeps) == 6


def test_retries_stop_at_the_deadline() -> None:
    clock = FakeClock()  # the budget's time and the backoff's sleeps on one fake clock: no real waiting
    budget = Budget(0.3, clock=clock)
    tries = {"n": 0}

    def always() -> str:
        tries["n"] += 1
        raise RateError("slow down")

    with pytest.raises(RateError):
        call(always, budget, RetryPolicy(attempts=1000, initial_s=0.05, max_s=0.1), sleep=clock.sleep)
    assert 3 <= tries["n"] < 50 and budget.remaining() >= 0  # no retry was started that would sleep past it


def test_messages_lose_secrets() -> None:
    text = ("User: arn:aws:iam::123456789012:user/alice is not authorized. Encoded authorization failure message: "
            "AbCdEf123== key AKIAABCDEFGHIJKLMNOP token=abc123")
    clean = redact(text)
    assert "123456789012" not in clean and "AbCdEf123" not in clean and "AKIA" not in clean
    assert "abc123" not in clean and "not authorized" in clean
    assert len(redact("x" * 1000)) <= 300
