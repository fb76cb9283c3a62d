"""Several clusters under one node-group gang: the order `launch.provision_across` tries them in. Pure.

One plan ranks every candidate of every cluster's cloud and region (`providers.plan`, the same decision as
everywhere); each cluster's backend keeps the candidates it can hold (`Backend.targets`, in plan order). A cluster
is then tried as a whole, zone after zone, before the next: the clusters go in the order of their best zone's rank
(ties: the order the user named them), so the gang leaves a cluster only when every zone of it refused. That is the
machine path's zone -> region -> provider failover with the cluster as the outer step (a node group cannot span two
clusters, and the job's context is one cluster's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from geosched.providers.nodegroups.backend import Backend, Target
from geosched.providers.plan import Candidate, Plan, Skipped


@dataclass(frozen=True)
class Site:
    """One cluster the gang may land in: its backend, its description (what `Backend.cluster` answered), and the
    plan's candidates it can hold (`targets`, plan order) and cannot (`skipped`, with the reason)."""

    backend: Backend
    cluster: Any
    targets: tuple[Target, ...]
    skipped: tuple[Skipped, ...] = ()

    @property
    def name(self) -> str:
        return str(self.cluster.name)


def site(plan: Plan, backend: Backend, cluster: Any) -> Site:
    targets, skipped = backend.targets(plan, cluster)
    return Site(backend, cluster, tuple(targets), tuple(skipped))


def ordered(plan: Plan, sites: Sequence[Site]) -> tuple[Site, ...]:
    """The sites by the plan rank of their best target (a site holding no candidate last); stable for ties."""
    rank = {id(c): i for i, c in enumerate(plan.candidates)}
    last = len(plan.candidates)

    def best(s: Site) -> int:
        return min((rank.get(id(t.candidate), last) for t in s.targets), default=last + 1)

    return tuple(sorted(sites, key=best))


def skipped(sites: Sequence[Site]) -> tuple[Skipped, ...]:
    """The candidates no site can hold, once each, with the reason of the cluster of their cloud and region when
    there is one (another cluster's 'not in my region' says nothing), else the first site's."""
    held = {id(t.candidate) for s in sites for t in s.targets}
    reasons: dict[int, tuple[Skipped, Backend]] = {}  # insertion order: the first site's order
    for s in sites:
        for skip in s.skipped:
            key = id(skip.candidate)
            if key in held:
                continue
            if key not in reasons or (_home(s.backend, skip.candidate)
                                      and not _home(reasons[key][1], skip.candidate)):
                reasons[key] = (skip, s.backend)
    return tuple(skip for skip, _ in reasons.values())


def _home(backend: Backend, c: Candidate) -> bool:
    """The candidate is in the backend's cloud and region (a GKE location is a region or a zone of it)."""
    return backend.provider == c.provider and (backend.region == c.region or backend.region.startswith(c.region + "-"))
