"""Each cloud's launch settings (what its provider launches with: regions, image, project, the network), one light
module per cloud in this package, found by listing it (as `geosched.clouds` finds the clouds), so a new cloud with
launch settings is one module here and `geosched.providers.config` names no cloud.

A module here defines `NAME` (the cloud's, from its `geosched.clouds` module), `TYPE` (a frozen dataclass whose
every field has a default: a `ProviderSettings()` holds one of each) and `build(values, network, admin_cidrs)`, the
settings from the values its cloud's `SETTINGS` declare (`Values.of_cloud`), the Terraform network and the admin
CIDRs. Its provider is the module of the same name in geosched.providers, whose `PROVIDER` takes these settings
(geosched.providers.registry imports it by that name when a provider is built). Light: no SDK is imported here
(boto3 and google load with the providers that call them).

It also says what its cloud's launches need from the network, so no other module branches on a cloud for it:
- `DEFAULT_NETWORK`: the word for the network a launch without a Terraform network uses ("VPC", "network");
- `ondemand(settings, owner, regions)` (settings: its own, of `TYPE`): what the first such launch makes sure
  exists, as the plan's document and the line `--dry-run` says; `ondemand_summary(owner, admin_cidrs)`: that
  line alone, for `check`;
- `NETWORK`: how its section of the Terraform output (`value.<name>`) is read (a `terraform.CloudNetwork`: its
  region objects' fields and checks, its `RegionNetwork` type), None when geosched has no Terraform module for
  its network (the output then has no section for it);
- `check_network(network, settings)` (likewise): its own checks of a Terraform network before any API call,
  beside the owner check every cloud gets (geosched.providers.terraform.check_owner).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

from geosched.providers import terraform

if TYPE_CHECKING:
    from pathlib import Path

    from geosched.files.decl.provisioning import OnDemandNetwork
    from geosched.providers.terraform import NetworkConfig


# Tags (AWS) / labels (GCP) / lease fields (SSH) that tie a machine to the store (geosched.providers.base). Lower
# case with dashes so the same keys are valid GCP label keys.
TAG_PREFIX = "geosched-"
# Without a Terraform network, geosched creates on demand one security group per AWS region (in the default
# VPC) and two firewall rules per GCP project (on the default network), all named after the store's owner id:
# shared by every gang of the store, free, and never deleted by `down` or `sweep` (they are reused). Here, below
# the providers, because each cloud's module below says what it makes.
SSH_PORT = 22


def ondemand_group(owner: str) -> str:
    """The AWS security group name and the GCP network tag of a store's machines."""
    return f"{TAG_PREFIX}{owner}"


def ondemand_firewalls(owner: str) -> tuple[str, str]:
    """The GCP firewall rules: SSH from the admin CIDRs, and everything between the store's machines."""
    return f"{TAG_PREFIX}{owner}-ssh", f"{TAG_PREFIX}{owner}-internal"


def admin_cidrs_shown(admin_cidrs: Sequence[str]) -> str:
    """The sources of the on-demand SSH rule as the on-demand summaries say them."""
    return ", ".join(admin_cidrs) or "nowhere (no admin CIDR set: provision refuses)"


@dataclass(frozen=True, slots=True)
class LaunchSettings:
    """One cloud's entry: its settings type and how they are built."""

    name: str
    type: type[object]
    build: Callable[[Mapping[str, Any], NetworkConfig | None, tuple[str, ...]], object]
    default_network: str
    # The hooks below take the cloud's own settings (an instance of `type`).
    ondemand: Callable[[Any, str, Sequence[str]], tuple[OnDemandNetwork, str]]
    ondemand_summary: Callable[[str, Sequence[str]], str]
    check_network: Callable[[NetworkConfig, Any], None]
    network: terraform.CloudNetwork | None


def _entry(module: ModuleType) -> LaunchSettings:
    return LaunchSettings(name=module.NAME, type=module.TYPE, build=module.build,
                          default_network=module.DEFAULT_NETWORK, ondemand=module.ondemand,
                          ondemand_summary=module.ondemand_summary,
                          check_network=module.check_network, network=module.NETWORK)


@cache
def registry() -> Mapping[str, LaunchSettings]:
    entries: dict[str, LaunchSettings] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        entry = _entry(importlib.import_module(f"{__name__}.{info.name}"))
        if entry.name in entries:
            raise RuntimeError(f"launch settings of {entry.name!r} are defined twice ({__name__}.{info.name})")
        entries[entry.name] = entry
    return entries


def defaults() -> dict[str, object]:
    """Every cloud's settings at their defaults."""
    return {name: entry.type() for name, entry in registry().items()}


def build(of_cloud: Callable[[str], Mapping[str, Any]], network: NetworkConfig | None,
          admin_cidrs: tuple[str, ...]) -> dict[str, object]:
    """Every cloud's settings from its values (`of_cloud(name)`), the network and the admin CIDRs."""
    return {name: entry.build(of_cloud(name), network, admin_cidrs) for name, entry in registry().items()}


def get(name: str) -> LaunchSettings | None:
    """The launch settings of cloud `name`; None for a provider geosched launches nothing on by a cloud's API."""
    return registry().get(name)


def networks() -> tuple[terraform.CloudNetwork, ...]:
    """How each cloud's section of the Terraform output is read, in the listing's order (the output's)."""
    return tuple(entry.network for entry in registry().values() if entry.network is not None)


# geosched.providers.terraform's readers with every cloud's section: what `--tf-output` reads.
def load_terraform_output(path: Path, output: str = terraform.OUTPUT_NAME) -> NetworkConfig:
    return terraform.load_terraform_output(path, networks(), output)


def read_terraform_output(text: str, source: str = "<stdin>", output: str = terraform.OUTPUT_NAME) -> NetworkConfig:
    return terraform.read_terraform_output(text, networks(), source, output)


def parse_terraform_output(data: Any, source: str, output: str = terraform.OUTPUT_NAME) -> NetworkConfig:
    return terraform.parse_terraform_output(data, networks(), source, output)
