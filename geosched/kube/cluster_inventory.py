"""The GPU nodes of every cluster geosched may use, read live through the kubeconfig into one `Fleet`.

Which clusters: every context of the kubeconfig (an explicit file, else $KUBECONFIG, else ~/.kube/config). A
cluster config (`geosched.kube.config`) narrows them to its clusters and names them; a context list narrows
further. Each cluster is read with the official client (nodes, and the bound pods that hold GPUs) and turned
into `Node`s by `geosched.kube.inventory.nodes_from_kube`; a cluster that cannot be read is reported in
`unreachable`, and the fleet is built from the others.

Turning cluster nodes into a fleet needs three things a cluster does not say, decided here and reported in
`assumptions` so nothing is silent:

- **Regions the catalog does not know** (on-prem, another cloud, a region label geosched has no data for) are
  declared, not skipped: skipping would make every on-prem cluster invisible. Grid intensity: that of the
  catalog region with the same name if exactly one exists (a region label names a place, whoever runs it),
  else the world average, 480 gCO2e/kWh (Ember, Global Electricity Review 2024, year 2023). PUE: 1.58, the
  industry average of the Uptime Institute's 2023 survey (the catalog's PUEs are the clouds' own).
- **Prices** (`geosched.kube.nodeprice`, the one resolver): the catalog's list price in the node's zone, else in
  its region (on-demand prices are regional), else the catalog's median $/GPU-hour for that GPU model (on-demand
  and spot), else the median over all GPUs; a node labelled spot is charged its spot price. Policies need a price
  to weigh cost; the median keeps such nodes neutral on cost rather than free or excluded.
- **Names**: a node name seen in two clusters becomes `<cluster>/<name>` (a fleet needs unique names; the
  hostname label, which manifests use, is unchanged).

Nodes launched by a provider (`launched`) are joined with their cluster record by `merge_launched`: one machine,
one identity.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from statistics import median

from geosched import clouds
from geosched.core import catalog, netmodel
from geosched.core.errors import GeoschedError, InputError
from geosched.core.models import Fleet, NetworkView, Node, Region, Rejection, Zone, region_key
from geosched.kube import nodeprice
from geosched.kube.client import NODES, PODS, Json, Kube, describe, kubeconfig_files, list_contexts
from geosched.kube.config import ClusterConfig, check_context
from geosched.kube.inventory import merge_launched, nodes_from_kube
from geosched.kube.keys import JOB_LABEL
from geosched.kube.kubeconfig import KubeconfigError
from geosched.kube.tolerations import Toleration

DEFAULT_GRID_GCO2E_PER_KWH = 480.0
DEFAULT_PUE = 1.58
# Bound pods that are not finished: the only ones holding GPUs (the same rule as inventory.gpus_in_use).
LIVE_BOUND_PODS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


JobRef = tuple[str, str]
"""A job geosched rendered, as (namespace, name): its pods carry `geosched.io/job: <name>`."""


@dataclass(frozen=True, slots=True)
class ClusterRef:
    """A cluster as geosched names it, and the kubeconfig context that reaches it."""

    name: str
    context: str


@dataclass(frozen=True, slots=True)
class Unreachable:
    cluster: str
    context: str
    reason: str


@dataclass(frozen=True)
class ClusterReading:
    """What one cluster said: its nodes and its live bound pods, as the API's JSON."""

    cluster: str
    nodes: tuple[Json, ...]
    pods: tuple[Json, ...]


@dataclass(frozen=True)
class FleetView:
    fleet: Fleet
    clusters: tuple[str, ...]
    skipped: tuple[Rejection, ...] = ()
    assumptions: tuple[str, ...] = ()
    unreachable: tuple[Unreachable, ...] = ()

    @property
    def not_whole(self) -> Mapping[str, tuple[Mapping[str, str], ...]]:
        """Per cluster, the labels of its GPU nodes whose nvidia.com/gpu are not whole
        (`inventory.Inventory.not_whole`), as the fleet carries them (so a snapshot exported from the clusters keeps
        them for GitOps renders)."""
        return self.fleet.not_whole


# --- which clusters -------------------------------------------------------------------------------

def candidates(kubeconfig: Path | None = None, contexts: Sequence[str] = (),
               clusters: Mapping[str, ClusterConfig] | None = None) -> list[ClusterRef]:
    """The clusters to read: the cluster config's (else every kubeconfig context), narrowed to `contexts`
    (each a context or cluster name). A name that matches nothing is bad input, not an empty fleet."""
    known, _ = list_contexts(kubeconfig)
    source = kubeconfig_files(kubeconfig)
    if clusters:
        for cluster in clusters.values():
            check_context(cluster, "context", known, source)
        refs = [ClusterRef(c.name, c.context) for c in clusters.values()]
    else:
        refs = [ClusterRef(c, c) for c in known]
    if contexts:
        wanted = set(contexts)
        unknown = wanted - {r.context for r in refs} - {r.name for r in refs}
        if unknown:
            raise InputError("--context", "", f"unknown context or cluster {', '.join(sorted(unknown))} (known: "
                             f"{', '.join(r.name for r in refs) or 'none'})")
        refs = [r for r in refs if r.context in wanted or r.name in wanted]
    if not refs:
        raise InputError(source, "contexts", "no cluster to use: the kubeconfig has no context")
    return refs


# --- reading (I/O) --------------------------------------------------------------------------------

def read_cluster(kube: Kube, cluster: str) -> ClusterReading:
    nodes, _ = kube.list_all(NODES.path())
    pods, _ = kube.list_all(PODS.path(), field_selector=LIVE_BOUND_PODS)
    return ClusterReading(cluster, tuple(nodes), tuple(pods))


def read_clusters(refs: Sequence[ClusterRef], kubeconfig: Path | None = None, *, timeout_s: float = 20.0,
                  ) -> tuple[list[ClusterReading], list[Unreachable]]:
    """Read every cluster at once (they are independent and mostly waiting on the network)."""

    def one(ref: ClusterRef) -> ClusterReading | Unreachable:
        try:
            with Kube.open(ref.context, kubeconfig, name=ref.name, timeout_s=timeout_s) as kube:
                return read_cluster(kube, ref.name)
        except KubeconfigError:  # the user's input, not this cluster's outage: exit 2
            raise
        except InputError as exc:
            return Unreachable(ref.name, ref.context, exc.reason)
        except Exception as exc:  # any failure of one cluster is that cluster's, reported, never the run's
            return Unreachable(ref.name, ref.context, describe(exc))

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(refs)))) as pool:
        results = list(pool.map(one, refs))
    readings = [r for r in results if isinstance(r, ClusterReading)]
    unreachable = [r for r in results if isinstance(r, Unreachable)]
    return readings, unreachable


def load(kubeconfig: Path | None = None, contexts: Sequence[str] = (),
         clusters: Mapping[str, ClusterConfig] | None = None, launched: Sequence[Node] = (),
         released: Mapping[str, Collection[JobRef]] | None = None) -> FleetView:
    """The live fleet over every candidate cluster that answered; GPUs held by the pods of `released` jobs
    (per cluster) count as free (see `release`)."""
    refs = candidates(kubeconfig, contexts, clusters)
    readings, unreachable = read_clusters(refs, kubeconfig)
    if released:
        readings = [release(r, released.get(r.cluster, ())) for r in readings]
    view = build_fleet(readings, launched, tolerations=declared_tolerations(clusters))
    return replace(view, unreachable=tuple(unreachable))


def declared_tolerations(clusters: Mapping[str, ClusterConfig] | None,
                         job: Sequence[Toleration] = ()) -> dict[str, tuple[Toleration, ...]]:
    """Per cluster, what geosched's pods for it tolerate beyond the GPU toleration: the job's own and the cluster
    config's `tolerations:` (render writes both on every pod)."""
    return {name: (*job, *c.tolerations) for name, c in (clusters or {}).items()}


def release(reading: ClusterReading, jobs: Collection[JobRef]) -> ClusterReading:
    """The reading without the pods of `jobs`: the GPUs they hold count as free. A GitOps tree's snapshot is what
    its own jobs may use, so taken while they run it must not show their GPUs as someone else's."""
    wanted = set(jobs)
    if not wanted:
        return reading

    def own(pod: Json) -> bool:
        meta = pod.get("metadata") or {}
        return (meta.get("namespace"), (meta.get("labels") or {}).get(JOB_LABEL)) in wanted

    return replace(reading, pods=tuple(p for p in reading.pods if not own(p)))


def only_labelled(reading: ClusterReading, labels: Mapping[str, str]) -> ClusterReading:
    """The reading with only the nodes carrying every one of `labels` (the pods stay: they say what is in use).
    `geosched up` places a gang on exactly the node group it created this way."""
    def carries(node: Json) -> bool:
        have = (node.get("metadata") or {}).get("labels") or {}
        return all(have.get(k) == v for k, v in labels.items())

    return replace(reading, nodes=tuple(n for n in reading.nodes if carries(n)))


# --- building the fleet (pure) --------------------------------------------------------------------

def build_fleet(readings: Iterable[ClusterReading], launched: Sequence[Node] = (), *,
                skip_tainted: bool = True, tolerations: Mapping[str, Sequence[Toleration]] | None = None,
                ) -> FleetView:
    """The fleet the readings describe. `skip_tainted`: leave out nodes whose taints geosched's own rendered pods
    do not tolerate (submit, snapshot export), those pods carrying the `tolerations` of their cluster (by cluster
    name: `declared_tolerations`); a caller that reads each workload's
    tolerations (the MultiKueue dispatcher) keeps them and masks them per workload."""
    declared = tolerations or {}
    nodes: list[Node] = []
    skipped: list[Rejection] = []
    names: list[str] = []
    not_whole: dict[str, tuple[Mapping[str, str], ...]] = {}
    for reading in readings:
        names.append(reading.cluster)
        inventory = nodes_from_kube(reading.nodes, reading.pods, reading.cluster, skip_tainted=skip_tainted,
                                    tolerations=declared.get(reading.cluster, ()))
        nodes.extend(inventory.nodes)
        skipped.extend(Rejection(f"{reading.cluster}/{r.subject}", r.reason) for r in inventory.skipped)
        if inventory.not_whole:
            not_whole[reading.cluster] = inventory.not_whole
    merged = merge_launched(nodes, launched) if launched else tuple(nodes)
    fleet, more_skipped, assumptions = fleet_from_nodes(_unique_names(merged))
    return FleetView(replace(fleet, not_whole=not_whole), tuple(names), tuple(skipped + more_skipped),
                     tuple(assumptions))


def fleet_from_nodes(nodes: Sequence[Node]) -> tuple[Fleet, list[Rejection], list[str]]:
    """Regions, zones and prices around the nodes; nodes whose zone contradicts an earlier node are skipped."""
    known = catalog.regions()
    regions: dict[str, Region] = {}
    zones: dict[str, Zone] = {}
    kept: list[Node] = []
    skipped: list[Rejection] = []
    assumptions: list[str] = []
    estimated: dict[str, int] = {}
    regional: set[str] = set()
    spotted = 0
    offers = catalog.offering_index()
    for node in nodes:
        zone = Zone(node.zone, node.provider, node.region)
        if zones.setdefault(node.zone, zone) != zone:
            other = zones[node.zone]
            skipped.append(Rejection(node.name, f"zone {node.zone} is in {other.region_key} on other nodes, "
                                     f"here in {zone.region_key}"))
            continue
        key = node.region_key
        if key not in regions:
            regions[key] = known.get(key) or _declared_region(node.provider, node.region, assumptions)
        if node.price_ondemand is None or node.price_spot is None:
            node = _estimated_prices(node)
            estimated[node.gpu] = estimated.get(node.gpu, 0) + 1
        elif (node.provider, node.instance_type, node.zone) not in offers:
            regional.add(f"{node.provider} {node.instance_type} in {node.region}")
        spot = nodeprice.on_market(node)
        spotted += spot is not node
        kept.append(spot)
    for gpu, count in sorted(estimated.items()):
        assumptions.append(f"{count} {gpu} node(s) without a catalog price: priced at the catalog's median "
                           f"$/GPU-hour for {gpu}")
    if regional:
        assumptions.append(f"priced at their region's list price (the catalog does not key their zone): "
                           f"{', '.join(sorted(regional))}")
    if spotted:
        assumptions.append(f"{spotted} spot node(s) (their capacity-type label): charged their spot price whatever "
                           "a job asks for")
    for spec in clouds.all_specs():
        label = spec.zone_id_label
        by_name = sorted({n.zone for n in kept if n.provider == spec.name and label and label not in n.labels})
        if label and by_name:
            # Which ID a zone name stands for differs per account: not guessed, so these zones stay apart from the
            # catalog's and the measured network's zone IDs.
            before = f" ({spec.zone_id_label_since})" if spec.zone_id_label_since else ""
            assumptions.append(f"{spec.title} zone(s) {', '.join(by_name)} named by nodes without {label}{before}: "
                               "keyed by name, so no zone-ID measurement applies to them")
    fleet = Fleet(regions=regions, zones=zones, nodes=tuple(kept), gpu_power=catalog.gpu_power())
    return fleet, skipped, assumptions


def _declared_region(provider: str, name: str, assumptions: list[str]) -> Region:
    namesakes = [r for r in catalog.regions().values() if r.name == name]
    if len(namesakes) == 1:
        grid = namesakes[0].grid_gco2e_per_kwh
        origin = f"the grid of {namesakes[0].key}"
    else:
        grid = DEFAULT_GRID_GCO2E_PER_KWH
        origin = "the world-average grid"
    assumptions.append(f"region {region_key(provider, name)} is not in the catalog: {origin} "
                       f"({grid:g} gCO2e/kWh) and PUE {DEFAULT_PUE:g} assumed")
    return Region(provider, name, grid, DEFAULT_PUE)


def _estimated_prices(node: Node) -> Node:
    ondemand, spot = median_gpu_prices(node.gpu)
    return replace(node,
                   price_ondemand=node.price_ondemand if node.price_ondemand is not None else ondemand * node.gpus,
                   price_spot=node.price_spot if node.price_spot is not None else spot * node.gpus)


@cache
def median_gpu_prices(gpu: str) -> tuple[float, float]:
    """Median on-demand and spot $/GPU-hour of the catalog's offerings of `gpu` (of all GPUs if none)."""
    offers = [o for o in catalog.offerings() if o.gpus > 0]
    own = [o for o in offers if o.gpu == gpu] or offers

    def per_gpu(values: Iterable[float | None], gpus: Iterable[int]) -> float:
        prices = [v / g for v, g in zip(values, gpus, strict=True) if v is not None]
        return median(prices) if prices else 0.0

    ondemand = per_gpu((o.price_ondemand for o in own), (o.gpus for o in own))
    spot = per_gpu((o.price_spot for o in own), (o.gpus for o in own))
    return ondemand, spot or ondemand


def _unique_names(nodes: Sequence[Node]) -> list[Node]:
    seen: dict[str, int] = {}
    for node in nodes:
        seen[node.name] = seen.get(node.name, 0) + 1
    return [replace(n, name=f"{n.cluster}/{n.name}") if seen[n.name] > 1 and n.cluster else n for n in nodes]


def network_for(fleet: Fleet, measured: NetworkView | None = None) -> NetworkView:
    """The network a live fleet is placed on: the shipped model (`geosched.core.netmodel`, links with `samples: 0`)
    for every zone pair it knows, overridden by measured zone links; measured node links as they are. Only links
    between the fleet's own zones and nodes: a snapshot names nothing the fleet does not hold."""
    links = netmodel.zone_links(fleet.zones.values())
    if measured is None:
        return NetworkView(zone_links=links)
    own = {pair: link for pair, link in measured.zone_links.items()
           if pair[0] in fleet.zones and pair[1] in fleet.zones}
    names = fleet.by_name
    node_links = {pair: link for pair, link in measured.node_links.items() if pair[0] in names and pair[1] in names}
    return NetworkView(zone_links=netmodel.LayeredLinks(own, links), node_links=node_links,
                       stale_after_s=measured.stale_after_s)


class ClustersUnreachable(GeoschedError):
    """Clusters that could not be read, where going on without them would mislead: a snapshot without a cluster
    would move every job off it, a submit that read no cluster would call the job a no-fit."""


def unreachable_list(unreachable: Iterable[Unreachable]) -> str:
    """`cluster a (context ctx-a): cause; ...`: each cluster with the context that reaches it and why it did not."""
    return "; ".join(f"cluster {u.cluster} (context {u.context}): {u.reason}" for u in unreachable)


def snapshot(kubeconfig: Path | None = None, contexts: Sequence[str] = (),
             clusters: Mapping[str, ClusterConfig] | None = None, measured: NetworkView | None = None,
             released: Mapping[str, Collection[JobRef]] | None = None) -> tuple[FleetView, NetworkView]:
    """The live fleet of every candidate cluster and the network it is placed on, as the files a GitOps tree
    renders from (`geosched snapshot export --from-clusters`): the same reading `submit` places on."""
    view = load(kubeconfig, contexts, clusters, released=released)
    if view.unreachable:
        raise ClustersUnreachable(f"cannot read {unreachable_list(view.unreachable)}; nothing written (a snapshot "
                                  "without a cluster would move its jobs away; leave it out with --context)")
    return view, network_for(view.fleet, measured)
