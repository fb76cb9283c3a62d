"""The provider table: a name to a factory. A cloud geosched launches on has launch settings
(geosched.providers.launchsettings, found by listing) and a provider module of the same name here whose `PROVIDER`
is built from them, so a new cloud names no line in this file; what its cloud offers (zones, labels, prices, ...)
is its spec in `geosched.clouds`. The SSH inventory, no cloud, is the one line here.

Factories import their SDK lazily, so `geosched` without boto3 or google-cloud-compute still runs for the
providers that are installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from geosched import clouds
from geosched.core.errors import InputError
from geosched.providers import launchsettings

if TYPE_CHECKING:  # annotations only: `geosched -h` reads DEFAULT_PROVIDERS without loading the providers' base
    from geosched.providers.base import Provider
    from geosched.providers.config import ProviderSettings


def _cloud(name: str, kind: type[object]) -> Callable[[ProviderSettings], Provider]:
    """The factory of cloud `name`: geosched.providers.<name>.PROVIDER from the cloud's launch settings. Imported by
    name when called (not at import: the module imports its SDK, and `geosched -h` must not)."""
    def build(settings: ProviderSettings) -> Provider:
        module = importlib.import_module(f"{__package__}.{name}")
        provider: Provider = module.PROVIDER(settings.of_cloud(name, kind))
        return provider

    return build


def _ssh(settings: ProviderSettings) -> Provider:
    from geosched.providers.ssh import SshProvider

    return SshProvider(settings.ssh)


FACTORIES: Mapping[str, Callable[[ProviderSettings], Provider]] = {
    **{name: _cloud(name, entry.type) for name, entry in launchsettings.registry().items()},
    "ssh": _ssh,
}
# The clouds geosched launches machines on: those with a spec and a factory (a Kubernetes-only cloud has a spec
# and no factory: geosched reads its nodes, it does not launch them).
CLOUDS = tuple(name for name in clouds.names() if name in FACTORIES)


def names() -> tuple[str, ...]:
    return tuple(FACTORIES)


def build(wanted: Iterable[str], settings: ProviderSettings, field: str = "--provider") -> dict[str, Provider]:
    out: dict[str, Provider] = {}
    for name in wanted:
        factory = FACTORIES.get(name)
        if factory is None:
            raise InputError(field, "", f"unknown provider {name!r} (known: {', '.join(FACTORIES)})")
        out[name] = factory(settings)
    return out
