"""GCP launch settings: what `geosched.providers.gcp` launches with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from geosched.clouds import gcp as gcp_cloud
from geosched.providers.launchsettings import SSH_PORT, admin_cidrs_shown, ondemand_firewalls, ondemand_group
from geosched.providers.terraform import NetworkConfig, check_project

if TYPE_CHECKING:
    from geosched.files.decl.provisioning import OnDemandNetwork

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


# Without a Terraform network, launches go to the project's default network.
DEFAULT_NETWORK = "network"


def ondemand_summary(owner: str, admin_cidrs: Sequence[str]) -> str:
    """What a launch without a Terraform network ensures exists first (for `--dry-run` and `check`)."""
    ssh, internal = ondemand_firewalls(owner)
    return (f"firewall rules {ssh} (tcp {SSH_PORT} from {admin_cidrs_shown(admin_cidrs)}) and {internal} (all "
            f"traffic between machines tagged {ondemand_group(owner)}) on the default network (created if missing)")


def ondemand(settings: GcpSettings, owner: str, regions: Sequence[str]) -> tuple[OnDemandNetwork, str]:
    """Two firewall rules per project (a GCP network is global: no region is named), as the plan's document and
    its line say it."""
    from geosched.files.decl.provisioning import OnDemandNetwork
    cidrs = settings.admin_cidrs
    return (OnDemandNetwork.build(provider=NAME, firewall_rules=list(ondemand_firewalls(owner)),
                                  network_tag=ondemand_group(owner), admin_cidrs=list(cidrs)),
            ondemand_summary(owner, cidrs))


def check_network(network: NetworkConfig, settings: GcpSettings) -> None:
    """Every GCP region of the network must be in the project geosched launches into."""
    check_project(network, settings.project)
