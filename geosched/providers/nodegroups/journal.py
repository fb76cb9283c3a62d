"""The store table of node groups (`prov_nodegroups`): `intent` before CreateNodegroup, `created` after its answer,
`deleting` before DeleteNodegroup, `deleted` once EKS no longer knows the group. Every function is one transaction.

The gang and its attempts live in the machine path's tables (`providers.journal`: prov_gangs, prov_attempts), so
`status` shows a node-group gang's attempts like any other; a gang is a node-group gang when it has rows here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from geosched.providers.journal import AttemptRecord, where
from geosched.store import Store

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
    with store.transaction() as db:
        db.execute("UPDATE prov_nodegroups SET state = ?, arn = COALESCE(?, arn), note = COALESCE(?, note), "
                   "updated_at = ? WHERE id = ?", (state, arn, note, time.time(), row_id))


def group(store: Store, row_id: int) -> GroupRecord | None:
    row = store.db.execute(f"SELECT {_COLUMNS} FROM prov_nodegroups WHERE id = ?", (row_id,)).fetchone()
    return _record(row) if row else None


def groups(store: Store, *, gang: str | None = None, states: Sequence[str] = ()) -> list[GroupRecord]:
    clause, args = where(gang=gang, states=states)
    return [_record(r) for r in store.db.execute(f"SELECT {_COLUMNS} FROM prov_nodegroups{clause} ORDER BY id",
                                                 args)]


def is_nodegroup_gang(store: Store, gang: str) -> bool:
    return store.db.execute("SELECT 1 FROM prov_nodegroups WHERE gang = ? LIMIT 1", (gang,)).fetchone() is not None


def _record(row: tuple[Any, ...]) -> GroupRecord:
    return GroupRecord(id=row[0], gang=row[1], attempt=row[2], cluster=row[3], region=row[4], zone=row[5],
                       subnet=row[6], name=row[7], instance_type=row[8], capacity_type=row[9], nodes=row[10],
                       arn=row[11], state=row[12], note=row[13], created_at=row[14], updated_at=row[15])
