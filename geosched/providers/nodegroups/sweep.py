"""`geosched sweep` for node groups and node pools: find the EKS managed node groups and GKE node pools geosched made
that no open journal row names, and delete them with `down`'s code. The machine sweep's contract
(`providers.lifecycle.sweep`), for the capacity a cluster holds:

- it looks only in the clusters it is given (the ones the user names, else those the store's journal has made
  groups in): a cluster is not something a cloud account lists for geosched to go through;
- a group counts only with geosched's mark, the tags (EKS) or resource labels (GKE) `backend.ownership` writes:
  `geosched-gang` and `geosched-owner`; anyone else's group is never listed, never touched;
- a group an open journal row names (`intent`, `created`, `deleting`) is its gang's, left to `down`;
- a group of this store's owner is an orphan (another owner's too with `any_owner`), another owner's is `foreign`
  (counted, not listed for deletion);
- listing changes nothing; with `delete`, every orphan is journalled first, then each deleted by `launch._delete`, the
  code `down` runs: tags checked again right before the call, waited until the cloud no longer knows it, then what
  its create made beside it (EKS: launch template, cluster placement group: `Backend.release`) deleted too. Where it
  is journalled: a closed row of its name, reopened; else a gang the store knows whose attempt its tag names (a new
  row, as `down` adopts one); else a gang record of its own gang's name and owner, made now
  (`nodegroups.journal.record_found`), so that a process killed before the delete leaves a gang `down GANG`
  finishes; a `sweep-<hex>` record only when the store has another gang of that name. A group that could not be
  deleted leaves its row open for `down` of its gang.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

from geosched.clouds import gcp
from geosched.providers import journal
from geosched.providers.base import (
    ATTEMPT_TAG,
    GANG_NAME_RE,
    GANG_TAG,
    OWNER_TAG,
    Budget,
    ProviderError,
    UnsupportedError,
)
from geosched.providers.nodegroups import gkespec, launch
from geosched.providers.nodegroups import journal as groups_journal
from geosched.providers.nodegroups.backend import Backend, Pool
from geosched.providers.nodegroups.journal import GroupRecord
from geosched.providers.nodegroups.launch import BackendFor, GroupSettings
from geosched.providers.retry import call
from geosched.store.db import Store


@dataclass(frozen=True, slots=True)
class Place:
    """A cluster to look in: its cloud (the catalog's provider name), where it is (EKS: its region; GKE: its
    location, a region or a zone) and its name."""

    provider: str
    location: str
    cluster: str


@dataclass(frozen=True, slots=True)
class Found:
    place: Place
    kind: str  # "node group", "node pool"
    pool: Pool

    @property
    def gang(self) -> str:
        return self.pool.tags.get(GANG_TAG, "")

    @property
    def owner(self) -> str:
        return self.pool.tags.get(OWNER_TAG, "")


@dataclass(frozen=True, slots=True)
class GroupSweep:
    orphans: tuple[Found, ...]
    foreign: tuple[Found, ...]
    deleted: int
    api_calls: int
    errors: tuple[str, ...] = ()


def known_places(store: Store) -> tuple[Place, ...]:
    """The clusters this store's journal has made groups in (any state): where `sweep` looks when no cluster is
    named. A GKE row's location is its `subnet` (where the pool is addressed), an EKS row's its region."""
    provider_of = {a.id: a.provider for g in journal.gangs(store) for a in journal.attempts(store, g.gang)}
    out: set[Place] = set()
    for row in groups_journal.groups(store):
        provider = provider_of.get(row.attempt)
        if provider is None:
            continue
        out.add(Place(provider, row.subnet if provider == gcp.NAME else row.region, row.cluster))
    return tuple(sorted(out, key=lambda p: (p.provider, p.location, p.cluster)))


def sweep(store: Store, places: Sequence[Place], backend_for: BackendFor = launch.open_backend, *,
          delete: bool = False, any_owner: bool = False,
          settings: GroupSettings | None = None, strict: bool = True) -> GroupSweep:
    """List (and with `delete`, delete) the groups with geosched's mark in `places` that no open journal row
    names: this store's owner's, or any owner's with `any_owner` (module docstring)."""
    settings = settings or GroupSettings()
    me = journal.owner(store)
    orphans: list[Found] = []
    foreign: list[Found] = []
    errors: list[str] = []
    calls = 0
    backends: dict[tuple[str, str], Backend] = {}
    for place in places:
        key = (place.provider, place.location)
        if key not in backends:
            backends[key] = backend_for(*key)
        b = backends[key]
        budget = Budget(settings.call_timeout_s * 10, settings.call_timeout_s)
        try:
            found = _marked(b, place, budget, settings, strict=strict)
        except ProviderError as exc:
            errors.append(f"{b.cloud} cluster {place.cluster} ({place.location}): not swept: {exc.kind}: "
                          f"{exc.message}")
            continue
        finally:
            calls += budget.calls
        for pool in found:
            if _open_row(store, place, pool.name) is not None:
                continue
            item = Found(place, b.kind, pool)
            (orphans if item.owner == me or any_owner else foreign).append(item)
    deleted = 0
    if delete and orphans:
        records: set[str] = set()
        # Every orphan journalled before the first delete: a process killed during one leaves them all to `down`.
        rows: list[GroupRecord] = []
        for item in orphans:
            row = _journalled(store, item)
            if row is None:
                record = _record_for(store, item, records)
                records.add(record)
                row = groups_journal.record_found(
                    store, record, provider=item.place.provider, region=region_of(item.place),
                    cluster=item.place.cluster, where=item.pool.where, name=item.pool.name,
                    instance_type=item.pool.instance_type, capacity_type=item.pool.capacity_type,
                    nodes=item.pool.nodes, arn=item.pool.ident, token=item.pool.tags.get(ATTEMPT_TAG, ""))
            rows.append(row)
        for item, row in zip(orphans, rows, strict=True):
            b = backends[(item.place.provider, item.place.location)]
            result = launch._delete(store, b, row, item.owner, settings, gang=item.gang)
            calls += result.calls
            deleted += int(result.ok and result.existed)
            if not result.ok:
                errors.append(f"{item.place.cluster}/{item.pool.name}: {result.error}")
        for record in sorted(records):
            left = groups_journal.groups(store, gang=record, states=groups_journal.OPEN_STATES)
            journal.set_gang(store, record, "terminating" if left else "terminated",
                             message="node groups found by sweep" + ("; not all deleted" if left else ""))
    return GroupSweep(tuple(orphans), tuple(foreign), deleted, calls, tuple(errors))


def _record_for(store: Store, item: Found, made: set[str]) -> str:
    """The gang an orphan is journalled under: its own gang's name (the tag's) with the tag's owner, when the store
    has no gang of that name (the store that made it was lost), so that `status` shows it as that gang and, should
    this process die before the delete, `down GANG` deletes it as any gang's group (its tags match the record);
    else (a gang of that name the store has, whose attempts the tag names none of) a `sweep-<hex>` record of its
    own. `made`: the records this sweep made already (a lost gang's second group goes with its first)."""
    if item.gang in made:
        return item.gang
    if GANG_NAME_RE.match(item.gang) and journal.gang_record(store, item.gang) is None:
        journal.create_gang(store, item.gang, item.owner, None, node_groups=True)
        journal.set_gang(store, item.gang, "terminating", message="node groups found by sweep")
        return item.gang
    record = f"sweep-{secrets.token_hex(4)}"
    journal.create_gang(store, record, journal.owner(store), None, node_groups=True)
    journal.set_gang(store, record, "terminating", message="node groups found by sweep")
    return record


def _marked(b: Backend, place: Place, budget: Budget, settings: GroupSettings, *, strict: bool = True) -> list[Pool]:
    """The cluster's groups that carry geosched's mark (its gang and owner tags), as the cloud describes them. A
    cluster the cloud does not know is an error: EKS answers ListNodegroups of one ResourceNotFound, which would
    read as an empty cluster, and nothing found where geosched could not look is not "nothing there"."""
    if call(lambda: b.cluster(place.cluster, budget), budget, settings.retry, sleep=settings.sleep) is None:
        if not strict:
            # A cluster only the journal names (not the user) that is gone holds no groups: deleting a cluster
            # deletes its pools (GKE), and EKS refuses to delete one that still has node groups.
            return []
        raise UnsupportedError(f"no {b.cloud} cluster {place.cluster!r} in {b.scope} {place.location}",
                               code="NotFound")
    names = call(lambda: b.names(place.cluster, place.location, budget), budget, settings.retry,
                 sleep=settings.sleep)
    out = []
    for name in names:
        pool = call(partial(b.describe, place.cluster, place.location, name, budget), budget, settings.retry,
                    sleep=settings.sleep)
        if pool is not None and pool.tags.get(GANG_TAG) and pool.tags.get(OWNER_TAG):
            out.append(pool)
    return out


def region_of(place: Place) -> str:
    """The region a row of the place's groups carries (its attempt's): a GKE location's region (a zonal cluster's
    location is a zone), an EKS cluster's region itself."""
    return gkespec.region_of(place.location) if place.provider == gcp.NAME else place.location


def _rows_named(store: Store, place: Place, name: str) -> list[GroupRecord]:
    """The store's rows for group `name` of the cluster (any state). A row's region is its attempt's, and a GKE
    row's location its `subnet`, so either may be the place's location."""
    return [r for r in groups_journal.groups(store) if r.cluster == place.cluster and r.name == name
            and place.location in (r.region, r.subnet)]


def _open_row(store: Store, place: Place, name: str) -> GroupRecord | None:
    return next((r for r in _rows_named(store, place, name) if r.state in groups_journal.OPEN_STATES), None)


def _journalled(store: Store, item: Found) -> GroupRecord | None:
    """The row the orphan is deleted under when the store knows it: a closed row of its name (reopened), or an
    attempt of its gang that its attempt tag names (the gang's own new row, as `down` adopts one); else None (the
    caller journals it under the sweep's record)."""
    closed = next((r for r in _rows_named(store, item.place, item.pool.name) if r.state == "deleted"), None)
    if closed is not None:
        return groups_journal.reopen(store, closed.id, "found again by sweep")
    if journal.gang_record(store, item.gang) is None:
        return None
    region = next((r.region for r in groups_journal.groups(store, gang=item.gang)), item.place.location)
    return launch._adopt(store, item.gang, region, item.place.cluster, item.pool.name, item.pool)
