"""The network a provider launches into, read from `terraform output -json` of geosched's Terraform modules.

`terraform/examples/multi-region` (and any root module built the same way) has one output, `geosched`, that
gathers per provider and region what a launch needs:

    {"geosched": {"sensitive": false, "type": [...], "value": {
        "schema_version": 1,
        "aws": {"us-east-1": {"vpc_id": "vpc-...", "subnet_ids": {"use1-az1": "subnet-..."},
                              "security_group_id": "sg-...", "key_name": "...",
                              "placement_group_names": {"use1-az1": "..."}, "launch_tags": {"geosched-owner": "..."}}},
        "gcp": {"us-central1": {"project": "...", "network": "https://.../global/networks/...",
                                "subnetwork": "https://.../regions/us-central1/subnetworks/...",
                                "zones": ["us-central1-a"], "firewall_tag": "...", "placement_policy": null,
                                "service_account_email": "...", "launch_labels": {"geosched-owner": "..."}}}}}}

Every problem is one InputError naming the file, the field path (`geosched.value.aws.us-east-1.subnet_ids`) and
the reason. Values of an output marked sensitive never appear in errors, not even as path keys.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from geosched.clouds import aws as aws_cloud
from geosched.clouds import gcp as gcp_cloud
from geosched.core.errors import InputError
from geosched.files.gate import Kind, parse_json, read_bytes

# The output's per-cloud keys are the clouds' names (geosched.clouds), each with its own region schema below.
AWS = aws_cloud.NAME
GCP = gcp_cloud.NAME
OUTPUT_NAME = "geosched"
SCHEMA_VERSION = 1
# The IAM policy (AWS) and geosched's listing (GCP) both hinge on this key, so a config without it is unusable.
OWNER_KEY = "geosched-owner"

AWS_FIELDS = ("vpc_id", "subnet_ids", "security_group_id", "key_name", "placement_group_names", "launch_tags")
GCP_FIELDS = ("project", "network", "subnetwork", "zones", "firewall_tag", "placement_policy",
              "service_account_email", "launch_labels", "public_ips")
# Fields an output of an older module version lacks, and what their absence means (public_ips: the module
# gave every VM an external address before the choice existed).
GCP_OPTIONAL = ("public_ips",)
TOP_FIELDS = ("schema_version", AWS, GCP)

AWS_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")
AWS_ZONE_ID_RE = re.compile(r"^[a-z]+[0-9]+-az[0-9]+$")
# EC2 IDs are 8 hex digits (older resources) or 17.
VPC_ID_RE = re.compile(r"^vpc-([0-9a-f]{8}|[0-9a-f]{17})$")
SUBNET_ID_RE = re.compile(r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$")
SECURITY_GROUP_ID_RE = re.compile(r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$")
AWS_NAME_RE = re.compile(r"^[^\x00-\x1f]{1,255}$")
AWS_TAG_KEY_RE = re.compile(r"^[^\x00-\x1f]{1,128}$")
AWS_TAG_VALUE_RE = re.compile(r"^[^\x00-\x1f]{0,256}$")

GCP_REGION_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+$")
GCP_ZONE_RE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
GCP_PROJECT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
GCP_NAME = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
GCP_TAG_RE = re.compile(rf"^{GCP_NAME}$")
# Terraform's google provider returns v1 self links; google-beta returns beta ones.
SELF_LINK = r"^https://www\.googleapis\.com/compute/(v1|beta)/projects/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])/"
NETWORK_LINK_RE = re.compile(SELF_LINK + rf"global/networks/{GCP_NAME}$")
SUBNETWORK_LINK_RE = re.compile(SELF_LINK + rf"regions/(?P<region>[a-z]+-[a-z]+[0-9]+)/subnetworks/{GCP_NAME}$")
POLICY_LINK_RE = re.compile(SELF_LINK + rf"regions/(?P<region>[a-z]+-[a-z]+[0-9]+)/resourcePolicies/{GCP_NAME}$")
SERVICE_ACCOUNT_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*@[a-z0-9.-]+\.gserviceaccount\.com$")
GCP_LABEL_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
GCP_LABEL_VALUE_RE = re.compile(r"^[a-z0-9_-]{0,63}$")


@dataclass(frozen=True, slots=True)
class AwsRegionNetwork:
    """What a launch in one AWS region needs. Zones are availability-zone IDs (use1-az1), as in the catalog."""

    region: str
    vpc_id: str
    subnet_ids: Mapping[str, str]
    security_group_id: str
    key_name: str
    placement_group_names: Mapping[str, str]
    launch_tags: Mapping[str, str]

    @property
    def zones(self) -> tuple[str, ...]:
        return tuple(self.subnet_ids)

    def subnet_for(self, zone: str) -> str | None:
        return self.subnet_ids.get(zone)

    def placement_group_for(self, zone: str) -> str | None:
        return self.placement_group_names.get(zone)


@dataclass(frozen=True, slots=True)
class GcpRegionNetwork:
    """What a launch in one GCP region needs. A GCP subnetwork is regional: every zone launches into it."""

    region: str
    project: str
    network: str
    subnetwork: str
    zones: tuple[str, ...]
    firewall_tag: str
    placement_policy: str | None
    service_account_email: str
    launch_labels: Mapping[str, str]
    # An external (ONE_TO_ONE_NAT) address per VM: the module's `public_ips`. Off, geosched reaches the VMs by
    # their internal addresses (it runs inside the VPC, behind a bastion or over a VPN).
    public_ips: bool = True

    def subnet_for(self, zone: str) -> str | None:
        return self.subnetwork if zone in self.zones else None


RegionNetwork = AwsRegionNetwork | GcpRegionNetwork


@dataclass(frozen=True, slots=True)
class NetworkConfig:
    """Per provider (AWS, GCP) and region, the network geosched's Terraform modules built."""

    source: str
    aws: Mapping[str, AwsRegionNetwork]
    gcp: Mapping[str, GcpRegionNetwork]
    # Terraform marked the output sensitive: callers should not log these values either.
    sensitive: bool = False
    # The output's name in `terraform output -json`, the head of every field path in errors.
    output: str = OUTPUT_NAME

    def regions(self, provider: str) -> Mapping[str, RegionNetwork]:
        """Region name to network for AWS or GCP; empty for any other provider (ssh, on-prem)."""
        if provider == AWS:
            return self.aws
        if provider == GCP:
            return self.gcp
        return MappingProxyType({})

    def region(self, provider: str, region: str) -> RegionNetwork | None:
        return self.regions(provider).get(region)

    def for_zone(self, provider: str, zone: str) -> RegionNetwork | None:
        """The region network with a subnet in `zone`, or None when Terraform did not provision that zone."""
        return next((r for r in self.regions(provider).values() if r.subnet_for(zone) is not None), None)

    def zones(self) -> tuple[tuple[str, str, str], ...]:
        """(provider, region, zone) for every zone geosched can launch in."""
        out: list[tuple[str, str, str]] = []
        for provider, regions in ((AWS, self.aws), (GCP, self.gcp)):
            for name, net in regions.items():
                out.extend((provider, name, zone) for zone in net.zones)
        return tuple(out)


def check_owner(config: NetworkConfig, owner: str, providers: Iterable[str] = (AWS, GCP)) -> None:
    """The modules' `owner` must be this store's owner id: on AWS the IAM policy lets RunInstances and
    TerminateInstances through only with the tag geosched-owner = var.owner, so any other value makes every
    launch a denial; on GCP geosched lists and sweeps its VMs by that label. Checked before any API call."""
    for provider in providers:
        field = "launch_tags" if provider == AWS else "launch_labels"
        for index, (name, net) in enumerate(config.regions(provider).items()):
            tags = net.launch_tags if isinstance(net, AwsRegionNetwork) else net.launch_labels
            found = tags.get(OWNER_KEY, "")
            if found == owner:
                continue
            region = f"<region #{index + 1}>" if config.sensitive else name
            what = "the value" if config.sensitive else repr(found)
            why = ("the IAM policy lets RunInstances through only with this tag" if provider == AWS
                   else "geosched finds and sweeps its VMs by this label")
            raise InputError(config.source, f"{config.output}.value.{provider}.{region}.{field}.{OWNER_KEY}",
                             f"{what} is not this store's owner id {owner!r} ({why}): set the Terraform modules' "
                             f"`owner` variable to {owner!r}, apply, and export `terraform output -json` again")


def check_project(config: NetworkConfig, project: str | None) -> None:
    """Every GCP region of the output must be in the project geosched launches into."""
    if project is None:
        return
    for index, (name, net) in enumerate(config.gcp.items()):
        if net.project != project:
            region = f"<region #{index + 1}>" if config.sensitive else name
            shown = "" if config.sensitive else f" {net.project!r}"
            raise InputError(config.source, f"{config.output}.value.gcp.{region}.project",
                             f"project{shown} is not the configured project {project!r} "
                             "(GEOSCHED_GCP_PROJECT or the application default credentials): launch with the "
                             "project the network was built in")


def load_terraform_output(path: Path, output: str = OUTPUT_NAME) -> NetworkConfig:
    """Read a file holding what `terraform output -json` printed."""
    raw = read_bytes(path, Kind.TERRAFORM)
    try:
        text = _decode(raw)
    except UnicodeDecodeError:
        reason = "not UTF-8 or UTF-16 text: expected the JSON of `terraform output -json`"
        raise InputError(str(path), "", reason) from None
    return read_terraform_output(text, str(path), output)


def read_terraform_output(text: str, source: str = "<stdin>", output: str = OUTPUT_NAME) -> NetworkConfig:
    """Parse the text `terraform output -json` printed (a file's content or stdin)."""
    if not text.strip():
        raise InputError(source, "", "empty: expected the JSON printed by `terraform output -json`")
    return parse_terraform_output(parse_json(text, source), source, output)


def parse_terraform_output(data: Any, source: str, output: str = OUTPUT_NAME) -> NetworkConfig:
    """Validate decoded `terraform output -json` and build the NetworkConfig from its `output` entry."""
    if not isinstance(data, Mapping):
        raise InputError(source, "(document)", f"expected the object `terraform output -json` prints, got "
                         f"{_kind(data)}")
    if output not in data:
        raise InputError(source, output, _missing_output_reason(data, output))
    envelope = data[output]
    if not isinstance(envelope, Mapping) or "value" not in envelope:
        raise InputError(source, output, "expected an object with sensitive, type and value (as printed by "
                         "`terraform output -json`)")
    # The envelope is Terraform's format, not ours: extra keys a newer Terraform may add are not an error.
    sensitive = envelope.get("sensitive", False)
    if not isinstance(sensitive, bool):
        raise InputError(source, f"{output}.sensitive", f"expected true or false, got {_kind(sensitive, shown=True)}")
    reader = _Reader(source, sensitive)
    return reader.config(envelope["value"], f"{output}.value")


def _decode(raw: bytes) -> str:
    # PowerShell's `>` writes UTF-16 with a byte-order mark; accept it rather than fail on a JSON error.
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return raw.decode("utf-16")
    return raw.decode("utf-8-sig")


def _missing_output_reason(data: Mapping[Any, Any], output: str) -> str:
    if any(key in data for key in TOP_FIELDS):
        return (f"no output named {output!r}; this looks like the bare value of `terraform output -json {output}`: "
                "give the whole `terraform output -json` instead")
    if not data:
        return f"no output named {output!r}: the state has no outputs (has `terraform apply` run?)"
    names = ", ".join(sorted(str(k) for k in data))
    return f"no output named {output!r} (outputs: {names})"


class _Reader:
    """Field-by-field checks under one output; in sensitive mode errors show kinds, never values or keys."""

    def __init__(self, source: str, sensitive: bool) -> None:
        self.source = source
        self.sensitive = sensitive

    def fail(self, path: str, reason: str) -> InputError:
        return InputError(self.source, path, reason)

    def show(self, value: Any) -> str:
        return _kind(value) if self.sensitive else _kind(value, shown=True)

    def step(self, path: str, key: str, index: int) -> str:
        return f"{path}.<key #{index + 1}>" if self.sensitive else f"{path}.{key}"

    def quoted(self, text: str) -> str:
        return "" if self.sensitive else f" {text!r}"

    def obj(self, value: Any, path: str, fields: tuple[str, ...], nullable: tuple[str, ...] = (),
            optional: tuple[str, ...] = ()) -> dict[str, Any]:
        """An object with exactly `fields` (the `optional` ones may be absent: None), as a Terraform object
        constructor produces."""
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected an object, got {self.show(value)}")
        for index, key in enumerate(value):
            if key not in fields:
                raise self.fail(self.step(path, str(key), index), f"unknown field (known: {', '.join(fields)})")
        for key in fields:
            if key in optional and key not in value:
                continue
            if key not in value or (value[key] is None and key not in nullable):
                raise self.fail(f"{path}.{key}", "required")
        return {key: value.get(key) for key in fields}

    def entries(self, value: Any, path: str, expected: str) -> list[tuple[str, str, Any]]:
        """(key, path, item) for each entry of a JSON object (Terraform's maps and objects both print as one)."""
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected {expected}, got {self.show(value)}")
        return [(key, self.step(path, key, index), item) for index, (key, item) in enumerate(value.items())]

    # fullmatch, not match: the patterns end in `$`, which also matches before a final newline ("us-east-1\n").
    def key(self, key: str, path: str, pattern: re.Pattern[str], what: str) -> str:
        if not pattern.fullmatch(key):
            raise self.fail(path, f"expected {what} as this key" if self.sensitive
                            else f"expected {what}, got the key {key!r}")
        return key

    def string(self, value: Any, path: str, pattern: re.Pattern[str], what: str) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"expected {what}, got {self.show(value)}")
        if not pattern.fullmatch(value):
            raise self.fail(path, f"expected {what}, got {'another string' if self.sensitive else repr(value[:60])}")
        return value

    def string_map(self, value: Any, path: str, expected: str, key_re: re.Pattern[str], key_what: str,
                   value_re: re.Pattern[str], value_what: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, at, item in self.entries(value, path, expected):
            out[self.key(key, at, key_re, key_what)] = self.string(item, at, value_re, value_what)
        return out

    def config(self, value: Any, path: str) -> NetworkConfig:
        top = self.obj(value, path, TOP_FIELDS)
        version = top["schema_version"]
        if isinstance(version, bool) or not isinstance(version, int):
            raise self.fail(f"{path}.schema_version", f"expected an integer, got {self.show(version)}")
        if version != SCHEMA_VERSION:
            # The version is ours, not the user's data: safe to show even in sensitive mode.
            raise self.fail(f"{path}.schema_version", f"unsupported schema version {version} (this geosched reads "
                            f"{SCHEMA_VERSION}): update geosched or the Terraform modules so they match")
        aws = {key: self.aws_region(key, at, item)
               for key, at, item in self.region_entries(top[AWS], f"{path}.{AWS}", AWS_REGION_RE,
                                                        "an AWS region name such as us-east-1")}
        gcp = {key: self.gcp_region(key, at, item)
               for key, at, item in self.region_entries(top[GCP], f"{path}.{GCP}", GCP_REGION_RE,
                                                        "a GCP region name such as us-central1")}
        if not aws and not gcp:
            raise self.fail(path, "no regions: both aws and gcp are empty")
        self.unique_zones(path, aws, gcp)
        return NetworkConfig(source=self.source, aws=MappingProxyType(aws), gcp=MappingProxyType(gcp),
                             sensitive=self.sensitive, output=path.split(".", 1)[0])

    def region_entries(self, value: Any, path: str, pattern: re.Pattern[str],
                       what: str) -> list[tuple[str, str, Any]]:
        entries = self.entries(value, path, "an object of region name to region settings")
        for key, at, _ in entries:
            self.key(key, at, pattern, what)
        return entries

    def aws_region(self, region: str, path: str, value: Any) -> AwsRegionNetwork:
        f = self.obj(value, path, AWS_FIELDS)
        subnets = self.string_map(f["subnet_ids"], f"{path}.subnet_ids", "a mapping of zone to subnet id",
                                  AWS_ZONE_ID_RE, "an availability-zone ID such as use1-az1",
                                  SUBNET_ID_RE, "a subnet id (subnet-...)")
        if not subnets:
            raise self.fail(f"{path}.subnet_ids", "expected at least one zone")
        groups = self.string_map(f["placement_group_names"], f"{path}.placement_group_names",
                                 "a mapping of zone to placement group name", AWS_ZONE_ID_RE,
                                 "an availability-zone ID such as use1-az1", AWS_NAME_RE, "a placement group name")
        for index, zone in enumerate(groups):
            if zone not in subnets:
                raise self.fail(self.step(f"{path}.placement_group_names", zone, index),
                                "zone has no subnet in subnet_ids")
        tags = self.string_map(f["launch_tags"], f"{path}.launch_tags", "a mapping of tag key to value",
                               AWS_TAG_KEY_RE, "an EC2 tag key", AWS_TAG_VALUE_RE, "an EC2 tag value")
        if not tags.get(OWNER_KEY):
            raise self.fail(f"{path}.launch_tags", f"missing the {OWNER_KEY} tag the IAM policy requires at launch")
        return AwsRegionNetwork(
            region=region,
            vpc_id=self.string(f["vpc_id"], f"{path}.vpc_id", VPC_ID_RE, "a VPC id (vpc-...)"),
            subnet_ids=MappingProxyType(subnets),
            security_group_id=self.string(f["security_group_id"], f"{path}.security_group_id", SECURITY_GROUP_ID_RE,
                                          "a security group id (sg-...)"),
            key_name=self.string(f["key_name"], f"{path}.key_name", AWS_NAME_RE, "an EC2 key pair name"),
            placement_group_names=MappingProxyType(groups),
            launch_tags=MappingProxyType(tags),
        )

    def gcp_region(self, region: str, path: str, value: Any) -> GcpRegionNetwork:
        f = self.obj(value, path, GCP_FIELDS, nullable=("placement_policy",), optional=GCP_OPTIONAL)
        public_ips = True if f["public_ips"] is None else f["public_ips"]
        if not isinstance(public_ips, bool):
            raise self.fail(f"{path}.public_ips", f"expected a boolean, got {self.show(public_ips)}")
        project = self.string(f["project"], f"{path}.project", GCP_PROJECT_RE, "a GCP project ID")
        network = self.string(f["network"], f"{path}.network", NETWORK_LINK_RE,
                              "a network self link (https://www.googleapis.com/compute/v1/projects/P/global/networks/N)")
        subnetwork = self.regional_link(f["subnetwork"], f"{path}.subnetwork", region, SUBNETWORK_LINK_RE,
                                        "a subnetwork self link (https://www.googleapis.com/compute/v1/projects/P/"
                                        "regions/R/subnetworks/N)")
        zones = self.zones(f["zones"], f"{path}.zones", region)
        policy = None
        if f["placement_policy"] is not None:
            policy = self.regional_link(f["placement_policy"], f"{path}.placement_policy", region, POLICY_LINK_RE,
                                        "null or a resource policy self link (https://www.googleapis.com/compute/"
                                        "v1/projects/P/regions/R/resourcePolicies/N)")
        labels = self.string_map(f["launch_labels"], f"{path}.launch_labels", "a mapping of label key to value",
                                 GCP_LABEL_KEY_RE, "a GCP label key", GCP_LABEL_VALUE_RE, "a GCP label value")
        if not labels.get(OWNER_KEY):
            raise self.fail(f"{path}.launch_labels", f"missing the {OWNER_KEY} label geosched lists its VMs by")
        return GcpRegionNetwork(
            region=region,
            project=project,
            network=network,
            subnetwork=subnetwork,
            zones=zones,
            firewall_tag=self.string(f["firewall_tag"], f"{path}.firewall_tag", GCP_TAG_RE, "a GCP network tag"),
            placement_policy=policy,
            service_account_email=self.string(f["service_account_email"], f"{path}.service_account_email",
                                              SERVICE_ACCOUNT_RE, "a service account email (...gserviceaccount.com)"),
            launch_labels=MappingProxyType(labels),
            public_ips=public_ips,
        )

    def regional_link(self, value: Any, path: str, region: str, pattern: re.Pattern[str], what: str) -> str:
        link = self.string(value, path, pattern, what)
        match = pattern.match(link)
        if match is not None and match.group("region") != region:
            where = "" if self.sensitive else f" {match.group('region')}"
            raise self.fail(path, f"points into region{where}, not the region it is listed under")
        return link

    def zones(self, value: Any, path: str, region: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            raise self.fail(path, f"expected a non-empty list of zones, got {self.show(value)}")
        zones: list[str] = []
        for index, item in enumerate(value):
            at = f"{path}[{index}]"
            zone = self.string(item, at, GCP_ZONE_RE, "a GCP zone name such as us-central1-a")
            if not zone.startswith(f"{region}-"):
                raise self.fail(at, f"zone{self.quoted(zone)} is not in the region it is listed under")
            if zone in zones:
                raise self.fail(at, f"zone{self.quoted(zone)} listed twice")
            zones.append(zone)
        return tuple(zones)

    def unique_zones(self, path: str, aws: Mapping[str, AwsRegionNetwork], gcp: Mapping[str, GcpRegionNetwork]) -> None:
        # Zone names identify a zone fleet-wide (AWS zone IDs, GCP zone names), so one zone in two regions is a
        # copy-paste error that would send launches to the wrong subnet.
        seen: dict[str, str] = {}
        for provider, regions in ((AWS, aws), (GCP, gcp)):
            for name, net in regions.items():
                for zone in net.zones:
                    here = f"{provider}.{name}"
                    if zone in seen:
                        if self.sensitive:
                            raise self.fail(path, "a zone is listed under two regions")
                        raise self.fail(f"{path}.{here}", f"zone {zone!r} is also listed under {seen[zone]}")
                    seen[zone] = here


def _kind(value: Any, shown: bool = False) -> str:
    """A value's JSON kind, with the value itself only when `shown` (never for sensitive outputs)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})" if shown else "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value})" if shown else "a number"
    if isinstance(value, str):
        return f"a string ({value[:60]!r})" if shown else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
