"""AWS launch settings: what `geosched.providers.aws` launches with."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from geosched.clouds import aws as aws_cloud
from geosched.providers.launchsettings import SSH_PORT, admin_cidrs_shown, ondemand_group
from geosched.providers.terraform import OWNER_KEY, CloudNetwork, NetworkConfig, Reader

if TYPE_CHECKING:
    from geosched.files.decl.provisioning import OnDemandNetwork

NAME = aws_cloud.NAME
# Deep Learning AMIs (NVIDIA driver, CUDA, PyTorch) as Amazon publishes them; the newest match wins.
AWS_AMI_NAME_PATTERN = "Deep Learning*"


# The region object of the output's `aws` section (terraform/modules/aws-gpu-region) and its checks.
AWS_FIELDS = ("vpc_id", "subnet_ids", "security_group_id", "key_name", "placement_group_names", "launch_tags")

AWS_REGION_RE = re.compile(r"^[a-z]{2}(-[a-z]+)+-[0-9]+$")
AWS_ZONE_ID_RE = re.compile(r"^[a-z]+[0-9]+-az[0-9]+$")
# EC2 IDs are 8 hex digits (older resources) or 17.
VPC_ID_RE = re.compile(r"^vpc-([0-9a-f]{8}|[0-9a-f]{17})$")
SUBNET_ID_RE = re.compile(r"^subnet-([0-9a-f]{8}|[0-9a-f]{17})$")
SECURITY_GROUP_ID_RE = re.compile(r"^sg-([0-9a-f]{8}|[0-9a-f]{17})$")
AWS_NAME_RE = re.compile(r"^[^\x00-\x1f]{1,255}$")
AWS_TAG_KEY_RE = re.compile(r"^[^\x00-\x1f]{1,128}$")
AWS_TAG_VALUE_RE = re.compile(r"^[^\x00-\x1f]{0,256}$")


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

    @property
    def owner_tags(self) -> Mapping[str, str]:
        return self.launch_tags

    owner_field = "launch_tags"
    owner_why = "the IAM policy lets RunInstances through only with this tag"


def read_region(reader: Reader, region: str, path: str, value: Any) -> AwsRegionNetwork:
    """One region object of `value.aws`."""
    f = reader.obj(value, path, AWS_FIELDS)
    subnets = reader.string_map(f["subnet_ids"], f"{path}.subnet_ids", "a mapping of zone to subnet id",
                                AWS_ZONE_ID_RE, "an availability-zone ID such as use1-az1",
                                SUBNET_ID_RE, "a subnet id (subnet-...)")
    if not subnets:
        raise reader.fail(f"{path}.subnet_ids", "expected at least one zone")
    groups = reader.string_map(f["placement_group_names"], f"{path}.placement_group_names",
                               "a mapping of zone to placement group name", AWS_ZONE_ID_RE,
                               "an availability-zone ID such as use1-az1", AWS_NAME_RE, "a placement group name")
    for index, zone in enumerate(groups):
        if zone not in subnets:
            raise reader.fail(reader.step(f"{path}.placement_group_names", zone, index),
                              "zone has no subnet in subnet_ids")
    tags = reader.string_map(f["launch_tags"], f"{path}.launch_tags", "a mapping of tag key to value",
                             AWS_TAG_KEY_RE, "an EC2 tag key", AWS_TAG_VALUE_RE, "an EC2 tag value")
    if not tags.get(OWNER_KEY):
        raise reader.fail(f"{path}.launch_tags", f"missing the {OWNER_KEY} tag the IAM policy requires at launch")
    return AwsRegionNetwork(
        region=region,
        vpc_id=reader.string(f["vpc_id"], f"{path}.vpc_id", VPC_ID_RE, "a VPC id (vpc-...)"),
        subnet_ids=MappingProxyType(subnets),
        security_group_id=reader.string(f["security_group_id"], f"{path}.security_group_id", SECURITY_GROUP_ID_RE,
                                        "a security group id (sg-...)"),
        key_name=reader.string(f["key_name"], f"{path}.key_name", AWS_NAME_RE, "an EC2 key pair name"),
        placement_group_names=MappingProxyType(groups),
        launch_tags=MappingProxyType(tags),
    )


# How geosched.providers.terraform reads this cloud's section of the output.
NETWORK = CloudNetwork(NAME, AWS_REGION_RE, "an AWS region name such as us-east-1", AWS_FIELDS, read_region)


def region_network(config: NetworkConfig, region: str) -> AwsRegionNetwork | None:
    """The network of one AWS region, None when the output has none for it."""
    net = config.region(NAME, region)
    return net if isinstance(net, AwsRegionNetwork) else None


@dataclass(frozen=True, slots=True)
class AwsSettings:
    regions: tuple[str, ...] = ()
    ami: str | None = None
    key_name: str | None = None
    ami_name_pattern: str = AWS_AMI_NAME_PATTERN
    connect_timeout_s: float = 10.0
    # Subnets, security group, key pair, placement groups and launch tags per region (None: default VPC).
    terraform: NetworkConfig | None = None
    # Sources of SSH (tcp 22) in the on-demand security group (only without a Terraform network); none until
    # configured (geosched.providers.config.DEFAULT_ADMIN_CIDRS).
    admin_cidrs: tuple[str, ...] = ()


TYPE = AwsSettings


def build(values: Mapping[str, Any], network: NetworkConfig | None, admin_cidrs: tuple[str, ...]) -> AwsSettings:
    """From the values geosched.clouds.aws.SETTINGS declares (by their names there)."""
    return AwsSettings(regions=values["regions"] or (), ami=values["ami"], key_name=values["key_name"],
                       terraform=network, admin_cidrs=admin_cidrs)


# Without a Terraform network, launches go to each region's default VPC.
DEFAULT_NETWORK = "VPC"


def ondemand_summary(owner: str, admin_cidrs: Sequence[str]) -> str:
    """What a launch without a Terraform network ensures exists first (for `--dry-run` and `check`)."""
    return (f"security group {ondemand_group(owner)} in each region's default VPC (created if missing): "
            f"tcp {SSH_PORT} from {admin_cidrs_shown(admin_cidrs)}, all traffic from the group itself")


def ondemand(settings: AwsSettings, owner: str, regions: Sequence[str]) -> tuple[OnDemandNetwork, str]:
    """A security group per region, as the plan's document and its line say it."""
    from geosched.files.decl.provisioning import OnDemandNetwork
    cidrs = settings.admin_cidrs
    return (OnDemandNetwork.build(provider=NAME, regions=list(regions), security_group=ondemand_group(owner),
                                  admin_cidrs=list(cidrs)),
            ondemand_summary(owner, cidrs))


def check_network(network: NetworkConfig, settings: AwsSettings) -> None:
    """Nothing beyond the owner tag (geosched.providers.terraform.check_owner): the VPC is the region's own."""
