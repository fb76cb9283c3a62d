"""One command at a time per gang: the lease `up` and `down` hold on a gang while they change it.

`geosched up GANG` creating node groups (pools) while `geosched down GANG` deletes them (a second terminal, a CI job
cancelled and re-run while the first still runs) raced: `down` listed the groups and closed the gang, then `up`'s
create landed and its usage rows opened, a group nobody would delete and a charge nobody would close. A lease
makes the two exclusive, as Terraform's state lock makes two `apply`/`destroy` runs on one state exclusive
(developer.hashicorp.com/terraform/language/state/locking: an operation that cannot take the lock fails, naming
who holds it): the second command refuses in one line naming the command and pid holding the gang, and changes
nothing. A holder that died (SIGKILL, a machine reset) holds nothing: its pid no longer runs, or runs another
program (the kernel's start time of the process differs), and the next command takes the lease over, so a killed
`up` never blocks the `down` that cleans up after it.

The lease is a `prov_meta` row (`lease:GANG`), taken and released in one store transaction each (BEGIN IMMEDIATE:
two processes cannot both see it free). The process holding it may take it again (`up`'s own rollback runs the
teardown `down` runs). Leases are per store, on one host: the store is SQLite in WAL mode, which does not work
over a network file system, so every process that can open it runs here.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from geosched.core.errors import GeoschedError
from geosched.store.db import Store


class GangBusy(GeoschedError):
    """Another live command holds the gang (exit 1: retry once it ended; nothing was changed)."""


@dataclass(frozen=True, slots=True)
class Holder:
    verb: str  # the command holding the gang: up, down, provision
    pid: int
    started: str  # the process's start time as the kernel counts it ("" where unknown): tells a reused pid
    since: float  # epoch seconds the lease was taken


def _key(gang: str) -> str:
    return f"lease:{gang}"


def process_start(pid: int) -> str | None:
    """The start time of process `pid` (field 22 of /proc/PID/stat, clock ticks since boot), "" on a system
    without /proc (the pid alone then), or None when no such process runs (a zombie included: it has exited)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    return start_in(stat)


def start_in(stat: str) -> str | None:
    """The start time in a /proc/PID/stat line (proc(5): field 22, `starttime`), "" when the line is too short, None
    for a process that has exited (state Z, zombie, or X, dead). Pure."""
    # The command name (field 2) is in parentheses and may hold spaces or parentheses: split after the last ')'.
    fields = stat[stat.rfind(")") + 2:].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    return fields[19] if len(fields) > 19 else ""


def _pid_runs(pid: int) -> str | None:
    if os.path.isdir("/proc"):
        return process_start(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return ""  # runs, as another user
    return ""


def live(holder: Holder, runs: Callable[[int], str | None]) -> bool:
    """Whether `holder` still holds its lease: its pid runs and is the same process (same start time, where both
    are known). Pure but for `runs` (pid -> start time, "" unknown, None not running)."""
    started = runs(holder.pid)
    if started is None:
        return False
    return not (started and holder.started and started != holder.started)


def describe(gang: str, holder: Holder) -> str:
    when = time.strftime("%H:%M:%S UTC", time.gmtime(holder.since))
    return (f"gang {gang} is held by `geosched {holder.verb}` (pid {holder.pid}, since {when}): wait until it "
            f"ends or stop it, then run this again")


def holder(store: Store, gang: str) -> Holder | None:
    row = store.db.execute("SELECT value FROM prov_meta WHERE key = ?", (_key(gang),)).fetchone()
    if row is None:
        return None
    try:
        doc = json.loads(row[0])
        return Holder(str(doc["verb"]), int(doc["pid"]), str(doc.get("started", "")), float(doc["since"]))
    except (ValueError, KeyError, TypeError):
        return None  # a damaged lease holds nothing: it is replaced


@contextmanager
def held(store: Store, gang: str, verb: str, *, runs: Callable[[int], str | None] = _pid_runs) -> Iterator[None]:
    """Hold the gang's lease for the block; `GangBusy` (nothing changed) when another live command holds it. The
    process holding it already (a nested take) holds it on, and only the outer block releases it."""
    me = os.getpid()
    mine = Holder(verb, me, runs(me) or "", time.time())
    with store.transaction() as db:
        row = db.execute("SELECT value FROM prov_meta WHERE key = ?", (_key(gang),)).fetchone()
        current = holder(store, gang) if row is not None else None
        if current is not None and current.pid != me and live(current, runs):
            raise GangBusy(describe(gang, current))
        nested = current is not None and current.pid == me and live(current, runs)
        if not nested:
            db.execute("INSERT OR REPLACE INTO prov_meta (key, value) VALUES (?, ?)",
                       (_key(gang), json.dumps({"verb": mine.verb, "pid": mine.pid, "started": mine.started,
                                                "since": mine.since})))
    try:
        yield
    finally:
        if not nested:
            with store.transaction() as db:
                db.execute("DELETE FROM prov_meta WHERE key = ? AND json_extract(value, '$.pid') = ?",
                           (_key(gang), me))
