"""GitOps: every job of a repository placed on a fleet snapshot and rendered as a tree per cluster,
`clusters/<cluster>/<namespace>/<job>.yaml`, for Argo CD or Flux to apply. See render.py and check.py."""

from geosched.gitops.check import CheckResult, check_tree
from geosched.gitops.render import Rendered, render_in_memory, render_tree

__all__ = ["CheckResult", "Rendered", "check_tree", "render_in_memory", "render_tree"]
