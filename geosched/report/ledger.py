"""The usage ledger in the store: providers and the kube adapter open an interval when a node or job starts
holding GPUs and close it when it stops; the report reads them back.

Opening and closing are idempotent, because both are called from reconcile loops that may run twice: an open
finds a still-open row for the same (kind, name, source[, ref]) and returns it; a close of nothing closes
nothing. Times are Unix seconds (UTC).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from geosched.models import Pricing
from geosched.report.journal import journal_intervals, unrecorded
from geosched.report.records import Interval, Kind, Origin, Source
from geosched.store import Store

_COLUMNS = ("id, kind, name, job, provider, region, zone, cluster, instance_type, gpu, gpus, pricing, started_at, "
            "ended_at, source, ref, utilisation")


def open_interval(store: Store, *, kind: Kind | str, name: str, provider: str, region: str, gpu: str, gpus: int,
                  source: Source | str, job: str | None = None, zone: str | None = None, cluster: str | None = None,
                  instance_type: str | None = None, pricing: Pricing | str = Pricing.ON_DEMAND,
                  start: float | None = None, ref: str | None = None, utilisation: float | None = None) -> int:
    """Record that `name` started holding `gpus` GPUs at `start` (default now); returns the row id."""
    kind, source, pricing = Kind(kind), Source(source), Pricing(pricing)
    if gpus < 0:
        raise ValueError(f"gpus must be >= 0, got {gpus}")
    if utilisation is not None and not 0.0 <= utilisation <= 1.0:
        raise ValueError(f"utilisation must be within [0, 1], got {utilisation}")
    start = time.time() if start is None else start
    with store.transaction() as db:
        found = _open_row(db, kind, name, source, ref)
        if found is not None:
            return found
        cur = db.execute(
            "INSERT INTO usage (kind, name, job, provider, region, zone, cluster, instance_type, gpu, gpus, pricing, "
            "started_at, source, ref, utilisation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (kind.value, name, job, provider, region, zone, cluster, instance_type, gpu, gpus, pricing.value, start,
             source.value, ref, utilisation))
        return int(cur.lastrowid or 0)


def close_interval(store: Store, *, kind: Kind | str, name: str, source: Source | str, end: float | None = None,
                   ref: str | None = None) -> int:
    """Record that `name` stopped at `end` (default now); returns how many open rows were closed (0 or 1).

    An `end` before the row's start closes it at its start (a clock step back must not make usage negative)."""
    kind, source = Kind(kind), Source(source)
    end = time.time() if end is None else end
    with store.transaction() as db:
        row_id = _open_row(db, kind, name, source, ref)
        if row_id is None:
            return 0
        db.execute("UPDATE usage SET ended_at = MAX(?, started_at) WHERE id = ?", (end, row_id))
        return 1


def _open_row(db: sqlite3.Connection, kind: Kind, name: str, source: Source, ref: str | None) -> int | None:
    query = "SELECT id FROM usage WHERE kind = ? AND name = ? AND source = ? AND ended_at IS NULL"
    args: list[Any] = [kind.value, name, source.value]
    if ref is not None:
        query += " AND (ref = ? OR ref IS NULL)"
        args.append(ref)
    row = db.execute(query + " ORDER BY id DESC LIMIT 1", args).fetchone()
    return int(row[0]) if row else None


def ledger_intervals(store: Store, since: float | None = None, until: float | None = None) -> list[Interval]:
    """Ledger rows that overlap [since, until): started before `until` and not ended before `since`."""
    query = f"SELECT {_COLUMNS} FROM usage WHERE 1 = 1"
    args: list[Any] = []
    if until is not None:
        query += " AND started_at < ?"
        args.append(until)
    if since is not None:
        query += " AND (ended_at IS NULL OR ended_at > ?)"
        args.append(since)
    return [_interval(r) for r in store.db.execute(query + " ORDER BY started_at, id", args)]


def intervals(store: Store, since: float | None = None, until: float | None = None, *,
              journal: bool = True) -> list[Interval]:
    """Every interval of use overlapping [since, until): the ledger's, plus (with `journal`) the instances the
    providers' journal shows launched that no ledger row accounts for, so nothing launched escapes the report."""
    recorded = ledger_intervals(store, since, until)
    if not journal:
        return recorded
    derived = [i for i in journal_intervals(store) if _overlaps(i, since, until)]
    return recorded + unrecorded(derived, recorded)


def _overlaps(interval: Interval, since: float | None, until: float | None) -> bool:
    if until is not None and interval.start >= until:
        return False
    return not (since is not None and interval.end is not None and interval.end <= since)


def _interval(row: tuple[Any, ...]) -> Interval:
    return Interval(
        id=int(row[0]), kind=Kind(row[1]), name=row[2], job=row[3], provider=row[4], region=row[5], zone=row[6],
        cluster=row[7], instance_type=row[8], gpu=row[9], gpus=int(row[10]), pricing=Pricing(row[11]),
        start=float(row[12]), end=None if row[13] is None else float(row[13]), source=Source(row[14]), ref=row[15],
        utilisation=None if row[16] is None else float(row[16]), origin=Origin.LEDGER)
