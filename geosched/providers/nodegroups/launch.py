"""A gang as a node group (EKS) or node pool (GKE), zone first, and its teardown; cloud-neutral: the cloud is a
`backend.Backend` (eks.py, gke.py).

`provision`: for each zone of the plan the cluster can hold (`backend.targets`), in order:

1. journal an attempt (the machine path's `prov_attempts`) and the group's `intent` row, then create it;
2. poll it until ACTIVE, with a deadline on an injectable clock;
3. with a `join` (geosched up): wait until its nodes are Ready in the cluster; nodes that never come up by the
   join deadline are a `NotJoined`, a capacity failure of the zone (the cloud accepted the group but did not
   deliver it);
4. on failure (the create refused, a failed create with its cloud's reasons, the deadline, nodes that never
   joined) delete the group the attempt may have made (journalled `deleting` first) and let `failover.blocks_for`
   say what the error rules out, as for machines: a capacity refusal moves to the next zone and is remembered
   for its TTL. Anything else the join raises (the cluster unreachable, the API refusing) is not the zone's: the
   group is deleted the same way and the error goes to the caller.

`provision_across`: the same over several clusters (`--cluster` repeated), one after the other in the order
sites.py gives, each zone by zone; the blocks hold across them, and a refused request ends one cluster, not the run.

`down`: every group the journal names for the gang, plus any group in those clusters tagged with this store's
owner and the gang (what a crash left without a row), is deleted and waited for; a group that exists under a
journalled name but is not tagged as this store's is left alone. Nothing else in the cluster is touched.

What a create makes beside its group (EKS: a cluster placement group and the launch template naming it,
`Backend.release`) is journalled by the group's row: its `intent` is written before the first of those calls and
their names follow from the row's, so wherever a row is closed (`deleted`: the group gone, never made, refused, or
not this store's) they are deleted first; a row whose parts could not be deleted stays open for `down` to retry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from geosched.clouds import aws, gcp
from geosched.core.errors import InputError
from geosched.core.retry import RetryPolicy
from geosched.providers import journal
from geosched.providers.base import (
    ATTEMPT_TAG,
    Budget,
    LaunchSpec,
    Provider,
    ProviderError,
    QuotaError,
    StallError,
    UnsupportedError,
)
from geosched.providers.failover import Ttls, blocks_for, first_block
from geosched.providers.journal import AttemptRecord
from geosched.providers.nodegroups import backend as pools
from geosched.providers.nodegroups import blocks as block_journal
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups import sites
from geosched.providers.nodegroups.backend import (
    Backend,
    InUse,
    NotJoined,
    Pool,
    RefusedRequest,
    Target,
)
from geosched.providers.nodegroups.journal import GroupRecord
from geosched.providers.nodegroups.sites import Site
from geosched.providers.plan import Block, Candidate, Plan, Skipped
from geosched.providers.retry import call
from geosched.store.db import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupSettings:
    # EKS takes minutes to bring a group's nodes up (and to drain and delete them).
    active_timeout_s: float = 1800.0
    delete_timeout_s: float = 1800.0
    poll_s: float = 15.0
    call_timeout_s: float = 30.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    ttls: Ttls = field(default_factory=Ttls)
    # The deadline's clock and the wait between polls: injectable, so a test can run a 30-minute deadline at once.
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # How long a create request a server still holds can land after the process that sent it died: `down` keeps
    # looking for a journalled group it does not find until its intent is this old (as the machine path's settle_s).
    settle_s: float = 120.0


@dataclass(frozen=True)
class GroupResult:
    gang: str
    state: str  # ready, scheduled (a group at 0 nodes until its Capacity Block starts: `starts_at`) or failed
    cluster: str
    target: Target | None
    group: str | None
    attempts: tuple[AttemptRecord, ...]
    api_calls: int
    message: str
    skipped: tuple[Skipped, ...] = ()
    starts_at: float | None = None  # scheduled: when the group's nodes come up (epoch seconds)

    @property
    def ok(self) -> bool:
        return self.state in ("ready", "scheduled")


@dataclass(frozen=True)
class DownResult:
    gang: str
    state: str  # terminated, or terminating when a group could not be deleted
    deleted: int
    api_calls: int
    errors: tuple[str, ...] = ()
    blocks: tuple[str, ...] = ()  # each Capacity Block bought for the gang: it stays, paid, until its end


Notify = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class NewGroup:
    """A group the cloud calls ACTIVE, for the `join` that waits for its nodes in the cluster."""

    cluster: str
    provider: str  # the catalog's provider name: which label selects the group's nodes
    kind: str  # "node group", "node pool": for messages
    name: str
    nodes: int
    zone: str


# Waits until the group's nodes are Ready in the cluster; raises `NotJoined` when they are not by its deadline.
Join = Callable[[NewGroup], None]
# Blocks until the given epoch time (`up --wait-for-block`: a group made ahead of its Capacity Block).
Until = Callable[[float], None]
# The account's quota for `nodes` of the candidate, read before anything is created (the machine providers'
# `check_quota`: AWS Service Quotas' vCPU limit, GCP's regional GPU metric and GPUS_ALL_REGIONS); raises
# `QuotaError` when the gang would exceed it. A quota it cannot read is not a refusal.
Precheck = Callable[[Candidate, int, Budget], None]


def read_cluster(backend: Backend, name: str, settings: GroupSettings = GroupSettings()) -> Any:
    """The cluster as the backend needs it; one line naming the option when there is no such cluster or it
    cannot take a pool."""
    budget = Budget(settings.call_timeout_s * 4, settings.call_timeout_s)
    cluster = call(lambda: backend.cluster(name, budget), budget, settings.retry, sleep=settings.sleep)
    if cluster is None:
        raise InputError("--cluster", "", f"no {backend.cloud} cluster {name!r} in {backend.scope} {backend.region}")
    why = backend.unusable(cluster)
    if why is not None:
        raise InputError("--cluster", "", why)
    return cluster


def provision(plan: Plan, cluster: Any, backend: Backend, store: Store, *, gang: str,
              settings: GroupSettings = GroupSettings(), notify: Notify | None = None,
              precheck: Precheck | None = None) -> GroupResult:
    """Create the gang's node group (pool) in the first zone of the plan that holds it."""
    return provision_across(plan, (sites.site(plan, backend, cluster),), store, gang=gang, settings=settings,
                            precheck=precheck,
                            notify=notify)


def provision_across(plan: Plan, places: Sequence[Site], store: Store, *, gang: str,
                     settings: GroupSettings = GroupSettings(), notify: Notify | None = None,
                     join: Join | None = None, precheck: Precheck | None = None,
                     until: Until | None = None) -> GroupResult:
    """Create the gang's node group (pool) in the first zone of the plan that one of the clusters holds: the
    clusters in `sites.ordered` order, each zone by zone, so the next cluster is tried only when every zone of the
    one before refused (sites.py). What a failed attempt created is deleted before the next; the blocks a refusal
    leaves (a zone out of capacity) hold in every cluster, as the zone's capacity is the cloud's, not a cluster's.
    With `join`, a group counts only once its nodes are Ready in the cluster (`NotJoined`: the next zone). With
    `precheck`, a zone whose quota the gang exceeds is refused before any call that creates (`QuotaError`: the
    region's market, as for machines). A group made ahead of its Capacity Block ends the run `scheduled`, unless
    `until` (and `join`) are given: then `until` blocks until the block's start and the join follows."""
    say = notify or (lambda _line: None)
    request = plan.request
    for place in places:
        too_big = place.backend.size_problem(request.nodes)
        if too_big is not None:  # library callers too: nothing is journalled for a gang no group can hold
            raise InputError("--nodes", "", too_big)
    owner = journal.owner(store)
    places = sites.ordered(plan, places)
    outside = sites.skipped(places)
    journal.create_gang(store, gang, owner, request, node_groups=True)
    for s in outside:
        journal.start_attempt(store, gang, s.candidate, "skipped", s.reason)
    blocks: list[Block] = []
    calls = 0
    failures: list[str] = []
    for place in places:
        backend, cluster, what = place.backend, place.cluster, place.backend.kind
        refused: str | None = None
        last: str | None = None  # the last quota refusal or never-joined group of this cluster, said at the end
        for target in place.targets:
            c = target.candidate
            block = first_block(blocks, c, request.nodes)
            if block is not None:
                # Several clusters: a zone another cluster's attempt ruled out says for which cluster it was skipped.
                reason = f"{block.reason} (cluster {cluster.name})" if len(places) > 1 else block.reason
                journal.start_attempt(store, gang, c, "skipped", reason)
                continue
            a = journal.start_attempt(store, gang, c)
            refusal = _precheck(precheck, c, request.nodes, settings) if precheck is not None else None
            if refusal is not None:
                error, n = refusal
                calls += n
                journal.finish_attempt(store, a.id, "failed", error, message=f"{error.code}: {error.message}; "
                                       f"checked before any {what} was created", api_calls=n)
                say(f"#{a.seq} {c.zone}: quota: {error.message}; no {what} created")
                last = f"quota: {error.message}"
                new = list(blocks_for(error, c, request.nodes, settings.ttls))
                blocks.extend(new)
                journal.remember(store, new)
                continue
            name = pools.pool_name(gang, a.seq)
            where = f", cluster {cluster.name}" if len(places) > 1 else ""
            say(f"#{a.seq} {c.zone} ({target.zone_name}, {target.where}{where}): creating {what} {name} "
                f"({request.nodes} x {c.instance_type}, {target.capacity_type})")
            row = groups_journal.intend(store, a, cluster=cluster.name, subnet=target.where,
                                        capacity_type=target.capacity_type, name=name, nodes=request.nodes)
            budget = Budget(settings.active_timeout_s, settings.call_timeout_s)
            try:
                made = _create(backend, target, a, row, owner, request.nodes, budget, store, settings)
                wait_active(backend, row, budget, settings)
                waited = False
                if made.starts_at is not None:
                    # Its reservation starts later: the group waits at 0 nodes, scaled by the cloud at the start;
                    # nothing joins before, so the run ends here unless the caller waits (`until`).
                    schedule_scaling(backend, made, row, owner, request.nodes, budget, store, settings)
                    if join is not None and until is not None:
                        say(f"#{a.seq} {c.zone}: {what} {name} ACTIVE with 0 nodes; waiting until its Capacity Block "
                            f"starts at {utc(made.starts_at)}")
                        try:
                            until(made.starts_at)
                            say(f"#{a.seq} {c.zone}: the block started; waiting for the {request.nodes} nodes of "
                                f"{what} {name} to be Ready in cluster {cluster.name}")
                            join(NewGroup(cluster.name, backend.provider, what, name, request.nodes, c.zone))
                            waited = True
                        except KeyboardInterrupt:
                            # Ctrl-C stops the wait, not the gang: the group stays scheduled on the block, paid and
                            # never refunded, as a run without the wait leaves it (deleted, a re-run would buy a
                            # second block, as a new gang's tags find none).
                            say(f"#{a.seq} {c.zone}: interrupted while waiting: {what} {name} stays scheduled on its "
                                "Capacity Block")
                elif join is not None:
                    say(f"#{a.seq} {c.zone}: {what} {name} ACTIVE; waiting for its {request.nodes} nodes to be "
                        f"Ready in cluster {cluster.name}")
                    join(NewGroup(cluster.name, backend.provider, what, name, request.nodes, c.zone))
            except ProviderError as error:
                cleanup = _cleanup(store, backend, row, error, owner, settings)
                calls += budget.calls + cleanup.calls
                note = f"; the {what} was deleted" if cleanup.ok else f"; deleting it failed: {cleanup.error}"
                journal.finish_attempt(store, a.id, "rolled-back" if cleanup.existed else "failed", error,
                                       message=f"{error.code + ': ' if error.code else ''}{error.message}"
                                       + (note if cleanup.existed else ""), api_calls=budget.calls + cleanup.calls)
                say(f"#{a.seq} {c.zone}: {error.kind}: {error.message}" + (note if cleanup.existed else ""))
                if isinstance(error, NotJoined):
                    last = f"{error.message}" + (note if cleanup.existed else "")
                if isinstance(error, RefusedRequest):
                    # Every zone of this cloud would refuse the request alike: the next cluster may take it.
                    refused = f"{backend.cloud} refused the {what} request: {error.code}: {error.message}"
                    break
                new = list(blocks_for(error, c, request.nodes, settings.ttls))
                blocks.extend(new)
                journal.remember(store, new)
                continue
            except KeyboardInterrupt:
                # Closed, not left `started`: the run is over. The group stays for the caller (`up` deletes it, all
                # or nothing) or for `down`; its row says it exists.
                journal.finish_attempt(store, a.id, "cancelled", message=f"interrupted while {what} {name} was made "
                                       "or its nodes awaited", api_calls=budget.calls)
                raise
            except Exception as exc:
                # The join could not ask the cluster (unreachable, refused): not the zone's fault, so no failover;
                # what this attempt made is deleted before the caller hears of it.
                cleanup = _delete(store, backend, groups_journal.group(store, row.id) or row, owner, settings)
                note = f"the {what} was deleted" if cleanup.ok else f"deleting it failed: {cleanup.error}"
                journal.finish_attempt(store, a.id, "rolled-back", message=f"waiting for its nodes: "
                                       f"{type(exc).__name__}; {note}", api_calls=budget.calls + cleanup.calls)
                journal.set_gang(store, gang, "failed", message=f"waiting for the nodes of {what} {name} failed; "
                                 f"{note}")
                raise
            calls += budget.calls
            if made.starts_at is not None and not waited:
                when = utc(made.starts_at)
                message = (f"{what} {name} ACTIVE with 0 nodes in {c.zone} ({target.zone_name}) of cluster "
                           f"{cluster.name}; its Capacity Block starts at {when}: its {request.nodes} nodes come "
                           "up then (scheduled scaling)")
                journal.finish_attempt(store, a.id, "launched", message=message, api_calls=budget.calls)
                journal.set_gang(store, gang, "ready", attempt=a.id, message=message)  # `status`: scheduled
                say(message)
                return GroupResult(gang, "scheduled", cluster.name, target, name,
                                   tuple(journal.attempts(store, gang)), calls, message, outside,
                                   starts_at=made.starts_at)
            joined = f", its {request.nodes} nodes Ready" if join is not None else ""
            journal.finish_attempt(store, a.id, "launched", message=f"{what} {name} ACTIVE{joined}",
                                   api_calls=budget.calls)
            message = f"{what} {name} ACTIVE in {c.zone} ({target.zone_name}) of cluster {cluster.name}{joined}"
            journal.set_gang(store, gang, "ready", attempt=a.id, message=message)
            say(message)
            return GroupResult(gang, "ready", cluster.name, target, name, tuple(journal.attempts(store, gang)),
                               calls, message, outside)
        held = f"no zone of cluster {cluster.name} held {request.nodes} x {request.gpu}:{request.gpus_per_node}"
        failures.append(refused or ((held + (f" (last: {last})" if last else "")) if place.targets
                                    else f"cluster {cluster.name} can hold no zone of the plan"))
        if len(places) > 1:
            say(f"cluster {cluster.name}: {failures[-1]}")
    message = failures[0] if len(failures) == 1 else (
        "every cluster refused the gang: " + "; ".join(failures))
    journal.set_gang(store, gang, "failed", message=message)
    return GroupResult(gang, "failed", ", ".join(p.name for p in places), None, None,
                       tuple(journal.attempts(store, gang)), calls, message, outside)


def quota_precheck(providers: Mapping[str, Provider], gang: str) -> Precheck:
    """The machine providers' quota pre-check (`Provider.check_quota`) for a gang of node group nodes: EKS managed
    nodes are EC2 instances of the account (Service Quotas' vCPU limit of their family and market: L-417A185B
    running on-demand P, L-7212CCBC spot P, ...: aws.VCPU_QUOTA_CODES), GKE nodes are Compute Engine VMs of the
    project (the region's GPU metric from regions.get, NVIDIA_H100_GPUS or PREEMPTIBLE_NVIDIA_H100_GPUS for spot,
    then GPUS_ALL_REGIONS). Each provider caches what it read (one read per region and run)."""

    def check(c: Candidate, nodes: int, budget: Budget) -> None:
        provider = providers.get(c.provider)
        if provider is None:
            return
        spec = LaunchSpec(gang=gang, token="quota-precheck", owner="", region=c.region, zone=c.zone,
                          instance_type=c.instance_type, gpu=c.gpu, gpus=c.gpus, vcpus=c.vcpus, pricing=c.pricing,
                          names=tuple(f"{gang}-{i}" for i in range(nodes)))
        provider.check_quota(spec, budget)

    return check


def _precheck(precheck: Precheck, c: Candidate, nodes: int, settings: GroupSettings) -> tuple[QuotaError, int] | None:
    """The quota refusal of `c` and the calls it took, or None when the gang fits or the quota cannot be read (an
    unreadable quota, or an error reading it, leaves the decision to the create, as on the machine path)."""
    budget = Budget(settings.call_timeout_s * 4, settings.call_timeout_s)
    try:
        call(lambda: precheck(c, nodes, budget), budget, settings.retry, sleep=settings.sleep)
    except QuotaError as error:
        return error, budget.calls
    except ProviderError as error:
        log.info("quota of %s %s not read (%s: %s): the create decides", c.provider, c.region, error.kind,
                 error.message)
    return None


def utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))


def _create(backend: Backend, target: Target, a: AttemptRecord, row: GroupRecord, owner: str, nodes: int,
            budget: Budget, store: Store, settings: GroupSettings) -> Pool:
    try:
        made = call(lambda: backend.create(target, gang=a.gang, seq=a.seq, owner=owner, token=a.token, nodes=nodes,
                                           budget=budget, record=partial(block_journal.record, store, a)),
                    budget, settings.retry, sleep=settings.sleep)
    except InUse as exc:
        # A create retried after an answer was lost made the group already: ours if it carries this attempt's tag.
        found = backend.describe(row.cluster, row.subnet, row.name, budget)
        if found is None or found.tags.get(ATTEMPT_TAG) != a.token:
            raise UnsupportedError(f"a {backend.kind} named {row.name} exists in cluster {target.cluster} and is "
                                   "not this attempt's", code=exc.code) from None
        made = _adopted(found, exc.planned)
    groups_journal.mark(store, row.id, "created", arn=made.ident, note=made.note)
    if made.note:
        log.info("%s %s: %s", backend.kind, row.name, made.note)
    return made


def _adopted(found: Pool, planned: Pool | None) -> Pool:
    """The pool a retried create found (`InUse`, this attempt's), with what the create knew of it (`planned`). A
    pool that stands at 0 nodes on a reservation with dates was made ahead of it (the accepted try's decision,
    which this retry's clock must not redo): it gets `starts_at`, so its scaling is scheduled as for a pool the
    create made itself; without it the gang would never come up. Pure."""
    if planned is None:
        return found
    later = found.nodes == 0 and planned.starts_at is not None and planned.ends_at is not None
    return replace(found, note=planned.note or found.note, starts_at=planned.starts_at if later else None,
                   ends_at=planned.ends_at if later else None)


def schedule_scaling(backend: Backend, made: Pool, row: GroupRecord, owner: str, nodes: int, budget: Budget,
                     store: Store, settings: GroupSettings) -> None:
    """Set the scaling of a group made at 0 nodes (`Backend.schedule`) and add what was set to its row's note. A
    failure is the attempt's: the group is deleted (its 0 nodes cost nothing) and the caller fails over or stops."""
    line = call(lambda: backend.schedule(made, cluster=row.cluster, owner=owner, nodes=nodes, budget=budget),
                budget, settings.retry, sleep=settings.sleep)
    current = groups_journal.group(store, row.id) or row
    groups_journal.mark(store, row.id, "created", note="; ".join(n for n in (current.note, line) if n))
    log.info("%s %s: %s", backend.kind, row.name, line)


def wait_active(backend: Backend, row: GroupRecord, budget: Budget, settings: GroupSettings) -> None:
    deadline = settings.clock() + settings.active_timeout_s
    while True:
        found = call(lambda: backend.describe(row.cluster, row.subnet, row.name, budget), budget, settings.retry,
                     sleep=settings.sleep)
        if found is None:
            raise StallError(f"{backend.kind} {row.name} vanished while it was being created", code="NotFound")
        if found.status == pools.ACTIVE:
            return
        if found.status != pools.CREATING:
            raise found.failure or UnsupportedError(f"{backend.kind} {row.name} {found.status}", code=found.status)
        if settings.clock() >= deadline:
            raise StallError(f"{backend.kind} {row.name} still {found.status} after {settings.active_timeout_s:g} s",
                             code="Deadline")
        settings.sleep(settings.poll_s)


def _cleanup(store: Store, backend: Backend, row: GroupRecord, error: ProviderError, owner: str,
             settings: GroupSettings) -> _Deleted:
    """After a failed attempt: a create the cloud refused made nothing; anything else (a create whose outcome is
    unknown, a group that failed or never became ACTIVE) is deleted."""
    current = groups_journal.group(store, row.id) or row
    if current.state == "intent" and not isinstance(error, StallError):
        # The group was refused; what its create made before it (EKS: placement group, launch template) was not.
        budget = Budget(settings.delete_timeout_s, settings.call_timeout_s)
        failed = _release(backend, current, owner, budget, settings)
        if failed is not None:
            return _Deleted(False, True, budget.calls, failed)
        groups_journal.mark(store, row.id, "deleted", note="the create was refused")
        return _Deleted(True, False, budget.calls)
    return _delete(store, backend, current, owner, settings)


def _release(backend: Backend, row: GroupRecord, owner: str, budget: Budget, settings: GroupSettings) -> str | None:
    """Delete what the row's create made beside its group (`Backend.release`), once the group is gone: None when
    done (nothing there included), else why not (the row then stays open, for `down` to try again)."""
    try:
        released = call(lambda: backend.release(row.name, owner=owner, instance_type=row.instance_type,
                                                nodes=row.nodes, budget=budget, capacity_type=row.capacity_type),
                        budget, settings.retry,
                        sleep=settings.sleep)
    except ProviderError as error:
        return f"{row.name}'s parts: {error.kind}: {error.message}"
    if released:
        log.info("%s %s: deleted %s", backend.kind, row.name, ", ".join(released))
    return None


@dataclass(frozen=True, slots=True)
class _Deleted:
    ok: bool
    existed: bool
    calls: int
    error: str | None = None


def _delete(store: Store, backend: Backend, row: GroupRecord, owner: str, settings: GroupSettings,
            gang: str | None = None) -> _Deleted:
    """Delete the row's group if it is tagged with `owner` and `gang` (default: the row's gang; `sweep` journals a
    group whose gang the store does not know under a record of its own), and wait until the cloud no longer knows
    it."""
    budget = Budget(settings.delete_timeout_s, settings.call_timeout_s)
    tagged = gang or row.gang

    def look() -> Pool | None:
        return call(lambda: backend.describe(row.cluster, row.subnet, row.name, budget), budget, settings.retry,
                    sleep=settings.sleep)

    try:
        found = look()
        # A group only intended may still be created by a request in flight: look again until the intent settled.
        while found is None and row.state == "intent" and time.time() - row.created_at < settings.settle_s:
            settings.sleep(settings.poll_s)
            found = look()
        if found is None or not pools.ours(found.tags, owner, tagged):
            # Either way no group of ours stands: what the create made beside one (named for this store) goes.
            failed = _release(backend, row, owner, budget, settings)
            if failed is not None:
                return _Deleted(False, False, budget.calls, failed)
        if found is None:
            groups_journal.mark(store, row.id, "deleted", note="not found in the cluster")
            return _Deleted(True, False, budget.calls)
        if not pools.ours(found.tags, owner, tagged):
            groups_journal.mark(store, row.id, "deleted", note=f"a {backend.kind} of this name is not tagged as "
                                "this store's: left alone")
            return _Deleted(True, False, budget.calls)
        groups_journal.mark(store, row.id, "deleting")
        if found.status != pools.DELETING:
            call(lambda: backend.delete(row.cluster, row.subnet, row.name, budget), budget, settings.retry,
                 sleep=settings.sleep)
        deadline = settings.clock() + settings.delete_timeout_s
        while True:
            found = look()
            if found is None:
                failed = _release(backend, row, owner, budget, settings)
                if failed is not None:
                    return _Deleted(False, True, budget.calls, failed)
                groups_journal.mark(store, row.id, "deleted")
                return _Deleted(True, True, budget.calls)
            if found.status == pools.DELETE_FAILED:
                why = found.failure.message if found.failure else f"{backend.kind} {row.name} DELETE_FAILED"
                return _Deleted(False, True, budget.calls, why)
            if settings.clock() >= deadline:
                return _Deleted(False, True, budget.calls, f"{backend.kind} {row.name} still {found.status} after "
                                f"{settings.delete_timeout_s:g} s")
            settings.sleep(settings.poll_s)
    except ProviderError as error:
        return _Deleted(False, True, budget.calls, f"{error.kind}: {error.message}")


BackendFor = Callable[[str, str], Backend]


def open_backend(provider: str, region: str) -> Backend:
    """The backend of `provider` for `region` (EKS: the region; GKE: the cluster's location), with the SDK's
    standard configuration. Imported here: boto3 and google-cloud-container load only when used."""
    if provider == aws.NAME:
        from geosched.providers.nodegroups.eks import Eks

        return Eks(region)
    if provider == gcp.NAME:
        from geosched.providers.nodegroups.gke import Gke

        return Gke(region)
    raise ValueError(f"no node pool backend for provider {provider!r}")


def down(store: Store, gang: str, backend_for: BackendFor = open_backend,
         settings: GroupSettings = GroupSettings()) -> DownResult:
    """Delete every node group (pool) of the gang: the journal's, and those its clusters hold tagged with this
    store's owner and the gang. `backend_for(provider, region)` gives the cloud's backend; a row's provider is
    its attempt's."""
    record = journal.gang_record(store, gang)
    if record is None:
        raise InputError("GANG", "", f"no gang {gang!r} in {store.path}")
    owner = record.owner
    journal.set_gang(store, gang, "terminating")
    rows = groups_journal.groups(store, gang=gang)
    provider_of = {a.id: a.provider for a in journal.attempts(store, gang)}
    clients: dict[tuple[str, str], Backend] = {}

    def backend_of(row: GroupRecord) -> Backend:
        key = (provider_of.get(row.attempt, aws.NAME), row.region)
        if key not in clients:
            clients[key] = backend_for(*key)
        return clients[key]

    errors: list[str] = []
    calls = 0
    deleted = 0
    # One listing per cluster (GKE addresses a cluster by its location, the rows' `subnet`; EKS ignores it).
    places = {(r.region, r.cluster, r.subnet if provider_of.get(r.attempt) == gcp.NAME else ""): r for r in rows}
    for (region, cluster, _where), first in sorted(places.items(), key=lambda item: item[0]):
        b = backend_of(first)
        known = {r.name for r in rows if r.cluster == cluster and r.region == region}
        found, n = _tagged(b, cluster, first.subnet, owner, gang, known, settings)
        calls += n
        for name, pool in found:
            row = _adopt(store, gang, region, cluster, name, pool)
            if row is None:
                errors.append(f"{b.kind} {name} in cluster {cluster} is tagged for {gang} but names no attempt of it")
            else:
                rows.append(row)
    for row in rows:
        if row.state == "deleted":
            continue
        result = _delete(store, backend_of(row), row, owner, settings)
        calls += result.calls
        deleted += int(result.ok and result.existed)
        if not result.ok:
            errors.append(f"{row.cluster}/{row.name}: {result.error}")
    state = "terminating" if errors else "terminated"
    journal.set_gang(store, gang, state, message="; ".join(errors) or "every node group deleted")
    # The gang's Capacity Blocks are named, never deleted: EC2 cannot cancel one (the journal recorded each before
    # its purchase, so one bought just before a crash is named too).
    return DownResult(gang, state, deleted, calls, tuple(errors),
                      tuple(block_journal.describe(b) for b in block_journal.of_gang(store, gang)))


def _tagged(backend: Backend, cluster: str, where: str, owner: str, gang: str, known: set[str],
            settings: GroupSettings) -> tuple[list[tuple[str, Pool]], int]:
    """Groups of the cluster tagged as this gang's that the journal has no row for."""
    budget = Budget(settings.call_timeout_s * 10, settings.call_timeout_s)
    out: list[tuple[str, Pool]] = []
    try:
        names = call(lambda: backend.names(cluster, where, budget), budget, settings.retry, sleep=settings.sleep)
        for name in names:
            if name in known:
                continue
            pool = backend.describe(cluster, where, name, budget)
            if pool is not None and pools.ours(pool.tags, owner, gang):
                out.append((name, pool))
    except ProviderError:
        pass  # the journal's rows are still deleted; a listing that failed only loses the extra safety net
    return out, budget.calls


def _adopt(store: Store, gang: str, region: str, cluster: str, name: str, pool: Pool) -> GroupRecord | None:
    token = pool.tags.get(ATTEMPT_TAG)
    a = next((x for x in journal.attempts(store, gang) if x.token == token), None)
    if a is None:
        return None
    row = groups_journal.intend(store, a, cluster=cluster, subnet=pool.where, capacity_type=pool.capacity_type,
                                name=name, nodes=pool.nodes)
    groups_journal.mark(store, row.id, "created", arn=pool.ident, note="found by its tags")
    return groups_journal.group(store, row.id)
