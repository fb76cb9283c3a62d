"""geosched: zone-first placement of distributed training gangs across geo-distributed GPU clusters."""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from geosched import toplinks

# ./policies, ./providers and ./probes of a checkout are links into this package: imported through them, a module
# is the geosched one, never a second copy (geosched/toplinks.py).
toplinks.install()

__version__ = "0.1.0"

# The Python API (geosched/api.py), re-exported here but imported on first use: the API pulls in numpy, the
# policies and the Kubernetes job readers, which `geosched --version` and `-h` must not pay for (issue 25).
_API = frozenset({"load_fleet", "load_job", "load_network", "place", "simulate"})

if TYPE_CHECKING:
    from geosched.api import load_fleet, load_job, load_network, place, simulate


class _Package(types.ModuleType):
    """`geosched.simulate` is the API function although `geosched/simulate/` is also a subpackage: importing a
    subpackage binds its name on the parent, so the API names are resolved here on every access instead of being
    stored (`from geosched.simulate import engine` still reaches the subpackage through sys.modules)."""

    def __getattribute__(self, name: str) -> Any:
        if name in _API:
            from geosched import api

            return getattr(api, name)
        return super().__getattribute__(name)


sys.modules[__name__].__class__ = _Package

__all__ = ["__version__", "load_fleet", "load_job", "load_network", "place", "simulate"]
