"""Intervals derived from the providers' journal (`prov_instances`), so a node launched by geosched is in the
report even when no ledger row accounts for it. The journal writes the node's ledger row in the same
transaction as the row's state (`geosched.providers.journal`), so this is for what that cannot cover: a machine
first seen already gone (it never was `launched`), and stores written before the journal wrote the ledger.

Which rows: those with a `provider_id`, i.e. a provider reported the machine (the journal sets it when it
records an instance as launched). Rows still in `intent`, and rows that went to `terminated` without ever
getting a provider id (a launch that failed), never stood for a machine and are left out.

Timestamps (the journal keeps no launch or termination time of its own):
- start = `created_at`: the intent journaled just before the launch call (early by the launch latency, so
  cost is over- rather than under-stated); for an adopted row (note 'adopted') it is when reconciliation found
  the machine, which is later than its real start.
- end = `updated_at` of a `terminated` row: when the journal last wrote the row, which is after the terminate
  call or when reconciliation saw the machine gone; a later reconcile that re-reads a terminated instance moves
  it further, so the end is late by up to one reconcile period. `launched` and `terminating` rows are running
  (end None).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from geosched.providers import journal
from geosched.report.records import Interval, Kind, Origin, Source
from geosched.store.db import Store

RUNNING_STATES = ("launched", "terminating")


def journal_intervals(store: Store) -> list[Interval]:
    return instance_intervals(journal.at_site(store.db, r) for r in journal.instances(store))


def instance_intervals(rows: Iterable[journal.InstanceRecord]) -> list[Interval]:
    out = []
    for r in rows:
        if r.provider_id is None or r.state not in (*RUNNING_STATES, "terminated"):
            continue
        out.append(Interval(
            kind=Kind.NODE, name=r.name, job=r.gang, provider=r.provider, region=r.region, zone=r.zone, cluster=None,
            instance_type=r.instance_type, gpu=r.gpu, gpus=r.gpus, pricing=r.pricing, start=r.created_at,
            end=None if r.state in RUNNING_STATES else max(r.updated_at, r.created_at), source=Source.PROVIDER,
            ref=r.provider_id, origin=Origin.JOURNAL))
    return out


def unrecorded(derived: Sequence[Interval], ledger: Sequence[Interval]) -> list[Interval]:
    """The derived intervals no provider ledger row accounts for (same instance id, or same node name and gang):
    when a provider writes the ledger itself, its own times are the better ones."""
    ids = {(i.provider, i.ref) for i in ledger if i.source is Source.PROVIDER and i.ref}
    names = {(i.provider, i.name, i.job) for i in ledger if i.source is Source.PROVIDER and i.kind is Kind.NODE}
    return [d for d in derived if (d.provider, d.ref) not in ids and (d.provider, d.name, d.job) not in names]
