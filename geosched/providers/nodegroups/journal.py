"""The store table of node groups (`prov_nodegroups`): `intent` before CreateNodegroup, `created` after its answer,
`deleting` before DeleteNodegroup, `deleted` once EKS no longer knows the group. Every function is one transaction.

The gang and its attempts live in the machine path's tables (`providers.journal`: prov_gangs, prov_attempts), so
`status` shows a node-group gang's attempts like any other; a gang is a node-group gang when it has rows here.

The usage ledger (`geosched.store.usage`) is written in the same transactions, one node interval per node of the group:
opened when the group is known to exist (`created`, or `deleting` for a group only intended that `down` found in
the cluster), closed when it is `deleted`. Clouds bill a group's nodes from their instances' launch, which follows
the create request within seconds, to their termination: each interval starts at the group's intent (just before
the create call, so cost is over- rather than under-stated; for a group on a Capacity Block, at the later of that
and the block's start, as no instance runs in a block before it) and ends when the cloud no longer knows the group. Idle
time is charged: the nodes are the group's whether a job's pods run on them or not. A create refused, or a group
never found, opens nothing. The rows carry the cluster (a machine's rows have none): `geosched.report` tells
node-group capacity by it.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from geosched.core import catalog
from geosched.core.models import Pricing
from geosched.providers.journal import AttemptRecord, read_request, where
from geosched.store import usage
from geosched.store.db import Store

CAPACITY_BLOCK = "CAPACITY_BLOCK"  # spec.CAPACITY_BLOCK (spec imports the cloud catalog; this table does not)
STATES = ("intent", "created", "deleting", "deleted")
# Rows that may still stand for a node group in a cluster.
OPEN_STATES = ("intent", "created", "deleting")

_COLUMNS = ("id, gang, attempt, cluster, region, zone, subnet, name, instance_type, capacity_type, nodes, arn, "
            "state, note, created_at, updated_at")


@dataclass(frozen=True, slots=True)
class GroupRecord:
    id: int
    gang: str
    attempt: int
    cluster: str
    region: str
    zone: str
    subnet: str
    name: str
    instance_type: str
    capacity_type: str
    nodes: int
    arn: str | None
    state: str
    note: str | None
    created_at: float
    updated_at: float


def intend(store: Store, a: AttemptRecord, *, cluster: str, subnet: str, capacity_type: str, name: str,
           nodes: int) -> GroupRecord:
    """Journal the group an attempt is about to create, before the create call."""
    now = time.time()
    with store.transaction() as db:
        cur = db.execute(
            "INSERT INTO prov_nodegroups (gang, attempt, cluster, region, zone, subnet, name, instance_type, "
            "capacity_type, nodes, state, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'intent', ?, ?)",
            (a.gang, a.id, cluster, a.region, a.zone, subnet, name, a.instance_type, capacity_type, nodes, now, now))
        row_id = int(cur.lastrowid or 0)
    record = group(store, row_id)
    assert record is not None
    return record


def mark(store: Store, row_id: int, state: str, *, arn: str | None = None, note: str | None = None) -> None:
    now = time.time()
    with store.transaction() as db:
        db.execute("UPDATE prov_nodegroups SET state = ?, arn = COALESCE(?, arn), note = COALESCE(?, note), "
                   "updated_at = ? WHERE id = ?", (state, arn, note, now, row_id))
        row = db.execute(f"SELECT {_COLUMNS} FROM prov_nodegroups WHERE id = ?", (row_id,)).fetchone()
        if row is not None:
            _ledger(db, _record(row), now)


def record_found(store: Store, record: str, *, provider: str, region: str, cluster: str, where: str, name: str,
                 instance_type: str, capacity_type: str, nodes: int, arn: str | None, token: str) -> GroupRecord:
    """A group `sweep` found in a cluster, carrying geosched's tags, that no row of this store names (the store that
    made it was lost, another machine made it): journalled `created` under the sweep's gang `record`, with an attempt
    of its own (outcome `launched`, token the group's attempt tag), so that its deletion is journalled as any other's
    and its nodes are charged from now (the discovery: when it was really made is not known here) to its deletion.
    One transaction."""
    now = time.time()
    pricing = Pricing.SPOT.value if capacity_type == "SPOT" else Pricing.ON_DEMAND.value
    with store.transaction() as db:
        seq = int(db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM prov_attempts WHERE gang = ?",
                             (record,)).fetchone()[0])
        cur = db.execute(
            "INSERT INTO prov_attempts (gang, seq, token, provider, region, zone, instance_type, pricing, outcome, "
            "message, started_at, finished_at) VALUES (?, ?, ?, ?, ?, '', ?, ?, 'launched', ?, ?, ?)",
            (record, seq, token, provider, region, instance_type, pricing,
             f"found by sweep in cluster {cluster}", now, now))
        attempt = int(cur.lastrowid or 0)
        cur = db.execute(
            "INSERT INTO prov_nodegroups (gang, attempt, cluster, region, zone, subnet, name, instance_type, "
            "capacity_type, nodes, arn, state, note, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, '', ?, ?, ?, ?, ?, ?, 'created', 'found by sweep', ?, ?)",
            (record, attempt, cluster, region, where, name, instance_type, capacity_type, nodes, arn, now, now))
        row = db.execute(f"SELECT {_COLUMNS} FROM prov_nodegroups WHERE id = ?", (cur.lastrowid,)).fetchone()
        found = _record(row)
        _ledger(db, found, now)
    return found


def reopen(store: Store, row_id: int, note: str) -> GroupRecord | None:
    """A `deleted` row whose group `sweep` found in the cluster again (a create still in flight landed after `down`
    closed the row): `created` again, its nodes charged from now (its earlier interval stays closed, so no hour is
    charged twice) until the group is deleted. One transaction."""
    now = time.time()
    with store.transaction() as db:
        db.execute("UPDATE prov_nodegroups SET state = 'created', note = ?, created_at = ?, updated_at = ? "
                   "WHERE id = ? AND state = 'deleted'", (note, now, now, row_id))
        row = db.execute(f"SELECT {_COLUMNS} FROM prov_nodegroups WHERE id = ?", (row_id,)).fetchone()
        if row is None:
            return None
        found = _record(row)
        _ledger(db, found, now)
    return found


def _ledger(db: sqlite3.Connection, row: GroupRecord, now: float) -> None:
    """The group's node intervals after its row went to `row.state`: open while it exists (`created`,
    `deleting`), closed once `deleted`. Idempotent: `usage.open_in` finds a node's open interval."""
    if row.state in ("created", "deleting"):
        start = max(row.created_at, _block_start(db, row) or row.created_at)
        for node in node_usages(db, row):
            usage.open_in(db, node, start)
    elif row.state == "deleted":
        for i in range(row.nodes):
            usage.close_in(db, usage.Kind.NODE, node_name(row, i), usage.Source.PROVIDER, None, now)


def _block_start(db: sqlite3.Connection, row: GroupRecord) -> float | None:
    """When the Capacity Block a group runs on starts (the gang's block of the group's type and size: a gang buys
    at most one), or None. No node of the group can run before it: EC2 launches none into a block that is not
    active, so a group made ahead of its block (0 nodes until the start) is charged from the start. The block's
    fee is paid in full at purchase whatever is used (EC2 User Guide, "Capacity Blocks for ML", pricing and
    billing): `down` says so for each block; reports spread the fee over the block's node-hours and charge the
    hours the group held (report/METHODOLOGY.md)."""
    if row.capacity_type != CAPACITY_BLOCK:
        return None
    found = db.execute("SELECT start_at FROM prov_capacity_blocks WHERE gang = ? AND instance_type = ? AND nodes = ? "
                       "AND start_at IS NOT NULL ORDER BY id LIMIT 1", (row.gang, row.instance_type, row.nodes))
    got = found.fetchone()
    return float(got[0]) if got is not None else None


def scheduled_start(store: Store, gang: str, now: float | None = None) -> float | None:
    """When the gang's nodes come up, for a gang whose node group waits at 0 nodes for its Capacity Block (a group
    standing on a block that has not started yet); None for any other gang, and once the start has passed (the
    scheduled action has run then; geosched does not look at the nodes)."""
    at = time.time() if now is None else now
    with store.transaction() as db:
        starts = [_block_start(db, r) for r in groups(store, gang=gang, states=("created",))]
    future = [s for s in starts if s is not None and s > at]
    return min(future) if future else None


def charge_to_job(store: Store, gang: str, job: str) -> int:
    """`up` made the gang's groups for `job`: their node intervals, open and closed, name the job instead of the
    gang (`job` column), so a report by job shows the group's cost, idle time included, as the job's, and
    `--usage auto` does not count the job's own rows (`geosched jobs` records them) a second time. Returns how many
    rows it changed."""
    with store.transaction() as db:
        cur = db.execute("UPDATE usage SET job = ? WHERE kind = ? AND source = ? AND job = ? AND cluster IS NOT NULL",
                         (job, usage.Kind.NODE.value, usage.Source.PROVIDER.value, gang))
        return cur.rowcount


def node_name(row: GroupRecord, index: int) -> str:
    """A node of a group in the ledger: the cloud names the instances, and they are not known here (nor needed:
    the group is charged as `nodes` machines of its type for as long as it exists)."""
    return f"{row.name}#{index}"


def node_usages(db: sqlite3.Connection, row: GroupRecord) -> list[usage.Usage]:
    """One ledger interval per node of the group: its attempt's provider and market, the gang's GPU model and
    GPUs per node (the plan only offers instance types with exactly that many), the group's zone and cluster."""
    found = db.execute("SELECT a.provider, a.pricing, g.request FROM prov_attempts a JOIN prov_gangs g "
                       "ON g.gang = a.gang WHERE a.id = ?", (row.attempt,)).fetchone()
    if found is None:
        return []
    provider, pricing, text = found
    # The journalled request's one reader (its declaration): a damaged row is one line naming the store, not a
    # KeyError here.
    source = next((str(r[2]) for r in db.execute("PRAGMA database_list") if r[1] == "main"), "the store")
    asked = read_request(text, source, row.gang)
    gpu = asked.gpu if asked else ""
    # The catalog's spelling of the model, which the report's power and spec tables are keyed by.
    gpu = next((m for m in catalog.gpu_models() if m.lower() == gpu.lower()), gpu)
    ident = row.arn or f"{row.cluster}/{row.name}"
    return [usage.Usage(kind=usage.Kind.NODE, name=node_name(row, i), job=row.gang, provider=provider,
                        region=row.region, zone=row.zone, cluster=row.cluster, instance_type=row.instance_type,
                        gpu=gpu, gpus=asked.gpus_per_node if asked else 0, pricing=Pricing(pricing),
                        source=usage.Source.PROVIDER, ref=f"{ident}#{i}") for i in range(row.nodes)]


def group(store: Store, row_id: int) -> GroupRecord | None:
    row = store.db.execute(f"SELECT {_COLUMNS} FROM prov_nodegroups WHERE id = ?", (row_id,)).fetchone()
    return _record(row) if row else None


def groups(store: Store, *, gang: str | None = None, states: Sequence[str] = ()) -> list[GroupRecord]:
    clause, args = where(gang=gang, states=states)
    return [_record(r) for r in store.db.execute(f"SELECT {_COLUMNS} FROM prov_nodegroups{clause} ORDER BY id",
                                                 args)]


def is_nodegroup_gang(store: Store, gang: str) -> bool:
    """A gang with a group row, or whose own row says it is made of groups: a process killed after journalling the
    gang (and its skipped zones) but before its first group's intent has no group row, and `down` took it for a
    machine gang, asking the cloud's machine API (Compute Engine, which a GKE-only credential may not reach: the
    gang stayed `terminating`, found by tests/providers/test_nodegroups_kill_steps.py)."""
    found = store.db.execute(
        "SELECT 1 FROM prov_nodegroups WHERE gang = ? UNION ALL SELECT 1 FROM prov_gangs WHERE gang = ? AND "
        "json_extract(request, '$.node_groups') = 1 LIMIT 1", (gang, gang))
    return found.fetchone() is not None


def _record(row: tuple[Any, ...]) -> GroupRecord:
    return GroupRecord(id=row[0], gang=row[1], attempt=row[2], cluster=row[3], region=row[4], zone=row[5],
                       subnet=row[6], name=row[7], instance_type=row[8], capacity_type=row[9], nodes=row[10],
                       arn=row[11], state=row[12], note=row[13], created_at=row[14], updated_at=row[15])
