"""Settings from the environment, request building, and error-code tables (pure, no emulator)."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.core.errors import InputError
from geosched.core.models import Pricing
from geosched.providers import aws, gcp, launchsettings, registry
from geosched.providers.base import (
    AuthError,
    CapacityError,
    LaunchSpec,
    QuotaError,
    RateError,
    TransientError,
    UnsupportedError,
)
from geosched.providers.config import ProviderSettings, from_env, read_public_key
from geosched.providers.launchsettings.aws import AwsSettings
from geosched.providers.launchsettings.gcp import GcpSettings

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me"


def spec(**overrides: object) -> LaunchSpec:
    base: dict[str, object] = {
        "gang": "gang-x", "token": "gang-x-1", "owner": "o1", "region": "us-east-1", "zone": "use1-az1",
        "instance_type": "p4d.24xlarge", "gpu": "A100", "gpus": 8, "vcpus": 96, "pricing": Pricing.ON_DEMAND,
        "names": ("gang-x-1-0", "gang-x-1-1"), "ssh_public_key": KEY}
    base.update(overrides)
    return LaunchSpec(**base)  # type: ignore[arg-type]


def test_settings_come_from_the_environment(tmp_path: Path) -> None:
    key = tmp_path / "k.pub"
    key.write_text(KEY + "\n")
    env = {"GEOSCHED_AWS_REGIONS": "us-east-1, eu-north-1,", "GEOSCHED_GCP_PROJECT": "p1",
           "GEOSCHED_GCP_ENDPOINT": "http://127.0.0.1:1", "GEOSCHED_SSH_PUBLIC_KEY": str(key),
           "GEOSCHED_INVENTORY": str(tmp_path / "inv.yaml"), "GEOSCHED_SSH_USER": "ml"}
    s = from_env(env, tmp_path / "home")
    assert s.aws.regions == ("us-east-1", "eu-north-1") and s.aws.ami is None
    assert (s.gcp.project, s.gcp.endpoint) == ("p1", "http://127.0.0.1:1")
    assert s.ssh.inventory == tmp_path / "inv.yaml" and s.ssh.leases == tmp_path / "home" / "ssh-leases.json"
    assert (s.ssh_public_key, s.ssh_user) == (KEY, "ml")


def test_launch_settings_are_kept_by_cloud_name(tmp_path: Path) -> None:
    """Every cloud geosched launches on has launch settings in geosched.providers.launchsettings, found by listing
    it, and ProviderSettings holds them by the cloud's name (config.py names no cloud's settings type to build them)."""
    assert set(registry.CLOUDS) <= set(launchsettings.registry())
    s = from_env({"GEOSCHED_AWS_AMI": "ami-0abc", "GEOSCHED_GCP_IMAGE": "projects/p/global/images/i"}, tmp_path)
    assert set(s.clouds) == set(launchsettings.registry())
    assert s.clouds["aws"] is s.aws and s.of_cloud("aws", AwsSettings).ami == "ami-0abc"
    assert s.clouds["gcp"] is s.gcp and s.gcp.image == "projects/p/global/images/i"
    # Made without them (tests, the demo): each cloud's defaults, as the fields' default factories gave before.
    assert (ProviderSettings().aws, ProviderSettings(clouds={}).gcp) == (AwsSettings(), GcpSettings())
    with pytest.raises(TypeError, match="launch settings of 'aws' are GcpSettings, not AwsSettings"):
        _ = ProviderSettings(clouds={"aws": GcpSettings()}).aws


def test_a_private_key_is_never_taken_for_a_public_one(tmp_path: Path) -> None:
    private = tmp_path / "id"
    private.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n")
    assert read_public_key({}, private) is None


def test_aws_request_is_one_call_for_the_gang() -> None:
    params = aws.run_params(spec(pricing=Pricing.SPOT), "ami-1", "us-east-1b", "my-key")
    assert (params["MinCount"], params["MaxCount"], params["ClientToken"]) == (2, 2, "gang-x-1")
    assert params["Placement"] == {"AvailabilityZone": "us-east-1b"}
    assert params["InstanceMarketOptions"]["MarketType"] == "spot" and params["KeyName"] == "my-key"
    assert {t["Key"] for t in params["TagSpecifications"][0]["Tags"]} == {
        "geosched-gang", "geosched-owner", "geosched-attempt", "Name"}
    assert "InstanceMarketOptions" not in aws.run_params(spec(), "ami-1", "us-east-1b", None)
    with pytest.raises(ValueError):
        aws.user_data(spec(ssh_user="root; rm -rf /"))
    assert aws.user_data(spec(ssh_public_key=None)) is None


@pytest.mark.parametrize(("code", "status", "kind"), [
    ("InsufficientInstanceCapacity", 500, CapacityError), ("InsufficientHostCapacity", 500, CapacityError),
    ("VcpuLimitExceeded", 400, QuotaError), ("RequestLimitExceeded", 503, RateError),
    ("InternalError", 500, TransientError), ("SomethingNew", 502, TransientError),
    ("AuthFailure", 401, AuthError), ("AccessDenied", 403, AuthError),
    ("OptInRequired", 401, UnsupportedError), ("InvalidParameterValue", 400, UnsupportedError),
])
def test_aws_codes(code: str, status: int, kind: type) -> None:
    assert type(aws.classify_code(code, "m", status)) is kind


def test_an_unreadable_aws_answer_retries_a_read_and_stalls_a_launch() -> None:
    from botocore.parsers import ResponseParserError

    from geosched.providers.base import Budget, StallError

    html = ResponseParserError("Unable to parse response (syntax error), invalid XML received: b'<html>502'")
    assert type(aws.classify(html, mutating=False, budget=Budget(10.0))) is TransientError
    assert type(aws.classify(html, mutating=True, budget=Budget(10.0))) is StallError


def test_aws_region_wide_refusals() -> None:
    err = aws.classify_code("InvalidAMIID.NotFound", "m", 400)
    assert isinstance(err, UnsupportedError) and err.region_wide


@pytest.mark.parametrize(("code", "status", "kind"), [
    ("ZONE_RESOURCE_POOL_EXHAUSTED", 503, CapacityError), ("QUOTA_EXCEEDED", 403, QuotaError),
    ("RESOURCE_OPERATION_RATE_EXCEEDED", 403, RateError), ("UNSUPPORTED_OPERATION", 400, UnsupportedError),
    ("SOMETHING_ELSE", 500, TransientError), ("SOMETHING_ELSE", 400, UnsupportedError),
])
def test_gcp_operation_codes(code: str, status: int, kind: type) -> None:
    assert type(gcp.classify_operation(code, "m", status)) is kind


def test_registry_knows_each_launching_cloud_and_ssh_and_refuses_others() -> None:
    # Each cloud with launch settings, by listing (a new cloud adds its modules, not a line here), then ssh.
    assert registry.names() == (*launchsettings.registry(), "ssh")
    assert {"aws", "gcp"} <= set(registry.CLOUDS)
    with pytest.raises(InputError, match="unknown provider 'azure'"):
        registry.build(["azure"], from_env({}, Path("/tmp/x")))
