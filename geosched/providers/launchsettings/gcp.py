"""GCP launch settings: what `geosched.providers.gcp` launches with."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from geosched.clouds import gcp as gcp_cloud
from geosched.core.errors import InputError
from geosched.providers.launchsettings import SSH_PORT, admin_cidrs_shown, ondemand_firewalls, ondemand_group
from geosched.providers.terraform import OWNER_KEY, CloudNetwork, NetworkConfig, Reader

if TYPE_CHECKING:
    from geosched.files.decl.provisioning import OnDemandNetwork

NAME = gcp_cloud.NAME
# Google's Deep Learning VM images: CUDA and NVIDIA driver installed on first boot.
GCP_DEFAULT_IMAGE = "projects/deeplearning-platform-release/global/images/family/common-cu124-debian-11-py310"


# The region object of the output's `gcp` section (terraform/modules/gcp-gpu-region) and its checks.
GCP_FIELDS = ("project", "network", "subnetwork", "zones", "firewall_tag", "placement_policy",
              "service_account_email", "launch_labels", "public_ips")
# Fields an output of an older module version lacks, and what their absence means (public_ips: the module
# gave every VM an external address before the choice existed).
GCP_OPTIONAL = ("public_ips",)

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

    @property
    def owner_tags(self) -> Mapping[str, str]:
        return self.launch_labels

    owner_field = "launch_labels"
    owner_why = "geosched finds and sweeps its VMs by this label"


def read_region(reader: Reader, region: str, path: str, value: Any) -> GcpRegionNetwork:
    """One region object of `value.gcp`."""
    f = reader.obj(value, path, GCP_FIELDS, nullable=("placement_policy",), optional=GCP_OPTIONAL)
    public_ips = True if f["public_ips"] is None else f["public_ips"]
    if not isinstance(public_ips, bool):
        raise reader.fail(f"{path}.public_ips", f"expected a boolean, got {reader.show(public_ips)}")
    project = reader.string(f["project"], f"{path}.project", GCP_PROJECT_RE, "a GCP project ID")
    network = reader.string(f["network"], f"{path}.network", NETWORK_LINK_RE,
                            "a network self link (https://www.googleapis.com/compute/v1/projects/P/global/networks/N)")
    subnetwork = _regional_link(reader, f["subnetwork"], f"{path}.subnetwork", region, SUBNETWORK_LINK_RE,
                                "a subnetwork self link (https://www.googleapis.com/compute/v1/projects/P/"
                                "regions/R/subnetworks/N)")
    zones = _zones(reader, f["zones"], f"{path}.zones", region)
    policy = None
    if f["placement_policy"] is not None:
        policy = _regional_link(reader, f["placement_policy"], f"{path}.placement_policy", region, POLICY_LINK_RE,
                                "null or a resource policy self link (https://www.googleapis.com/compute/"
                                "v1/projects/P/regions/R/resourcePolicies/N)")
    labels = reader.string_map(f["launch_labels"], f"{path}.launch_labels", "a mapping of label key to value",
                               GCP_LABEL_KEY_RE, "a GCP label key", GCP_LABEL_VALUE_RE, "a GCP label value")
    if not labels.get(OWNER_KEY):
        raise reader.fail(f"{path}.launch_labels", f"missing the {OWNER_KEY} label geosched lists its VMs by")
    return GcpRegionNetwork(
        region=region,
        project=project,
        network=network,
        subnetwork=subnetwork,
        zones=zones,
        firewall_tag=reader.string(f["firewall_tag"], f"{path}.firewall_tag", GCP_TAG_RE, "a GCP network tag"),
        placement_policy=policy,
        service_account_email=reader.string(f["service_account_email"], f"{path}.service_account_email",
                                            SERVICE_ACCOUNT_RE, "a service account email (...gserviceaccount.com)"),
        launch_labels=MappingProxyType(labels),
        public_ips=public_ips,
    )

def _regional_link(reader: Reader, value: Any, path: str, region: str, pattern: re.Pattern[str], what: str) -> str:
    link = reader.string(value, path, pattern, what)
    match = pattern.match(link)
    if match is not None and match.group("region") != region:
        where = "" if reader.sensitive else f" {match.group('region')}"
        raise reader.fail(path, f"points into region{where}, not the region it is listed under")
    return link

def _zones(reader: Reader, value: Any, path: str, region: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise reader.fail(path, f"expected a non-empty list of zones, got {reader.show(value)}")
    zones: list[str] = []
    for index, item in enumerate(value):
        at = f"{path}[{index}]"
        zone = reader.string(item, at, GCP_ZONE_RE, "a GCP zone name such as us-central1-a")
        if not zone.startswith(f"{region}-"):
            raise reader.fail(at, f"zone{reader.quoted(zone)} is not in the region it is listed under")
        if zone in zones:
            raise reader.fail(at, f"zone{reader.quoted(zone)} listed twice")
        zones.append(zone)
    return tuple(zones)


# How geosched.providers.terraform reads this cloud's section of the output.
NETWORK = CloudNetwork(NAME, GCP_REGION_RE, "a GCP region name such as us-central1", GCP_FIELDS, read_region)


def region_network(config: NetworkConfig, region: str) -> GcpRegionNetwork | None:
    """The network of one GCP region, None when the output has none for it."""
    net = config.region(NAME, region)
    return net if isinstance(net, GcpRegionNetwork) else None


def check_project(config: NetworkConfig, project: str | None) -> None:
    """Every GCP region of the output must be in the project geosched launches into."""
    if project is None:
        return
    for index, (name, net) in enumerate(config.regions(NAME).items()):
        if not isinstance(net, GcpRegionNetwork) or net.project == project:
            continue
        region = f"<region #{index + 1}>" if config.sensitive else name
        shown = "" if config.sensitive else f" {net.project!r}"
        raise InputError(config.source, f"{config.output}.value.{NAME}.{region}.project",
                         f"project{shown} is not the configured project {project!r} "
                         "(GEOSCHED_GCP_PROJECT or the application default credentials): launch with the "
                         "project the network was built in")


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
