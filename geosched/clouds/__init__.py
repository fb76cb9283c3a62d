"""The cloud registry: every cloud geosched knows, one module per cloud in this package, each defining `SPEC`
(a `CloudSpec`). Modules ask here instead of naming a cloud: `get("aws")`, `by_scheme("gce")`, `names()`.

A new cloud is one module here (found by listing this package, so no other file names it) plus its data rows
(catalog CSV, carbon and grid-zone rows) and, if geosched launches machines there, a provider in
`geosched.providers`. Pure: importing a spec reads no file and no network.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from geosched.clouds.spec import CloudSpec, NodeShape

__all__ = ["CloudSpec", "NodeShape", "all_specs", "by_scheme", "get", "names"]


@cache
def _registry() -> dict[str, CloudSpec]:
    specs: dict[str, CloudSpec] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "spec" or info.name.startswith("_"):
            continue
        spec = getattr(importlib.import_module(f"{__name__}.{info.name}"), "SPEC", None)
        if not isinstance(spec, CloudSpec):
            continue
        if spec.name in specs:
            raise RuntimeError(f"cloud {spec.name!r} is defined twice (geosched.clouds.{info.name})")
        specs[spec.name] = spec
    return specs


def all_specs() -> tuple[CloudSpec, ...]:
    """Every known cloud, by name."""
    return tuple(_registry().values())


def names() -> tuple[str, ...]:
    return tuple(_registry())


def get(name: str) -> CloudSpec | None:
    """The cloud called `name`; None for a provider that is no cloud (ssh, onprem) or one geosched does not know."""
    return _registry().get(name)


@cache
def _schemes() -> dict[str, CloudSpec]:
    return {scheme: spec for spec in all_specs() for scheme in spec.provider_id_schemes}


def by_scheme(scheme: str) -> CloudSpec | None:
    """The cloud whose nodes carry providerIDs with this scheme (`gce` -> gcp)."""
    return _schemes().get(scheme)
