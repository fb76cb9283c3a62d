"""AWS EC2 through boto3: launch a gang as one RunInstances call, describe by tag, terminate.

Why one call for the whole gang: RunInstances with MinCount = MaxCount = N either starts all N instances in
the zone or fails with InsufficientInstanceCapacity, so a zone never hands out a partial gang at launch; it
costs one API call instead of N; and one ClientToken makes the whole launch idempotent (a retry after a
lost response returns the same reservation instead of a second gang). Partial gangs can still happen later
(an instance that dies during boot); the gang code checks and rolls back.

Endpoint, region chain and credentials come only from boto3's standard configuration (environment, shared
files, instance roles, AWS_ENDPOINT_URL). botocore's own retries are off (one attempt): this module maps
errors to the taxonomy and `retry.py` decides what to retry.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, TypeVar

import boto3  # type: ignore[import-untyped]
import botocore.exceptions as bex  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.parsers import ResponseParserError  # type: ignore[import-untyped]

from geosched.clouds import aws as aws_cloud
from geosched.core import catalog
from geosched.core.models import Offering, Pricing, Region
from geosched.files.access import SSH_USER_RE
from geosched.policies import spotrisk
from geosched.providers.base import (
    ATTEMPT_TAG,
    GANG_TAG,
    INDEX_TAG,
    NAME_TAG,
    OWNER_TAG,
    AuthError,
    Budget,
    CapacityError,
    CheckItem,
    Instance,
    InstanceState,
    LaunchSpec,
    PriceObservation,
    ProviderError,
    QuotaCheck,
    QuotaError,
    RateError,
    SpotSignal,
    StallError,
    TransientError,
    UnsupportedError,
    admin_sources,
)
from geosched.providers.launchsettings import SSH_PORT, ondemand_group
from geosched.providers.launchsettings.aws import AwsRegionNetwork, AwsSettings, region_network
from geosched.providers.terraform import OWNER_KEY

NAME = aws_cloud.NAME  # what this cloud offers: geosched.clouds.aws
T = TypeVar("T")

CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientReservedInstanceCapacity",
    "InsufficientCapacity", "InsufficientCapacityOnHost", "InsufficientFreeAddressesInSubnet",
    "SpotMaxPriceTooLow", "capacity-not-available",
})
QUOTA_CODES = frozenset({
    "InstanceLimitExceeded", "VcpuLimitExceeded", "MaxSpotInstanceCountExceeded", "SpotInstanceCountExceeded",
    "AddressLimitExceeded", "ResourceLimitExceeded",
})
UNSUPPORTED_CODES = frozenset({"Unsupported", "UnsupportedOperation", "InvalidInstanceType"})
REGION_UNSUPPORTED_CODES = frozenset({"OptInRequired", "InvalidAMIID.NotFound", "InvalidAMIID.Unavailable"})
RATE_CODES = frozenset({
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled", "TooManyRequestsException",
    "RequestThrottledException", "SlowDown",
})
TRANSIENT_CODES = frozenset({"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable",
                             "RequestTimeout", "RequestTimeoutException"})
AUTH_CODES = frozenset({
    "AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId", "SignatureDoesNotMatch", "ExpiredToken",
    "ExpiredTokenException", "AccessDenied", "AccessDeniedException", "MissingAuthenticationToken",
    "InvalidAccessKeyId", "Blocked", "PendingVerification",
})
GONE_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})
# The on-demand security group: another process created it between our describe and create (race), a rule
# that is already there, one that is already gone, and a group id EC2 does not know yet right after creating
# it (eventual consistency).
GROUP_DUPLICATE = "InvalidGroup.Duplicate"
RULE_DUPLICATE = "InvalidPermission.Duplicate"
RULE_GONE = "InvalidPermission.NotFound"
GROUP_NOT_YET = "InvalidGroup.NotFound"

# GPU instance families, so catalog calls never page through all ~900 instance types.
GPU_FAMILIES = ("p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "g4dn", "g5", "g6", "g6e")
# Service Quotas codes for running vCPUs by instance-family letter and market.
VCPU_QUOTA_CODES: Mapping[tuple[str, Pricing], str] = {
    ("p", Pricing.ON_DEMAND): "L-417A185B", ("g", Pricing.ON_DEMAND): "L-DB2E81BA",
    ("p", Pricing.SPOT): "L-7212CCBC", ("g", Pricing.SPOT): "L-3819A6DF",
}
# Families whose running vCPUs count against each quota class (the letter of VCPU_QUOTA_CODES): the G quota
# is "Running On-Demand G and VT instances".
QUOTA_CLASS_FAMILIES: Mapping[str, tuple[str, ...]] = {"p": ("p",), "g": ("g", "vt")}
# States that hold vCPU quota: a stopped instance releases it.
QUOTA_STATES = ("pending", "running")
# (quota class, spot?) -> instance type -> number of pending and running instances, in one region.
UsageCounts = Mapping[tuple[str, bool], Mapping[str, int]]
STATES = {"pending": InstanceState.PENDING, "running": InstanceState.RUNNING, "stopping": InstanceState.STOPPING,
          "stopped": InstanceState.STOPPED, "shutting-down": InstanceState.GONE, "terminated": InstanceState.GONE}
# Per-call read timeouts come from the zone budget; rounding down to these keeps the number of cached
# clients small while never letting a call outlive the deadline.
TIMEOUT_STEPS = (0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0)
# How long a Service Quotas limit read is reused: limits change only when someone raises them (a support
# case, minutes to days), so one read serves every zone attempt of a region within one command run.
QUOTA_TTL_S = 300.0


# --- error classification ---------------------------------------------------------------------------

def classify(exc: Exception, *, mutating: bool, budget: Budget) -> ProviderError:
    """Map a boto3/botocore exception to the taxonomy. `mutating` calls that time out have an unknown
    outcome and are never retried in place (StallError), reads are (TransientError) while time is left."""
    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, bex.ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", "Unknown"))
        message = str(err.get("Message", ""))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return classify_code(code, message, status)
    if isinstance(exc, bex.NoCredentialsError | bex.PartialCredentialsError | bex.CredentialRetrievalError
                  | bex.TokenRetrievalError | bex.SSOError):
        return AuthError(f"AWS credentials unavailable: {type(exc).__name__}", code=type(exc).__name__)
    if isinstance(exc, bex.ConnectTimeoutError | bex.EndpointConnectionError):
        # The request never reached the server: safe to send again.
        if budget.expired:
            return StallError("zone deadline passed while connecting", code=type(exc).__name__)
        return TransientError(f"cannot connect to the EC2 endpoint: {type(exc).__name__}", code=type(exc).__name__)
    if isinstance(exc, bex.ReadTimeoutError | bex.ConnectionClosedError | bex.HTTPClientError):
        if mutating or budget.expired:
            return StallError(f"no answer in time ({type(exc).__name__}); outcome unknown", code="Timeout")
        return TransientError(f"no answer in time: {type(exc).__name__}", code="Timeout")
    if isinstance(exc, ResponseParserError):
        # A proxy or load balancer answered with something that is not EC2's XML (an HTML 502 page): the request
        # may or may not have reached EC2.
        if mutating or budget.expired:
            return StallError("unreadable answer from the EC2 endpoint; outcome unknown", code="ResponseParserError")
        return TransientError("unreadable answer from the EC2 endpoint", code="ResponseParserError")
    if isinstance(exc, bex.BotoCoreError):
        return TransientError(f"{type(exc).__name__}", code=type(exc).__name__)
    raise exc


def classify_code(code: str, message: str, status: int) -> ProviderError:
    if code in CAPACITY_CODES:
        return CapacityError(message, code=code)
    if code in QUOTA_CODES:
        return QuotaError(message, code=code)
    if code in RATE_CODES:
        return RateError(message, code=code)
    # Before the status check: OptInRequired comes as a 401, but it is one region, not the credentials.
    if code in REGION_UNSUPPORTED_CODES:
        return UnsupportedError(message, code=code, region_wide=True)
    if code in AUTH_CODES or status in (401, 403):
        return AuthError(message, code=code)
    if code in UNSUPPORTED_CODES:
        return UnsupportedError(message, code=code)
    if code in TRANSIENT_CODES or status >= 500:
        return TransientError(message, code=code)
    # Any other refusal (bad parameter for this zone, unknown type): not worth retrying here.
    return UnsupportedError(message, code=code)


# --- pure request building --------------------------------------------------------------------------

def user_data(spec: LaunchSpec) -> str | None:
    """cloud-init that creates the login user with the gang's SSH public key (JSON-quoted, so a key can never
    break out of its YAML scalar)."""
    if not spec.ssh_public_key:
        return None
    if not SSH_USER_RE.match(spec.ssh_user):  # checked when read; kept here, where it is written into YAML
        raise ValueError(f"invalid SSH user name {spec.ssh_user!r}")
    key = json.dumps(spec.ssh_public_key.strip())
    return ("#cloud-config\nusers:\n  - default\n"
            f"  - name: {spec.ssh_user}\n    sudo: ALL=(ALL) NOPASSWD:ALL\n    shell: /bin/bash\n"
            f"    ssh_authorized_keys:\n      - {key}\n")


def tags(spec: LaunchSpec, extra: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """geosched's tags over the network's launch tags: ours win, so a module's tag can never rename a gang
    or an attempt (the owner tags agree, `check_owner` saw to that before any call)."""
    merged = dict(extra or {})
    merged.update({GANG_TAG: spec.gang, OWNER_TAG: spec.owner, ATTEMPT_TAG: spec.token, NAME_TAG: spec.token})
    return [{"Key": k, "Value": v} for k, v in merged.items()]


def run_params(spec: LaunchSpec, ami: str, zone_name: str, key_name: str | None,
               network: AwsRegionNetwork | None = None, security_group: str | None = None) -> dict[str, Any]:
    """The RunInstances request. With a Terraform network, the subnet of the zone, the module's security
    group, key pair and (when the zone has one) cluster placement group; the IAM policy the module writes
    allows launches into exactly those, tagged with its launch tags. Without one, the default subnet of the
    zone and `security_group` (the on-demand group of the store)."""
    placement: dict[str, str] = {"AvailabilityZone": zone_name}
    launch_tags = tags(spec, network.launch_tags if network is not None else None)
    params: dict[str, Any] = {
        "ImageId": ami,
        "InstanceType": spec.instance_type,
        "MinCount": spec.count,
        "MaxCount": spec.count,
        "ClientToken": spec.token,
        "Placement": placement,
        "TagSpecifications": [{"ResourceType": "instance", "Tags": launch_tags},
                              {"ResourceType": "volume", "Tags": launch_tags}],
        "InstanceInitiatedShutdownBehavior": "terminate",
        "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
    }
    data = user_data(spec)
    if data:
        params["UserData"] = data
    if network is None and security_group is not None:
        params["SecurityGroupIds"] = [security_group]
    if network is not None:
        subnet = network.subnet_for(spec.zone)
        if subnet is None:
            raise UnsupportedError(f"zone {spec.zone}: no subnet in the Terraform output", code="NoSubnet")
        params["SubnetId"] = subnet
        params["SecurityGroupIds"] = [network.security_group_id]
        group = network.placement_group_for(spec.zone)
        if group is not None:
            placement["GroupName"] = group
        # The module's key pair is the one its IAM policy allows; user data still installs the user's key.
        key_name = network.key_name
    if key_name:
        params["KeyName"] = key_name
    if spec.pricing is Pricing.SPOT:
        params["InstanceMarketOptions"] = {
            "MarketType": "spot",
            "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
        }
    return params


def ssh_permission(cidr: str) -> dict[str, Any]:
    """Ingress on tcp 22 from one admin CIDR (one rule per call: EC2 refuses a whole call when any of its
    rules exists already, which a racing process can cause)."""
    key, field = ("Ipv6Ranges", "CidrIpv6") if ":" in cidr else ("IpRanges", "CidrIp")
    return {"IpProtocol": "tcp", "FromPort": SSH_PORT, "ToPort": SSH_PORT,
            key: [{field: cidr, "Description": "geosched: SSH from admin CIDRs"}]}


def self_permission(group_id: str) -> dict[str, Any]:
    """Every protocol and port from members of the group itself: probes and NCCL between a gang's nodes."""
    return {"IpProtocol": "-1",
            "UserIdGroupPairs": [{"GroupId": group_id, "Description": "geosched: traffic between nodes"}]}


def ingress_changes(permissions: Sequence[Mapping[str, Any]], group_id: str,
                    admin_cidrs: Sequence[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rules to authorize, rules to revoke) that turn the group's ingress `permissions` into: tcp 22 from
    exactly `admin_cidrs`, everything from the group itself. Port-22 sources no longer in the admin CIDRs are
    revoked, so narrowing GEOSCHED_ADMIN_CIDRS narrows an existing group; other rules are left alone."""
    ssh: set[str] = set()
    from_self = False
    for perm in permissions:
        proto = str(perm.get("IpProtocol", ""))
        if proto == "tcp" and perm.get("FromPort") == SSH_PORT and perm.get("ToPort") == SSH_PORT:
            ssh |= {str(r["CidrIp"]) for r in perm.get("IpRanges", []) or []}
            ssh |= {str(r["CidrIpv6"]) for r in perm.get("Ipv6Ranges", []) or []}
        if proto == "-1" and any(g.get("GroupId") == group_id for g in perm.get("UserIdGroupPairs", []) or []):
            from_self = True
    add = [] if from_self else [self_permission(group_id)]
    add += [ssh_permission(c) for c in admin_cidrs if c not in ssh]
    revoke = [ssh_permission(c) for c in sorted(ssh - set(admin_cidrs))]
    return add, revoke


def instance_from(raw: Mapping[str, Any], region: str, zone_ids: Mapping[str, str]) -> Instance:
    tag_map = {t["Key"]: t["Value"] for t in raw.get("Tags", []) or []}
    zone_name = raw.get("Placement", {}).get("AvailabilityZone", "")
    token = tag_map.get(ATTEMPT_TAG)
    index = raw.get("AmiLaunchIndex")
    if INDEX_TAG in tag_map and tag_map[INDEX_TAG].isdigit():
        index = int(tag_map[INDEX_TAG])
    addresses = tuple(a for a in (raw.get("PrivateIpAddress"), raw.get("PublicIpAddress")) if a)
    return Instance(
        provider=NAME,
        provider_id=str(raw["InstanceId"]),
        name=f"{token}-{index}" if token and index is not None else str(raw["InstanceId"]),
        region=region,
        zone=zone_ids.get(zone_name, zone_name),
        instance_type=str(raw.get("InstanceType", "")),
        state=STATES.get(str(raw.get("State", {}).get("Name", "")), InstanceState.PENDING),
        gang=tag_map.get(GANG_TAG),
        token=token,
        owner=tag_map.get(OWNER_TAG),
        index=int(index) if index is not None else None,
        addresses=addresses,
        pricing=Pricing.SPOT if raw.get("InstanceLifecycle") == "spot" else Pricing.ON_DEMAND,
        launched_at=_timestamp(raw.get("LaunchTime")),
        ended_at=transition_time(str(raw.get("StateTransitionReason") or "")),
    )


# cloud-init's cc_keys_to_console writes the machine's public host keys between these lines at first boot.
_KEYS_BLOCK_RE = re.compile(r"-----BEGIN SSH HOST KEY KEYS-----\r?\n(.*?)-----END SSH HOST KEY KEYS-----", re.S)
_KEY_LINE_RE = re.compile(r"^(ssh-ed25519|ecdsa-sha2-nistp(?:256|384|521)|ssh-rsa) ([A-Za-z0-9+/=]+)")


def console_host_keys(console: str) -> tuple[str, ...]:
    """The key lines of cloud-init's host key block in a console output (comments dropped)."""
    block = _KEYS_BLOCK_RE.search(console)
    if block is None:
        return ()
    keys = (_KEY_LINE_RE.match(line.strip()) for line in block.group(1).splitlines())
    return tuple(f"{m.group(1)} {m.group(2)}" for m in keys if m)


# The Price List API is served from us-east-1 (also eu-central-1, ap-south-1) and lists every region's prices.
PRICE_LIST_REGION = "us-east-1"
# Spot placement scores depend on the capacity asked for; a refresh does not know the gang yet, so it asks for
# this many instances of one type in one zone (a typical multi-node training gang) and stores the target with
# the score.
SCORE_TARGET_INSTANCES = 4


def spot_usd(raw: object) -> float | None:
    """A DescribeSpotPriceHistory `SpotPrice` (a decimal string, EC2 API reference) as $/h; None for anything that
    is not a positive finite number ("abc", "", NaN, 0), which would otherwise raise or read as free capacity."""
    try:
        price = float(str(raw))
    except ValueError:
        return None
    return price if math.isfinite(price) and price > 0 else None


def volatility_signals(region: str, history: Iterable[Mapping[str, Any]], zone_ids: Mapping[str, str],
                       now: float) -> list[SpotSignal]:
    """One volatility signal per (instance type, zone) from DescribeSpotPriceHistory records (`SpotPriceHistory`
    items: AvailabilityZone, InstanceType, ProductDescription, SpotPrice as a string, Timestamp)."""
    series: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for h in history:
        zone = zone_ids.get(str(h["AvailabilityZone"]), str(h["AvailabilityZone"]))
        at = h["Timestamp"].timestamp() if hasattr(h["Timestamp"], "timestamp") else float(h["Timestamp"])
        price = spot_usd(h.get("SpotPrice"))
        if price is None:
            continue  # a feed error (pricescreen drops it from the prices too): NaN would poison the whole series
        series.setdefault((str(h["InstanceType"]), zone), []).append((at, price))
    out = []
    for (instance_type, zone), points in sorted(series.items()):
        v = spotrisk.volatility(points, now - spotrisk.VOLATILITY_WINDOW_S, now)
        if v is not None:
            out.append(SpotSignal(NAME, instance_type, region, zone, "volatility", v.cv, now,
                                  "aws:spot-price-history", changes=v.changes))
    return out


def ondemand_from_price_list(item: str | Mapping[str, Any]) -> tuple[float, float] | None:
    """(USD per hour, effective date) of one GetProducts entry (a JSON string, aws_v1: `terms.OnDemand.<term>.
    priceDimensions.<rate>.pricePerUnit.USD` in unit "Hrs"); None for anything else."""
    try:
        doc = json.loads(item) if isinstance(item, str) else item
        for term in (doc.get("terms", {}).get("OnDemand") or {}).values():
            valid_from = _iso(str(term.get("effectiveDate", "")))
            for dim in (term.get("priceDimensions") or {}).values():
                if dim.get("unit") == "Hrs":
                    usd = float(dim["pricePerUnit"]["USD"])
                    if usd > 0 and math.isfinite(usd):
                        return usd, valid_from if valid_from is not None else time.time()
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return None


def _iso(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


# EC2's StateTransitionReason carries the time of the last state change, e.g. "User initiated (2015-11-20
# 20:28:59 GMT)" (DescribeInstances, Instance.StateTransitionReason; moto writes "... UTC").
_TRANSITION_RE = re.compile(r"\((\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) (?:GMT|UTC)\)")


def transition_time(reason: str) -> float | None:
    match = _TRANSITION_RE.search(reason)
    if match is None:
        return None
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()


def _timestamp(value: Any) -> float | None:
    """boto3 parses EC2's timestamps into aware datetimes."""
    return value.timestamp() if isinstance(value, datetime) else None


log = logging.getLogger(__name__)


# --- the provisioning log ---------------------------------------------------------------------------

def _log_call(http_response: Any, parsed: Mapping[str, Any], model: Any, context: Mapping[str, Any] | None = None,
              **_: Any) -> None:
    """botocore's after-call hook: one line per API call for the provisioning log (geosched/providers/provlog.py):
    operation, HTTP status, the error code if any and the request id AWS support asks for. Never the parameters."""
    meta = parsed.get("ResponseMetadata") or {}
    error = (parsed.get("Error") or {}).get("Code")
    log.debug("aws %s %s %s: HTTP %s%s, request %s", (context or {}).get("client_region", "-"),
              model.service_model.service_name, model.name, getattr(http_response, "status_code", "?"),
              f" {error}" if error else "", meta.get("RequestId", "-"))


def _log_call_error(exception: BaseException, event_name: str = "", context: Mapping[str, Any] | None = None,
                    **_: Any) -> None:
    """botocore's after-call-error hook: the call got no answer (connection refused or reset, a read timeout).
    The event is named `after-call-error.<service>.<operation>`."""
    log.warning("aws %s %s: no answer: %s", (context or {}).get("client_region", "-"),
                " ".join(event_name.split(".")[1:]), type(exception).__name__)


# --- the provider -----------------------------------------------------------------------------------

class AwsProvider:
    """EC2 in every region the account can use; zones are named by AZ ID, as in the catalog."""

    def __init__(self, settings: AwsSettings | None = None, session: Any | None = None) -> None:
        self.settings = settings or AwsSettings()
        self._session = session or boto3.session.Session()
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, str, float], Any] = {}
        self._zone_maps: dict[str, dict[str, str]] = {}
        self._amis: dict[str, str] = {}
        # Quota pre-check caches, shared by the threads of parallel zone attempts (under `_lock`):
        # (region, quota code) -> (monotonic time read, limit or None when unreadable), reused for `quota_ttl_s`;
        # region -> instance counts per (quota class, spot) of pending and running instances, reused until
        # this provider launches or terminates in the region (`_usage_changed`). `_usage_epoch` counts those
        # changes so that a read that overlapped one is not stored (it may predate the change).
        self.quota_ttl_s = QUOTA_TTL_S
        self._quotas: dict[tuple[str, str], tuple[float, float | None]] = {}
        self._usage: dict[str, UsageCounts] = {}
        self._usage_epoch: dict[str, int] = {}
        self._vcpus: dict[str, float] = {}
        self._groups: dict[tuple[str, str], str] = {}  # (region, owner) -> on-demand security group id

    @property
    def name(self) -> str:
        return NAME

    # -- plumbing ----------------------------------------------------------------------------------

    def _client(self, service: str, region: str, budget: Budget) -> Any:
        timeout = max((s for s in TIMEOUT_STEPS if s <= budget.timeout()), default=TIMEOUT_STEPS[0])
        key = (service, region, timeout)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                config = Config(retries={"total_max_attempts": 1, "mode": "standard"}, read_timeout=timeout,
                                connect_timeout=min(self.settings.connect_timeout_s, timeout))
                client = self._session.client(service, region_name=region, config=config)
                client.meta.events.register("after-call", _log_call)
                client.meta.events.register("after-call-error", _log_call_error)
                self._clients[key] = client
            return client

    def _call(self, budget: Budget, fn: Callable[[], T], *, mutating: bool = False) -> T:
        if budget.expired:
            raise StallError("zone deadline passed before the call", code="Deadline")
        budget.tick()
        try:
            return fn()
        except Exception as exc:
            raise classify(exc, mutating=mutating, budget=budget) from None

    def _pages(self, budget: Budget, region: str, method: str, key: str, **params: Any) -> list[Any]:
        ec2 = self._client("ec2", region, budget)
        out: list[Any] = []
        token: str | None = None
        while True:
            page_params = dict(params, NextToken=token) if token else params
            page = self._call(budget, partial(getattr(ec2, method), **page_params))
            out.extend(page.get(key, []))
            token = page.get("NextToken")
            if not token:
                return out

    def _zone_map(self, region: str, budget: Budget) -> dict[str, str]:
        """AZ name -> AZ ID for a region (the mapping differs between accounts, so it is always asked)."""
        with self._lock:
            cached = self._zone_maps.get(region)
        if cached is not None:
            return cached
        ec2 = self._client("ec2", region, budget)
        zones = self._call(budget, lambda: ec2.describe_availability_zones(
            Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}]))["AvailabilityZones"]
        mapping = {z["ZoneName"]: z["ZoneId"] for z in zones}
        with self._lock:
            self._zone_maps[region] = mapping
        return mapping

    def _zone_name(self, region: str, zone_id: str, budget: Budget) -> str:
        names = {zid: name for name, zid in self._zone_map(region, budget).items()}
        if zone_id in names:
            return names[zone_id]
        if zone_id in self._zone_map(region, budget):
            return zone_id
        raise UnsupportedError(f"zone {zone_id} is not visible to this account in {region}", code="UnknownZone")

    def _ami(self, region: str, budget: Budget) -> str:
        if self.settings.ami:
            return self.settings.ami
        with self._lock:
            cached = self._amis.get(region)
        if cached:
            return cached
        ec2 = self._client("ec2", region, budget)
        images = self._call(budget, lambda: ec2.describe_images(Owners=["amazon"], Filters=[
            {"Name": "name", "Values": [self.settings.ami_name_pattern]},
            {"Name": "state", "Values": ["available"]},
            {"Name": "architecture", "Values": ["x86_64"]},
        ]))["Images"]
        if not images:
            raise UnsupportedError(f"no image matching {self.settings.ami_name_pattern!r} in {region}; set "
                                   "GEOSCHED_AWS_AMI", code="NoImage", region_wide=True)
        newest = max(images, key=lambda i: (str(i.get("CreationDate", "")), str(i["ImageId"])))
        with self._lock:
            self._amis[region] = str(newest["ImageId"])
        return str(newest["ImageId"])

    # -- what the cloud offers ---------------------------------------------------------------------

    def regions(self, budget: Budget) -> tuple[str, ...]:
        if self.settings.regions:
            return self.settings.regions
        home = self._session.region_name or "us-east-1"
        ec2 = self._client("ec2", home, budget)
        found = self._call(budget, lambda: ec2.describe_regions())["Regions"]
        return tuple(sorted(str(r["RegionName"]) for r in found))

    def zones(self, region: str, budget: Budget) -> tuple[str, ...]:
        return tuple(sorted(self._zone_map(region, budget).values()))

    def region_info(self, region: str) -> Region | None:
        return catalog.regions().get(f"{NAME}:{region}")

    def offerings(self, region: str, budget: Budget) -> tuple[Offering, ...]:
        types = self._pages(budget, region, "describe_instance_types", "InstanceTypes",
                            Filters=[{"Name": "instance-type", "Values": [f"{f}.*" for f in GPU_FAMILIES]}])
        specs: dict[str, tuple[str, int, float, float]] = {}
        for t in types:
            gpus = (t.get("GpuInfo") or {}).get("Gpus") or []
            if not gpus:
                continue
            name = str(t["InstanceType"])
            shipped = next((o for o in catalog.offerings() if o.provider == NAME and o.instance_type == name), None)
            gpu = shipped.gpu if shipped else str(gpus[0]["Name"])
            specs[name] = (gpu, int(sum(g["Count"] for g in gpus)), float(t["VCpuInfo"]["DefaultVCpus"]),
                           float(t["MemoryInfo"]["SizeInMiB"]) / 1024.0)
        if not specs:
            return ()
        located = self._pages(budget, region, "describe_instance_type_offerings", "InstanceTypeOfferings",
                              LocationType="availability-zone-id",
                              Filters=[{"Name": "instance-type", "Values": sorted(specs)}])
        index = catalog.offering_index()
        out = []
        for item in located:
            name, zone = str(item["InstanceType"]), str(item["Location"])
            gpu, count, vcpus, memory = specs[name]
            shipped = index.get((NAME, name, zone))
            out.append(Offering(NAME, name, gpu, count, vcpus, memory, region, zone,
                                shipped.price_ondemand if shipped else _region_price(name, region),
                                shipped.price_spot if shipped else None))
        return tuple(sorted(out, key=lambda o: (o.zone, o.instance_type)))

    def prices(self, region: str, instance_types: Sequence[str], budget: Budget) -> tuple[PriceObservation, ...]:
        """Spot prices from DescribeSpotPriceHistory and on-demand prices from the Price List API (GetProducts),
        each valid from its own time (the spot price's timestamp, the on-demand term's effective date). A price
        nobody observed is not recorded: the shipped catalog stays the fallback, shown as such."""
        if not instance_types:
            return ()
        zone_ids = self._zone_map(region, budget)
        history = self._pages(budget, region, "describe_spot_price_history", "SpotPriceHistory",
                              InstanceTypes=list(instance_types), ProductDescriptions=["Linux/UNIX"],
                              StartTime=datetime.now(UTC))
        latest: dict[tuple[str, str], tuple[float, float]] = {}
        for h in history:
            zone = zone_ids.get(str(h["AvailabilityZone"]), str(h["AvailabilityZone"]))
            at = h["Timestamp"].timestamp() if hasattr(h["Timestamp"], "timestamp") else time.time()
            key = (str(h["InstanceType"]), zone)
            # Not a number ("abc") becomes NaN, which catalog refresh's screen (pricescreen) drops with one warning
            # line, as it does NaN and zero.
            try:
                price = float(str(h.get("SpotPrice")))
            except ValueError:
                price = math.nan
            if key not in latest or at > latest[key][0]:
                latest[key] = (at, price)
        out = [PriceObservation(NAME, t, region, z, Pricing.SPOT, price, at, "aws:spot-price-history")
               for (t, z), (at, price) in sorted(latest.items())]
        zones = sorted(set(zone_ids.values()))
        for instance_type in instance_types:
            found = self.ondemand_price(region, instance_type, budget)
            if found is not None:
                # One price per region: the on-demand rate is the same in every zone of it.
                out += [PriceObservation(NAME, instance_type, region, z, Pricing.ON_DEMAND, found[0], found[1],
                                         "aws:price-list") for z in zones]
        return tuple(out)

    def placement_scores(self, region: str, instance_types: Sequence[str], budget: Budget) -> tuple[SpotSignal, ...]:
        """The Spot placement score of each zone (GetSpotPlacementScores, one call per type: a score is for the
        set of types asked together; SingleAvailabilityZone so each zone is scored)."""
        now = time.time()
        out: list[SpotSignal] = []
        for instance_type in instance_types:
            scores = self._pages(budget, region, "get_spot_placement_scores", "SpotPlacementScores",
                                 InstanceTypes=[instance_type], TargetCapacity=SCORE_TARGET_INSTANCES,
                                 TargetCapacityUnitType="units", SingleAvailabilityZone=True, RegionNames=[region])
            out += [SpotSignal(NAME, instance_type, region, str(item["AvailabilityZoneId"]), "score",
                               float(item["Score"]), now, "aws:get-spot-placement-scores",
                               target=SCORE_TARGET_INSTANCES)
                    for item in scores if item.get("AvailabilityZoneId") and item.get("Score") is not None]
        return tuple(out)

    def price_volatility(self, region: str, instance_types: Sequence[str], budget: Budget) -> tuple[SpotSignal, ...]:
        """The volatility of the last 7 days' spot price per zone (DescribeSpotPriceHistory)."""
        if not instance_types:
            return ()
        now = time.time()
        history = self._pages(budget, region, "describe_spot_price_history", "SpotPriceHistory",
                              InstanceTypes=list(instance_types), ProductDescriptions=["Linux/UNIX"],
                              StartTime=datetime.fromtimestamp(now - spotrisk.VOLATILITY_WINDOW_S, UTC),
                              EndTime=datetime.fromtimestamp(now, UTC))
        return tuple(volatility_signals(region, history, self._zone_map(region, budget), now))

    def host_keys(self, instance: Instance, budget: Budget) -> tuple[str, ...]:
        """The host keys cloud-init prints to the console at boot (GetConsoleOutput, base64)."""
        ec2 = self._client("ec2", instance.region, budget)
        answer = self._call(budget, lambda: ec2.get_console_output(InstanceId=instance.provider_id))
        text = answer.get("Output") or ""
        with contextlib.suppress(ValueError, binascii.Error):  # EC2 sends base64; some SDKs decode it already
            text = base64.b64decode(text, validate=True).decode("utf-8", "replace")
        return console_host_keys(text)

    def ondemand_price(self, region: str, instance_type: str, budget: Budget) -> tuple[float, float] | None:
        """(USD per hour, valid from) of on-demand Linux, shared tenancy, from the Price List API (served in
        us-east-1 for every region). None when it lists no such product or cannot be read (no
        pricing:GetProducts permission, say): the shipped catalog's price then stands, marked as shipped."""
        client = self._client("pricing", PRICE_LIST_REGION, budget)
        filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in (
            ("instanceType", instance_type), ("regionCode", region), ("operatingSystem", "Linux"),
            ("tenancy", "Shared"), ("preInstalledSw", "NA"), ("capacitystatus", "Used"))]
        try:
            answer = self._call(budget, lambda: client.get_products(ServiceCode="AmazonEC2", Filters=filters,
                                                                    FormatVersion="aws_v1", MaxResults=10))
        except ProviderError:
            return None
        for item in answer.get("PriceList", []):
            price = ondemand_from_price_list(item)
            if price is not None:
                return price
        return None

    def check_quota(self, spec: LaunchSpec, budget: Budget) -> QuotaCheck:
        """The family's Service Quotas vCPU limit minus the vCPUs running and pending instances of the same
        quota class and market already hold in the region. An unreadable limit skips the check (no usage
        calls): the launch itself then tells."""
        klass = quota_class(spec.instance_type)
        code = VCPU_QUOTA_CODES.get((klass, spec.pricing)) if klass else None
        if klass is None or code is None:
            return QuotaCheck(False, f"no vCPU quota code known for {spec.instance_type}")
        limit = self._quota_limit(spec.region, code, budget)
        if limit is None:
            return QuotaCheck(False, f"quota {code} not readable in {spec.region}")
        used = self.vcpus_in_use(spec.region, klass, spec.pricing, budget, cached=True)
        need = spec.vcpus * spec.count
        if need + used > limit:
            raise QuotaError(f"the gang needs {need:g} vCPUs, {used:g} of the {limit:g} of quota {code} in "
                             f"{spec.region} are in use", code="VcpuLimitExceeded")
        return QuotaCheck(True, f"quota {code}: {limit - used:g} of {limit:g} vCPUs free")

    def _quota_limit(self, region: str, code: str, budget: Budget) -> float | None:
        """The Service Quotas value of `code` in `region`, read at most once per `quota_ttl_s` (an
        unreadable one too: asking again would only be refused again). Concurrent misses may both read."""
        key = (region, code)
        with self._lock:
            cached = self._quotas.get(key)
        if cached is not None and time.monotonic() - cached[0] < self.quota_ttl_s:
            return cached[1]
        quotas = self._client("service-quotas", region, budget)
        budget.tick()
        try:
            value: float | None = float(
                quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
        except Exception:  # no permission, or no such endpoint: the launch itself will tell
            value = None
        with self._lock:
            self._quotas[key] = (time.monotonic(), value)
        return value

    def vcpus_in_use(self, region: str, klass: str, pricing: Pricing, budget: Budget, *,
                     cached: bool = False) -> float:
        """vCPUs of pending and running instances of quota class `klass` ("p", "g") in `pricing`'s market:
        DescribeInstances for the instances (any owner: the quota is the account's), DescribeInstanceTypes
        for the vCPUs of their types. `cached`: reuse the region's last read unless this provider launched
        or terminated there since (others' launches are not seen: the pre-check is best effort anyway)."""
        counts = self._instance_counts(region, budget, cached=cached).get((klass, pricing is Pricing.SPOT), {})
        vcpus = self._type_vcpus(region, sorted(counts), budget)
        return vcpu_usage(counts, vcpus)

    def _instance_counts(self, region: str, budget: Budget, *, cached: bool) -> UsageCounts:
        with self._lock:
            epoch = self._usage_epoch.get(region, 0)
            hit = self._usage.get(region) if cached else None
        if hit is not None:
            return hit
        # Filtered by state on the server and by class here: not every EC2 implementation (moto) takes
        # wildcards in the instance-type filter. One read serves every class and market.
        reservations = self._pages(budget, region, "describe_instances", "Reservations", MaxResults=1000,
                                   Filters=[{"Name": "instance-state-name", "Values": list(QUOTA_STATES)}])
        counts = instance_counts(raw for r in reservations for raw in r.get("Instances", []))
        with self._lock:
            if self._usage_epoch.get(region, 0) == epoch:  # no launch or terminate of ours overlapped the read
                self._usage[region] = counts
        return counts

    def _usage_changed(self, region: str) -> None:
        """This provider launched or terminated in `region`: the next pre-check there reads usage again."""
        with self._lock:
            self._usage_epoch[region] = self._usage_epoch.get(region, 0) + 1
            self._usage.pop(region, None)

    def _type_vcpus(self, region: str, names: Sequence[str], budget: Budget) -> dict[str, float]:
        with self._lock:
            missing = [n for n in names if n not in self._vcpus]
        if missing:
            found = self._pages(budget, region, "describe_instance_types", "InstanceTypes", InstanceTypes=missing)
            with self._lock:
                for t in found:
                    self._vcpus[str(t["InstanceType"])] = float(t["VCpuInfo"]["DefaultVCpus"])
        with self._lock:
            return {n: self._vcpus[n] for n in names if n in self._vcpus}

    # -- how to launch there -----------------------------------------------------------------------

    def network(self, region: str, zone: str) -> AwsRegionNetwork | None:
        """The Terraform network a launch in `zone` uses; None without a config. A zone the config does not
        cover is refused before any call (the plan leaves such zones out; this guards direct callers)."""
        config = self.settings.terraform
        if config is None:
            return None
        net = region_network(config, region)
        if net is None or net.subnet_for(zone) is None:
            raise UnsupportedError(f"zone {zone}: no subnet in the Terraform output {config.source}",
                                   code="NoSubnet", region_wide=net is None)
        return net

    def launch(self, spec: LaunchSpec, budget: Budget) -> tuple[Instance, ...]:
        net = self.network(spec.region, spec.zone)
        if net is not None and net.launch_tags.get(OWNER_KEY) != spec.owner:
            # `check_owner` refuses this before any call; a direct caller still must not burn a denied launch.
            raise AuthError(f"the Terraform output's {OWNER_KEY} tag is not this store's owner id {spec.owner}: "
                            "the IAM policy would deny the launch", code="OwnerMismatch")
        zone_name = self._zone_name(spec.region, spec.zone, budget)
        ami = self._ami(spec.region, budget)
        group = self.security_group(spec.region, spec.owner, budget) if net is None else None
        params = run_params(spec, ami, zone_name, self.settings.key_name, net, group)
        ec2 = self._client("ec2", spec.region, budget)
        try:
            reservation = self._call(budget, lambda: ec2.run_instances(**params), mutating=True)
        except ProviderError as exc:
            if may_have_created(exc):
                self._usage_changed(spec.region)
            raise
        # After the call, not before: a usage read that overlapped it must not be reused.
        self._usage_changed(spec.region)
        zone_ids = self._zone_map(spec.region, budget)
        out = []
        for raw in reservation.get("Instances", []):
            inst = instance_from(raw, spec.region, zone_ids)
            out.append(Instance(inst.provider, inst.provider_id, f"{spec.token}-{inst.index}", inst.region,
                                inst.zone, inst.instance_type, inst.state, spec.gang, spec.token, spec.owner,
                                inst.index, inst.addresses, spec.pricing))
        return tuple(out)

    # -- the on-demand security group (no Terraform network) -------------------------------------------

    def security_group(self, region: str, owner: str, budget: Budget) -> str:
        """The id of security group `geosched-<owner>` in the region's default VPC, created if missing, with
        its ingress brought to: tcp 22 from the admin CIDRs, everything from the group itself. Idempotent and
        safe against a racing process (a duplicate group or rule is taken as done); once per provider and
        region. Every call is counted on `budget`. Errors: no default VPC is region-wide UnsupportedError,
        a refused permission AuthError (the account may not manage security groups: no AWS launch will work
        without a Terraform network)."""
        key = (region, owner)
        with self._lock:
            cached = self._groups.get(key)
        if cached is not None:
            return cached
        name = ondemand_group(owner)
        try:
            group_id = self._ensure_group(region, name, owner, budget)
        except ProviderError as exc:
            if isinstance(exc, UnsupportedError):
                exc.region_wide = True  # every zone of the region launches into this group
            raise exc.with_context(f"on-demand security group {name} in {region}") from None
        with self._lock:
            self._groups[key] = group_id
        return group_id

    def _ensure_group(self, region: str, name: str, owner: str, budget: Budget) -> str:
        sources = admin_sources(self.settings.admin_cidrs)
        ec2 = self._client("ec2", region, budget)
        vpcs = self._call(budget, lambda: ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}]))
        if not vpcs.get("Vpcs"):
            raise UnsupportedError(f"no default VPC in {region}: create one (`aws ec2 create-default-vpc --region "
                                   f"{region}`) or launch into a Terraform network (--tf-output)", code="NoDefaultVpc",
                                   region_wide=True)
        vpc = str(vpcs["Vpcs"][0]["VpcId"])
        group = self._find_group(ec2, name, vpc, budget)
        if group is None:
            tags = [{"Key": OWNER_TAG, "Value": owner}, {"Key": NAME_TAG, "Value": name}]
            # Creating and authorizing are idempotent here (duplicates are taken as done), so a timed-out
            # call is retried like a read (mutating=False) instead of stalling the zone.
            try:
                created = self._call(budget, lambda: ec2.create_security_group(
                    GroupName=name, VpcId=vpc,
                    Description=f"geosched nodes of store {owner}: SSH from admin CIDRs, all traffic within",
                    TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}]))
                group = {"GroupId": created["GroupId"], "IpPermissions": []}
            except UnsupportedError as exc:
                if exc.code != GROUP_DUPLICATE:
                    raise
                group = self._find_group(ec2, name, vpc, budget)  # another process created it first
                if group is None:
                    raise TransientError(f"{name} exists but is not visible yet", code=GROUP_DUPLICATE) from None
        group_id = str(group["GroupId"])
        add, revoke = ingress_changes(group.get("IpPermissions", []) or [], group_id, sources)
        for perm in add:
            self._change_ingress(budget, partial(ec2.authorize_security_group_ingress, GroupId=group_id,
                                                 IpPermissions=[perm]), RULE_DUPLICATE)
        if revoke:
            self._change_ingress(budget, partial(ec2.revoke_security_group_ingress, GroupId=group_id,
                                                 IpPermissions=revoke), RULE_GONE)
        return group_id

    def _find_group(self, ec2: Any, name: str, vpc: str, budget: Budget) -> dict[str, Any] | None:
        found = self._call(budget, lambda: ec2.describe_security_groups(Filters=[
            {"Name": "group-name", "Values": [name]}, {"Name": "vpc-id", "Values": [vpc]}]))["SecurityGroups"]
        return dict(found[0]) if found else None

    def _change_ingress(self, budget: Budget, fn: Callable[[], Any], done_code: str) -> None:
        try:
            self._call(budget, fn)
        except UnsupportedError as exc:
            if exc.code == GROUP_NOT_YET:
                # A group created a moment ago that EC2 does not list everywhere yet: retry in place.
                raise TransientError(exc.message, code=exc.code) from None
            if exc.code != done_code:
                raise

    def describe(self, gang: str | None, regions: Iterable[str], budget: Budget) -> tuple[Instance, ...]:
        wanted = tuple(regions) or self.regions(budget)
        flt = ({"Name": f"tag:{GANG_TAG}", "Values": [gang]} if gang is not None
               else {"Name": "tag-key", "Values": [GANG_TAG]})
        out: list[Instance] = []
        for region in wanted:
            reservations = self._pages(budget, region, "describe_instances", "Reservations", Filters=[flt],
                                       MaxResults=1000)
            zone_ids = self._zone_map(region, budget) if reservations else {}
            out.extend(instance_from(raw, region, zone_ids) for r in reservations for raw in r.get("Instances", []))
        return tuple(out)

    def terminate(self, instances: Sequence[Instance], budget: Budget) -> None:
        by_region: dict[str, list[str]] = {}
        for inst in instances:
            by_region.setdefault(inst.region, []).append(inst.provider_id)
        for region, ids in by_region.items():
            ec2 = self._client("ec2", region, budget)
            try:
                for start in range(0, len(ids), 500):
                    chunk = ids[start:start + 500]
                    try:
                        self._call(budget, partial(ec2.terminate_instances, InstanceIds=chunk))
                    except UnsupportedError as exc:
                        if exc.code not in GONE_CODES:
                            raise
                        # One unknown id fails the whole call: terminate the rest one by one.
                        for one in chunk:
                            self._terminate_one(ec2, one, budget)
            finally:  # even a failed terminate may have released some (a rolled-back gang's vCPUs)
                self._usage_changed(region)

    def _terminate_one(self, ec2: Any, instance_id: str, budget: Budget) -> None:
        try:
            self._call(budget, lambda: ec2.terminate_instances(InstanceIds=[instance_id]))
        except UnsupportedError as exc:
            if exc.code not in GONE_CODES:
                raise

    def check(self) -> tuple[CheckItem, ...]:
        items = []
        creds = None
        try:
            creds = self._session.get_credentials()
        except Exception as exc:  # a broken profile must be reported, not crash the check
            items.append(CheckItem(NAME, "credentials", False, f"cannot load: {type(exc).__name__}"))
        if creds is None and not items:
            items.append(CheckItem(NAME, "credentials", False,
                                   "none found: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, or run "
                                   "`aws configure` / `aws sso login`"))
        elif creds is not None:
            items.append(CheckItem(NAME, "credentials", True, f"found (source: {getattr(creds, 'method', '?')})"))
        region = self._session.region_name
        regions = self.settings.regions
        items.append(CheckItem(NAME, "regions", bool(region or regions),
                               f"{', '.join(regions)}" if regions else (f"default region {region}" if region else
                               "no default region: set AWS_REGION or GEOSCHED_AWS_REGIONS")))
        if creds is not None:
            probe = (regions or (region or "us-east-1",))[0]
            budget = Budget(20.0, 10.0)
            try:
                self._zone_map(probe, budget)
                items.append(CheckItem(NAME, "api", True, f"EC2 answered in {probe}"))
            except ProviderError as exc:
                items.append(CheckItem(NAME, "api", False, f"EC2 in {probe}: {exc.kind}: {exc}"))
        return tuple(items)


def quota_class(instance_type: str) -> str | None:
    """The vCPU quota class ("p", "g") of an instance type, from its family; None for other families."""
    family = instance_type.split(".", 1)[0]
    return next((k for k, fams in QUOTA_CLASS_FAMILIES.items() if family.startswith(fams)), None)


def instance_counts(instances: Iterable[Mapping[str, Any]]) -> UsageCounts:
    """Instances (DescribeInstances items) per quota class and market, then per type; other families are left
    out."""
    out: dict[tuple[str, bool], dict[str, int]] = {}
    for raw in instances:
        name = str(raw.get("InstanceType", ""))
        klass = quota_class(name)
        if klass is not None:
            per_type = out.setdefault((klass, raw.get("InstanceLifecycle") == "spot"), {})
            per_type[name] = per_type.get(name, 0) + 1
    return out


def may_have_created(exc: ProviderError) -> bool:
    """Could a launch that failed with `exc` have created instances? (Then usage is read again.) Refusals
    (capacity, quota, unsupported, auth) create nothing; a lost answer or a partial gang may have."""
    return bool(exc.launched) or isinstance(exc, StallError | TransientError | RateError)


def vcpu_usage(counts: Mapping[str, int], vcpus: Mapping[str, float]) -> float:
    """vCPUs held by `counts` instances per type. A type whose vCPUs are unknown counts as 0: the check can
    then only under-count usage, and the launch itself is the final word."""
    return sum(n * vcpus.get(name, 0.0) for name, n in counts.items())


def _region_price(instance_type: str, region: str) -> float | None:
    prices = [o.price_ondemand for o in catalog.offerings()
              if o.provider == NAME and o.instance_type == instance_type and o.region == region and o.price_ondemand]
    return min(prices) if prices else None


# The provider geosched.providers.registry builds for this cloud, from its launch settings (AwsSettings).
PROVIDER = AwsProvider
