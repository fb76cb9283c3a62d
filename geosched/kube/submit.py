"""Hand a placed gang to its cluster, and list the gangs geosched placed.

`submit` is the whole path for one job file: read the live fleet (`cluster_inventory`), look for the job on every
candidate cluster, place it, render it, and apply the manifests on the chosen cluster. `plan` is the pure middle
(place + render), `apply_manifests` the last step alone, `jobs` the listing, and `sync_usage` writes what the
listing saw of each job's run (its start and end in the cluster's status) into the usage ledger.

Idempotent by construction: every object is written by server-side apply (field manager `geosched`) under its
own name, so a retry, a second submit or a rerun after a crash converges on one object per name; nothing is
POSTed. The job object is applied last, so a crash part way leaves only companions (PodGroup, Service), which
the next submit applies again in place.

Never a duplicate job:

- on one cluster: by name, as above;
- across clusters: submit looks before it places. A job whose object already exists on a candidate cluster is
  not placed again; its cluster and zones are reported and nothing is written. A candidate cluster that cannot
  be read might hold the job, so submit refuses (`SubmitRefused`) unless told to skip unreachable clusters.
  Two submits of one job racing on different clusters are not prevented: there is no cross-cluster lock.

Never a placed job's nodes: a job geosched placed that has not started (Pending, or Suspended while Kueue holds
it) holds no GPUs the cluster can see yet, only the nodes its `geosched.io/assignments` annotation names. Submit
reads those objects on every candidate cluster and keeps their nodes for them first (`geosched.policies.stable`), so a
new job is placed around them; a started job's bound pods already hold their GPUs. A cluster whose jobs cannot be read
refuses the submit as above.

Retries: 429, 5xx and dropped connections are retried with exponential backoff and full jitter, at least the
server's Retry-After. A 409 on apply (another field manager owns a field we set, or a racing writer) is re-read
and re-applied once, then reported with the server's message, unless `force` takes the fields over.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from geosched import policies
from geosched.core.errors import GeoschedError, InputError
from geosched.core.models import CarbonSignal, Job, NetworkView, Node, NoFit, Placement, Pricing, Rejection, Weights
from geosched.core.retry import RetryPolicy
from geosched.grid.carbon import decision_signal
from geosched.kube import cluster_inventory, keys, kinds, nodeprice, owners
from geosched.kube.backends import kueue, workload_api
from geosched.kube.client import (
    APPLY_PATCH,
    FIELD_MANAGER,
    KUBE_RETRY,
    NODES,
    Json,
    Kube,
    api_message,
    describe,
    kubeconfig_files,
    list_contexts,
    with_retries,
)
from geosched.kube.cluster_inventory import ClusterRef, ClustersUnreachable, FleetView, Unreachable
from geosched.kube.compact import CompactKind
from geosched.kube.config import Backend, ClusterConfig, apply_context, check_context
from geosched.kube.inventory import nodes_from_kube
from geosched.kube.jobinput import JobInput, parse_job_object, read_job_file
from geosched.kube.kinds.base import UNKNOWN as UNKNOWN_KIND
from geosched.kube.kinds.base import when
from geosched.kube.kubeconfig import KubeconfigError
from geosched.kube.queues import check_queues
from geosched.kube.render import RenderOptions, render
from geosched.policies.stable import Current, Request, place_all
from geosched.store import usage
from geosched.store.db import Store

COMPACT_OBJECTS = {CompactKind.JOB: ("batch/v1", "Job"), CompactKind.JOBSET: ("jobset.x-k8s.io/v1alpha2", "JobSet")}
# The kinds a placed gang's main object can have, for `jobs`: every kind a cluster serves (kube/kinds/).
JOB_RESOURCES = tuple((k.api_version, k.kind) for k in kinds.served())
CLUSTER_NOTE = keys.PREFIX + "cluster"
ZONES_NOTE = keys.PREFIX + "zones"
REGIONS_NOTE = keys.PREFIX + "regions"
POLICY_NOTE = keys.PREFIX + "policy"
PLACED_AT_NOTE = keys.PREFIX + "placed-at"
ASSIGNMENTS_NOTE = keys.PREFIX + "assignments"


class SubmitError(GeoschedError):
    """The cluster refused the manifests (after retries), or cannot take them."""


class SubmitRefused(GeoschedError):
    """Submitting could create a second copy of the job (a candidate cluster could not be checked), or, with
    `check_queues`, the chosen Kueue cluster lacks what would admit it."""


@dataclass(frozen=True, slots=True)
class Applied:
    api_version: str
    kind: str
    name: str
    namespace: str | None
    action: str  # created | configured | unchanged
    resource_version: str


@dataclass(frozen=True, slots=True)
class Existing:
    cluster: str
    namespace: str
    kind: str
    name: str
    zones: tuple[str, ...]
    placed_by_geosched: bool


@dataclass(frozen=True)
class Planned:
    job: JobInput
    placement: Placement
    cluster: ClusterConfig
    manifests: tuple[Json, ...]
    notes: tuple[str, ...] = ()
    """Where the decision's grid intensity came from, when an hourly series did not cover the hour."""


@dataclass(frozen=True)
class SubmitOutcome:
    job: str
    status: str  # applied | dry-run | exists | no-fit
    cluster: str | None = None
    context: str | None = None
    zones: tuple[str, ...] = ()
    placement: Placement | None = None
    nofit: NoFit | None = None
    manifests: tuple[Json, ...] = ()
    applied: tuple[Applied, ...] = ()
    existing: Existing | None = None
    unreachable: tuple[Unreachable, ...] = ()
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class JobUsage:
    """What a job's cluster status says about its use of GPUs: when its current (or last) run started and
    ended (None: not known, or not yet), and the ledger rows that run is made of (one per zone, instance type
    and market its workers used)."""

    start: float | None
    end: float | None
    shares: tuple[usage.Usage, ...]


@dataclass(frozen=True, slots=True)
class PlacedJob:
    cluster: str
    namespace: str
    kind: str
    name: str
    zones: tuple[str, ...]
    regions: tuple[str, ...]
    policy: str | None
    placed_at: str | None
    state: str
    uid: str | None = None
    # Filled by `jobs(..., with_usage=True)`: the run's facts, or why the job cannot be accounted.
    usage: JobUsage | None = None
    usage_note: str | None = None


@dataclass(frozen=True)
class SubmitOptions:
    policy: str = policies.DEFAULT_POLICY
    weights: Weights = field(default_factory=Weights)
    compact_kind: CompactKind = CompactKind.JOB
    dry_run: bool = False
    force: bool = False
    skip_unreachable: bool = False
    # Kueue clusters: read the queue's ClusterQueue, flavors and Topology first; refuse, saying what is missing.
    check_queues: bool = False
    # Kueue clusters: also render (and apply first, on the cluster itself) its Topology, ResourceFlavors, ClusterQueue
    # and the LocalQueue the cluster config names, sized from its nodes (backends/kueue.py `cluster_objects`).
    kueue_objects: bool = False
    retry: RetryPolicy = KUBE_RETRY
    carbon: CarbonSignal | None = None
    """An hourly grid-intensity series; the job is placed at the intensity of the hour it starts (`now`)."""
    node_labels: Mapping[str, str] | None = None
    """Only nodes carrying all these labels are placed on (`geosched up`: the node group it just created)."""


# --- the whole path -------------------------------------------------------------------------------

def submit(job_file: Path, *, kubeconfig: Path | None = None, contexts: Sequence[str] = (),
           clusters: Mapping[str, ClusterConfig] | None = None, network: NetworkView | None = None,
           options: SubmitOptions | None = None, now: datetime | None = None,
           launched: Sequence[Node] = ()) -> SubmitOutcome:
    """Place one job file on the live clusters and apply it (or, with dry_run, only render it). `launched`: nodes
    a provider launched, joined with their cluster records (one identity)."""
    opts = options or SubmitOptions()
    job = read_job_file(job_file)
    refs = cluster_inventory.candidates(kubeconfig, contexts, clusters)
    configs = {r.name: (clusters or {}).get(r.name) or ClusterConfig(name=r.name, context=r.context) for r in refs}
    if any(c.karmada_context for c in configs.values()):  # where the job is applied: refused before any reading
        known, _ = list_contexts(kubeconfig)
        for config in configs.values():
            check_context(config, "karmada_context", known, kubeconfig_files(kubeconfig))
    readings, down_clusters = cluster_inventory.read_clusters(refs, kubeconfig)
    if opts.node_labels:
        readings = [cluster_inventory.only_labelled(r, opts.node_labels) for r in readings]
    if not readings:  # not a "no fit": nothing was seen to fit on
        raise ClustersUnreachable(f"cannot read {cluster_inventory.unreachable_list(down_clusters)}; nothing "
                                  "placed")
    # The nodes count whose taints the job's pods will tolerate: the job's own tolerations and its cluster's.
    tolerated = cluster_inventory.declared_tolerations(configs, job.tolerations)
    view = replace(cluster_inventory.build_fleet(readings, launched, tolerations=tolerated),
                   unreachable=tuple(down_clusters))
    down = {u.cluster for u in view.unreachable}
    existing, unchecked = find_existing(job, [r for r in refs if r.name not in down], configs, kubeconfig,
                                        opts.compact_kind)
    unreachable = (*view.unreachable, *unchecked)
    seen = SubmitOutcome(job.name, "exists", unreachable=unreachable, assumptions=view.assumptions)
    if existing is not None:
        return replace(seen, cluster=existing.cluster, context=configs[existing.cluster].context,
                       zones=existing.zones, existing=existing)
    if unreachable and not opts.dry_run and not opts.skip_unreachable:
        names = ", ".join(f"{u.cluster} ({u.reason})" for u in unreachable)
        raise SubmitRefused(f"cannot check {names} for an existing copy of {job.name!r}; submitting could run it "
                            "twice. Retry, leave the cluster out with --context, or pass --skip-unreachable")
    held, unread = held_placements([r for r in refs if r.name not in down], kubeconfig)
    if unread and not opts.dry_run and not opts.skip_unreachable:
        names = ", ".join(f"{u.cluster} ({u.reason})" for u in unread)
        raise SubmitRefused(f"cannot read the jobs geosched placed on {names}; placing now could take their nodes. "
                            "Retry, leave the cluster out with --context, or pass --skip-unreachable")
    if held:
        names = ", ".join(r.key for r in held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        seen = replace(seen, assumptions=(*seen.assumptions, f"{len(held)} job(s) geosched placed that have not "
                                          f"started keep their nodes: {names}"))
    planned = plan(job, view, configs, network=network, policy=opts.policy, weights=opts.weights,
                   compact_kind=opts.compact_kind, now=now or datetime.now(UTC), held=held, carbon=opts.carbon)
    if isinstance(planned, NoFit):
        return replace(seen, status="no-fit", nofit=_with_taints(planned, view))
    cluster = planned.cluster
    target = apply_context(cluster)
    queues: tuple[Json, ...] = ()
    if opts.kueue_objects and cluster.backend is Backend.KUEUE:
        assert cluster.queue is not None, "config parsing requires a queue for kueue"
        nodes = next(r.nodes for r in readings if r.cluster == cluster.name)
        queues = tuple(kueue.cluster_objects(nodes, cluster.queue, _namespace(job, cluster),
                                             kueue.requested_resources(planned.manifests)))
    rendered = replace(seen, status="dry-run", cluster=cluster.name, context=target,
                       zones=planned.placement.zones, placement=planned.placement,
                       manifests=(*queues, *planned.manifests), assumptions=(*seen.assumptions, *planned.notes))
    if opts.check_queues and cluster.backend is Backend.KUEUE and not queues:
        assert cluster.queue is not None, "config parsing requires a queue for kueue"
        # The member cluster runs Kueue, also when a Karmada control plane takes the manifests.
        with Kube.open(cluster.context, kubeconfig, name=cluster.name) as kube:
            lacking = check_queues(kube, planned.manifests, _namespace(job, cluster), cluster.queue)
        if lacking:
            raise SubmitRefused(f"cluster {cluster.name} cannot admit {job.name!r} through Kueue: "
                                + "; ".join(lacking))
    if opts.dry_run:
        return rendered
    applied: list[Applied] = []
    if queues:  # on the member cluster itself, also when a Karmada control plane takes the job
        with Kube.open(cluster.context, kubeconfig, name=cluster.name) as kube:
            applied += apply_manifests(kube, queues, default_namespace=_namespace(job, cluster), retry=opts.retry,
                                       force=opts.force)
    with Kube.open(target, kubeconfig, name=cluster.name) as kube:
        done = apply_manifests(kube, planned.manifests, default_namespace=_namespace(job, cluster),
                               retry=opts.retry, force=opts.force)
        # On the Karmada control plane when the cluster is a Karmada member (geosched.kube.owners says why that
        # is safe).
        applied += own_companions(kube, planned.manifests, done, _namespace(job, cluster), opts)
    return replace(rendered, status="applied", applied=tuple(applied))


def own_companions(kube: Kube, manifests: Sequence[Mapping[str, Any]], done: Sequence[Applied], namespace: str,
                   opts: SubmitOptions) -> list[Applied]:
    """Apply the job's companions again, owned by the job just applied (geosched.kube.owners), so deleting the
    job deletes them. Each companion keeps one entry in the result (created stays created)."""
    job = owners.the_job(manifests)
    resource = with_retries(lambda: kube.resource(str(job["apiVersion"]), str(job["kind"])), opts.retry)
    name = str((job.get("metadata") or {}).get("name"))
    found = with_retries(lambda: kube.get(resource.path(namespace, name)), opts.retry) if resource else None
    reference = owners.owner_reference(found) if found is not None else None
    if reference is None:
        return list(done)
    again = {(a.api_version, a.kind, a.name): a for a in apply_manifests(
        kube, [owners.owned(c, reference) for c in owners.companions(manifests, job, namespace)],
        default_namespace=namespace, retry=opts.retry, force=opts.force)}
    out = []
    for a in done:
        later = again.get((a.api_version, a.kind, a.name))
        out.append(a if later is None else replace(later, action="created" if a.action == "created" else
                                                   ("unchanged" if later.action == "unchanged" else "configured")))
    return out


def plan(job: JobInput, view: FleetView, clusters: Mapping[str, ClusterConfig], *,
         network: NetworkView | None = None, policy: str = policies.DEFAULT_POLICY, weights: Weights | None = None,
         compact_kind: CompactKind = CompactKind.JOB, now: datetime, held: Sequence[Request] = (),
         carbon: CarbonSignal | None = None) -> Planned | NoFit:
    """Place the job on the fleet's clusters (only those: nodes of no cluster cannot run it) and render it. Pure.

    `held`: jobs geosched placed that have not started (`held_placements`): their nodes are kept for them first
    (geosched.policies.stable), so a new job never takes the nodes a placed one is waiting for. `carbon`: placed at
    the grid intensity of the hour of `now`."""
    reachable = tuple(c for c in view.clusters if c in clusters)
    allowed = tuple(c for c in reachable if not job.job.clusters or c in job.job.clusters)
    placed_job = _with_clusters(job, allowed)
    grid = decision_signal(view.fleet, carbon, now)
    ctx = policies.PlacementContext(view.fleet, cluster_inventory.network_for(view.fleet, network), grid.signal)
    # The new job's key sorts before any other, so only kept placements come before it.
    decisions = place_all([*held, Request("", placed_job.job)], ctx, ctx.gpus_free, policy=policy, weights=weights)
    result = decisions[-1].result
    if isinstance(result, NoFit):
        return result
    if result.cluster is None:  # a policy that divides gangs across clusters (karmada): nothing to apply as one
        spanned = ", ".join(sorted({n.cluster or "?" for n in view.fleet.nodes
                                    if n.name in {a.node for a in result.assignments}}))
        return NoFit(result.job, policy, (Rejection("policy", f"{policy} splits the gang over clusters {spanned}; "
                                                    "submit applies a gang to one cluster"),))
    cluster = clusters[result.cluster]
    nodes = {n.name: n for n in view.fleet.nodes if n.cluster == cluster.name}
    manifests = render(job, _restore_clusters(result, job), cluster,
                       RenderOptions(now=now, compact_kind=compact_kind, nodes=nodes,
                                     not_whole=view.not_whole.get(cluster.name, ())))
    return Planned(job, result, cluster, tuple(manifests), grid.notes)


def _with_taints(nofit: NoFit, view: FleetView) -> NoFit:
    """The no-fit saying first that GPU nodes were left out for taints the job's pods do not tolerate: otherwise
    it reads as if the cluster had no such GPUs, and the fix (`tolerations:`) is not in sight."""
    tainted = [r for r in view.skipped if r.reason.startswith("taint ")]
    if not tainted:
        return nofit
    first = tainted[0]
    return replace(nofit, reasons=(Rejection(f"{len(tainted)} GPU node(s) left out", f"{first.subject}: "
                                             f"{first.reason}"), *nofit.reasons))


def _with_clusters(job: JobInput, clusters: tuple[str, ...]) -> JobInput:
    # An empty tuple would mean "any cluster": a placeholder no node has keeps a job with no cluster unplaced.
    return replace(job, job=replace(job.job, clusters=clusters or ("(none reachable)",)))


def _restore_clusters(placement: Placement, job: JobInput) -> Placement:
    # render() checks the placement against the job as read; the cluster restriction was ours, not the user's.
    return replace(placement, job=job.job)


def _namespace(job: JobInput, cluster: ClusterConfig) -> str:
    return job.namespace or cluster.namespace or "default"


# --- looking before placing -----------------------------------------------------------------------

def job_object(job: JobInput, compact_kind: CompactKind = CompactKind.JOB) -> tuple[str, str]:
    """apiVersion and kind of the object that is the job on a cluster."""
    if not job.kind.served:
        return COMPACT_OBJECTS[compact_kind]
    return job.kind.api_version, job.kind.kind


def find_existing(job: JobInput, refs: Sequence[ClusterRef], configs: Mapping[str, ClusterConfig],
                  kubeconfig: Path | None, compact_kind: CompactKind = CompactKind.JOB,
                  ) -> tuple[Existing | None, list[Unreachable]]:
    """The job's object on the first cluster that has it, and the clusters that could not be asked."""
    api_version, kind = job_object(job, compact_kind)
    unreachable: list[Unreachable] = []
    for ref in refs:
        namespace = _namespace(job, configs[ref.name])
        try:
            with Kube.open(ref.context, kubeconfig, name=ref.name) as kube:
                resource = kube.resource(api_version, kind)
                found = kube.get(resource.path(namespace, job.name)) if resource is not None else None
        except KubeconfigError:  # the user's input, not this cluster's outage: exit 2
            raise
        except Exception as exc:  # one cluster's failure is reported with the others
            unreachable.append(Unreachable(ref.name, ref.context, describe(exc)))
            continue
        if found is not None:
            notes = (found.get("metadata") or {}).get("annotations") or {}
            zones = tuple(z for z in str(notes.get(ZONES_NOTE, "")).split(",") if z)
            return Existing(ref.name, namespace, kind, job.name, zones, CLUSTER_NOTE in notes), unreachable
    return None, unreachable


def held_placements(refs: Sequence[ClusterRef], kubeconfig: Path | None) -> tuple[list[Request], list[Unreachable]]:
    """Jobs geosched placed that have not started, on every cluster in `refs`, as kept placements for `plan`."""
    held: list[Request] = []
    unreachable: list[Unreachable] = []
    for ref in refs:
        try:
            with Kube.open(ref.context, kubeconfig, name=ref.name) as kube:
                for api_version, kind in JOB_RESOURCES:
                    resource = kube.resource(api_version, kind)
                    if resource is None:
                        continue
                    items, _ = kube.list_all(resource.path(), label_selector=keys.JOB_LABEL)
                    held.extend(r for item in items
                                if (r := held_placement(ref.name, kind, {**item, "apiVersion": api_version,
                                                                         "kind": kind})) is not None)
        except KubeconfigError:  # the user's input, not this cluster's outage: exit 2
            raise
        except Exception as exc:  # one cluster's failure is reported with the others
            unreachable.append(Unreachable(ref.name, ref.context, describe(exc)))
    return held, unreachable


def held_placement(cluster: str, kind: str, obj: Mapping[str, Any]) -> Request | None:
    """A placed job that holds no GPUs yet (Pending, or Suspended: Kueue holds a job suspended until admitted) as a
    kept placement on the nodes its `geosched.io/assignments` name. A started job's pods are bound, and the fleet
    already counts their GPUs as used; a finished one holds nothing. Pure."""
    placed = placed_job(cluster, kind, obj)
    if placed is None or placed.state not in ("Pending", "Suspended"):
        return None
    notes = (obj.get("metadata") or {}).get("annotations") or {}
    nodes = tuple(sorted(_assignments(notes.get(ASSIGNMENTS_NOTE)).items()))
    try:
        gang = parse_job_object(obj, f"{cluster}: {kind} {placed.namespace}/{placed.name}").job
    except InputError:
        return None
    if not nodes:
        return None
    key = f"{cluster}/{placed.namespace}/{placed.name}"
    # Only the gang's shape: its nodes were chosen by geosched, and the object's zone labels may name zones
    # differently from the fleet (EKS zone names vs zone IDs).
    shape = Job(name=key, workers=gang.workers, gpus_per_worker=gang.gpus_per_worker)
    return Request(key, shape, Current(cluster, placed.zones, nodes, gang.gpus_per_worker))


# --- applying -------------------------------------------------------------------------------------

def apply_manifests(kube: Kube, manifests: Sequence[Mapping[str, Any]], *, default_namespace: str,
                    retry: RetryPolicy | None = None, force: bool = False) -> list[Applied]:
    """Server-side apply each manifest, in order. Objects that already hold the same content are unchanged."""
    return [apply_object(kube, m, default_namespace=default_namespace, retry=retry or KUBE_RETRY, force=force)
            for m in manifests]


def apply_object(kube: Kube, obj: Mapping[str, Any], *, default_namespace: str, retry: RetryPolicy,
                 force: bool = False) -> Applied:
    api_version, kind = str(obj["apiVersion"]), str(obj["kind"])
    meta = obj.get("metadata") or {}
    name = str(meta["name"])
    resource = with_retries(lambda: kube.resource(api_version, kind), retry)
    if resource is None:
        hint = workload_api.NOT_SERVED if api_version == workload_api.API_VERSION else "is its CRD installed?"
        raise SubmitError(f"{kube.name}: {api_version} {kind} is not served ({hint})")
    namespace = str(meta.get("namespace") or default_namespace) if resource.namespaced else None
    body = dict(obj)
    if namespace is not None:
        body["metadata"] = {**meta, "namespace": namespace}
    path = resource.path(namespace, name)
    before = with_retries(lambda: kube.get(path), retry)

    def send(take_over: bool) -> Json:
        query = {"fieldManager": FIELD_MANAGER, "force": "true" if take_over else None}
        return with_retries(lambda: kube.request("PATCH", path, query=query, body=body, content_type=APPLY_PATCH),
                            retry)

    where = f"{kube.name}: {kind} {namespace + '/' if namespace else ''}{name}"
    try:
        try:
            after = send(force)
        except ApiException as exc:
            if exc.status != 409:
                raise
            # Re-read, then one more apply: a racing writer's change is now visible; a field owned by another
            # manager conflicts again and is reported below.
            with_retries(lambda: kube.get(path), retry)
            after = send(force)
    except ApiException as exc:
        hint = " (another field manager owns these fields; --force-conflicts takes them over)" \
            if exc.status == 409 else ""
        raise SubmitError(f"{where}: {exc.status} {api_message(exc)}{hint}") from None
    except Exception as exc:
        raise SubmitError(f"{where}: {describe(exc)}") from None
    version = str((after.get("metadata") or {}).get("resourceVersion", ""))
    old = str(((before or {}).get("metadata") or {}).get("resourceVersion", ""))
    action = "created" if before is None else ("unchanged" if old == version else "configured")
    return Applied(api_version, kind, name, namespace, action, version)


# --- listing --------------------------------------------------------------------------------------

def jobs(kubeconfig: Path | None = None, contexts: Sequence[str] = (),
         clusters: Mapping[str, ClusterConfig] | None = None, *,
         with_usage: bool = False) -> tuple[list[PlacedJob], list[Unreachable]]:
    """Every job object carrying geosched's provenance, on every candidate cluster, with zones and state; with
    `with_usage`, also what each job's run used (which reads the cluster's nodes when a job has started)."""
    refs = cluster_inventory.candidates(kubeconfig, contexts, clusters)
    found: list[PlacedJob] = []
    unreachable: list[Unreachable] = []
    for ref in refs:
        try:
            with Kube.open(ref.context, kubeconfig, name=ref.name) as kube:
                found.extend(list_placed(kube, ref.name, with_usage=with_usage))
        except KubeconfigError:  # the user's input, not this cluster's outage: exit 2
            raise
        except Exception as exc:  # reported with the others; the listing goes on
            unreachable.append(Unreachable(ref.name, ref.context, describe(exc)))
    found.sort(key=lambda j: (j.cluster, j.namespace, j.name))
    return found, unreachable


def list_placed(kube: Kube, cluster: str, *, with_usage: bool = False) -> list[PlacedJob]:
    found: list[tuple[PlacedJob, Json]] = []
    for api_version, kind in JOB_RESOURCES:
        resource = kube.resource(api_version, kind)
        if resource is None:
            continue  # the cluster does not run this controller
        items, _ = kube.list_all(resource.path(), label_selector=keys.JOB_LABEL)
        for item in items:
            # List items leave out apiVersion and kind; parsing the object (for its gang size) needs them.
            obj = {**item, "apiVersion": api_version, "kind": kind}
            if (p := placed_job(cluster, kind, obj)) is not None:
                found.append((p, obj))
    if not with_usage:
        return [p for p, _ in found]
    ran = any(t != (None, None) for t in (job_times(p.kind, obj) for p, obj in found))
    nodes = cluster_nodes(kube, cluster) if ran else {}
    return [_with_usage(p, job_usage(cluster, p.kind, obj, nodes)) for p, obj in found]


def cluster_nodes(kube: Kube, cluster: str) -> dict[str, Node]:
    """The cluster's GPU nodes by name, as fleet nodes (provider, place, instance type, GPU model, labels)."""
    items, _ = kube.list_all(NODES.path())
    return {n.name: n for n in nodes_from_kube(items, (), cluster).nodes}


def _with_usage(placed: PlacedJob, found: JobUsage | str) -> PlacedJob:
    return replace(placed, usage=found) if isinstance(found, JobUsage) else replace(placed, usage_note=found)


def placed_job(cluster: str, kind: str, obj: Mapping[str, Any]) -> PlacedJob | None:
    """A job object as a listing row, or None if geosched did not place it (no provenance)."""
    meta = obj.get("metadata") or {}
    notes = meta.get("annotations") or {}
    if CLUSTER_NOTE not in notes:
        return None
    return PlacedJob(
        cluster=cluster,
        namespace=str(meta.get("namespace", "")),
        kind=kind,
        name=str(meta.get("name", "")),
        zones=_split(notes.get(ZONES_NOTE)),
        regions=_split(notes.get(REGIONS_NOTE)),
        policy=notes.get(POLICY_NOTE),
        placed_at=notes.get(PLACED_AT_NOTE),
        state=job_state(obj),
        uid=str(meta["uid"]) if meta.get("uid") else None,
    )


# Conditions that end or hold a job, strongest first; one table serves Job, JobSet, PyTorchJob and TrainJob,
# whose condition types overlap (Complete/Completed/Succeeded mean the same).
STATE_OF_CONDITION = (("Failed", "Failed"), ("Complete", "Succeeded"), ("Completed", "Succeeded"),
                      ("Succeeded", "Succeeded"), ("Suspended", "Suspended"), ("Restarting", "Restarting"),
                      ("Running", "Running"), ("Created", "Pending"))


def job_state(obj: Mapping[str, Any]) -> str:
    status = obj.get("status") or {}
    true = {str(c.get("type")) for c in status.get("conditions") or [] if c.get("status") == "True"}
    adapter = kinds.by_name(str(obj.get("kind")))
    for condition, state in (*STATE_OF_CONDITION, *(adapter.state_conditions if adapter is not None else ())):
        if condition in true:
            return state
    if (obj.get("spec") or {}).get("suspend") is True:
        return "Suspended"  # Kueue holds a job suspended until it is admitted
    if int(status.get("active") or 0) > 0:
        return "Running"
    return "Pending"


def _split(value: Any) -> tuple[str, ...]:
    return tuple(v for v in str(value or "").split(",") if v)


# --- usage: when a job ran, on what (pure), and the ledger write --------------------------------------

# Conditions that end a run (status True); Job and TrainJob say Complete, JobSet Completed, PyTorchJob Succeeded.
END_CONDITIONS = ("Complete", "Completed", "Succeeded", "Failed")
UNKNOWN_GPU = "?"


def job_times(kind: str, obj: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """When the job's current (or last) run started and ended, from its status; None where it does not say.

    - a kind whose status states it (`JobKind.started_at`: Job, PyTorchJob): that;
    - others (JobSet, TrainJob: no start field): when the Suspended condition went False (resumed, e.g. admitted
      by Kueue); else, once anything shows the run began (`JobKind.run_began`: a child job counted active, ready,
      succeeded or failed; or a final condition), `metadata.creationTimestamp`, early by the scheduling delay
      (cost over-stated);
    - end: `status.completionTime`, else the time of a Complete/Completed/Succeeded/Failed condition;
    - suspended now (Suspended condition True): the run ended when it was suspended, and a start from before
      that is the run that ended; a start after it is ignored (the job is not running).
    """
    status = obj.get("status") or {}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
    true = {str(c.get("type")): _when(c.get("lastTransitionTime")) for c in conditions if c.get("status") == "True"}
    ends = [t for c in END_CONDITIONS if (t := true.get(c)) is not None]
    end = _when(status.get("completionTime")) or (min(ends) if ends else None)
    adapter = kinds.by_name(kind) or UNKNOWN_KIND
    if adapter.states_start:
        start = adapter.started_at(status, true)
    else:
        resumed = [_when(c.get("lastTransitionTime")) for c in conditions
                   if c.get("type") == "Suspended" and c.get("status") == "False"]
        start = next((t for t in resumed if t is not None), None)
        if start is None and (adapter.run_began(status) or end is not None):
            start = _when((obj.get("metadata") or {}).get("creationTimestamp"))
    suspended = true.get("Suspended")
    if end is None and suspended is not None:
        end = suspended
        start = start if start is not None and start < suspended else None
    return start, end


_when = when


def job_usage(cluster: str, kind: str, obj: Mapping[str, Any], nodes: Mapping[str, Node]) -> JobUsage | str:
    """The ledger facts of one placed job, or why it cannot be accounted. Pure: `nodes` are the cluster's.

    One row per node the placement's assignments annotation names (the report charges a job row its GPUs' share
    of one node), with that node's workers x GPUs per worker (from the object's pod templates, as `submit` read
    them); the node gives provider, region, zone, instance type, GPU model and market (spot from the node's
    spot label). A node the cluster no longer has: the placement's region (and zone, if it names one), no
    instance type (unpriced), GPU model from the pod template's node selector.
    """
    meta = obj.get("metadata") or {}
    notes = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    uid = meta.get("uid")
    if not uid:
        return f"{cluster}: {name} has no metadata.uid"
    start, end = job_times(kind, obj)
    try:
        parsed = parse_job_object(obj, f"{cluster}: {kind} {name}").job
    except InputError as exc:
        return f"{cluster}: {name}: cannot read its gang ({exc.reason})"
    regions = [r.split(":", 1) for r in _split(notes.get(REGIONS_NOTE)) if ":" in r]
    zones = _split(notes.get(ZONES_NOTE))
    assigned = _assignments(notes.get(ASSIGNMENTS_NOTE)) or {"": parsed.workers}
    job = str(labels.get(keys.JOB_LABEL) or meta.get("name", ""))
    shares: list[usage.Usage] = []
    for node_name, workers in sorted(assigned.items()):
        node = nodes.get(node_name)
        place: tuple[str, str, str | None, str | None, str, Pricing]
        if node is not None:
            place = (node.provider, node.region, node.zone, node.instance_type, node.gpu, _market(node))
        elif regions:
            place = (regions[0][0], regions[0][1], zones[0] if len(zones) == 1 else None, None,
                     parsed.gpu or UNKNOWN_GPU, Pricing.ON_DEMAND)
        else:
            return f"{cluster}: {name}: node {node_name or '(none)'} not found and no {REGIONS_NOTE} annotation"
        provider, region, zone, instance_type, gpu, pricing = place
        shares.append(usage.Usage(
            kind=usage.Kind.JOB, name=name if len(assigned) == 1 else f"{name}@{node_name}", job=job,
            provider=provider, region=region, zone=zone, cluster=cluster, instance_type=instance_type, gpu=gpu,
            gpus=workers * parsed.gpus_per_worker, pricing=pricing, source=usage.Source.KUBE, ref=str(uid)))
    return JobUsage(start, end, tuple(shares))


def _assignments(value: Any) -> dict[str, int]:
    """`node=workers,node=workers` (provenance) as a mapping; malformed entries are skipped."""
    out: dict[str, int] = {}
    for entry in _split(value):
        node, _, count = entry.rpartition("=")
        if node and count.isdigit():
            out[node] = out.get(node, 0) + int(count)
    return out


def _market(node: Node) -> Pricing:
    return nodeprice.market(node.labels)


@dataclass(frozen=True, slots=True)
class UsageSync:
    """What one sync wrote: runs opened, closed, recorded whole, left as they were; open rows closed because
    their job is gone from a cluster that answered; jobs that could not be accounted, with the reason."""

    opened: int = 0
    closed: int = 0
    recorded: int = 0
    unchanged: int = 0
    gone: int = 0
    skipped: tuple[str, ...] = ()


def sync_usage(store: Store, found: Sequence[PlacedJob], clusters_read: Collection[str],
               now: float | None = None) -> UsageSync:
    """Write what `jobs(with_usage=True)` saw into the ledger, in one transaction; idempotent.

    A job row still open whose job is no longer on its cluster (deleted, e.g. by its TTL after finishing) is
    closed at `now`: late by up to one sync period. Only clusters in `clusters_read` are judged that way (an
    unreachable cluster's jobs are not gone)."""
    now = time.time() if now is None else now
    counts: Counter[str] = Counter()
    seen = {(j.cluster, j.uid) for j in found if j.uid}
    gone = 0
    with store.transaction() as db:
        for j in found:
            if j.usage is not None and j.usage.shares:
                counts[usage.record_run(db, j.usage.shares, j.usage.start, j.usage.end)] += 1
        for row_id, _, ref, cluster in usage.open_runs(db, usage.Source.KUBE):
            if cluster in clusters_read and (cluster, ref) not in seen:
                usage.close_row(db, row_id, now)
                gone += 1
    return UsageSync(counts["opened"], counts["closed"], counts["recorded"], counts["unchanged"], gone,
                     tuple(j.usage_note for j in found if j.usage_note))


__all__ = ["Applied", "Existing", "JobUsage", "PlacedJob", "Planned", "SubmitError", "SubmitOptions", "SubmitOutcome",
           "SubmitRefused", "UsageSync", "apply_manifests", "find_existing", "job_times", "job_usage", "jobs", "plan",
           "submit", "sync_usage"]
