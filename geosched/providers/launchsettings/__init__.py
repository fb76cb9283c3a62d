"""Each cloud's launch settings (what its provider launches with: regions, image, project, the network), one light
module per cloud in this package, found by listing it (as `geosched.clouds` finds the clouds), so a new cloud with
launch settings is one module here and `geosched.providers.config` names no cloud.

A module here defines `NAME` (the cloud's, from its `geosched.clouds` module), `TYPE` (a frozen dataclass whose
every field has a default: a `ProviderSettings()` holds one of each) and `build(values, network, admin_cidrs)`, the
settings from the values its cloud's `SETTINGS` declare (`Values.of_cloud`), the Terraform network and the admin
CIDRs. Light: no SDK is imported here (boto3 and google load with the providers that call them).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geosched.providers.terraform import NetworkConfig


@dataclass(frozen=True, slots=True)
class LaunchSettings:
    """One cloud's entry: its settings type and how they are built."""

    name: str
    type: type[object]
    build: Callable[[Mapping[str, Any], NetworkConfig | None, tuple[str, ...]], object]


def _entry(module: ModuleType) -> LaunchSettings:
    return LaunchSettings(name=module.NAME, type=module.TYPE, build=module.build)


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
