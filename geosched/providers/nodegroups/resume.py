"""Picking a node-group gang up again: `geosched up JOB --name GANG` for a GANG this store made before (as
`sky launch -c NAME` reuses the cluster NAME: the same command, run again, goes on from where the gang stands).

The case it is for: a gang on a Capacity Block that starts later, whose first `up` ended `scheduled` (its group
ACTIVE at 0 nodes, scaled by the cloud at the block's start). The re-run creates and buys nothing: it checks that the
gang was made for the same request (`problem`, pure), makes sure the group's scheduled scaling is set (put again:
the first run may have died between the group's ACTIVE and the actions, and PutScheduledUpdateGroupAction creates
or updates by name), waits until the block's start (`until`, injectable), then for the group's nodes (`join`), and
hands the group back to `up`, which places the job on it as after a create. A gang whose group stands with its
nodes (a block already started, a gang without one) is joined at once.

Nothing here deletes: the group was made by an earlier command and may stand on a paid block; a re-run that fails
(nodes that never come, a group gone) says so and leaves the gang to `geosched down GANG`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from geosched.providers import journal
from geosched.providers.base import Budget, ProviderError
from geosched.providers.journal import GangRecord
from geosched.providers.nodegroups import backend as pools
from geosched.providers.nodegroups import blocks as block_journal
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.backend import Backend
from geosched.providers.nodegroups.journal import GroupRecord
from geosched.providers.nodegroups.launch import (
    GroupResult,
    GroupSettings,
    Join,
    NewGroup,
    Notify,
    Until,
    schedule_scaling,
    utc,
    wait_active,
)
from geosched.providers.plan import GangRequest
from geosched.providers.retry import call
from geosched.store.db import Store

# A gang in one of these states has no group left to pick up (`down` ran, or every zone failed).
GONE = ("terminating", "terminated", "failed")


@dataclass(frozen=True, slots=True)
class Asked:
    """What the re-run asks for, as `up` sizes a group: the job's GPU model and GPUs per worker, its workers plus
    spares, its market, and the clusters named."""

    gpu: str
    gpus_per_node: int
    nodes: int
    pricing: str
    clusters: tuple[str, ...]


def problem(gang: str, record: GangRecord, rows: Sequence[GroupRecord], asked: Asked) -> str | None:
    """Why `gang` cannot be picked up for `asked` (one line), or None. Pure."""
    if not rows:
        return f"gang {gang} is not a node group gang of this store: choose another --name"
    if record.state in GONE:
        return f"gang {gang} is {record.state}: its name is taken; choose another --name"
    made = record.request
    if made is None or (made.gpu.lower(), made.gpus_per_node, made.nodes, made.pricing.value) != (
            asked.gpu.lower(), asked.gpus_per_node, asked.nodes, asked.pricing):
        return (f"gang {gang} was made for {_shape(made)}, not {asked.nodes} x {asked.gpu}:{asked.gpus_per_node} "
                f"({asked.pricing}): its name is taken; choose another --name")
    standing = [r for r in rows if r.state == "created"]
    if not standing:
        return f"gang {gang} has no node group standing: its name is taken; choose another --name"
    where = standing[-1].cluster
    if where not in asked.clusters:
        return f"gang {gang}'s node group {standing[-1].name} is in cluster {where}, not {', '.join(asked.clusters)}"
    return None


def _shape(made: GangRequest | None) -> str:
    if made is None:
        return "an unknown request"
    return f"{made.nodes} x {made.gpu}:{made.gpus_per_node} ({made.pricing.value})"


def standing(store: Store, gang: str) -> GroupRecord:
    """The gang's group that stands (the last `created` row: the attempt that succeeded). After `problem`."""
    return [r for r in groups_journal.groups(store, gang=gang) if r.state == "created"][-1]


def resume(store: Store, gang: str, backend: Backend, *, settings: GroupSettings | None = None,
           join: Join, until: Until, notify: Notify | None = None,
           now: Callable[[], float] = time.time) -> GroupResult:
    """Pick up `gang`'s standing group (after `problem` said None): its scaling set again if its block starts
    later, the wait until the start, then its nodes joined. A failure leaves everything as it is."""
    settings = settings or GroupSettings()
    say = notify or (lambda _line: None)
    record = journal.gang_record(store, gang)
    assert record is not None
    row = standing(store, gang)
    attempts = tuple(journal.attempts(store, gang))
    budget = Budget(settings.active_timeout_s, settings.call_timeout_s)

    def failed(message: str) -> GroupResult:
        line = f"{message}; nothing was deleted: `geosched down {gang}` deletes the {backend.kind}"
        return GroupResult(gang, "failed", row.cluster, None, row.name, attempts, budget.calls, line)

    try:
        found = call(lambda: backend.describe(row.cluster, row.subnet, row.name, budget), budget, settings.retry,
                     sleep=settings.sleep)
        if found is None or not pools.ours(found.tags, record.owner, gang):
            return failed(f"{backend.kind} {row.name} of gang {gang} is no longer in cluster {row.cluster}")
        wait_active(backend, row, budget, settings)
        block = _block(store, gang, row)
        if found.nodes == 0 and block is not None and block[0] > now():
            start, end = block
            # Put again: the first run may have stopped between the group's ACTIVE and its actions.
            schedule_scaling(backend, replace(found, starts_at=start, ends_at=end), row, record.owner, row.nodes,
                             budget, store, settings)
            say(f"{backend.kind} {row.name} waits at 0 nodes for its Capacity Block; waiting until it starts at "
                f"{utc(start)}")
            until(start)
        say(f"waiting for the {row.nodes} nodes of {backend.kind} {row.name} to be Ready in cluster {row.cluster}")
        join(NewGroup(row.cluster, backend.provider, backend.kind, row.name, row.nodes, row.zone))
    except ProviderError as error:
        return failed(f"{error.kind}: {error.message}")
    message = (f"{backend.kind} {row.name} of gang {gang} ACTIVE in {row.zone} of cluster {row.cluster}, its "
               f"{row.nodes} nodes Ready")
    journal.set_gang(store, gang, "ready", message=message)
    say(message)
    return GroupResult(gang, "ready", row.cluster, None, row.name, attempts, budget.calls, message)


def _block(store: Store, gang: str, row: GroupRecord) -> tuple[float, float] | None:
    """The start and end of the Capacity Block the row's group stands on (the gang's, of its type and size), or
    None (no block, or one whose dates are not known)."""
    for b in block_journal.of_gang(store, gang):
        if (b.instance_type, b.nodes) == (row.instance_type, row.nodes) and b.start_at and b.end_at:
            return b.start_at, b.end_at
    return None
