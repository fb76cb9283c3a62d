"""Hand a placed gang to its cluster, and list the gangs geosched placed.

`submit` is the whole path for one job file: read the live fleet (`cluster_inventory`), look for the job on every
candidate cluster, place it, render it, and apply the manifests on the chosen cluster. `plan` is the pure middle
(place + render), `apply_manifests` the last step alone, `jobs` the listing.

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

Retries: 429, 5xx and dropped connections are retried with exponential backoff and full jitter, at least the
server's Retry-After. A 409 on apply (another field manager owns a field we set, or a racing writer) is re-read
and re-applied once, then reported with the server's message, unless `force` takes the fields over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from geosched import policies
from geosched.errors import GeoschedError
from geosched.kube import cluster_inventory, keys
from geosched.kube.client import (
    APPLY_PATCH,
    FIELD_MANAGER,
    Json,
    Kube,
    RetryPolicy,
    api_message,
    describe,
    with_retries,
)
from geosched.kube.cluster_inventory import ClusterRef, FleetView, Unreachable
from geosched.kube.compact import CompactKind
from geosched.kube.config import ClusterConfig, apply_context
from geosched.kube.jobinput import JobInput, JobKind, read_job_file
from geosched.kube.render import RenderOptions, render
from geosched.models import NetworkView, Node, NoFit, Placement, Weights

COMPACT_OBJECTS = {CompactKind.JOB: ("batch/v1", "Job"), CompactKind.JOBSET: ("jobset.x-k8s.io/v1alpha2", "JobSet")}
# The kinds a placed gang's main object can have, for `jobs`.
JOB_RESOURCES = (("batch/v1", "Job"), ("jobset.x-k8s.io/v1alpha2", "JobSet"), ("kubeflow.org/v1", "PyTorchJob"),
                 ("trainer.kubeflow.org/v1alpha1", "TrainJob"))
CLUSTER_NOTE = keys.PREFIX + "cluster"
ZONES_NOTE = keys.PREFIX + "zones"
REGIONS_NOTE = keys.PREFIX + "regions"
POLICY_NOTE = keys.PREFIX + "policy"
PLACED_AT_NOTE = keys.PREFIX + "placed-at"


class SubmitError(GeoschedError):
    """The cluster refused the manifests (after retries), or cannot take them."""


class SubmitRefused(GeoschedError):
    """Submitting could create a second copy of the job (a candidate cluster could not be checked)."""


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


@dataclass(frozen=True)
class SubmitOptions:
    policy: str = policies.DEFAULT_POLICY
    weights: Weights = field(default_factory=Weights)
    compact_kind: CompactKind = CompactKind.JOB
    dry_run: bool = False
    force: bool = False
    skip_unreachable: bool = False
    retry: RetryPolicy = field(default_factory=RetryPolicy)


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
    readings, down_clusters = cluster_inventory.read_clusters(refs, kubeconfig)
    view = replace(cluster_inventory.build_fleet(readings, launched), unreachable=tuple(down_clusters))
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
    planned = plan(job, view, configs, network=network, policy=opts.policy, weights=opts.weights,
                   compact_kind=opts.compact_kind, now=now or datetime.now(UTC))
    if isinstance(planned, NoFit):
        return replace(seen, status="no-fit", nofit=planned)
    cluster = planned.cluster
    target = apply_context(cluster)
    rendered = replace(seen, status="dry-run", cluster=cluster.name, context=target,
                       zones=planned.placement.zones, placement=planned.placement, manifests=planned.manifests)
    if opts.dry_run:
        return rendered
    with Kube.open(target, kubeconfig, name=cluster.name) as kube:
        applied = apply_manifests(kube, planned.manifests, default_namespace=_namespace(job, cluster),
                                  retry=opts.retry, force=opts.force)
    return replace(rendered, status="applied", applied=tuple(applied))


def plan(job: JobInput, view: FleetView, clusters: Mapping[str, ClusterConfig], *,
         network: NetworkView | None = None, policy: str = policies.DEFAULT_POLICY, weights: Weights | None = None,
         compact_kind: CompactKind = CompactKind.JOB, now: datetime) -> Planned | NoFit:
    """Place the job on the fleet's clusters (only those: nodes of no cluster cannot run it) and render it. Pure."""
    reachable = tuple(c for c in view.clusters if c in clusters)
    allowed = tuple(c for c in reachable if not job.job.clusters or c in job.job.clusters)
    placed_job = _with_clusters(job, allowed)
    ctx = policies.PlacementContext(view.fleet, cluster_inventory.network_for(view.fleet, network))
    result = policies.place(placed_job.job, ctx, policy, weights)
    if isinstance(result, NoFit):
        return result
    assert result.cluster is not None, "every node of a live fleet belongs to a cluster"
    cluster = clusters[result.cluster]
    nodes = {n.name: n for n in view.fleet.nodes if n.cluster == cluster.name}
    manifests = render(job, _restore_clusters(result, job), cluster,
                       RenderOptions(now=now, compact_kind=compact_kind, nodes=nodes))
    return Planned(job, result, cluster, tuple(manifests))


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
    if job.kind is JobKind.COMPACT:
        return COMPACT_OBJECTS[compact_kind]
    api_version, kind = job.kind.value.split(" ")
    return api_version, kind


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
        except Exception as exc:  # one cluster's failure is reported with the others
            unreachable.append(Unreachable(ref.name, ref.context, describe(exc)))
            continue
        if found is not None:
            notes = (found.get("metadata") or {}).get("annotations") or {}
            zones = tuple(z for z in str(notes.get(ZONES_NOTE, "")).split(",") if z)
            return Existing(ref.name, namespace, kind, job.name, zones, CLUSTER_NOTE in notes), unreachable
    return None, unreachable


# --- applying -------------------------------------------------------------------------------------

def apply_manifests(kube: Kube, manifests: Sequence[Mapping[str, Any]], *, default_namespace: str,
                    retry: RetryPolicy | None = None, force: bool = False) -> list[Applied]:
    """Server-side apply each manifest, in order. Objects that already hold the same content are unchanged."""
    return [apply_object(kube, m, default_namespace=default_namespace, retry=retry or RetryPolicy(), force=force)
            for m in manifests]


def apply_object(kube: Kube, obj: Mapping[str, Any], *, default_namespace: str, retry: RetryPolicy,
                 force: bool = False) -> Applied:
    api_version, kind = str(obj["apiVersion"]), str(obj["kind"])
    meta = obj.get("metadata") or {}
    name = str(meta["name"])
    resource = with_retries(lambda: kube.resource(api_version, kind), retry)
    if resource is None:
        raise SubmitError(f"{kube.name}: {api_version} {kind} is not served (is its CRD installed?)")
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
         clusters: Mapping[str, ClusterConfig] | None = None) -> tuple[list[PlacedJob], list[Unreachable]]:
    """Every job object carrying geosched's provenance, on every candidate cluster, with zones and state."""
    refs = cluster_inventory.candidates(kubeconfig, contexts, clusters)
    found: list[PlacedJob] = []
    unreachable: list[Unreachable] = []
    for ref in refs:
        try:
            with Kube.open(ref.context, kubeconfig, name=ref.name) as kube:
                found.extend(list_placed(kube, ref.name))
        except Exception as exc:  # reported with the others; the listing goes on
            unreachable.append(Unreachable(ref.name, ref.context, describe(exc)))
    found.sort(key=lambda j: (j.cluster, j.namespace, j.name))
    return found, unreachable


def list_placed(kube: Kube, cluster: str) -> list[PlacedJob]:
    out: list[PlacedJob] = []
    for api_version, kind in JOB_RESOURCES:
        resource = kube.resource(api_version, kind)
        if resource is None:
            continue  # the cluster does not run this controller
        items, _ = kube.list_all(resource.path(), label_selector=keys.JOB_LABEL)
        out.extend(p for item in items if (p := placed_job(cluster, kind, item)) is not None)
    return out


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
    )


# Conditions that end or hold a job, strongest first; one table serves Job, JobSet, PyTorchJob and TrainJob,
# whose condition types overlap (Complete/Completed/Succeeded mean the same).
STATE_OF_CONDITION = (("Failed", "Failed"), ("Complete", "Succeeded"), ("Completed", "Succeeded"),
                      ("Succeeded", "Succeeded"), ("Suspended", "Suspended"), ("Restarting", "Restarting"),
                      ("Running", "Running"), ("Created", "Pending"))


def job_state(obj: Mapping[str, Any]) -> str:
    status = obj.get("status") or {}
    true = {str(c.get("type")) for c in status.get("conditions") or [] if c.get("status") == "True"}
    for condition, state in STATE_OF_CONDITION:
        if condition in true:
            return state
    if (obj.get("spec") or {}).get("suspend") is True:
        return "Suspended"  # Kueue holds a job suspended until it is admitted
    if int(status.get("active") or 0) > 0:
        return "Running"
    return "Pending"


def _split(value: Any) -> tuple[str, ...]:
    return tuple(v for v in str(value or "").split(",") if v)


__all__ = ["Applied", "Existing", "PlacedJob", "Planned", "SubmitError", "SubmitOptions", "SubmitOutcome",
           "SubmitRefused", "apply_manifests", "find_existing", "jobs", "plan", "submit"]
