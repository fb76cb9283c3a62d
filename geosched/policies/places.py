"""The zones and regions a job names, matched to the fleet's. Pure.

A fleet keys AWS zones by zone ID (`use1-az1`, the same place in every account), but an EKS user types the zone
*name* (`us-east-1a`), which is a different place in each account. Which ID a name stands for is known only where
the fleet says so: its nodes carry both, the name in `topology.kubernetes.io/zone` and the ID in
`topology.k8s.aws/zone-id` (EKS 1.30+, kubernetes/cloud-provider-aws#855), as nodes read from a cluster, a snapshot
taken from clusters (`snapshot export --from-clusters`) and the embedded fleet's example account do. A zone a job
names is a fleet zone, or a label value some of its nodes carry; anything else is said in one line, with the zone
IDs that exist, instead of a no-fit listing every zone's filters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from geosched import clouds
from geosched.clouds import CloudSpec
from geosched.core import catalog
from geosched.core.models import Fleet, Job, Rejection

# The same label key as geosched.kube.keys (the core may not import kube/), and each cloud's zone-ID label.
ZONE_LABEL = "topology.kubernetes.io/zone"
ZONE_LABELS = (ZONE_LABEL, *(s.zone_id_label for s in clouds.all_specs() if s.zone_id_label))
# The clouds keyed by zone ID whose zone names users type (AWS), with the pattern of such a name.
ZONE_NAMES = tuple((s, re.compile(s.zone_name_pattern)) for s in clouds.all_specs()
                   if s.zone_id_label and s.zone_name_pattern)
SHOWN = 12


def zone_keys(fleet: Fleet, zones: Iterable[str]) -> frozenset[str]:
    """The fleet zones `zones` name: each as it is when the fleet has that zone, else the zones of the nodes
    labelled with it."""
    wanted = set(zones)
    named = wanted - set(fleet.zones)
    if not named:
        return frozenset(wanted)
    out = wanted & set(fleet.zones)
    for node in fleet.nodes:
        if any(node.labels.get(key) in named for key in ZONE_LABELS):
            out.add(node.zone)
    return frozenset(out)


def unknown(job: Job, fleet: Fleet) -> Rejection | None:
    """Why nothing the job allows is in the fleet at all (no zone or no region it names), in one line; None when
    some zone and region it names are."""
    if job.regions and not any(_region_of(fleet, r) for r in job.regions):
        shown = ", ".join(sorted({z.region for z in fleet.zones.values()})[:SHOWN]) or "none"
        named = ", ".join(job.regions)
        return Rejection("job", f"region {named} is not a region of this fleet (regions: {shown}"
                         f"{', ...' if len({z.region for z in fleet.zones.values()}) > SHOWN else ''})")
    if job.zones and not zone_keys(fleet, job.zones):
        return Rejection("job", _zone_reason(fleet, job.zones[0], len(job.zones)))
    return None


def _region_of(fleet: Fleet, region: str) -> bool:
    return any(region in (z.region, z.region_key) for z in fleet.zones.values())


def _zone_reason(fleet: Fleet, zone: str, count: int) -> str:
    what = f"zone {zone}" + (f" (and the {count - 1} other zone(s) the job names)" if count > 1 else "")
    named = _zone_name(zone)
    if named is None:
        zones = sorted(fleet.zones)
        shown = ", ".join(zones[:SHOWN]) + (", ..." if len(zones) > SHOWN else "")
        return f"{what} is not a zone of this fleet (zones: {shown or 'none'})"
    spec, region = named
    ids = sorted({z.name for z in fleet.zones.values() if z.provider == spec.name and z.region == region}
                 or {z.name for z in catalog.zones().values() if z.provider == spec.name and z.region == region})
    where = f"IDs in {region}: {', '.join(ids)}" if ids else f"{region} is not an {spec.title} region geosched knows"
    return (f"{what}: {spec.title} zones are keyed by zone ID, and no node of this fleet says which ID this zone name "
            f"is in your account ({where}; nodes read from your clusters carry both)")


def _zone_name(zone: str) -> tuple[CloudSpec, str] | None:
    """The cloud keyed by zone ID whose zone name `zone` looks like, and the region it names."""
    for spec, pattern in ZONE_NAMES:
        match = pattern.match(zone)
        if match is not None:
            return spec, match.group("region")
    return None
