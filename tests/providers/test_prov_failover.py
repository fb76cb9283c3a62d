"""Gang launch with failover, against the emulators: one zone per gang, zone -> region -> provider per error
class, retries in place, stalls, rollback of partial gangs, remembered refusals, parallel zones."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import pytest

from geosched.core.models import Pricing
from geosched.providers import journal, lifecycle
from geosched.providers.aws import AwsProvider
from geosched.providers.base import Budget, Instance, LaunchSpec, Provider
from geosched.providers.failover import Ttls
from geosched.providers.gang import Event, ProvisionResult, provision
from geosched.providers.gcp import GcpProvider
from geosched.providers.lifecycle import LifecycleSettings
from geosched.providers.plan import GangRequest, PricingMode
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, GceDouble, GceFault, MotoServer
from tests.providers.prov_support import (
    AWS_REGIONS,
    GCP_REGIONS,
    aws_alive,
    fast_settings,
    gce_alive,
    moto_client,
)

pytestmark = pytest.mark.integration

BOTH = ("gcp", "aws")


def request(nodes: int = 4, providers: Sequence[str] = BOTH, pricing: PricingMode = PricingMode.ON_DEMAND
            ) -> GangRequest:
    return GangRequest("A100", 8, nodes, pricing, tuple(providers), AWS_REGIONS + GCP_REGIONS)


def trail(result: ProvisionResult) -> list[tuple[str, str]]:
    return [(a.zone, a.outcome if a.error_kind is None else f"{a.outcome}:{a.error_kind}") for a in result.attempts]


def eventually(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)  # real sleep: polling a real moto server between checks
    return True


def cleanup(store: Store, providers: Mapping[str, Provider], gang: str) -> None:
    lifecycle.down(store, providers, gang, fast_settings().lifecycle)


def test_gang_lands_in_one_zone_and_joins_the_fleet(aws: AwsProvider, moto: MotoServer, store: Store) -> None:
    providers: dict[str, Provider] = {"aws": aws}
    result = provision(request(4, ("aws",)), providers, store, fast_settings())
    assert result.ok, result.message
    assert trail(result) == [("use1-az1", "launched")]
    alive = aws_alive(moto.url, result.gang)
    assert len(alive) == 4 and set(alive.values()) == {"us-east-1b"}
    assert {n.provider_id for n in result.nodes} == set(alive)
    node = result.nodes[0]
    assert (node.provider, node.zone, node.gpu, node.gpus) == ("aws", "use1-az1", "A100", 8)
    assert node.price_ondemand == pytest.approx(32.7726)
    # The machine runs in us-east-1b, this account's name for use1-az1 (DescribeAvailabilityZones); it is no
    # Kubernetes node yet, so it claims no zone label (use1-az1 there would match no real node).
    assert "topology.kubernetes.io/zone" not in node.labels
    assert result.api_calls >= 2
    cleanup(store, providers, result.gang)
    assert aws_alive(moto.url, result.gang) == {}


GCE_CASES = {
    # fault in europe-west4-a -> what is tried next
    "capacity blocks the zone": (GceFault.zone_resource_pool_exhausted(), [
        ("europe-west4-a", "failed:capacity"), ("europe-west4-b", "launched")]),
    "unsupported blocks the zone": (GceFault.unsupported_operation(), [
        ("europe-west4-a", "failed:unsupported"), ("europe-west4-b", "launched")]),
    "regional quota blocks the region": (GceFault.quota_exceeded("NVIDIA_A100_GPUS", 0), [
        ("europe-west4-a", "failed:quota"), ("europe-west4-b", "skipped"), ("us-central1-a", "launched")]),
    "global quota blocks the provider": (GceFault.quota_exceeded("GPUS_ALL_REGIONS", 0), [
        ("europe-west4-a", "failed:quota")] + [(z, "skipped") for z in (
            "europe-west4-b", "us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")]
        + [("use1-az1", "launched")]),
    "auth blocks the provider": (GceFault.permission_denied(), [
        ("europe-west4-a", "failed:auth")] + [(z, "skipped") for z in (
            "europe-west4-b", "us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")]
        + [("use1-az1", "launched")]),
}


@pytest.mark.parametrize("case", list(GCE_CASES))
def test_failover_order_follows_the_error_class(case: str, aws: AwsProvider, gcp: GcpProvider, gce: GceDouble,
                                                moto: MotoServer, store: Store) -> None:
    fault, expected = GCE_CASES[case]
    gce.inject(fault, zone="europe-west4-a", method="instances.insert", times="always")
    providers: dict[str, Provider] = {"gcp": gcp, "aws": aws}
    result = provision(request(2), providers, store, fast_settings())
    assert result.ok, result.message
    assert trail(result) == expected
    winner = expected[-1][0]
    assert {n.zone for n in result.nodes} == {winner}
    everywhere = list(gce_alive(gce, result.gang).values()) + list(aws_alive(moto.url, result.gang).values())
    assert len(everywhere) == 2  # nothing left behind in the zones that failed
    cleanup(store, providers, result.gang)


AWS_CASES = {
    # spot plan order: use1-az6 (us-east-1a), use2-az2, use1-az1, use2-az1, use1-az2, then GCP
    "capacity blocks the zone": (Ec2Fault.insufficient_instance_capacity(), [
        ("use1-az6", "failed:capacity"), ("use2-az2", "launched")]),
    "vCPU quota blocks the region": (Ec2Fault.vcpu_limit_exceeded(), [
        ("use1-az6", "failed:quota"), ("use2-az2", "launched")]),
    "auth blocks the provider": (Ec2Fault.auth_failure(), [
        ("use1-az6", "failed:auth"), ("use2-az2", "skipped"), ("use1-az1", "skipped"), ("use2-az1", "skipped"),
        ("use1-az2", "skipped"), ("us-central1-a", "launched")]),
}


@pytest.mark.parametrize("case", list(AWS_CASES))
def test_aws_spot_failover(case: str, aws: AwsProvider, gcp: GcpProvider, gce: GceDouble, proxy: Ec2FaultProxy,
                           moto: MotoServer, store: Store) -> None:
    fault, expected = AWS_CASES[case]
    proxy.inject(fault, zone="us-east-1a", action="RunInstances", times="always")
    providers: dict[str, Provider] = {"gcp": gcp, "aws": aws}
    result = provision(request(2, pricing=PricingMode.SPOT), providers, store, fast_settings())
    assert result.ok, result.message
    assert trail(result) == expected
    assert all(n.price_spot is not None for n in result.nodes)
    if case == "vCPU quota blocks the region":
        assert ("use1-az1", "skipped") not in trail(result)  # the winner came before us-east-1's next zone
        plan_skip = provision(request(2, ("aws",), PricingMode.SPOT), {"aws": aws}, store, fast_settings())
        assert ("use1-az6", "skipped") in trail(plan_skip) and ("use1-az1", "skipped") in trail(plan_skip)
        cleanup(store, providers, plan_skip.gang)
    cleanup(store, providers, result.gang)


def test_throttling_and_5xx_are_retried_in_place(aws: AwsProvider, gcp: GcpProvider, gce: GceDouble,
                                                 proxy: Ec2FaultProxy, store: Store) -> None:
    proxy.inject(Ec2Fault.request_limit_exceeded(), zone="us-east-1b", action="RunInstances", times=2)
    proxy.inject(Ec2Fault.internal_error(), zone="us-east-1b", action="RunInstances", times=1)
    events: list[Event] = []
    result = provision(request(2, ("aws",)), {"aws": aws}, store, fast_settings(), observer=events.append)
    assert result.ok and trail(result) == [("use1-az1", "launched")]
    assert result.attempts[0].retries == 3
    assert [e.error_kind for e in events if e.kind == "retry"] == ["rate", "rate", "transient"]
    assert proxy.call_count("RunInstances", zone="us-east-1b") == 4
    cleanup(store, {"aws": aws}, result.gang)

    gce.inject(GceFault.rate_limited(), zone="europe-west4-a", method="instances.insert")
    gce.inject(GceFault.resource_operation_rate_exceeded(), zone="europe-west4-a", method="instances.insert")
    gce.inject(GceFault.unavailable(), zone="europe-west4-a", method="instances.insert")
    result = provision(request(2, ("gcp",)), {"gcp": gcp}, store, fast_settings())
    assert result.ok and trail(result) == [("europe-west4-a", "launched")]
    assert result.attempts[0].retries == 3
    assert len(gce_alive(gce, result.gang)) == 2
    cleanup(store, {"gcp": gcp}, result.gang)


def test_retries_that_run_out_move_on(aws: AwsProvider, proxy: Ec2FaultProxy, store: Store) -> None:
    proxy.inject(Ec2Fault.request_limit_exceeded(), zone="us-east-1b", action="RunInstances", times="always")
    result = provision(request(2, ("aws",)), {"aws": aws}, store, fast_settings())
    assert trail(result) == [("use1-az1", "failed:rate"), ("use1-az2", "launched")]
    assert result.attempts[0].retries == 3  # four attempts
    cleanup(store, {"aws": aws}, result.gang)


def test_a_stalled_zone_times_out_and_failover_continues(aws: AwsProvider, gcp: GcpProvider, gce: GceDouble,
                                                         proxy: Ec2FaultProxy, moto: MotoServer,
                                                         store: Store) -> None:
    # The stall is far longer than the call timeout, and the timeout far longer than a healthy call: once, in a full
    # CI run, the next zone's healthy RunInstances took more than the 1 s timeout this test used to give it.
    proxy.inject(Ec2Fault.stall(8.0), zone="us-east-1b", action="RunInstances")
    # settle_s: how long a stalled request may still land; intents stay open that long.
    settings = fast_settings(zone_timeout_s=3.5, call_timeout_s=3.0,
                             lifecycle=LifecycleSettings(settle_s=10.0, poll_s=0.05, budget_s=30.0, call_timeout_s=5.0))
    started = time.monotonic()
    result = provision(request(2, ("aws",)), {"aws": aws}, store, settings)
    assert time.monotonic() - started < 8.0  # did not sit out the stall
    assert trail(result) == [("use1-az1", "failed:stall"), ("use1-az2", "launched")]
    # The stalled request still reaches EC2 and launches, after we moved on: its intents stay open...
    assert len(journal.instances(store, gang=result.gang, states=("intent",))) == 2
    # A generous deadline (it returns as soon as the machines show): once, in a full CI run, 8 s was not enough.
    assert eventually(lambda: len(aws_alive(moto.url, result.gang)) == 4, 20.0), proxy.calls
    # ...so the next reconcile finds those machines, records and terminates them, and keeps the gang.
    report = lifecycle.reconcile(store, {"aws": aws}, result.gang, "keep", settings.lifecycle)
    assert report.terminated == 2 and report.alive_in_keeper == 2
    alive = aws_alive(moto.url, result.gang)
    assert set(alive.values()) == {"us-east-1c"}
    assert {r.provider_id for r in journal.instances(store, gang=result.gang, states=("launched",))} == set(alive)
    cleanup(store, {"aws": aws}, result.gang)

    gce.inject(GceFault.stall(8.0), zone="europe-west4-a", method="instances.insert")
    result = provision(request(2, ("gcp",)), {"gcp": gcp}, store, settings)
    assert trail(result)[:2] == [("europe-west4-a", "failed:stall"), ("europe-west4-b", "launched")]
    assert len(journal.instances(store, attempt_id=result.attempts[0].id, states=("intent",))) == 2
    assert eventually(lambda: len(gce_alive(gce, result.gang)) == 3, 15.0)  # the stalled insert landed
    lifecycle.reconcile(store, {"gcp": gcp}, result.gang, "keep", settings.lifecycle)
    assert set(gce_alive(gce, result.gang).values()) == {"europe-west4-b"}
    cleanup(store, {"gcp": gcp}, result.gang)


def test_partial_gangs_are_rolled_back(aws: AwsProvider, gcp: GcpProvider, gce: GceDouble, moto: MotoServer,
                                       store: Store) -> None:
    gce.set_capacity("europe-west4-a", "a2-highgpu-8g", 3)
    result = provision(request(4, ("gcp",)), {"gcp": gcp}, store, fast_settings())
    assert trail(result) == [("europe-west4-a", "rolled-back:capacity"), ("europe-west4-b", "launched")]
    assert set(gce_alive(gce, result.gang).values()) == {"europe-west4-b"}
    rolled = journal.instances(store, attempt_id=result.attempts[0].id)
    assert sorted((r.state, r.note) for r in rolled) == [("terminated", "launch refused")] + [
        ("terminated", "rollback")] * 3
    cleanup(store, {"gcp": gcp}, result.gang)

    class DiesOnBoot(AwsProvider):
        """EC2 accepts the gang, then one node dies while starting (real capacity loss in the emulator)."""

        def launch(self, spec: LaunchSpec, budget: Budget) -> tuple[Instance, ...]:
            launched = super().launch(spec, budget)
            if spec.zone == "use1-az1":
                moto_client(moto.url).terminate_instances(InstanceIds=[launched[0].provider_id])
            return launched

    dies = DiesOnBoot(aws.settings, aws._session)
    result = provision(request(3, ("aws",)), {"aws": dies}, store, fast_settings())
    assert trail(result) == [("use1-az1", "rolled-back:capacity"), ("use1-az2", "launched")]
    assert result.attempts[0].error_code == "PartialGang"
    assert set(aws_alive(moto.url, result.gang).values()) == {"us-east-1c"}
    cleanup(store, {"aws": dies}, result.gang)


def test_refusals_are_remembered_for_their_ttl(aws: AwsProvider, proxy: Ec2FaultProxy, store: Store) -> None:
    proxy.inject(Ec2Fault.insufficient_instance_capacity(), zone="us-east-1b", action="RunInstances")
    settings = fast_settings(ttls=Ttls(capacity_s=1.0))
    first = provision(request(1, ("aws",)), {"aws": aws}, store, settings)
    second = provision(request(1, ("aws",)), {"aws": aws}, store, settings)
    assert trail(second)[0] == ("use1-az1", "skipped") and "capacity" in (second.attempts[0].message or "")
    time.sleep(1.1)  # real sleep: the refusal's TTL runs on the journal's wall clock
    third = provision(request(1, ("aws",)), {"aws": aws}, store, settings)
    assert trail(third) == [("use1-az1", "launched")]
    for r in (first, second, third):
        cleanup(store, {"aws": aws}, r.gang)


def test_parallel_zones_keep_the_first_complete_gang(aws: AwsProvider, gcp: GcpProvider, gce: GceDouble,
                                                     moto: MotoServer, store: Store) -> None:
    gce.operation_delay_s = 0.4
    gce.inject(GceFault.zone_resource_pool_exhausted(), zone="europe-west4-a", times="always")
    providers: dict[str, Provider] = {"gcp": gcp, "aws": aws}
    result = provision(request(3), providers, store, fast_settings(parallel=3))
    assert result.ok, result.message
    outcomes = dict(trail(result))
    assert outcomes["europe-west4-a"] == "failed:capacity"
    winners = [z for z, o in outcomes.items() if o == "launched"]
    assert len(winners) == 1
    alive = list(gce_alive(gce, result.gang).values()) + list(aws_alive(moto.url, result.gang).values())
    assert alive == [winners[0]] * 3  # the other zones' machines were rolled back or never launched
    assert all(o in ("launched", "cancelled", "failed:capacity") for o in outcomes.values())
    cleanup(store, providers, result.gang)


def test_no_candidates_fails_cleanly(aws: AwsProvider, store: Store) -> None:
    result = provision(replace(request(2, ("aws",)), gpu="B200"), {"aws": aws}, store, fast_settings())
    assert not result.ok and result.state == "failed" and result.attempts == ()
    assert journal.gang_record(store, result.gang) is not None


def test_spot_gangs_are_priced_at_spot(aws: AwsProvider, store: Store) -> None:
    result = provision(request(1, ("aws",), PricingMode.SPOT), {"aws": aws}, store, fast_settings())
    assert result.candidate is not None and result.candidate.pricing is Pricing.SPOT
    assert result.nodes[0].price_spot == pytest.approx(5.0933) and result.nodes[0].price_ondemand is None
    cleanup(store, {"aws": aws}, result.gang)
