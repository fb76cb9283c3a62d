"""AWS launch settings: what `geosched.providers.aws` launches with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from geosched.clouds import aws as aws_cloud
from geosched.providers.launchsettings import SSH_PORT, admin_cidrs_shown, ondemand_group
from geosched.providers.terraform import NetworkConfig

if TYPE_CHECKING:
    from geosched.files.decl.provisioning import OnDemandNetwork

NAME = aws_cloud.NAME
# Deep Learning AMIs (NVIDIA driver, CUDA, PyTorch) as Amazon publishes them; the newest match wins.
AWS_AMI_NAME_PATTERN = "Deep Learning*"


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
