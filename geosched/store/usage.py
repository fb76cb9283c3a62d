"""The write side of the usage ledger (the store's `usage` table): providers and the kube adapter record when a
node or job started and stopped holding GPUs; `geosched.report` reads the rows back and prices them.

It lives at the top of the package, next to the store, because both the providers (an I/O edge) and the
report write it, and the report already imports the providers' journal: here it depends on nothing but
`geosched.core.models` and `geosched.store.db`.

Every write is idempotent, because reconcile loops and `geosched jobs` syncs call them more than once:
an open finds a still-open row for the same (kind, name, source[, ref]) and returns it; a close of nothing
closes nothing; `record_run` adds a row only for a run it has not seen. The `*_in` functions take a connection
already inside a transaction, so a caller can write the ledger in the same transaction as its own state (a
crash then leaves both or neither). Times are Unix seconds (UTC).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from geosched.core.models import Pricing

if TYPE_CHECKING:
    from geosched.store.db import Store


class Kind(StrEnum):
    NODE = "node"
    JOB = "job"


class Source(StrEnum):
    PROVIDER = "provider"
    KUBE = "kube"
    DEMO = "demo"


@dataclass(frozen=True, slots=True)
class Usage:
    """What an interval is of: `gpus` GPUs of model `gpu`, held by node or job `name`.

    `job` is the gang of a node (of a node group `up` made for a job: that job), or the job of a job row; `ref` the
    provider's instance id, a node group's ARN or selfLink `#<node>`, or the object's uid. A provider's node row with
    a `cluster` is a node of a node group geosched created (providers/nodegroups/journal.py).
    """

    kind: Kind
    name: str
    provider: str
    region: str
    gpu: str
    gpus: int
    source: Source
    job: str | None = None
    zone: str | None = None
    cluster: str | None = None
    instance_type: str | None = None
    pricing: Pricing = Pricing.ON_DEMAND
    ref: str | None = None
    utilisation: float | None = None

    def __post_init__(self) -> None:
        # Coerce strings to the enums here, so rows never hold a value the table's CHECKs would refuse.
        object.__setattr__(self, "kind", Kind(self.kind))
        object.__setattr__(self, "source", Source(self.source))
        object.__setattr__(self, "pricing", Pricing(self.pricing))
        if self.gpus < 0:
            raise ValueError(f"gpus must be >= 0, got {self.gpus}")
        if self.utilisation is not None and not 0.0 <= self.utilisation <= 1.0:
            raise ValueError(f"utilisation must be within [0, 1], got {self.utilisation}")


# --- the store-level API (one transaction each) ------------------------------------------------------

def open_interval(store: Store, *, kind: Kind | str, name: str, provider: str, region: str, gpu: str, gpus: int,
                  source: Source | str, job: str | None = None, zone: str | None = None, cluster: str | None = None,
                  instance_type: str | None = None, pricing: Pricing | str = Pricing.ON_DEMAND,
                  start: float | None = None, ref: str | None = None, utilisation: float | None = None) -> int:
    """Record that `name` started holding `gpus` GPUs at `start` (default now); returns the row id."""
    usage = Usage(kind=Kind(kind), name=name, provider=provider, region=region, gpu=gpu, gpus=gpus,
                  source=Source(source), job=job, zone=zone, cluster=cluster, instance_type=instance_type,
                  pricing=Pricing(pricing), ref=ref, utilisation=utilisation)
    with store.transaction() as db:
        return open_in(db, usage, start)


def close_interval(store: Store, *, kind: Kind | str, name: str, source: Source | str, end: float | None = None,
                   ref: str | None = None) -> int:
    """Record that `name` stopped at `end` (default now); returns how many open rows were closed (0 or 1).

    An `end` before the row's start closes it at its start (a clock step back must not make usage negative)."""
    with store.transaction() as db:
        return close_in(db, Kind(kind), name, Source(source), ref, end)


# --- inside a caller's transaction -------------------------------------------------------------------

def open_in(db: sqlite3.Connection, usage: Usage, start: float | None = None) -> int:
    found = _open_row(db, usage.kind, usage.name, usage.source, usage.ref)
    if found is not None:
        return found
    return _insert(db, usage, time.time() if start is None else start, None)


def close_in(db: sqlite3.Connection, kind: Kind, name: str, source: Source, ref: str | None,
             end: float | None = None) -> int:
    row_id = _open_row(db, kind, name, source, ref)
    if row_id is None:
        return 0
    db.execute("UPDATE usage SET ended_at = MAX(?, started_at) WHERE id = ?",
               (time.time() if end is None else end, row_id))
    return 1


def is_open(db: sqlite3.Connection, kind: Kind, name: str, source: Source, ref: str | None) -> bool:
    """Whether the interval of this node or job is still running (billed) in the ledger."""
    return _open_row(db, kind, name, source, ref) is not None


def record_run(db: sqlite3.Connection, shares: Sequence[Usage], start: float | None, end: float | None) -> str:
    """Bring the ledger in line with one run of one object whose start and end an outside system reports (a
    Kubernetes job's status), however often it is called. `shares` are the rows the run is made of (one per
    zone and instance type it used), all with the same kind, source and `ref` (the object's identity), which
    is what the run is found by: their names and places may be derived differently on a later call (a node
    gone from the cluster), and the rows already written stay the run's rows. Returns what it did: `opened`,
    `closed`, `recorded` (a whole run added at once) or `unchanged`.

    The run's open rows are closed at `end`. With no open row, a start after the newest row's end is a new run
    (a job resumed after suspension) and is added; a start at or before it is the run already recorded. An
    unknown start with an end (a suspended job: its start is cleared) only closes.
    """
    keys = {(u.kind, u.source, u.ref) for u in shares}
    if len(keys) != 1:
        raise ValueError(f"the shares of one run need one kind, source and ref, got {sorted(map(str, keys))}")
    kind, source, ref = keys.pop()
    if ref is None:
        raise ValueError("a run is found by its ref: it cannot be None")
    where = "kind = ? AND source = ? AND ref = ?"
    args = (kind.value, source.value, ref)
    open_ids = [int(r[0]) for r in db.execute(f"SELECT id FROM usage WHERE {where} AND ended_at IS NULL", args)]
    if open_ids:
        if end is None:
            return "unchanged"
        for row_id in open_ids:
            close_row(db, row_id, end)
        return "closed"
    if start is None:
        return "unchanged"
    last_end = db.execute(f"SELECT MAX(ended_at) FROM usage WHERE {where}", args).fetchone()[0]
    if last_end is not None and start <= float(last_end):
        return "unchanged"
    for share in shares:
        _insert(db, share, start, None if end is None else max(end, start))
    return "opened" if end is None else "recorded"


def open_runs(db: sqlite3.Connection, source: Source) -> list[tuple[int, str, str | None, str | None]]:
    """(id, name, ref, cluster) of every open row of one source."""
    rows = db.execute("SELECT id, name, ref, cluster FROM usage WHERE source = ? AND ended_at IS NULL ORDER BY id",
                      (source.value,))
    return [(int(r[0]), str(r[1]), r[2], r[3]) for r in rows]


def close_row(db: sqlite3.Connection, row_id: int, end: float) -> None:
    db.execute("UPDATE usage SET ended_at = MAX(?, started_at) WHERE id = ? AND ended_at IS NULL", (end, row_id))


def _insert(db: sqlite3.Connection, u: Usage, start: float, end: float | None) -> int:
    cur = db.execute(
        "INSERT INTO usage (kind, name, job, provider, region, zone, cluster, instance_type, gpu, gpus, pricing, "
        "started_at, ended_at, source, ref, utilisation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (u.kind.value, u.name, u.job, u.provider, u.region, u.zone, u.cluster, u.instance_type, u.gpu, u.gpus,
         u.pricing.value, start, end, u.source.value, u.ref, u.utilisation))
    return int(cur.lastrowid or 0)


def _open_row(db: sqlite3.Connection, kind: Kind, name: str, source: Source, ref: str | None) -> int | None:
    query = "SELECT id FROM usage WHERE kind = ? AND name = ? AND source = ? AND ended_at IS NULL"
    args: list[Any] = [kind.value, name, source.value]
    if ref is not None:
        # A row opened before its ref was known (NULL) is the same interval.
        query += " AND (ref = ? OR ref IS NULL)"
        args.append(ref)
    row = db.execute(query + " ORDER BY id DESC LIMIT 1", args).fetchone()
    return int(row[0]) if row else None


__all__ = ["Kind", "Source", "Usage", "close_in", "close_interval", "close_row", "open_in", "open_interval",
           "open_runs", "record_run"]
