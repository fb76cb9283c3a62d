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
import urllib.request

import pytest
from google.cloud import compute_v1
from google.protobuf import json_format  # type: ignore[import-untyped]

from geosched.emulators import Ec2FaultProxy, GceDouble, MotoServer
from geosched.models import Pricing
from geosched.providers import lifecycle
from geosched.providers.aws import AwsProvider, quota_class, vcpu_usage
from geosched.providers.base import Budget, LaunchSpec, Provider, QuotaError
from geosched.providers.gang import provision
from geosched.providers.gcp import GcpProvider
from geosched.providers.plan import GangRequest, PricingMode
from geosched.store import Store
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
    assert gce.call_count("projects.get") == 2
    gcp.terminate(launched, Budget(30.0))
    assert gcp.check_quota(gcp_spec("gang-q0000012-1", 2), Budget(30.0)).known


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
