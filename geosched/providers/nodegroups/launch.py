"""A gang as an EKS managed node group, zone first, and its teardown.

`provision`: for each zone of the plan the cluster can hold (`spec.targets`), in order:

1. journal an attempt (the machine path's `prov_attempts`) and the group's `intent` row, then CreateNodegroup;
2. poll DescribeNodegroup until ACTIVE, with a deadline on an injectable clock;
3. on failure (the create refused, CREATE_FAILED with its health issues, the deadline) delete the group the
   attempt may have made (journalled `deleting` first) and let `failover.blocks_for` say what the error rules
   out, as for machines: a capacity refusal moves to the next zone and is remembered for its TTL.

`down`: every group the journal names for the gang, plus any group in those clusters tagged with this store's
owner and the gang (what a crash left without a row), is deleted and waited for; a group that exists under a
journalled name but is not tagged as this store's is left alone. Nothing else in the cluster is touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from geosched.errors import InputError
from geosched.providers import journal
from geosched.providers.base import ATTEMPT_TAG, Budget, ProviderError, StallError, UnsupportedError
from geosched.providers.failover import Ttls, blocks_for, first_block
from geosched.providers.journal import AttemptRecord
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups import spec
from geosched.providers.nodegroups.eks import Eks, InUse, RefusedRequest
from geosched.providers.nodegroups.journal import GroupRecord
from geosched.providers.plan import Block, Plan, Skipped
from geosched.providers.retry import call
from geosched.retry import RetryPolicy
from geosched.store import Store


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
    state: str  # ready or failed
    cluster: str
    target: spec.Target | None
    group: str | None
    attempts: tuple[AttemptRecord, ...]
    api_calls: int
    message: str
    skipped: tuple[Skipped, ...] = ()

    @property
    def ok(self) -> bool:
        return self.state == "ready"


@dataclass(frozen=True)
class DownResult:
    gang: str
    state: str  # terminated, or terminating when a group could not be deleted
    deleted: int
    api_calls: int
    errors: tuple[str, ...] = ()


Notify = Callable[[str], None]


def read_cluster(eks: Eks, name: str, settings: GroupSettings = GroupSettings()) -> spec.Cluster:
    """The cluster and its subnets; one line naming the option when the region has no such cluster."""
    budget = Budget(settings.call_timeout_s * 4, settings.call_timeout_s)
    cluster = call(lambda: eks.cluster(name, budget), budget, settings.retry, sleep=settings.sleep)
    if cluster is None:
        raise InputError("--cluster", "", f"no EKS cluster {name!r} in region {eks.region}")
    if not cluster.subnets:
        raise InputError("--cluster", "", f"EKS cluster {name!r} lists no subnet geosched can read "
                         "(resourcesVpcConfig.subnetIds)")
    return cluster


def provision(plan: Plan, cluster: spec.Cluster, eks: Eks, store: Store, *, gang: str, node_role: str,
              settings: GroupSettings = GroupSettings(), notify: Notify | None = None) -> GroupResult:
    """Create the gang's node group in the first zone of the plan that holds it."""
    say = notify or (lambda _line: None)
    request = plan.request
    if journal.gang_record(store, gang) is not None:
        raise InputError("--name", "", f"gang {gang!r} exists already in {store.path}")
    too_big = spec.size_problem(request.nodes)
    if too_big is not None:  # library callers too: nothing is journalled for a gang no group can hold
        raise InputError("--nodes", "", too_big)
    owner = journal.owner(store)
    targets, outside = spec.targets(plan, cluster)
    journal.create_gang(store, gang, owner, request)
    for s in outside:
        journal.start_attempt(store, gang, s.candidate, "skipped", s.reason)
    blocks: list[Block] = []
    calls = 0
    for target in targets:
        c = target.candidate
        block = first_block(blocks, c, request.nodes)
        if block is not None:
            journal.start_attempt(store, gang, c, "skipped", block.reason)
            continue
        a = journal.start_attempt(store, gang, c)
        name = spec.group_name(gang, a.seq)
        say(f"#{a.seq} {c.zone} ({target.subnet.zone_name}, {target.subnet.subnet_id}): creating node group {name} "
            f"({request.nodes} x {c.instance_type}, {target.capacity_type})")
        row = groups_journal.intend(store, a, cluster=cluster.name, subnet=target.subnet.subnet_id,
                                    capacity_type=target.capacity_type, name=name, nodes=request.nodes)
        budget = Budget(settings.active_timeout_s, settings.call_timeout_s)
        try:
            _create(eks, target, a, row, owner, request.nodes, node_role, budget, store, settings)
            _wait_active(eks, row, budget, settings)
        except ProviderError as error:
            cleanup = _cleanup(store, eks, row, error, owner, settings)
            calls += budget.calls + cleanup.calls
            note = "; the group was deleted" if cleanup.ok else f"; deleting it failed: {cleanup.error}"
            journal.finish_attempt(store, a.id, "rolled-back" if cleanup.existed else "failed", error,
                                   message=f"{error.code + ': ' if error.code else ''}{error.message}"
                                   + (note if cleanup.existed else ""), api_calls=budget.calls + cleanup.calls)
            say(f"#{a.seq} {c.zone}: {error.kind}: {error.message}")
            if isinstance(error, RefusedRequest):
                message = f"EKS refused the node group request: {error.code}: {error.message}"
                journal.set_gang(store, gang, "failed", message=message)
                return GroupResult(gang, "failed", cluster.name, None, None, tuple(journal.attempts(store, gang)),
                                   calls, message, outside)
            new = list(blocks_for(error, c, request.nodes, settings.ttls))
            blocks.extend(new)
            journal.remember(store, new)
            continue
        calls += budget.calls
        journal.finish_attempt(store, a.id, "launched", message=f"node group {name} ACTIVE", api_calls=budget.calls)
        message = f"node group {name} ACTIVE in {c.zone} ({target.subnet.zone_name}) of cluster {cluster.name}"
        journal.set_gang(store, gang, "ready", attempt=a.id, message=message)
        say(message)
        return GroupResult(gang, "ready", cluster.name, target, name, tuple(journal.attempts(store, gang)), calls,
                           message, outside)
    message = (f"no zone of cluster {cluster.name} held {request.nodes} x {request.gpu}:{request.gpus_per_node}"
               if targets else f"cluster {cluster.name} has no subnet in any zone of the plan")
    journal.set_gang(store, gang, "failed", message=message)
    return GroupResult(gang, "failed", cluster.name, None, None, tuple(journal.attempts(store, gang)), calls,
                       message, outside)


def _create(eks: Eks, target: spec.Target, a: AttemptRecord, row: GroupRecord, owner: str, nodes: int,
            node_role: str, budget: Budget, store: Store, settings: GroupSettings) -> None:
    request = spec.create_request(target, gang=a.gang, seq=a.seq, owner=owner, token=a.token, nodes=nodes,
                                  node_role=node_role)
    try:
        made = call(lambda: eks.create(request, budget), budget, settings.retry, sleep=settings.sleep)
    except InUse as exc:
        # A create retried after an answer was lost made the group already: ours if it carries this attempt's tag.
        found = eks.describe(target.cluster, row.name, budget)
        if found is None or (found.get("tags") or {}).get(ATTEMPT_TAG) != a.token:
            raise UnsupportedError(f"a node group named {row.name} exists in cluster {target.cluster} and is not "
                                   "this attempt's", code=exc.code) from None
        made = found
    groups_journal.mark(store, row.id, "created", arn=made.get("nodegroupArn"))


def _wait_active(eks: Eks, row: GroupRecord, budget: Budget, settings: GroupSettings) -> None:
    deadline = settings.clock() + settings.active_timeout_s
    while True:
        found = call(lambda: eks.describe(row.cluster, row.name, budget), budget, settings.retry, sleep=settings.sleep)
        if found is None:
            raise StallError(f"node group {row.name} vanished while it was being created", code="NotFound")
        status = str(found.get("status", ""))
        if status == spec.ACTIVE:
            return
        if status != spec.CREATING:
            raise spec.failure(status, (found.get("health") or {}).get("issues") or [], row.name)
        if settings.clock() >= deadline:
            raise StallError(f"node group {row.name} still {status} after {settings.active_timeout_s:g} s",
                             code="Deadline")
        settings.sleep(settings.poll_s)


def _cleanup(store: Store, eks: Eks, row: GroupRecord, error: ProviderError, owner: str,
             settings: GroupSettings) -> _Deleted:
    """After a failed attempt: a create EKS refused made nothing; anything else (a create whose outcome is unknown,
    a group that failed or never became ACTIVE) is deleted."""
    current = groups_journal.group(store, row.id) or row
    if current.state == "intent" and not isinstance(error, StallError):
        groups_journal.mark(store, row.id, "deleted", note="the create was refused")
        return _Deleted(True, False, 0)
    return _delete(store, eks, current, owner, settings)


@dataclass(frozen=True, slots=True)
class _Deleted:
    ok: bool
    existed: bool
    calls: int
    error: str | None = None


def _delete(store: Store, eks: Eks, row: GroupRecord, owner: str, settings: GroupSettings) -> _Deleted:
    """Delete the row's group if it is this store's, and wait until EKS no longer knows it."""
    budget = Budget(settings.delete_timeout_s, settings.call_timeout_s)
    try:
        found = call(lambda: eks.describe(row.cluster, row.name, budget), budget, settings.retry,
                     sleep=settings.sleep)
        # A group only intended may still be created by a request in flight: look again until the intent settled.
        while found is None and row.state == "intent" and time.time() - row.created_at < settings.settle_s:
            settings.sleep(settings.poll_s)
            found = call(lambda: eks.describe(row.cluster, row.name, budget), budget, settings.retry,
                         sleep=settings.sleep)
        if found is None:
            groups_journal.mark(store, row.id, "deleted", note="not found in the cluster")
            return _Deleted(True, False, budget.calls)
        if not spec.ours(found.get("tags"), owner, row.gang):
            groups_journal.mark(store, row.id, "deleted", note="a group of this name is not tagged as this store's: "
                                "left alone")
            return _Deleted(True, False, budget.calls)
        groups_journal.mark(store, row.id, "deleting")
        if str(found.get("status")) != spec.DELETING:
            call(lambda: eks.delete(row.cluster, row.name, budget), budget, settings.retry, sleep=settings.sleep)
        deadline = settings.clock() + settings.delete_timeout_s
        while True:
            found = call(lambda: eks.describe(row.cluster, row.name, budget), budget, settings.retry,
                         sleep=settings.sleep)
            if found is None:
                groups_journal.mark(store, row.id, "deleted")
                return _Deleted(True, True, budget.calls)
            if str(found.get("status")) == "DELETE_FAILED":
                issues = (found.get("health") or {}).get("issues") or []
                return _Deleted(False, True, budget.calls, spec.failure("DELETE_FAILED", issues, row.name).message)
            if settings.clock() >= deadline:
                return _Deleted(False, True, budget.calls, f"node group {row.name} still {found.get('status')} after "
                                f"{settings.delete_timeout_s:g} s")
            settings.sleep(settings.poll_s)
    except ProviderError as error:
        return _Deleted(False, True, budget.calls, f"{error.kind}: {error.message}")


def down(store: Store, gang: str, eks_for: Callable[[str], Eks], settings: GroupSettings = GroupSettings()
         ) -> DownResult:
    """Delete every node group of the gang: the journal's, and those its clusters hold tagged with this store's
    owner and the gang. `eks_for(region)` gives the region's clients."""
    record = journal.gang_record(store, gang)
    if record is None:
        raise InputError("GANG", "", f"no gang {gang!r} in {store.path}")
    owner = record.owner
    journal.set_gang(store, gang, "terminating")
    rows = groups_journal.groups(store, gang=gang)
    clients: dict[str, Eks] = {}
    errors: list[str] = []
    calls = 0
    deleted = 0
    for region, cluster in sorted({(r.region, r.cluster) for r in rows}):
        eks = clients.setdefault(region, eks_for(region))
        known = {r.name for r in rows if r.region == region and r.cluster == cluster}
        found, n = _tagged(eks, cluster, owner, gang, known, settings)
        calls += n
        for name, group in found:
            row = _adopt(store, gang, region, cluster, name, group)
            if row is None:
                errors.append(f"node group {name} in cluster {cluster} is tagged for {gang} but names no attempt of it")
            else:
                rows.append(row)
    for row in rows:
        if row.state == "deleted":
            continue
        result = _delete(store, clients.setdefault(row.region, eks_for(row.region)), row, owner, settings)
        calls += result.calls
        deleted += int(result.ok and result.existed)
        if not result.ok:
            errors.append(f"{row.cluster}/{row.name}: {result.error}")
    state = "terminating" if errors else "terminated"
    journal.set_gang(store, gang, state, message="; ".join(errors) or "every node group deleted")
    return DownResult(gang, state, deleted, calls, tuple(errors))


def _tagged(eks: Eks, cluster: str, owner: str, gang: str, known: set[str], settings: GroupSettings
            ) -> tuple[list[tuple[str, Mapping[str, Any]]], int]:
    """Groups of the cluster tagged as this gang's that the journal has no row for."""
    budget = Budget(settings.call_timeout_s * 10, settings.call_timeout_s)
    out: list[tuple[str, Mapping[str, Any]]] = []
    try:
        names = call(lambda: eks.names(cluster, budget), budget, settings.retry, sleep=settings.sleep)
        for name in names:
            if name in known:
                continue
            group = eks.describe(cluster, name, budget)
            if group is not None and spec.ours(group.get("tags"), owner, gang):
                out.append((name, group))
    except ProviderError:
        pass  # the journal's rows are still deleted; a listing that failed only loses the extra safety net
    return out, budget.calls


def _adopt(store: Store, gang: str, region: str, cluster: str, name: str, group: Mapping[str, Any]
           ) -> GroupRecord | None:
    token = (group.get("tags") or {}).get(ATTEMPT_TAG)
    a = next((x for x in journal.attempts(store, gang) if x.token == token), None)
    if a is None:
        return None
    subnets = group.get("subnets") or [""]
    row = groups_journal.intend(store, a, cluster=cluster, subnet=str(subnets[0]),
                                capacity_type=str(group.get("capacityType", "")), name=name,
                                nodes=int((group.get("scalingConfig") or {}).get("desiredSize", 0)))
    groups_journal.mark(store, row.id, "created", arn=group.get("nodegroupArn"), note="found by its tags")
    return groups_journal.group(store, row.id)

