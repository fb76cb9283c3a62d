"""The demo's emulated clouds: moto's EC2 server behind the fault proxy, and the Compute Engine REST double,
both in this process on 127.0.0.1, with an AWS and a GCP provider wired to them explicitly.

Nothing here reads or changes the user's cloud configuration: the AWS session ignores AWS_PROFILE, the
shared config and credentials files and AWS_ENDPOINT_URL*, and every client it makes is given the proxy's
URL; the GCP provider gets the double's URL and anonymous credentials. So no call can reach a real endpoint
or account, and os.environ is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import boto3  # type: ignore[import-untyped]
import botocore.session  # type: ignore[import-untyped]
from google.auth.credentials import AnonymousCredentials

from geosched.providers.aws import AwsProvider
from geosched.providers.base import Budget, Provider
from geosched.providers.gcp import GcpProvider
from geosched.providers.launchsettings.aws import AwsSettings
from geosched.providers.launchsettings.gcp import GcpSettings
from geosched.providers.plan import Candidate
from geosched_emulators import Ec2Fault, Ec2FaultProxy, GceDouble, GceFault, MotoServer
from geosched_emulators.gce import DEFAULT_MACHINE_TYPES, only_in, with_zones

GCP_PROJECT = "geosched-demo"
# moto accepts any key; a fixed fake one keeps boto3 from looking for the user's.
FAKE_KEY = "demo-not-a-secret"
# botocore session variables (name: config key, env vars, default, converter) that would otherwise come from
# the user's environment or ~/.aws: none of them may steer the demo's clients.
_ISOLATED: Mapping[str, tuple[Any, Any, Any, Any]] = {
    "profile": (None, None, None, None),
    "config_file": (None, None, os.devnull, None),
    "credentials_file": (None, None, os.devnull, None),
    "ca_bundle": (None, None, None, None),
    "ignore_configured_endpoint_urls": (None, None, True, None),
}


class EmulatorSession:
    """What AwsProvider uses of a boto3 session, bound to one endpoint with fake credentials."""

    def __init__(self, endpoint: str, region: str) -> None:
        core = botocore.session.Session(session_vars=dict(_ISOLATED))
        self._session = boto3.session.Session(aws_access_key_id=FAKE_KEY, aws_secret_access_key=FAKE_KEY,
                                              region_name=region, botocore_session=core)
        self._endpoint = endpoint
        self.region_name = region

    def client(self, service: str, **kwargs: Any) -> Any:
        kwargs["endpoint_url"] = self._endpoint
        return self._session.client(service, **kwargs)

    def get_credentials(self) -> Any:
        return self._session.get_credentials()


@dataclass
class Clouds:
    """Running emulators and the providers that talk to them."""

    providers: dict[str, Provider]
    moto_url: str
    proxy: Ec2FaultProxy
    gce: GceDouble

    def refuse(self, c: Candidate) -> str:
        """Make the candidate's zone refuse every launch for lack of capacity; returns the error code sent."""
        if c.provider == "gcp":
            self.gce.inject(GceFault.zone_resource_pool_exhausted(), zone=c.zone, method="instances.insert",
                            times="always")
            return "ZONE_RESOURCE_POOL_EXHAUSTED"
        # The proxy knows zones by AZ name; the plan names AWS zones by AZ ID, as the catalog does.
        self.proxy.inject(Ec2Fault.insufficient_instance_capacity(), zone=self.az_name(c.region, c.zone),
                          action="RunInstances", times="always")
        return "InsufficientInstanceCapacity"

    def az_name(self, region: str, zone_id: str) -> str:
        ec2 = EmulatorSession(self.moto_url, region).client("ec2", region_name=region)
        zones = ec2.describe_availability_zones()["AvailabilityZones"]
        return next(str(z["ZoneName"]) for z in zones if z["ZoneId"] == zone_id)

    def alive(self, gang: str, regions: Mapping[str, Sequence[str]]) -> int:
        """Machines of the gang that still exist, as the providers describe them (by the gang's tag)."""
        budget = Budget(60.0, 20.0)
        found = 0
        for name, provider in self.providers.items():
            wanted = tuple(regions.get(name, ()))
            if wanted:
                found += sum(1 for i in provider.describe(gang, wanted, budget) if i.state.exists)
        return found


ADMIN_CIDRS = ("127.0.0.1/32",)

@contextmanager
def emulated_clouds(gce_zones: Sequence[str], gce_types: Sequence[str], aws_regions: Sequence[str]) -> Iterator[Clouds]:
    """Start moto + the fault proxy and a GCE double that sells `gce_types` in `gce_zones`; stop them after."""
    machine_types = [only_in(m, *gce_zones) for m in DEFAULT_MACHINE_TYPES if m.name in gce_types]
    with ExitStack() as stack:
        moto = stack.enter_context(MotoServer())
        proxy = stack.enter_context(Ec2FaultProxy(moto.url))
        gce = stack.enter_context(GceDouble(zones=with_zones(*gce_zones), machine_types=machine_types))
        region = aws_regions[0] if aws_regions else "us-east-1"
        # The emulators listen on loopback: SSH from there only (geosched opens nothing to the world unasked).
        aws = AwsProvider(AwsSettings(regions=tuple(aws_regions), admin_cidrs=ADMIN_CIDRS),
                          session=EmulatorSession(proxy.url, region))
        gcp = GcpProvider(GcpSettings(project=GCP_PROJECT, endpoint=gce.endpoint, admin_cidrs=ADMIN_CIDRS),
                          credentials=AnonymousCredentials())  # type: ignore[no-untyped-call]
        yield Clouds({"aws": aws, "gcp": gcp}, moto.url, proxy, gce)
