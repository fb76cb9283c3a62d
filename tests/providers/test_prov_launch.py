"""Each provider against its emulator over real HTTP: what a launch sends, and how SDK errors map to the
taxonomy."""

from __future__ import annotations

import base64
import time

import pytest

from geosched.core.models import Pricing
from geosched.providers import gcp as gcp_module
from geosched.providers.aws import AwsProvider
from geosched.providers.base import (
    AuthError,
    Budget,
    CapacityError,
    InstanceState,
    LaunchSpec,
    ProviderError,
    QuotaError,
    RateError,
    StallError,
    TransientError,
    UnsupportedError,
)
from geosched.providers.gcp import GcpProvider
from geosched.providers.launchsettings.gcp import GcpSettings
from geosched_emulators import Ec2Fault, Ec2FaultProxy, GceDouble, GceFault, MotoServer
from tests.providers.prov_support import ADMIN_CIDR, moto_client

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me@laptop"

pytestmark = pytest.mark.integration


def aws_spec(token: str, zone: str = "use1-az1", count: int = 2, pricing: Pricing = Pricing.ON_DEMAND) -> LaunchSpec:
    return LaunchSpec(gang=token.rsplit("-", 1)[0], token=token, owner="otest", region="us-east-1", zone=zone,
                      instance_type="p4d.24xlarge", gpu="A100", gpus=8, vcpus=96, pricing=pricing,
                      names=tuple(f"{token}-{i}" for i in range(count)), ssh_public_key=KEY)


def gcp_spec(token: str, zone: str = "us-central1-a", count: int = 2, pricing: Pricing = Pricing.ON_DEMAND,
             instance_type: str = "a2-highgpu-8g") -> LaunchSpec:
    return LaunchSpec(gang=token.rsplit("-", 1)[0], token=token, owner="otest", region=zone.rsplit("-", 1)[0],
                      zone=zone, instance_type=instance_type, gpu="A100", gpus=8, vcpus=96, pricing=pricing,
                      names=tuple(f"{token}-{i}" for i in range(count)), ssh_public_key=KEY)


def test_aws_gang_is_one_tagged_spot_reservation_in_the_zone(aws: AwsProvider, moto: MotoServer,
                                                             proxy: Ec2FaultProxy) -> None:
    spec = aws_spec("gang-aaaa0001-1", count=3, pricing=Pricing.SPOT)
    launched = aws.launch(spec, Budget(30.0))
    assert len(launched) == 3 and {i.zone for i in launched} == {"use1-az1"}
    assert sorted(i.name for i in launched) == sorted(spec.names)
    assert proxy.call_count("RunInstances") == 1  # the whole gang in one call
    raw = moto_client(moto.url).describe_instances(InstanceIds=[i.provider_id for i in launched])
    instances = [i for r in raw["Reservations"] for i in r["Instances"]]
    assert {i["Placement"]["AvailabilityZone"] for i in instances} == {"us-east-1b"}  # use1-az1 in moto
    for inst in instances:
        tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
        assert tags == {"geosched-gang": "gang-aaaa0001", "geosched-owner": "otest",
                        "geosched-attempt": "gang-aaaa0001-1", "Name": "gang-aaaa0001-1"}
        assert inst["InstanceLifecycle"] == "spot"
        assert inst["ClientToken"] == "gang-aaaa0001-1"
    attr = moto_client(moto.url).describe_instance_attribute(InstanceId=instances[0]["InstanceId"],
                                                             Attribute="userData")
    data = base64.b64decode(attr["UserData"]["Value"]).decode()
    assert data.startswith("#cloud-config") and f'"{KEY}"' in data
    found = aws.describe("gang-aaaa0001", ["us-east-1"], Budget(30.0))
    assert {i.provider_id for i in found} == {i.provider_id for i in launched}
    assert all(i.state is InstanceState.RUNNING and i.token == spec.token for i in found)
    aws.terminate(launched, Budget(30.0))
    assert all(not i.state.exists for i in aws.describe("gang-aaaa0001", ["us-east-1"], Budget(30.0)))
    aws.terminate(launched, Budget(30.0))  # already gone: not an error


@pytest.mark.parametrize(("fault", "kind"), [
    (Ec2Fault.insufficient_instance_capacity(), CapacityError),
    (Ec2Fault.instance_limit_exceeded(), QuotaError),
    (Ec2Fault.vcpu_limit_exceeded(), QuotaError),
    (Ec2Fault.max_spot_instance_count_exceeded(), QuotaError),
    (Ec2Fault.unsupported(), UnsupportedError),
    (Ec2Fault.request_limit_exceeded(), RateError),
    (Ec2Fault.internal_error(), TransientError),
    (Ec2Fault.auth_failure(), AuthError),
    (Ec2Fault.unauthorized_operation(), AuthError),
])
def test_aws_errors_map_to_the_taxonomy(aws: AwsProvider, proxy: Ec2FaultProxy, fault: Ec2Fault,
                                        kind: type[ProviderError]) -> None:
    aws.launch(aws_spec("gang-warm0000-1", count=1), Budget(30.0))  # zone map and AMI cached
    proxy.inject(fault, zone="us-east-1b", action="RunInstances")
    with pytest.raises(ProviderError) as caught:
        aws.launch(aws_spec("gang-aaaa0002-1"), Budget(30.0))
    assert type(caught.value) is kind
    assert caught.value.code == fault.code
    assert "123456789012" not in str(caught.value)  # the account id in UnauthorizedOperation is redacted
    assert proxy.call_count("RunInstances", error_code=fault.code) == 1  # botocore did not retry it
    aws.terminate(aws.describe("gang-warm0000", ["us-east-1"], Budget(30.0)), Budget(30.0))


def test_aws_stalled_launch_is_a_stall_and_reads_time_out_as_transient(aws: AwsProvider,
                                                                        proxy: Ec2FaultProxy) -> None:
    aws.describe("gang-none", ["us-east-1"], Budget(30.0))
    # The on-demand security group made beforehand (four calls): under a loaded CI machine they overran the
    # launch's own budget and the test saw their read timeout, not the stalled RunInstances it is about.
    aws.security_group("us-east-1", "otest", Budget(30.0))
    proxy.inject(Ec2Fault.stall(3.0), zone="us-east-1b", action="RunInstances")
    with pytest.raises(StallError):
        aws.launch(aws_spec("gang-aaaa0003-1"), Budget(2.0, 2.0))
    proxy.inject(Ec2Fault.stall(1.5), action="DescribeInstances")
    with pytest.raises(TransientError):
        aws.describe("gang-none", ["us-east-1"], Budget(10.0, 1.0))
    time.sleep(1.6)  # real sleep: the proxy forwards the stalled launch to the real moto server after its stall
    aws.terminate(aws.describe("gang-aaaa0003", ["us-east-1"], Budget(10.0)), Budget(10.0))


def test_aws_quota_precheck_is_unknown_without_service_quotas(aws: AwsProvider) -> None:
    check = aws.check_quota(aws_spec("gang-aaaa0004-1"), Budget(30.0))
    assert not check.known


def test_gcp_gang_instances_carry_labels_spot_scheduling_and_the_key(gcp: GcpProvider, gce: GceDouble) -> None:
    spec = gcp_spec("gang-bbbb0001-1", count=3, pricing=Pricing.SPOT)
    launched = gcp.launch(spec, Budget(30.0))
    assert sorted(i.name for i in launched) == list(spec.names)
    assert all(i.state is InstanceState.RUNNING and i.addresses for i in launched)
    raw = gce.instances(zone="us-central1-a")
    assert len(raw) == 3
    for inst in raw:
        assert inst["labels"] == {"geosched-gang": "gang-bbbb0001", "geosched-owner": "otest",
                                  "geosched-attempt": "gang-bbbb0001-1",
                                  "geosched-index": inst["name"].rsplit("-", 1)[1]}
        assert inst["scheduling"]["provisioningModel"] == "SPOT"
        assert inst["scheduling"]["onHostMaintenance"] == "TERMINATE"
        # The key to log in with, and the guest agent asked to publish the host keys (read back before probing).
        assert inst["metadata"]["items"] == [{"key": "enable-guest-attributes", "value": "TRUE"},
                                             {"key": "ssh-keys", "value": f"geosched:{KEY}"}]
        assert inst["disks"][0]["initializeParams"]["sourceImage"].startswith("projects/deeplearning-platform")
    assert gce.call_count("instances.insert") == 3
    again = gcp.launch(spec, Budget(30.0))  # same attempt again: 409s taken as ours
    assert sorted(i.name for i in again) == list(spec.names) and len(gce.instances()) == 3
    found = gcp.describe("gang-bbbb0001", [], Budget(30.0))
    assert {i.name for i in found} == set(spec.names)
    gcp.terminate(found, Budget(30.0))
    assert gce.instances() == []
    gcp.terminate(found, Budget(30.0))  # already gone


def test_gcp_general_purpose_machines_get_guest_accelerators() -> None:
    spec = gcp_spec("gang-cccc0001-1", instance_type="n1-standard-8")
    body = gcp_module.instance_body(spec, 0, GcpSettings())
    assert [(a.accelerator_type, a.accelerator_count) for a in body.guest_accelerators] == [
        ("zones/us-central1-a/acceleratorTypes/nvidia-tesla-a100", 8)]
    assert not gcp_module.instance_body(gcp_spec("gang-cccc0001-1"), 0, GcpSettings()).guest_accelerators


@pytest.mark.parametrize(("fault", "kind", "extra"), [
    (GceFault.zone_resource_pool_exhausted(), CapacityError, {}),
    (GceFault.zone_resource_pool_exhausted(with_details=True), CapacityError, {}),
    (GceFault.quota_exceeded("NVIDIA_A100_GPUS", 8), QuotaError, {"all_regions": False}),
    (GceFault.quota_exceeded("GPUS_ALL_REGIONS", 8), QuotaError, {"all_regions": True}),
    (GceFault.unsupported_operation(), UnsupportedError, {}),
    (GceFault.resource_operation_rate_exceeded(), RateError, {}),
    (GceFault.rate_limited(), RateError, {}),
    (GceFault.unavailable(), TransientError, {}),
    (GceFault.internal_error(), TransientError, {}),
    (GceFault.permission_denied(), AuthError, {}),
])
def test_gcp_errors_map_to_the_taxonomy(gcp: GcpProvider, gce: GceDouble, fault: GceFault,
                                        kind: type[ProviderError], extra: dict[str, bool]) -> None:
    gce.inject(fault, zone="us-central1-b", method="instances.insert")
    with pytest.raises(ProviderError) as caught:
        gcp.launch(gcp_spec("gang-bbbb0002-1", zone="us-central1-b"), Budget(30.0))
    assert type(caught.value) is kind
    for attr, value in extra.items():
        assert getattr(caught.value, attr) is value
    assert caught.value.launched == ()  # the first insert failed: nothing to roll back
    assert gce.instances() == []


def test_gcp_partial_gang_reports_what_exists(gcp: GcpProvider, gce: GceDouble) -> None:
    gce.set_capacity("us-central1-c", "a2-highgpu-8g", 2)
    with pytest.raises(CapacityError) as caught:
        gcp.launch(gcp_spec("gang-bbbb0003-1", zone="us-central1-c", count=4), Budget(30.0))
    assert sorted(i.name for i in caught.value.launched) == ["gang-bbbb0003-1-0", "gang-bbbb0003-1-1"]
    assert gce.call_count("instances.insert") == 3  # stopped at the first refusal


def test_gcp_operations_are_waited_on_at_the_configured_endpoint(gcp: GcpProvider, gce: GceDouble) -> None:
    gce.operation_delay_s = 0.3
    gce.inject(GceFault.zone_resource_pool_exhausted(), zone="us-central1-a")
    with pytest.raises(CapacityError):
        gcp.launch(gcp_spec("gang-bbbb0004-1", count=1), Budget(30.0))
    launched = gcp.launch(gcp_spec("gang-bbbb0004-2", count=2), Budget(30.0))
    assert all(i.state is InstanceState.RUNNING for i in launched)
    assert gce.call_count("zoneOperations.wait") >= 3


def test_gcp_stall_and_quota_precheck(gcp: GcpProvider, gce: GceDouble) -> None:
    gce.inject(GceFault.stall(1.5), zone="us-central1-a", method="instances.insert")
    with pytest.raises(StallError) as caught:
        gcp.launch(gcp_spec("gang-bbbb0005-1", count=2), Budget(1.0, 1.0))
    assert caught.value.launched == ()  # outcome unknown: left to reconciliation, not to rollback
    gce.set_quota("NVIDIA_A100_GPUS", 8, region="europe-west4")
    with pytest.raises(QuotaError):
        gcp.check_quota(gcp_spec("gang-bbbb0006-1", zone="europe-west4-a", count=2), Budget(30.0))
    assert gcp.check_quota(gcp_spec("gang-bbbb0006-1", zone="europe-west4-a", count=1), Budget(30.0)).known


def test_gcp_missing_project_and_credentials_are_auth_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/creds.json")
    provider = GcpProvider(GcpSettings(project="p", endpoint="http://127.0.0.1:9", admin_cidrs=(ADMIN_CIDR,)))
    with pytest.raises(AuthError):
        provider.launch(gcp_spec("gang-dddd0001-1"), Budget(5.0))
    assert not [i for i in provider.check() if i.ok]
