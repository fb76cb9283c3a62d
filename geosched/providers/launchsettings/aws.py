"""AWS launch settings: what `geosched.providers.aws` launches with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geosched.clouds import aws as aws_cloud
from geosched.providers.terraform import NetworkConfig

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
