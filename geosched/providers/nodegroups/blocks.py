"""The store table of Capacity Blocks bought for node-group gangs (`prov_capacity_blocks`): `buying` before
PurchaseCapacityBlock (the offering, its dates and fee as offered), `bought` after its answer (the reservation id,
its dates, the fee). A block EC2 already held for the gang (found by its tags on a retry or a later run) is
recorded `bought` too. EC2 cannot cancel a block, so no row is ever closed: `down` names each one, paid until its
end, and deletes nothing for it. Every function is one transaction.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from geosched.providers.journal import AttemptRecord
from geosched.providers.nodegroups.backend import Block
from geosched.store.db import Store

_COLUMNS = ("id, gang, attempt, region, zone, instance_type, nodes, offering, reservation, state, start_at, end_at, "
            "upfront_usd, created_at, updated_at")


@dataclass(frozen=True, slots=True)
class BlockRecord:
    id: int
    gang: str
    attempt: int
    region: str
    zone: str
    instance_type: str
    nodes: int
    offering: str | None
    reservation: str | None
    state: str  # buying (the purchase's answer never came: it may have been bought), bought
    start_at: float | None
    end_at: float | None
    upfront_usd: float | None
    created_at: float
    updated_at: float


def record(store: Store, a: AttemptRecord, block: Block) -> None:
    """Journal `block` for the attempt: `buying` when it has no reservation id yet, else `bought`, updating the
    gang's row for the same offering or reservation (a purchase's answer, a block found again) rather than adding
    one. Values already known are kept when the new ones are missing (a block found by its tags has no fee)."""
    now = time.time()
    state = "buying" if block.reservation is None else "bought"
    with store.transaction() as db:
        row = None
        if block.reservation is not None:
            row = db.execute("SELECT id FROM prov_capacity_blocks WHERE gang = ? AND reservation = ?",
                             (a.gang, block.reservation)).fetchone()
        if row is None and block.offering is not None:
            row = db.execute("SELECT id FROM prov_capacity_blocks WHERE gang = ? AND offering = ? AND "
                             "reservation IS NULL", (a.gang, block.offering)).fetchone()
        if row is None and block.reservation is not None:
            # A purchase whose answer was lost, its block found later by its tags (which carry no offering id): the
            # gang's purchase of this zone, type and size (a gang buys at most one block).
            row = db.execute("SELECT id FROM prov_capacity_blocks WHERE gang = ? AND reservation IS NULL AND "
                             "zone = ? AND instance_type = ? AND nodes = ?",
                             (a.gang, block.zone, block.instance_type, block.nodes)).fetchone()
        if row is None:
            db.execute("INSERT INTO prov_capacity_blocks (gang, attempt, region, zone, instance_type, nodes, offering, "
                       "reservation, state, start_at, end_at, upfront_usd, created_at, updated_at) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (a.gang, a.id, a.region, block.zone, block.instance_type, block.nodes, block.offering,
                        block.reservation, state, block.start_at, block.end_at, block.upfront_usd, now, now))
            return
        db.execute("UPDATE prov_capacity_blocks SET state = ?, reservation = COALESCE(?, reservation), "
                   "offering = COALESCE(?, offering), start_at = COALESCE(?, start_at), "
                   "end_at = COALESCE(?, end_at), upfront_usd = COALESCE(?, upfront_usd), updated_at = ? "
                   "WHERE id = ?", (state, block.reservation, block.offering, block.start_at, block.end_at,
                                    block.upfront_usd, now, row[0]))


def of_gang(store: Store, gang: str) -> list[BlockRecord]:
    return [_record(r) for r in store.db.execute(
        f"SELECT {_COLUMNS} FROM prov_capacity_blocks WHERE gang = ? ORDER BY id", (gang,))]


def describe(b: BlockRecord, now: float | None = None) -> str:
    """One line for `down` and `status`: which block, where, until when, what it cost; a purchase whose answer
    never came says so (it may have been bought: EC2's console or DescribeCapacityReservations tells)."""
    now = time.time() if now is None else now
    size = f"{b.nodes} x {b.instance_type} in {b.zone}"
    fee = f", ${b.upfront_usd:,.2f} up front" if b.upfront_usd is not None else ""
    if b.state == "buying":
        return (f"capacity block offering {b.offering} ({size}{fee}): geosched stopped before the purchase's answer; "
                "it may have been bought: see DescribeCapacityReservations with the tag geosched-gang="
                f"{b.gang}")
    when = f" from {_utc(b.start_at)}" if b.start_at is not None else ""
    if b.end_at is None:
        until = ""
    elif b.end_at > now:
        until = f", paid until its end at {_utc(b.end_at)}"
    else:
        until = f", ended at {_utc(b.end_at)}"
    return (f"capacity block {b.reservation} ({size}{fee}) exists{when}{until}; EC2 cannot cancel it, geosched "
            "deleted nothing of it")


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _record(row: tuple[Any, ...]) -> BlockRecord:
    return BlockRecord(*row)
