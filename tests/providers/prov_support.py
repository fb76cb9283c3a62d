"""Helpers the provider tests and the provisioning benchmark share: providers wired to the emulators over
real HTTP (boto3 through AWS_ENDPOINT_URL, google-cloud-compute through its endpoint option), fast
settings, and what the emulators hold for a gang."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import boto3  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from google.auth.credentials import AnonymousCredentials

from geosched.core.retry import RetryPolicy
from geosched.providers.aws import AwsProvider
from geosched.providers.base import Budget
from geosched.providers.gang import ProvisionSettings
from geosched.providers.gcp import GcpProvider
from geosched.providers.launchsettings.aws import AwsSettings
from geosched.providers.launchsettings.gcp import GcpSettings
from geosched.providers.lifecycle import LifecycleSettings

PROJECT = "geosched-test"
AWS_REGIONS = ("us-east-1", "us-east-2")
GCP_REGIONS = ("europe-west4", "us-central1")
# The shipped catalog's p4d.24xlarge zones in the two AWS regions, in plan order (equal prices: by zone id),
# with the AZ names moto gives them.
AWS_ZONES = {"use1-az1": "us-east-1b", "use1-az2": "us-east-1c", "use1-az6": "us-east-1a",
             "use2-az1": "us-east-2a", "use2-az2": "us-east-2b"}
GCP_ZONES = ("europe-west4-a", "europe-west4-b", "us-central1-a", "us-central1-b", "us-central1-c")
ALIVE = ("pending", "running", "stopping", "stopped")


def aws_env(endpoint: str) -> dict[str, str]:
    """The standard AWS variables a user would set: endpoint, credentials and region, nothing else."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


@contextmanager
def environment(values: Mapping[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


# Who may reach SSH of on-demand networks in these tests (TEST-NET-2, RFC 5737): an explicit choice, as a
# user must make one (geosched has no default).
ADMIN_CIDR = "198.51.100.0/24"


def aws_provider(regions: tuple[str, ...] = AWS_REGIONS) -> AwsProvider:
    """An AWS provider configured only by the environment (see `aws_env`), as a user's would be."""
    return AwsProvider(AwsSettings(regions=regions, admin_cidrs=(ADMIN_CIDR,)), session=boto3.session.Session())


def warm(provider: AwsProvider, regions: tuple[str, ...] = AWS_REGIONS) -> None:
    """moto builds a region on its first call (over a second): do that before timing-sensitive tests, and
    cache the zone map and image lookups the way a provider that has launched before would have."""
    budget = Budget(120.0, 60.0)
    for region in regions:
        provider.zones(region, budget)
        provider._ami(region, budget)
        provider.describe(None, (region,), budget)


def gcp_provider(endpoint: str) -> GcpProvider:
    return GcpProvider(GcpSettings(project=PROJECT, endpoint=endpoint, admin_cidrs=(ADMIN_CIDR,)),
                       credentials=AnonymousCredentials())  # type: ignore[no-untyped-call]


def fast_settings(**overrides: Any) -> ProvisionSettings:
    base: dict[str, Any] = {
        "zone_timeout_s": 6.0, "call_timeout_s": 3.0, "poll_s": 0.05,
        "retry": RetryPolicy(attempts=4, initial_s=0.05, max_s=0.2),
        "lifecycle": LifecycleSettings(settle_s=1.0, poll_s=0.05, budget_s=30.0, call_timeout_s=5.0),
    }
    base.update(overrides)
    return ProvisionSettings(**base)


def moto_client(moto_url: str, region: str = "us-east-1") -> Any:
    """Straight to moto (not through the fault proxy), to see what really exists."""
    return boto3.client("ec2", region_name=region, endpoint_url=moto_url, aws_access_key_id="testing",
                        aws_secret_access_key="testing", config=Config(retries={"total_max_attempts": 3}))


def aws_alive(moto_url: str, gang: str | None = None, owner: str | None = None,
              regions: tuple[str, ...] = AWS_REGIONS, states: tuple[str, ...] = ALIVE) -> dict[str, str]:
    """Instance id -> zone name of live instances (in `states`) tagged with the gang (or owner)."""
    out: dict[str, str] = {}
    filters = [{"Name": "instance-state-name", "Values": list(states)}]
    if gang is not None:
        filters.append({"Name": "tag:geosched-gang", "Values": [gang]})
    if owner is not None:
        filters.append({"Name": "tag:geosched-owner", "Values": [owner]})
    for region in regions:
        ec2 = moto_client(moto_url, region)
        for r in ec2.describe_instances(Filters=filters)["Reservations"]:
            for i in r["Instances"]:
                out[i["InstanceId"]] = i["Placement"]["AvailabilityZone"]
    return out


def gce_alive(gce: Any, gang: str | None = None, owner: str | None = None) -> dict[str, str]:
    """Instance name -> zone of instances the GCE double holds for the gang (or owner)."""
    out = {}
    for inst in gce.instances(project=PROJECT):
        labels = inst.get("labels", {})
        if gang is not None and labels.get("geosched-gang") != gang:
            continue
        if owner is not None and labels.get("geosched-owner") != owner:
            continue
        out[inst["name"]] = inst["zone"].rsplit("/", 1)[-1]
    return out
