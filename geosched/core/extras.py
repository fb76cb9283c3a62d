"""Which optional extra brings which third-party module (issue 23 item 7: a light install).

`pip install geosched` places, simulates, renders GitOps trees and reports with no cloud SDK; each edge that talks
to a cloud, a cluster or a host comes with an extra, the way SkyPilot splits `skypilot[aws,gcp,kubernetes]`. The
modules of an extra are imported where they are used, so a core command never touches them, and a command that
needs one that is absent ends with one line naming the extra (exit 1: the environment, not the input, is at fault;
geosched.cli.main maps the ModuleNotFoundError here). tests/test_dependencies.py checks this table against
pyproject.toml: every module an extra's table entry names comes from a distribution that extra declares.
"""

from __future__ import annotations

from geosched import clouds
from geosched.core.errors import MissingExtra

# Top-level import name -> the extra whose distributions provide it (pyproject.toml [project.optional-dependencies]).
# A cloud's SDK extra is on its spec (geosched.clouds: `extra`, `sdk_modules`), so a new cloud names it there.
EXTRA_OF_MODULE: dict[str, str] = {
    **{module: spec.extra for spec in clouds.all_specs() if spec.extra for module in spec.sdk_modules},
    "kubernetes": "kubernetes",
    "urllib3": "kubernetes",  # the kubernetes client's transport (geosched.kube.client: timeouts, retries)
    "asyncssh": "probes",
    "matplotlib": "plots",
    "prometheus_client": "metrics",
}

# What each extra is for, as `geosched check` and the README say it.
PURPOSE: dict[str, str] = {
    **{spec.extra: spec.extra_purpose for spec in clouds.all_specs() if spec.extra},
    "kubernetes": "submit, jobs, scheduler mode, MultiKueue dispatcher, snapshot export --from-clusters",
    "probes": "probe run over SSH (asyncssh)",
    "plots": "charts: --plot files, HTML report charts, probe heatmaps (matplotlib)",
    "metrics": "the MultiKueue dispatcher's Prometheus endpoint (--metrics-port)",
}


def extra_for(exc: ModuleNotFoundError) -> MissingExtra | None:
    """The one-line error for a module of an optional extra that is not installed, or None for any other missing
    module (a broken install or a bug: that one must not be dressed up as a missing extra)."""
    name = exc.name or ""
    extra = EXTRA_OF_MODULE.get(name.split(".")[0])
    if extra is None:
        return None
    return MissingExtra(extra, name)


__all__ = ["EXTRA_OF_MODULE", "PURPOSE", "extra_for"]
