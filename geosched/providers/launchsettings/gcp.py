"""GCP launch settings: what `geosched.providers.gcp` launches with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from geosched.clouds import gcp as gcp_cloud
from geosched.providers.terraform import NetworkConfig

NAME = gcp_cloud.NAME
# Google's Deep Learning VM images: CUDA and NVIDIA driver installed on first boot.
GCP_DEFAULT_IMAGE = "projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11-py310"


@dataclass(frozen=True, slots=True)
class GcpSettings:
    project: str | None = None
    endpoint: str | None = None
    image: str = GCP_DEFAULT_IMAGE
    network: str = "global/networks/default"
    disk_gb: int = 200
    # Network, subnetwork, firewall tag, placement policy, service account and labels per region (None: the
    # default network above).
    terraform: NetworkConfig | None = None
    # Source ranges of the on-demand SSH firewall rule (only without a Terraform network); none until configured
    # (geosched.providers.config.DEFAULT_ADMIN_CIDRS).
    admin_cidrs: tuple[str, ...] = ()
    # An external address per VM (only without a Terraform network: there the module's public_ips decides).
    public_ips: bool = True


TYPE = GcpSettings


def build(values: Mapping[str, Any], network: NetworkConfig | None, admin_cidrs: tuple[str, ...]) -> GcpSettings:
    """From the values geosched.clouds.gcp.SETTINGS declares (by their names there)."""
    return GcpSettings(project=values["project"], endpoint=values["endpoint"],
                       image=values["image"] or GCP_DEFAULT_IMAGE, terraform=network, admin_cidrs=admin_cidrs,
                       public_ips=values["public_ips"])
