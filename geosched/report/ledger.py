"""The usage ledger in the store, read side: the rows providers and the kube adapter wrote, plus the instances
the providers' journal shows launched that no row accounts for.

The write side (`open_interval`, `close_interval`) lives in `geosched.store.usage`, so the providers can write the
ledger without importing the report (which imports the providers' journal); it is re-exported here so
`geosched.report.ledger.open_interval` keeps working. Times are Unix seconds (UTC).
"""

from __future__ import annotations

from typing import Any

from geosched.core.models import Pricing
from geosched.report.journal import journal_intervals, unrecorded
from geosched.report.records import Interval, Kind, Origin, Source
from geosched.store.db import Store
from geosched.store.usage import close_interval, open_interval

_COLUMNS = ("id, kind, name, job, provider, region, zone, cluster, instance_type, gpu, gpus, pricing, started_at, "
            "ended_at, source, ref, utilisation")


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
    if not derived:
        return recorded
    # Checked against every provider row, not only the window's: the journal's times are early (start) and late
    # (end), so a window that holds only those edges would otherwise count the instance a second time.
    covering = recorded if since is None and until is None else provider_rows(store)
    return recorded + unrecorded(derived, covering)


def provider_rows(store: Store) -> list[Interval]:
    """Every ledger row a provider wrote, whatever its time."""
    rows = store.db.execute(f"SELECT {_COLUMNS} FROM usage WHERE source = ? ORDER BY started_at, id",
                            (Source.PROVIDER.value,))
    return [_interval(r) for r in rows]


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


__all__ = ["close_interval", "intervals", "ledger_intervals", "open_interval", "provider_rows"]
