"""One identity per module (issue 25 item 5): the repository's top-level `policies/`, `providers/` and `probes/`
are links into geosched/ (users asked to see them there), so with the checkout on sys.path `import policies` would
load geosched/policies a second time as another module: every policy registered twice ("policy 'spread'
registered twice"), `providers.aws.AwsProvider is not geosched.providers.aws.AwsProvider`.

An import through a link therefore yields the geosched module itself, submodules included: `policies.zone_first`
IS `geosched.policies.zone_first`. A meta-path finder does it, installed by `import geosched` and by the first
statement of the three packages' `__init__.py` (for the `import policies` that comes before any `import geosched`).
It answers only for a name whose package on sys.path really is one of these links (resolved path), so an
application's own top-level `providers` package is left alone. The wheel has no links: nothing here runs there
but the finder's check.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

# Top-level name of a link -> the geosched package it points to.
LINKS = {"policies": "geosched.policies", "providers": "geosched.providers", "probes": "geosched.probes"}
PACKAGE_DIR = Path(__file__).resolve().parent


class _Alias(importlib.abc.Loader):
    """Loads `policies.x` as the module `geosched.policies.x` already is (importing it if need be)."""

    def __init__(self, real: str) -> None:
        self.real = real
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.real)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system stamped the alias's spec on the module: it keeps its own (reload, pickling, -m).
        module.__spec__ = self._spec


class LinkFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self._is_link: dict[str, bool] = {}

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        top, _, rest = fullname.partition(".")
        real_top = LINKS.get(top)
        if real_top is None:
            return None
        if rest:
            # A submodule is aliased exactly when its top-level package is (already imported by now).
            if sys.modules.get(top) is not sys.modules.get(real_top) or real_top not in sys.modules:
                return None
        elif not self._links_here(top):
            return None
        real = real_top + ("." + rest if rest else "")
        real_spec = importlib.util.find_spec(real)
        if real_spec is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(real),
                                               is_package=real_spec.submodule_search_locations is not None)

    def _links_here(self, top: str) -> bool:
        """Whether `import <top>` would load geosched's own package through a link (not someone else's)."""
        if top not in self._is_link:
            spec = importlib.machinery.PathFinder.find_spec(top)
            locations = list(spec.submodule_search_locations or []) if spec is not None else []
            self._is_link[top] = any(Path(os.path.realpath(p)) == PACKAGE_DIR / top for p in locations)
        return self._is_link[top]


def install() -> None:
    """Put the finder first on sys.meta_path, once."""
    if not any(isinstance(f, LinkFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, LinkFinder())


def alias(name: str) -> None:
    """Called by a package's `__init__` that is being executed under a link's name (`policies`): from here on
    that name is the geosched package. The rest of that `__init__` still runs, into a module nobody keeps; its
    imports resolve to geosched's modules through the finder, so nothing registers twice."""
    install()
    sys.modules[name] = importlib.import_module(LINKS[name])


__all__ = ["LINKS", "LinkFinder", "alias", "install"]
