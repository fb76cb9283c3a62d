"""The provider table: a name to a factory. A new provider is one module plus one line here; what its cloud
offers (zones, labels, prices, ...) is its spec in `geosched.clouds`.

Factories import their SDK lazily, so `geosched` without boto3 or google-cloud-compute still runs for the
providers that are installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from geosched import clouds
from geosched.clouds import aws, gcp
from geosched.core.errors import InputError

if TYPE_CHECKING:  # annotations only: `geosched -h` reads DEFAULT_PROVIDERS without loading the providers' base
    from geosched.providers.base import Provider
    from geosched.providers.config import ProviderSettings


def _aws(settings: ProviderSettings) -> Provider:
    from geosched.providers.aws import AwsProvider

    return AwsProvider(settings.aws)


def _gcp(settings: ProviderSettings) -> Provider:
    from geosched.providers.gcp import GcpProvider

    return GcpProvider(settings.gcp)


def _ssh(settings: ProviderSettings) -> Provider:
    from geosched.providers.ssh import SshProvider

    return SshProvider(settings.ssh)


FACTORIES: Mapping[str, Callable[[ProviderSettings], Provider]] = {
    aws.NAME: _aws,
    gcp.NAME: _gcp,
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
