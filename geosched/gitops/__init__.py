"""GitOps: every job of a repository placed on a fleet snapshot and rendered as a tree per cluster,
`clusters/<cluster>/<namespace>/<job>.yaml`, for Argo CD or Flux to apply. See render.py and check.py."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geosched.gitops.check import CheckResult, check_tree
    from geosched.gitops.render import Rendered, render_in_memory, render_tree

# Imported on first use: rendering places jobs (numpy, the policies), which `geosched -h` must not load.
_EXPORTS = {"CheckResult": "check", "check_tree": "check", "Rendered": "render", "render_in_memory": "render",
            "render_tree": "render"}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CheckResult", "Rendered", "check_tree", "render_in_memory", "render_tree"]
