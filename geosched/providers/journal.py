"""The provisioning journal in the store: intent before every API call, state after.

Tables (created by the store's migrations): prov_gangs, prov_attempts, prov_instances (intent -> launched ->
terminating -> terminated), prov_unavailable (refusals with an expiry), prov_meta (this store's owner id).
Every function is one transaction, so a crash leaves either the old or the new state, never half.
A `Store` connection belongs to one thread; threads open their own `Store(home)`.

The usage ledger (`geosched.store.usage`) is written in the same transactions: an instance recorded as launched opens
a node interval, one recorded or marked terminated closes it. Both are idempotent, so reconcile loops that
record the same instance again change nothing.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import Field

from geosched.core.errors import InputError
from geosched.core.models import Pricing, Weights
from geosched.files.decl.base import Declared, Record, Text, integer, number, one_of
from geosched.policies.spotrisk import Rework
from geosched.providers.base import INVENTORY_PROVIDERS, Instance, InstanceState, ProviderError, attempt_token
from geosched.providers.plan import DEFAULT_WEIGHTS, Block, Candidate, GangRequest, PricingMode
from geosched.store import usage
from geosched.store.db import Store, inventory_site

GANG_STATES = ("provisioning", "ready", "failed", "terminating", "terminated")
LIVE_GANG_STATES = ("provisioning", "ready", "failed", "terminating")
INSTANCE_STATES = ("intent", "launched", "terminating", "terminated")
# Rows that may still stand for a machine somewhere.
OPEN_STATES = ("intent", "launched", "terminating")


@dataclass(frozen=True, slots=True)
class GangRecord:
    gang: str
    owner: str
    request: GangRequest | None
    state: str
    attempt: int | None
    message: str | None
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    id: int
    gang: str
    seq: int
    token: str
    provider: str
    region: str
    zone: str
    instance_type: str
    pricing: Pricing
    usd_per_hour: float | None
    gco2e_per_hour: float | None
    outcome: str
    error_kind: str | None
    error_code: str | None
    message: str | None
    api_calls: int
    retries: int
    started_at: float
    finished_at: float | None


@dataclass(frozen=True, slots=True)
class InstanceRecord:
    id: int
    gang: str
    attempt: int | None
    idx: int | None
    name: str
    provider: str
    region: str
    zone: str
    instance_type: str
    gpu: str
    gpus: int
    pricing: Pricing
    usd_per_hour: float | None
    provider_id: str | None
    addresses: tuple[str, ...]
    state: str
    note: str | None
    created_at: float
    updated_at: float


# --- a gang's request, as journalled ---------------------------------------------------------------

PricingName = Literal["on-demand", "spot", "auto"]
assert set(get_args(PricingName)) == {m.value for m in PricingMode}


class RequestWeights(Declared):
    """The plan's cost, carbon and spot-risk weights (its network weight is always 0: plan.py says why). A key
    left out, in a gang journalled before it existed, is its default."""

    cost: float = number(0.0, default=DEFAULT_WEIGHTS.cost)
    carbon: float = number(0.0, default=DEFAULT_WEIGHTS.carbon)
    spot_risk: float = number(0.0, default=DEFAULT_WEIGHTS.spot_risk)


class RequestRework(Declared):
    checkpoint_interval_h: float = number(0.0, default=Rework().checkpoint_interval_h)
    restart_h: float = number(0.0, default=Rework().restart_h)


class GangRequestRecord(Record):
    """A gang's request in prov_gangs.request (JSON, keys sorted): what `resume` provisions again after a crash."""

    KIND: ClassVar[str] = "GangRequest"
    DESCRIPTION: ClassVar[str] = (
        "A gang's request as the provisioning journal keeps it (the store's prov_gangs.request, JSON with sorted "
        "keys; written by `geosched provision` and `up`, read back by `resume`, `status` and the reports). Keys a "
        "gang journalled before they existed (weights, rework) read as their defaults."
    )

    gpu: Text
    gpus_per_node: int = integer(1)
    nodes: int = integer(1)
    pricing: Annotated[PricingName, one_of(PricingName)] = "on-demand"
    providers: list[str] = Field(default_factory=list)
    regions: list[str] = Field(default_factory=list)
    zones: list[str] = Field(default_factory=list)
    instance_types: list[str] = Field(default_factory=list)
    weights: RequestWeights | None = None
    rework: RequestRework | None = None
    # The gang is made of node groups (pools): said in its own row, written with the gang, for a process killed
    # before its first group's row (nodegroups.journal.is_nodegroup_gang). Absent (None) for every other gang, so
    # their rows stay as before.
    node_groups: bool | None = None
    # The gang is queued through a ProvisioningRequest (`up --provisioning-class`), said in its own row for the same
    # reason: a process killed before its first prov_requests row left a gang `down` took for a machine gang.
    provisioning_request: bool | None = None

    @classmethod
    def of(cls, r: GangRequest, *, node_groups: bool = False,
           provisioning_request: bool = False) -> GangRequestRecord:
        return cls.build(
            node_groups=True if node_groups else None,
            provisioning_request=True if provisioning_request else None,
            gpu=r.gpu, gpus_per_node=r.gpus_per_node, nodes=r.nodes, pricing=r.pricing.value,
            providers=list(r.providers), regions=list(r.regions), zones=list(r.zones),
            instance_types=list(r.instance_types),
            weights=RequestWeights.build(cost=r.weights.cost, carbon=r.weights.carbon, spot_risk=r.weights.spot_risk),
            rework=RequestRework.build(checkpoint_interval_h=r.rework.checkpoint_interval_h,
                                       restart_h=r.rework.restart_h),
        )

    def request(self) -> GangRequest:
        w = self.weights or RequestWeights()
        rework = self.rework or RequestRework()
        return GangRequest(
            gpu=self.gpu, gpus_per_node=self.gpus_per_node, nodes=self.nodes, pricing=PricingMode(self.pricing),
            providers=tuple(self.providers), regions=tuple(self.regions), zones=tuple(self.zones),
            instance_types=tuple(self.instance_types),
            # float(): a weight journalled as a whole number stays a float in the plan's arithmetic, as before.
            weights=Weights(network=0.0, cost=float(w.cost), carbon=float(w.carbon), spot_risk=float(w.spot_risk)),
            rework=Rework(float(rework.checkpoint_interval_h), float(rework.restart_h)),
        )


def request_json(request: GangRequest | None, *, node_groups: bool = False,
                 provisioning_request: bool = False) -> str:
    """The prov_gangs.request column: the request's record as JSON with sorted keys ("{}" for a gang without one)."""
    return json.dumps(GangRequestRecord.of(request, node_groups=node_groups,
                                           provisioning_request=provisioning_request).dump() if request else {},
                      sort_keys=True)


def read_request(text: str | None, source: str, gang: str) -> GangRequest | None:
    """A journalled request, strictly: a row that is not one is an InputError naming the store, the gang's field
    and the reason (`prov_gangs[g1].request.nodes: required`), never a traceback."""
    where = f"prov_gangs[{gang}].request"
    try:
        doc = json.loads(text) if text else {}
    except json.JSONDecodeError as exc:
        raise InputError(source, where, f"not JSON: {exc.msg} (character {exc.pos})") from None
    return GangRequestRecord.read(doc, source, where).request() if doc else None


# --- owner ------------------------------------------------------------------------------------------

def owner(store: Store) -> str:
    """This store's owner id, tagged on every instance so `sweep` can tell ours from another store's."""
    found = existing_owner(store)
    if found is not None:
        return found
    with store.transaction() as db:
        db.execute("INSERT OR IGNORE INTO prov_meta (key, value) VALUES ('owner', ?)", (f"o{secrets.token_hex(5)}",))
    return str(store.db.execute("SELECT value FROM prov_meta WHERE key = 'owner'").fetchone()[0])


def existing_owner(store: Store) -> str | None:
    """The owner id if the store has one yet (a reader on a read-only store cannot make one)."""
    row = store.db.execute("SELECT value FROM prov_meta WHERE key = 'owner'").fetchone()
    return str(row[0]) if row else None


# --- gangs ------------------------------------------------------------------------------------------

def create_gang(store: Store, gang: str, owner_id: str, request: GangRequest | None, *,
                node_groups: bool = False, provisioning_request: bool = False) -> GangRecord:
    """A new gang; a name the store has already (`--name`) is one line, exit 2, and that gang is left as it was.
    Checked here, by the insert itself, so no path (machines, node groups, provisioning requests) can forget it.
    `node_groups`: the gang is made of node groups (pools), said in its own row (`nodegroups.journal.
    is_nodegroup_gang`), as a process killed before its first group's row leaves nothing else to tell it by;
    `provisioning_request` likewise for a gang queued through a ProvisioningRequest (`provreqs.is_request_gang`)."""
    now = time.time()
    doc = request_json(request, node_groups=node_groups, provisioning_request=provisioning_request)
    try:
        with store.transaction() as db:
            db.execute("INSERT INTO prov_gangs (gang, owner, request, state, created_at, updated_at) "
                       "VALUES (?, ?, ?, 'provisioning', ?, ?)", (gang, owner_id, doc, now, now))
    except sqlite3.IntegrityError:
        raise InputError("--name", "", f"gang {gang!r} exists already in {store.path}") from None
    record = gang_record(store, gang)
    assert record is not None
    return record


def gang_record(store: Store, gang: str) -> GangRecord | None:
    row = store.db.execute("SELECT gang, owner, request, state, attempt, message, created_at, updated_at "
                           "FROM prov_gangs WHERE gang = ?", (gang,)).fetchone()
    return _gang(row, str(store.path)) if row else None


def gangs(store: Store, states: Sequence[str] = ()) -> list[GangRecord]:
    query = "SELECT gang, owner, request, state, attempt, message, created_at, updated_at FROM prov_gangs"
    args: tuple[Any, ...] = ()
    if states:
        query += f" WHERE state IN ({', '.join('?' * len(states))})"
        args = tuple(states)
    return [_gang(r, str(store.path)) for r in store.db.execute(query + " ORDER BY created_at, gang", args)]


def set_gang(store: Store, gang: str, state: str, *, attempt: int | None = None, message: str | None = None) -> None:
    with store.transaction() as db:
        db.execute("UPDATE prov_gangs SET state = ?, attempt = COALESCE(?, attempt), message = ?, updated_at = ? "
                   "WHERE gang = ?", (state, attempt, message, time.time(), gang))


def _gang(row: sqlite3.Row | tuple[Any, ...], source: str) -> GangRecord:
    return GangRecord(gang=row[0], owner=row[1], request=read_request(row[2], source, row[0]), state=row[3],
                      attempt=row[4], message=row[5], created_at=row[6], updated_at=row[7])


# --- attempts ---------------------------------------------------------------------------------------

_ATTEMPT_COLUMNS = ("id, gang, seq, token, provider, region, zone, instance_type, pricing, usd_per_hour, "
                    "gco2e_per_hour, outcome, error_kind, error_code, message, api_calls, retries, started_at, "
                    "finished_at")


def start_attempt(store: Store, gang: str, c: Candidate, outcome: str = "started",
                  message: str | None = None) -> AttemptRecord:
    """A new attempt with the next sequence number of the gang (also used for skipped candidates, so the
    attempt log shows every candidate in the order it was considered)."""
    now = time.time()
    with store.transaction() as db:
        seq = int(db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM prov_attempts WHERE gang = ?",
                             (gang,)).fetchone()[0])
        finished = now if outcome != "started" else None
        cur = db.execute(
            "INSERT INTO prov_attempts (gang, seq, token, provider, region, zone, instance_type, pricing, "
            "usd_per_hour, gco2e_per_hour, outcome, message, started_at, finished_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (gang, seq, attempt_token(gang, seq), c.provider, c.region, c.zone, c.instance_type, c.pricing.value,
             c.usd_per_hour, c.gco2e_per_hour, outcome, message, now, finished))
        attempt_id = int(cur.lastrowid or 0)
    record = attempt(store, attempt_id)
    assert record is not None
    return record


def finish_attempt(store: Store, attempt_id: int, outcome: str, error: ProviderError | None = None, *,
                   message: str | None = None, api_calls: int = 0, retries: int = 0) -> None:
    with store.transaction() as db:
        db.execute("UPDATE prov_attempts SET outcome = ?, error_kind = ?, error_code = ?, message = ?, "
                   "api_calls = api_calls + ?, retries = retries + ?, finished_at = ? WHERE id = ?",
                   (outcome, error.kind if error else None, error.code if error else None,
                    message if message is not None else (error.message if error else None), api_calls, retries,
                    time.time(), attempt_id))


def close_interrupted(store: Store, gang: str, adopted: int | None = None) -> None:
    """Attempts a crash left `started`: the one whose machines were adopted counts as launched, the rest as
    interrupted, so the attempt log tells what happened to each."""
    now = time.time()
    with store.transaction() as db:
        db.execute("UPDATE prov_attempts SET outcome = CASE WHEN id = ? THEN 'launched' ELSE 'interrupted' END, "
                   "message = CASE WHEN id = ? THEN 'adopted after a restart' ELSE 'the process stopped during this "
                   "attempt' END, finished_at = ? WHERE gang = ? AND outcome = 'started'",
                   (adopted, adopted, now, gang))


def attempt(store: Store, attempt_id: int) -> AttemptRecord | None:
    row = store.db.execute(f"SELECT {_ATTEMPT_COLUMNS} FROM prov_attempts WHERE id = ?", (attempt_id,)).fetchone()
    return _attempt(row) if row else None


def attempts(store: Store, gang: str) -> list[AttemptRecord]:
    rows = store.db.execute(f"SELECT {_ATTEMPT_COLUMNS} FROM prov_attempts WHERE gang = ? ORDER BY seq", (gang,))
    return [_attempt(r) for r in rows]


def _attempt(row: tuple[Any, ...]) -> AttemptRecord:
    return AttemptRecord(
        id=row[0], gang=row[1], seq=row[2], token=row[3], provider=row[4], region=row[5], zone=row[6],
        instance_type=row[7], pricing=Pricing(row[8]), usd_per_hour=row[9], gco2e_per_hour=row[10], outcome=row[11],
        error_kind=row[12], error_code=row[13], message=row[14], api_calls=row[15], retries=row[16],
        started_at=row[17], finished_at=row[18])


# --- instances --------------------------------------------------------------------------------------

_INSTANCE_COLUMNS = ("id, gang, attempt, idx, name, provider, region, zone, instance_type, gpu, gpus, pricing, "
                     "usd_per_hour, provider_id, addresses, state, note, created_at, updated_at")


def intend(store: Store, a: AttemptRecord, names: Sequence[str], gpu: str, gpus: int,
           node_usd_per_hour: float | None) -> list[InstanceRecord]:
    """Journal the nodes an attempt is about to create, before the launch call."""
    now = time.time()
    with store.transaction() as db:
        db.executemany(
            "INSERT INTO prov_instances (gang, attempt, idx, name, provider, region, zone, instance_type, gpu, "
            "gpus, pricing, usd_per_hour, state, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'intent', ?, ?)",
            [(a.gang, a.id, i, name, a.provider, a.region, a.zone, a.instance_type, gpu, gpus, a.pricing.value,
              node_usd_per_hour, now, now) for i, name in enumerate(names)])
    return instances(store, attempt_id=a.id)


def record_instances(store: Store, gang: str, attempt_id: int | None, found: Sequence[Instance],
                     gpu: str = "", gpus: int = 0) -> list[InstanceRecord]:
    """Match instances a provider reported to this attempt's rows: by provider id, then by node name, then
    by launch index, then any row still in intent. An instance no row accounts for gets a row of its own
    (adopted), so nothing that exists stays unknown to the store."""
    now = time.time()
    with store.transaction() as db:
        rows = [_instance(r) for r in db.execute(
            f"SELECT {_INSTANCE_COLUMNS} FROM prov_instances WHERE gang = ? ORDER BY id", (gang,))]
        taken: set[int] = set()
        for inst in found:
            row = _match(rows, taken, inst, attempt_id)
            state = "launched" if inst.state.exists else "terminated"
            addresses = json.dumps(list(inst.addresses))
            if row is None:
                template = next((r for r in rows if r.attempt == attempt_id), None)
                cur = db.execute(
                    "INSERT INTO prov_instances (gang, attempt, idx, name, provider, region, zone, instance_type, "
                    "gpu, gpus, pricing, usd_per_hour, provider_id, addresses, state, note, created_at, "
                    "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'adopted', ?, ?)",
                    (gang, attempt_id, inst.index, inst.name, inst.provider, inst.region, inst.zone,
                     inst.instance_type, template.gpu if template else gpu, template.gpus if template else gpus,
                     (inst.pricing or Pricing.ON_DEMAND).value, template.usd_per_hour if template else None,
                     inst.provider_id, addresses, state, now, now))
                adopted = _instance(db.execute(f"SELECT {_INSTANCE_COLUMNS} FROM prov_instances WHERE id = ?",
                                               (cur.lastrowid,)).fetchone())
                _ledger(db, adopted, state, now, inst)
                continue
            taken.add(row.id)
            new_state = state
            # Something we asked to terminate but that still exists stays "terminating" (a GCE delete takes a
            # while): reconciliation terminates it again rather than taking it back into the gang.
            if row.state in ("terminating", "terminated") and inst.state.exists:
                new_state = "terminating"
            db.execute("UPDATE prov_instances SET provider_id = ?, addresses = ?, state = ?, updated_at = ? "
                       "WHERE id = ?", (inst.provider_id, addresses, new_state, now, row.id))
            _ledger(db, replace(row, provider_id=inst.provider_id), new_state, now, inst)
    return instances(store, gang=gang)


def _ledger(db: sqlite3.Connection, row: InstanceRecord, state: str, now: float,
            seen: Instance | None = None) -> None:
    """The node's usage interval after the row went to `state`, as the provider last reported the machine (`seen`):
    open while launched and running, closed once terminated or stopped (a stopped machine holds its disks, not
    its GPUs; it reopens when it runs again). `terminating` changes nothing: still billed until it is gone.

    The start is the launch time the provider reports (EC2 LaunchTime, GCE creationTimestamp, the lease time), so
    a machine found by a resume after a crash is counted from its launch; without one, when it was first seen. The
    end is the time the provider reports it stopped (EC2's state transition, GCE lastStopTimestamp: a spot reclaim
    hours before anyone looked is not billed until the look); without one, now. Neither is later than now: a
    provider's clock ahead of ours must not shorten the interval to nothing."""
    if row.provider_id is None:
        return
    ended = seen.ended_at if seen is not None else None
    end = now if ended is None else min(ended, now)
    if state == "launched" and (seen is None or seen.state is not InstanceState.STOPPED):
        launched_at = seen.launched_at if seen is not None else None
        usage.open_in(db, node_usage(at_site(db, row)), now if launched_at is None else min(launched_at, now))
    elif state in ("launched", "terminated"):
        usage.close_in(db, usage.Kind.NODE, row.name, usage.Source.PROVIDER, row.provider_id, end)


def at_site(db: sqlite3.Connection, row: InstanceRecord) -> InstanceRecord:
    """A leased inventory machine is accounted where its inventory says it is (provider and region: grid
    intensity, PUE, price), not under the provider that leased it; any other row as it is."""
    site = inventory_site(db, row.provider_id) if row.provider in INVENTORY_PROVIDERS and row.provider_id else None
    return row if site is None else replace(row, provider=site[0], region=site[1])


def node_usage(row: InstanceRecord) -> usage.Usage:
    """A journal row as what its ledger interval is of."""
    return usage.Usage(kind=usage.Kind.NODE, name=row.name, job=row.gang, provider=row.provider, region=row.region,
                       zone=row.zone, instance_type=row.instance_type, gpu=row.gpu, gpus=row.gpus,
                       pricing=row.pricing, source=usage.Source.PROVIDER, ref=row.provider_id)


def _match(rows: list[InstanceRecord], taken: set[int], inst: Instance,
           attempt_id: int | None) -> InstanceRecord | None:
    free = [r for r in rows if r.id not in taken and r.provider == inst.provider]
    for r in free:
        if r.provider_id is not None and r.provider_id == inst.provider_id:
            return r
    unassigned = [r for r in free if r.provider_id is None and r.zone == inst.zone
                  and (attempt_id is None or r.attempt == attempt_id)]
    for r in unassigned:
        if r.name == inst.name:
            return r
    for r in unassigned:
        if inst.index is not None and r.idx == inst.index and r.state == "intent":
            return r
    return next((r for r in unassigned if r.state == "intent"), None)


def move_to_attempt(store: Store, row_ids: Iterable[int], attempt_id: int) -> None:
    """Machines that survived an attempt join the attempt that filled the gang up, which the gang then keeps."""
    with store.transaction() as db:
        db.executemany("UPDATE prov_instances SET attempt = ?, updated_at = ? WHERE id = ?",
                       [(attempt_id, time.time(), i) for i in row_ids])


def mark(store: Store, row_ids: Iterable[int], state: str, note: str | None = None) -> None:
    ids = list(row_ids)
    if not ids:
        return
    now = time.time()
    with store.transaction() as db:
        db.executemany("UPDATE prov_instances SET state = ?, note = COALESCE(?, note), updated_at = ? WHERE id = ?",
                       [(state, note, now, i) for i in ids])
        if state == "terminated":
            marks = ", ".join("?" * len(ids))
            for r in db.execute(f"SELECT {_INSTANCE_COLUMNS} FROM prov_instances WHERE id IN ({marks})", ids):
                _ledger(db, _instance(r), state, now)


def where(*, states: Sequence[str] = (), **equal: Any) -> tuple[str, tuple[Any, ...]]:
    """A WHERE clause (with its leading space; empty without terms) and its arguments: `column = ?` for each
    keyword that is not None, and `state IN (...)` when `states` names some. Column names come from the
    callers' keywords, never from input."""
    clauses = [f"{column} = ?" for column, value in equal.items() if value is not None]
    args: list[Any] = [value for value in equal.values() if value is not None]
    if states:
        clauses.append(f"state IN ({', '.join('?' * len(states))})")
        args.extend(states)
    return (f" WHERE {' AND '.join(clauses)}" if clauses else ""), tuple(args)


def instances(store: Store, *, gang: str | None = None, attempt_id: int | None = None,
              states: Sequence[str] = ()) -> list[InstanceRecord]:
    clause, args = where(gang=gang, attempt=attempt_id, states=states)
    rows = store.db.execute(f"SELECT {_INSTANCE_COLUMNS} FROM prov_instances{clause} ORDER BY id", args)
    return [_instance(r) for r in rows]


def known_ids(store: Store, provider: str) -> set[str]:
    rows = store.db.execute("SELECT provider_id FROM prov_instances WHERE provider = ? AND provider_id IS NOT NULL",
                            (provider,))
    return {str(r[0]) for r in rows}


def _instance(row: tuple[Any, ...]) -> InstanceRecord:
    return InstanceRecord(
        id=row[0], gang=row[1], attempt=row[2], idx=row[3], name=row[4], provider=row[5], region=row[6],
        zone=row[7], instance_type=row[8], gpu=row[9], gpus=row[10], pricing=Pricing(row[11]),
        usd_per_hour=row[12], provider_id=row[13], addresses=tuple(json.loads(row[14] or "[]")), state=row[15],
        note=row[16], created_at=row[17], updated_at=row[18])


# --- unavailable offerings --------------------------------------------------------------------------

def remember(store: Store, blocks: Iterable[Block], now: float | None = None) -> None:
    now = time.time() if now is None else now
    rows = [(b.provider, b.region, b.zone, b.instance_type, b.pricing.value if b.pricing else None, b.min_nodes,
             b.kind, b.reason, now, now + b.ttl_s) for b in blocks if b.ttl_s is not None]
    if not rows:
        return
    with store.transaction() as db:
        db.executemany("INSERT INTO prov_unavailable (provider, region, zone, instance_type, pricing, min_nodes, kind, "
                       "reason, recorded_at, until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def active_blocks(store: Store, now: float | None = None) -> list[Block]:
    now = time.time() if now is None else now
    rows = store.db.execute("SELECT provider, region, zone, instance_type, pricing, min_nodes, kind, reason, until "
                            "FROM prov_unavailable WHERE until > ? ORDER BY recorded_at", (now,))
    return [Block(provider=p, region=r, zone=z, instance_type=t, pricing=Pricing(pr) if pr else None, reason=reason,
                  kind=kind, until=until, min_nodes=n) for p, r, z, t, pr, n, kind, reason, until in rows]


def forget_expired(store: Store, now: float | None = None) -> int:
    now = time.time() if now is None else now
    with store.transaction() as db:
        return db.execute("DELETE FROM prov_unavailable WHERE until <= ?", (now,)).rowcount
