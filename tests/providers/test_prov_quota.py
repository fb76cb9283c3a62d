"""Quota pre-checks, against the emulators over real HTTP.

AWS: the Service Quotas vCPU limit of the family minus the vCPUs running and pending instances of the same
quota class and market hold (DescribeInstances + DescribeInstanceTypes). moto 5.2 answers Service Quotas only
for VPC quotas (every EC2 code is NoSuchResourceException), so the unreadable-limit path is tested against
moto as it is, and the usage arithmetic against a limit the fault proxy answers for moto.
GCP: the region's GPU metric, then GPUS_ALL_REGIONS from projects.get (the GCE double's project resource); a
gang over the global limit is a global QuotaError that blocks every GCP region.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest
from google.cloud import compute_v1
from google.protobuf import json_format  # type: ignore[import-untyped]

from geosched.core.models import Pricing
from geosched.providers import lifecycle
from geosched.providers.aws import AwsProvider, quota_class, vcpu_usage
from geosched.providers.base import Budget, CapacityError, LaunchSpec, Provider, QuotaError
from geosched.providers.gang import provision
from geosched.providers.gcp import GcpProvider
from geosched.providers.plan import GangRequest, PricingMode
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, GceDouble, GceFault, MotoServer
from tests.providers.prov_support import PROJECT, fast_settings, moto_client

pytestmark = pytest.mark.integration

P_ON_DEMAND = "L-417A185B"  # Running On-Demand P instances (vCPUs)


def aws_spec(token: str, count: int, instance_type: str = "p4d.24xlarge", vcpus: float = 96,
             pricing: Pricing = Pricing.ON_DEMAND, region: str = "us-east-1", zone: str = "use1-az1") -> LaunchSpec:
    return LaunchSpec(gang=token.rsplit("-", 1)[0], token=token, owner="oquota", region=region, zone=zone,
                      instance_type=instance_type, gpu="A100", gpus=8, vcpus=vcpus, pricing=pricing,
                      names=tuple(f"{token}-{i}" for i in range(count)))


def gcp_spec(token: str, count: int, zone: str = "us-central1-a", pricing: Pricing = Pricing.ON_DEMAND
             ) -> LaunchSpec:
    return LaunchSpec(gang=token.rsplit("-", 1)[0], token=token, owner="oquota", region=zone.rsplit("-", 1)[0],
                      zone=zone, instance_type="a2-highgpu-8g", gpu="A100", gpus=8, vcpus=96, pricing=pricing,
                      names=tuple(f"{token}-{i}" for i in range(count)))


def test_quota_classes_and_usage_arithmetic() -> None:
    assert [quota_class(t) for t in ("p4d.24xlarge", "p5.48xlarge", "g5.48xlarge", "vt1.3xlarge", "m5.large")] == [
        "p", "p", "g", "g", None]
    assert vcpu_usage({"p4d.24xlarge": 2, "p3.2xlarge": 3}, {"p4d.24xlarge": 96, "p3.2xlarge": 8}) == 216
    assert vcpu_usage({"p9.unknown": 4}, {}) == 0  # unknown vCPUs under-count, never over-count


def test_aws_unreadable_limit_skips_the_check_without_usage_calls(aws: AwsProvider, proxy: Ec2FaultProxy) -> None:
    proxy.log.clear()
    check = aws.check_quota(aws_spec("gang-q0000001-1", 2), Budget(30.0))
    assert not check.known and "not readable" in check.detail
    assert proxy.call_count("GetServiceQuota") == 1  # moto: NoSuchResourceException for EC2 codes
    assert proxy.call_count("DescribeInstances") == 0  # no limit, no point counting usage


def test_aws_usage_counts_running_instances_of_the_class_and_market(aws: AwsProvider, proxy: Ec2FaultProxy,
                                                                    moto: MotoServer) -> None:
    budget = Budget(60.0)
    base = aws.vcpus_in_use("us-east-1", "p", Pricing.ON_DEMAND, budget)  # other tests' leftovers, if any
    p4d = aws.launch(aws_spec("gang-q0000002-1", 2), budget)
    spot = aws.launch(aws_spec("gang-q0000003-1", 1, pricing=Pricing.SPOT), budget)
    g5 = aws.launch(aws_spec("gang-q0000004-1", 1, "g5.48xlarge", 192), budget)
    try:
        assert aws.vcpus_in_use("us-east-1", "p", Pricing.ON_DEMAND, budget) == base + 2 * 96
        # The spot instance and the G instance hold other quotas.
        assert aws.vcpus_in_use("us-east-1", "p", Pricing.SPOT, budget) >= 96
        assert aws.vcpus_in_use("us-east-1", "g", Pricing.ON_DEMAND, budget) >= 192
        # A stopped instance releases its vCPUs.
        moto_client(moto.url).stop_instances(InstanceIds=[p4d[0].provider_id])
        assert aws.vcpus_in_use("us-east-1", "p", Pricing.ON_DEMAND, budget) == base + 96

        proxy.set_service_quota(P_ON_DEMAND, base + 96 + 192, region="us-east-1")
        fits = aws.check_quota(aws_spec("gang-q0000005-1", 2), Budget(30.0))  # 96 used + 192 = the limit
        assert fits.known and f"192 of {base + 288:g} vCPUs free" in fits.detail
        proxy.log.clear()
        with pytest.raises(QuotaError) as caught:
            aws.check_quota(aws_spec("gang-q0000006-1", 3), Budget(30.0))
        assert caught.value.code == "VcpuLimitExceeded" and not caught.value.all_regions
        assert f"{base + 96:g} of the {base + 288:g}" in str(caught.value)
        assert proxy.call_count("RunInstances") == 0
        # The limit is per region: us-east-2 has none configured, so the check cannot tell there.
        assert not aws.check_quota(aws_spec("gang-q0000007-1", 3, region="us-east-2", zone="use2-az1"),
                                   Budget(30.0)).known
    finally:
        aws.terminate(p4d + spot + g5, Budget(30.0))


def test_aws_full_region_is_refused_before_run_instances_and_the_gang_moves_on(
        aws: AwsProvider, proxy: Ec2FaultProxy, store: Store) -> None:
    providers: dict[str, Provider] = {"aws": aws}
    proxy.set_service_quota(P_ON_DEMAND, 96, region="us-east-1")  # room for one p4d, the gang needs two
    proxy.set_service_quota(P_ON_DEMAND, 1152, region="us-east-2")
    proxy.log.clear()
    request = GangRequest("A100", 8, 2, PricingMode.ON_DEMAND, ("aws",), ("us-east-1", "us-east-2"))
    result = provision(request, providers, store, fast_settings())
    try:
        assert result.ok, result.message
        trail = [(a.zone, a.outcome, a.error_kind) for a in result.attempts]
        assert trail[0] == ("use1-az1", "failed", "quota")
        # The quota is the region's: its other zones are not tried.
        assert [t for t in trail[1:] if t[0].startswith("use1")] == [
            ("use1-az2", "skipped", None), ("use1-az6", "skipped", None)]
        assert trail[-1] == ("use2-az1", "launched", None)
        assert proxy.call_count("RunInstances") == 1  # only in us-east-2
    finally:
        lifecycle.down(store, providers, result.gang, fast_settings().lifecycle)


def test_gce_double_serves_the_project_with_global_quotas(gce: GceDouble) -> None:
    gce.set_quota("GPUS_ALL_REGIONS", 24)
    with urllib.request.urlopen(f"{gce.endpoint}/compute/v1/projects/{PROJECT}", timeout=10) as resp:
        body = json.loads(resp.read())
    # A strict parse: a field the SDK does not know would vanish silently in the client.
    json_format.ParseDict(body, compute_v1.Project.pb()(), ignore_unknown_fields=False)
    project = compute_v1.ProjectsClient(**gce.client_kwargs()).get(project=PROJECT)
    quotas = {q.metric: (q.limit, q.usage) for q in project.quotas}
    assert quotas["GPUS_ALL_REGIONS"] == (24.0, 0.0) and "CPUS_ALL_REGIONS" in quotas
    assert project.name == PROJECT


def test_gcp_global_gpu_quota_counts_usage_everywhere(gcp: GcpProvider, gce: GceDouble) -> None:
    gce.set_quota("GPUS_ALL_REGIONS", 24)
    launched = gcp.launch(gcp_spec("gang-q0000010-1", 2, zone="europe-west4-a"), Budget(30.0))  # 16 GPUs
    ok = gcp.check_quota(gcp_spec("gang-q0000011-1", 1), Budget(30.0))
    assert ok.known and "GPUS_ALL_REGIONS: 8 of 24 free" in ok.detail
    with pytest.raises(QuotaError) as caught:
        gcp.check_quota(gcp_spec("gang-q0000012-1", 2), Budget(30.0))  # another region: still too many
    assert caught.value.all_regions and "GPUS_ALL_REGIONS" in str(caught.value)
    assert gce.call_count("projects.get") == 1  # read after the launch, then reused
    gcp.terminate(launched, Budget(30.0))
    assert gcp.check_quota(gcp_spec("gang-q0000012-1", 2), Budget(30.0)).known
    assert gce.call_count("projects.get") == 2  # the terminate freed GPUs: read again


def test_gcp_global_quota_blocks_every_region_before_any_insert(gcp: GcpProvider, gce: GceDouble,
                                                                  store: Store) -> None:
    gce.set_quota("GPUS_ALL_REGIONS", 8)
    providers: dict[str, Provider] = {"gcp": gcp}
    request = GangRequest("A100", 8, 2, PricingMode.ON_DEMAND, ("gcp",), ("europe-west4", "us-central1"))
    result = provision(request, providers, store, fast_settings())
    assert not result.ok
    first, *rest = result.attempts
    assert (first.outcome, first.error_kind, first.error_code) == ("failed", "quota", "QUOTA_EXCEEDED")
    assert rest and all(a.outcome == "skipped" for a in rest)
    assert {a.zone.rsplit("-", 1)[0] for a in rest} == {"europe-west4", "us-central1"}
    assert gce.call_count("instances.insert") == 0


# --- the quota cache: one read per region and command run, again after our own launches ------------------

def test_aws_second_zone_of_a_region_reuses_the_limit_and_usage(aws: AwsProvider, proxy: Ec2FaultProxy) -> None:
    proxy.set_service_quota(P_ON_DEMAND, 100_000)
    proxy.log.clear()
    assert aws.check_quota(aws_spec("gang-q0000020-1", 2, zone="use1-az1"), Budget(30.0)).known
    assert (proxy.call_count("GetServiceQuota"), proxy.call_count("DescribeInstances")) == (1, 1)
    assert aws.check_quota(aws_spec("gang-q0000020-2", 2, zone="use1-az2"), Budget(30.0)).known
    assert aws.check_quota(aws_spec("gang-q0000020-3", 2, zone="use1-az6"), Budget(30.0)).known
    assert (proxy.call_count("GetServiceQuota"), proxy.call_count("DescribeInstances")) == (1, 1)
    # Another region has its own limit and usage.
    assert aws.check_quota(aws_spec("gang-q0000020-4", 2, region="us-east-2", zone="use2-az1"), Budget(30.0)).known
    assert (proxy.call_count("GetServiceQuota"), proxy.call_count("DescribeInstances")) == (2, 2)
    # A refused launch (no capacity) creates nothing: the next zone still reuses the reads.
    proxy.inject(Ec2Fault.insufficient_instance_capacity(), zone="us-east-1b", action="RunInstances")
    with pytest.raises(CapacityError):
        aws.launch(aws_spec("gang-q0000020-5", 2, zone="use1-az1"), Budget(30.0))
    assert aws.check_quota(aws_spec("gang-q0000020-6", 2, zone="use1-az2"), Budget(30.0)).known
    assert (proxy.call_count("GetServiceQuota"), proxy.call_count("DescribeInstances")) == (2, 2)
    # The limit is only reused for a while.
    aws.quota_ttl_s = 0.0
    assert aws.check_quota(aws_spec("gang-q0000020-7", 2, zone="use1-az2"), Budget(30.0)).known
    assert (proxy.call_count("GetServiceQuota"), proxy.call_count("DescribeInstances")) == (3, 2)


def test_aws_usage_is_read_again_after_a_launch_and_a_terminate(aws: AwsProvider, proxy: Ec2FaultProxy) -> None:
    base = aws.vcpus_in_use("us-east-1", "p", Pricing.ON_DEMAND, Budget(30.0))  # other tests' leftovers
    proxy.set_service_quota(P_ON_DEMAND, base + 3 * 96, region="us-east-1")  # room for three p4d
    assert aws.check_quota(aws_spec("gang-q0000021-1", 2, zone="use1-az1"), Budget(30.0)).known
    launched = aws.launch(aws_spec("gang-q0000021-1", 2, zone="use1-az1"), Budget(30.0))
    try:
        proxy.log.clear()
        with pytest.raises(QuotaError):  # two more would make four
            aws.check_quota(aws_spec("gang-q0000022-1", 2, zone="use1-az2"), Budget(30.0))
        assert (proxy.call_count("GetServiceQuota"), proxy.call_count("DescribeInstances")) == (0, 1)
    finally:
        aws.terminate(launched, Budget(30.0))
    assert aws.check_quota(aws_spec("gang-q0000022-1", 2, zone="use1-az2"), Budget(30.0)).known
    assert proxy.call_count("DescribeInstances") == 2  # the terminate freed vCPUs: read again


def test_aws_a_usage_read_that_overlaps_a_launch_is_not_reused(aws: AwsProvider, proxy: Ec2FaultProxy) -> None:
    proxy.set_service_quota(P_ON_DEMAND, 100_000)
    proxy.log.clear()
    stall = proxy.inject(Ec2Fault.stall(1.5), action="DescribeInstances")
    reader = threading.Thread(target=aws.check_quota, args=(aws_spec("gang-q0000023-2", 1), Budget(30.0, 10.0)))
    reader.start()
    deadline = time.monotonic() + 10.0
    while not stall.hits and time.monotonic() < deadline:  # until the usage read is on its way
        reader.join(0.01)
    assert stall.hits == 1
    launched = aws.launch(aws_spec("gang-q0000023-3", 1, zone="use1-az2"), Budget(30.0))
    reader.join(10.0)
    try:
        assert not reader.is_alive() and proxy.call_count("DescribeInstances") == 1
        aws.check_quota(aws_spec("gang-q0000023-4", 1), Budget(30.0))
        assert proxy.call_count("DescribeInstances") == 2  # the overlapping read was not kept
    finally:
        aws.terminate(launched, Budget(30.0))


def test_aws_second_gang_over_the_quota_is_refused_with_the_same_provider(
        aws: AwsProvider, proxy: Ec2FaultProxy, store: Store) -> None:
    """The gang loop with parallel zone attempts (K=4): the first gang fills the region's quota; the second,
    planned by the same provider instance (one command run), is refused before any RunInstances."""
    providers: dict[str, Provider] = {"aws": aws}
    base = aws.vcpus_in_use("us-east-2", "p", Pricing.ON_DEMAND, Budget(30.0))
    proxy.set_service_quota(P_ON_DEMAND, base + 2 * 96, region="us-east-2")
    request = GangRequest("A100", 8, 2, PricingMode.ON_DEMAND, ("aws",), ("us-east-2",))
    first = provision(request, providers, store, fast_settings(parallel=4))
    try:
        assert first.ok, first.message
        proxy.log.clear()
        second = provision(request, providers, store, fast_settings(parallel=4))
        assert not second.ok
        assert {(a.outcome, a.error_kind) for a in second.attempts} <= {("failed", "quota"), ("skipped", None)}
        assert proxy.call_count("RunInstances") == 0
        # Read again after the first gang's launch (once per zone attempt at most: the two zones of the region
        # are tried at once, and concurrent misses both read).
        assert 1 <= proxy.call_count("DescribeInstances") <= 2
    finally:
        lifecycle.down(store, providers, first.gang, fast_settings().lifecycle)


def test_gcp_second_zone_of_a_region_reuses_the_quota_reads(gcp: GcpProvider, gce: GceDouble) -> None:
    assert gcp.check_quota(gcp_spec("gang-q0000030-1", 1, zone="us-central1-a"), Budget(30.0)).known
    assert gcp.check_quota(gcp_spec("gang-q0000030-2", 1, zone="us-central1-b"), Budget(30.0)).known
    assert (gce.call_count("regions.get"), gce.call_count("projects.get")) == (1, 1)
    # Another region: its own regions.get; the project's quotas are the same.
    assert gcp.check_quota(gcp_spec("gang-q0000030-3", 1, zone="europe-west4-a"), Budget(30.0)).known
    assert (gce.call_count("regions.get"), gce.call_count("projects.get")) == (2, 1)
    # An insert refused for capacity creates nothing: the reads are still good.
    gce.inject(GceFault.zone_resource_pool_exhausted(), zone="us-central1-a", method="instances.insert")
    with pytest.raises(CapacityError):
        gcp.launch(gcp_spec("gang-q0000030-4", 1, zone="us-central1-a"), Budget(30.0))
    assert gcp.check_quota(gcp_spec("gang-q0000030-5", 1, zone="us-central1-c"), Budget(30.0)).known
    assert (gce.call_count("regions.get"), gce.call_count("projects.get")) == (2, 1)
    gcp.quota_ttl_s = 0.0  # reused only for a while
    assert gcp.check_quota(gcp_spec("gang-q0000030-6", 1, zone="us-central1-c"), Budget(30.0)).known
    assert (gce.call_count("regions.get"), gce.call_count("projects.get")) == (3, 2)


def test_gcp_quotas_are_read_again_after_a_launch_and_a_terminate(gcp: GcpProvider, gce: GceDouble) -> None:
    gce.set_quota("NVIDIA_A100_GPUS", 24, region="us-central1")  # three a2-highgpu-8g
    assert gcp.check_quota(gcp_spec("gang-q0000031-1", 2, zone="us-central1-a"), Budget(30.0)).known
    launched = gcp.launch(gcp_spec("gang-q0000031-1", 2, zone="us-central1-a"), Budget(30.0))
    with pytest.raises(QuotaError) as caught:  # two more would make four
        gcp.check_quota(gcp_spec("gang-q0000032-1", 2, zone="us-central1-b"), Budget(30.0))
    assert "NVIDIA_A100_GPUS" in str(caught.value) and not caught.value.all_regions
    assert (gce.call_count("regions.get"), gce.call_count("projects.get")) == (2, 1)  # regional quota failed first
    # A launch in another region changes the project's usage, not this region's.
    elsewhere = gcp.launch(gcp_spec("gang-q0000033-1", 1, zone="europe-west4-a"), Budget(30.0))
    with pytest.raises(QuotaError):
        gcp.check_quota(gcp_spec("gang-q0000032-1", 2, zone="us-central1-b"), Budget(30.0))
    assert gce.call_count("regions.get") == 2
    gcp.terminate(launched + elsewhere, Budget(30.0))
    assert gcp.check_quota(gcp_spec("gang-q0000032-1", 2, zone="us-central1-b"), Budget(30.0)).known
    assert (gce.call_count("regions.get"), gce.call_count("projects.get")) == (3, 2)


def test_gcp_second_gang_over_the_quota_is_refused_with_the_same_provider(
        gcp: GcpProvider, gce: GceDouble, store: Store) -> None:
    """Sequential zone attempts (the AWS case above runs them in parallel)."""
    providers: dict[str, Provider] = {"gcp": gcp}
    gce.set_quota("NVIDIA_A100_GPUS", 16, region="us-central1")  # room for one gang of two
    request = GangRequest("A100", 8, 2, PricingMode.ON_DEMAND, ("gcp",), ("us-central1",))
    first = provision(request, providers, store, fast_settings())
    try:
        assert first.ok, first.message
        inserts = gce.call_count("instances.insert")
        second = provision(request, providers, store, fast_settings())
        assert not second.ok
        assert {(a.outcome, a.error_kind) for a in second.attempts} <= {("failed", "quota"), ("skipped", None)}
        assert gce.call_count("instances.insert") == inserts  # refused by the pre-check, not by GCE
    finally:
        lifecycle.down(store, providers, first.gang, fast_settings().lifecycle)
