"""The store is the memory: nodes, network samples and placements in SQLite (WAL, versioned migrations).

Every write runs in one transaction. Snapshots (fleet.yaml + network.yaml) export and import the same
documents the CLI reads, so a store can be reproduced from files in a Git repository.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import sqlite3
import stat
import statistics
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from geosched import settings
from geosched.core.errors import GeoschedError, OutputError
from geosched.core.models import Fleet, LinkStats, NetworkView, Placement, pair_key, region_key
from geosched.files import writes
from geosched.files.documents import fleet_to_dict, network_to_dict, parse_fleet, parse_network, placement_to_dict
from geosched.files.fields import dump
from geosched.files.gate import Kind, parse_yaml, read_text
from geosched.files.inventory import Inventory, parse_inventory

HOME_ENV = settings.HOME.env
DB_NAME = "geosched.db"
PRIVATE_DIR = 0o700
PRIVATE_FILE = writes.PRIVATE
LINK_REFUSED = ("a symbolic link (geosched does not follow links in its store; replace it with the file itself, "
                "or point GEOSCHED_HOME elsewhere)")
HARDLINK_REFUSED = ("a file with other hard links (another name would get the store's tables and mode; replace "
                    "it with a file of its own, or point GEOSCHED_HOME elsewhere)")
SHARED_HOME = ("a shared directory (mode {mode:o}: every user may create files in it, as in /tmp); not a home for "
               "the store: point GEOSCHED_HOME at a directory of your own")
OPEN_HOME = ("writable by every user (mode {mode:o}): others could plant or replace the database; not a home for the "
             "store: point GEOSCHED_HOME at a directory of your own (geosched leaves its mode alone)")
NOT_A_FILE = "not a regular file (a FIFO, socket or device); remove it, or point GEOSCHED_HOME elsewhere"
log = logging.getLogger(__name__)

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE nodes (
        name TEXT PRIMARY KEY,
        document TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE fleet_meta (
        key TEXT PRIMARY KEY,
        document TEXT NOT NULL
    );
    CREATE TABLE network_samples (
        id INTEGER PRIMARY KEY,
        scope TEXT NOT NULL CHECK (scope IN ('zone', 'node')),
        a TEXT NOT NULL,
        b TEXT NOT NULL,
        taken_at REAL NOT NULL,
        rtt_p50_ms REAL NOT NULL,
        rtt_p95_ms REAL NOT NULL,
        loss REAL NOT NULL,
        throughput_gbps REAL NOT NULL,
        samples INTEGER NOT NULL
    );
    CREATE INDEX network_samples_pair ON network_samples (scope, a, b, taken_at);
    CREATE TABLE placements (
        id INTEGER PRIMARY KEY,
        job TEXT NOT NULL,
        policy TEXT NOT NULL,
        cluster TEXT,
        created_at REAL NOT NULL,
        document TEXT NOT NULL
    );
    CREATE INDEX placements_job ON placements (job, created_at);
    """,
    # Provisioning journal (geosched.providers): gangs, their launch attempts and instances (intent before
    # every API call, state after), offerings refused for a while, refreshed catalog and price history.
    """
    CREATE TABLE prov_meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE prov_gangs (
        gang TEXT PRIMARY KEY,
        owner TEXT NOT NULL,
        request TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('provisioning', 'ready', 'failed', 'terminating', 'terminated')),
        attempt INTEGER,
        message TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE TABLE prov_attempts (
        id INTEGER PRIMARY KEY,
        gang TEXT NOT NULL REFERENCES prov_gangs (gang),
        seq INTEGER NOT NULL,
        token TEXT NOT NULL,
        provider TEXT NOT NULL,
        region TEXT NOT NULL,
        zone TEXT NOT NULL,
        instance_type TEXT NOT NULL,
        pricing TEXT NOT NULL,
        usd_per_hour REAL,
        gco2e_per_hour REAL,
        outcome TEXT NOT NULL CHECK (outcome IN ('started', 'launched', 'failed', 'rolled-back', 'cancelled',
                                                 'skipped', 'interrupted')),
        error_kind TEXT,
        error_code TEXT,
        message TEXT,
        api_calls INTEGER NOT NULL DEFAULT 0,
        retries INTEGER NOT NULL DEFAULT 0,
        started_at REAL NOT NULL,
        finished_at REAL,
        UNIQUE (gang, seq)
    );
    CREATE TABLE prov_instances (
        id INTEGER PRIMARY KEY,
        gang TEXT NOT NULL REFERENCES prov_gangs (gang),
        attempt INTEGER REFERENCES prov_attempts (id),
        idx INTEGER,
        name TEXT NOT NULL,
        provider TEXT NOT NULL,
        region TEXT NOT NULL,
        zone TEXT NOT NULL,
        instance_type TEXT NOT NULL,
        gpu TEXT NOT NULL,
        gpus INTEGER NOT NULL,
        pricing TEXT NOT NULL,
        usd_per_hour REAL,
        provider_id TEXT,
        addresses TEXT NOT NULL DEFAULT '[]',
        state TEXT NOT NULL CHECK (state IN ('intent', 'launched', 'terminating', 'terminated')),
        note TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX prov_instances_gang ON prov_instances (gang, state);
    CREATE INDEX prov_instances_provider_id ON prov_instances (provider, provider_id);
    CREATE TABLE prov_unavailable (
        id INTEGER PRIMARY KEY,
        provider TEXT NOT NULL,
        region TEXT,
        zone TEXT,
        instance_type TEXT,
        pricing TEXT,
        min_nodes INTEGER NOT NULL DEFAULT 1,
        kind TEXT NOT NULL,
        reason TEXT NOT NULL,
        recorded_at REAL NOT NULL,
        until REAL NOT NULL
    );
    CREATE INDEX prov_unavailable_until ON prov_unavailable (until);
    CREATE TABLE catalog_offerings (
        provider TEXT NOT NULL,
        instance_type TEXT NOT NULL,
        region TEXT NOT NULL,
        zone TEXT NOT NULL,
        gpu TEXT NOT NULL,
        gpus INTEGER NOT NULL,
        vcpus REAL NOT NULL,
        memory_gib REAL NOT NULL,
        refreshed_at REAL NOT NULL,
        PRIMARY KEY (provider, instance_type, zone)
    );
    CREATE TABLE price_history (
        id INTEGER PRIMARY KEY,
        provider TEXT NOT NULL,
        instance_type TEXT NOT NULL,
        region TEXT NOT NULL,
        zone TEXT NOT NULL,
        pricing TEXT NOT NULL,
        usd_per_hour REAL NOT NULL,
        observed_at REAL NOT NULL,
        source TEXT NOT NULL,
        recorded_at REAL NOT NULL
    );
    CREATE INDEX price_history_key ON price_history (provider, instance_type, zone, pricing, observed_at);
    """,
    # Usage ledger (geosched.report): one row per interval a node or a job held GPUs; ended_at is NULL while it
    # runs. `job` is the gang (node rows) or the job (job rows); `ref` is the provider's instance id or the pod
    # uid, so a retried open or close finds its row instead of adding one.
    """
    CREATE TABLE usage (
        id INTEGER PRIMARY KEY,
        kind TEXT NOT NULL CHECK (kind IN ('node', 'job')),
        name TEXT NOT NULL,
        job TEXT,
        provider TEXT NOT NULL,
        region TEXT NOT NULL,
        zone TEXT,
        cluster TEXT,
        instance_type TEXT,
        gpu TEXT NOT NULL,
        gpus INTEGER NOT NULL CHECK (gpus >= 0),
        pricing TEXT NOT NULL CHECK (pricing IN ('on-demand', 'spot')),
        started_at REAL NOT NULL,
        ended_at REAL CHECK (ended_at IS NULL OR ended_at >= started_at),
        source TEXT NOT NULL CHECK (source IN ('provider', 'kube', 'demo')),
        ref TEXT,
        utilisation REAL CHECK (utilisation IS NULL OR (utilisation >= 0 AND utilisation <= 1))
    );
    CREATE INDEX usage_window ON usage (started_at, ended_at);
    CREATE INDEX usage_open ON usage (kind, name, source) WHERE ended_at IS NULL;
    """,
    # Inventories (geosched.files.inventory) the ssh provider leases from, kept as their files said when a gang was
    # provisioned from them: the store's fleet, the usage ledger, reports and `probe run --store` then know each
    # machine's declared provider, region (grid intensity, PUE), price and how to reach it without the file.
    """
    CREATE TABLE inventories (
        source TEXT PRIMARY KEY,
        document TEXT NOT NULL,
        base TEXT,
        saved_at REAL NOT NULL
    );
    """,
    # Spot interruption signals (geosched.policies.spotrisk), appended like prices: `signal` is 'score' (an AWS
    # Spot placement score for `target` instances in one zone) or 'volatility' (the coefficient of variation of
    # the zone's spot price over the last 7 days, which moved `changes` times); observed_at is when the API answered.
    """
    CREATE TABLE spot_signals (
        id INTEGER PRIMARY KEY,
        provider TEXT NOT NULL,
        instance_type TEXT NOT NULL,
        region TEXT NOT NULL,
        zone TEXT NOT NULL,
        signal TEXT NOT NULL CHECK (signal IN ('score', 'volatility')),
        value REAL NOT NULL,
        target INTEGER,
        changes INTEGER,
        observed_at REAL NOT NULL,
        source TEXT NOT NULL
    );
    CREATE INDEX spot_signals_key ON spot_signals (provider, instance_type, zone, signal, observed_at);
    """,
    # EKS managed node groups a gang's attempts create (geosched.providers.nodegroups): one row per group, written
    # `intent` before CreateNodegroup and `deleting` before DeleteNodegroup, so `down` after a crash knows every
    # group that may exist (by cluster and name) and deletes it.
    """
    CREATE TABLE prov_nodegroups (
        id INTEGER PRIMARY KEY,
        gang TEXT NOT NULL REFERENCES prov_gangs (gang),
        attempt INTEGER NOT NULL REFERENCES prov_attempts (id),
        cluster TEXT NOT NULL,
        region TEXT NOT NULL,
        zone TEXT NOT NULL,
        subnet TEXT NOT NULL,
        name TEXT NOT NULL,
        instance_type TEXT NOT NULL,
        capacity_type TEXT NOT NULL,
        nodes INTEGER NOT NULL,
        arn TEXT,
        state TEXT NOT NULL CHECK (state IN ('intent', 'created', 'deleting', 'deleted')),
        note TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        UNIQUE (region, cluster, name)
    );
    CREATE INDEX prov_nodegroups_gang ON prov_nodegroups (gang, state);
    """,
    # EC2 Capacity Blocks bought for a node-group gang (geosched.providers.nodegroups.blocks): written `buying`
    # before PurchaseCapacityBlock and `bought` after its answer (reservation id, dates, fee), so `status` and
    # `down` name a block that was paid for even when geosched died between the purchase and the node group.
    # EC2 cannot cancel a block: a row is never closed, the block simply ends at end_at.
    """
    CREATE TABLE prov_capacity_blocks (
        id INTEGER PRIMARY KEY,
        gang TEXT NOT NULL REFERENCES prov_gangs (gang),
        attempt INTEGER NOT NULL REFERENCES prov_attempts (id),
        region TEXT NOT NULL,
        zone TEXT NOT NULL,
        instance_type TEXT NOT NULL,
        nodes INTEGER NOT NULL,
        offering TEXT,
        reservation TEXT,
        state TEXT NOT NULL CHECK (state IN ('buying', 'bought')),
        start_at REAL,
        end_at REAL,
        upfront_usd REAL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX prov_capacity_blocks_gang ON prov_capacity_blocks (gang);
    """,
    # The ProvisioningRequest a gang's job was queued through (`up --provisioning-class`,
    # geosched.providers.provreqs): written when its request is Provisioned, so `down` knows the cluster, the
    # objects geosched applied for the gang (`objects`, JSON), Kueue's queue objects it applied (`queue`: removed by
    # the `down` of the last gang using them) and the nodes the autoscaler made for it, whose ledger rows it closes
    # once they are gone.
    """
    CREATE TABLE prov_requests (
        id INTEGER PRIMARY KEY,
        gang TEXT NOT NULL REFERENCES prov_gangs (gang),
        attempt INTEGER NOT NULL REFERENCES prov_attempts (id),
        cluster TEXT NOT NULL,
        context TEXT NOT NULL,
        kubeconfig TEXT,
        namespace TEXT NOT NULL,
        objects TEXT NOT NULL,
        requests TEXT NOT NULL,
        nodes TEXT NOT NULL DEFAULT '[]',
        queue TEXT NOT NULL DEFAULT '[]',
        state TEXT NOT NULL CHECK (state IN ('provisioned', 'deleted')),
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX prov_requests_gang ON prov_requests (gang);
    """,
    # Karpenter NodePools geosched rendered for the user's GitOps (`provision|up --karpenter`,
    # geosched.store.uncharged): geosched never applies them, so Karpenter's nodes have no ledger row; the report
    # says which gangs' capacity it does not charge.
    """
    CREATE TABLE karpenter_renders (
        id INTEGER PRIMARY KEY,
        gang TEXT NOT NULL,
        cluster TEXT NOT NULL,
        region TEXT NOT NULL,
        pools TEXT NOT NULL,
        instance_type TEXT NOT NULL,
        capacity_type TEXT NOT NULL,
        nodes INTEGER NOT NULL,
        destination TEXT NOT NULL,
        rendered_at REAL NOT NULL
    );
    """,
    # A ProvisioningRequest gang's row is written as an intent before its zone's first apply (issue 26): a process
    # killed while the request was watched left the job and its request in the cluster and no row, so `down` could
    # not find them. `intent` rows hold what is about to be applied; SQLite cannot change a CHECK in place, so the
    # table is copied into one that allows the state.
    """
    CREATE TABLE prov_requests_v2 (
        id INTEGER PRIMARY KEY,
        gang TEXT NOT NULL REFERENCES prov_gangs (gang),
        attempt INTEGER NOT NULL REFERENCES prov_attempts (id),
        cluster TEXT NOT NULL,
        context TEXT NOT NULL,
        kubeconfig TEXT,
        namespace TEXT NOT NULL,
        objects TEXT NOT NULL,
        requests TEXT NOT NULL,
        nodes TEXT NOT NULL DEFAULT '[]',
        queue TEXT NOT NULL DEFAULT '[]',
        state TEXT NOT NULL CHECK (state IN ('intent', 'provisioned', 'deleted')),
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    INSERT INTO prov_requests_v2 (id, gang, attempt, cluster, context, kubeconfig, namespace, objects, requests, nodes,
                                  queue, state, created_at, updated_at)
        SELECT id, gang, attempt, cluster, context, kubeconfig, namespace, objects, requests, nodes, queue, state,
               created_at, updated_at FROM prov_requests;
    DROP TABLE prov_requests;
    ALTER TABLE prov_requests_v2 RENAME TO prov_requests;
    CREATE INDEX prov_requests_gang ON prov_requests (gang);
    """,
)


def _not_a_directory(path: Path) -> str:
    """What stands where the home (or a folder on its way) should be a directory, in words."""
    if path.is_symlink():
        target = os.readlink(path)
        if not path.exists():
            return (f"a dangling symbolic link (to {target}, which does not exist); create {target} or remove the "
                    "link, or point GEOSCHED_HOME elsewhere")
        return f"a symbolic link to {target}, which is not a directory; point GEOSCHED_HOME elsewhere"
    return "exists and is not a directory; move it away, or point GEOSCHED_HOME elsewhere"


def default_home() -> Path:
    """$GEOSCHED_HOME, else the config file's `home`, else the platform's user data directory."""
    home: Path | None = settings.lookup(settings.HOME)
    return home if home is not None else Path(platformdirs.user_data_dir("geosched"))


@dataclass(frozen=True, slots=True)
class Sample:
    """One measurement of one link; the network view aggregates many."""

    scope: str
    a: str
    b: str
    taken_at: float
    link: LinkStats


# SQLite's primary result codes that say the environment failed, not the SQL: a full disk (SQLITE_FULL), a
# read-only or unopenable file, no permission, I/O, a file that is not a database. https://sqlite.org/rescode.html
_ENVIRONMENT_CODES = {3: "SQLITE_PERM", 8: "SQLITE_READONLY", 10: "SQLITE_IOERR", 11: "SQLITE_CORRUPT",
                      13: "SQLITE_FULL", 14: "SQLITE_CANTOPEN", 26: "SQLITE_NOTADB"}


# Why opening the store read-write failed when a reader may still open it read-only: a read-only file system, no
# write permission on the home or the database.
_CANNOT_WRITE = {errno.EROFS, errno.EACCES, errno.EPERM}


class NewerStore(GeoschedError):
    """The store was written by a newer geosched (a colleague's home, a downgrade): this one cannot know what the
    newer tables mean, so it refuses the store in one line, exit 1 (the environment, not the user's input)."""


class _Connection(sqlite3.Connection):
    """A connection whose statements fail, when the environment is at fault, as one line naming the store
    (exit 1): every transaction rolls back, so the store keeps what it held."""

    path = ""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        with self._environment():
            return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        with self._environment():
            return super().executemany(sql, parameters)

    @contextmanager
    def _environment(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _ENVIRONMENT_CODES:
                raise
            raise OutputError(self.path, str(exc)) from None


class Store:
    db: sqlite3.Connection
    read_only: bool
    """Opened `mode=ro` or `immutable=1`: a reader on a store it cannot write (see __init__)."""

    def __init__(self, home: Path | None = None, *, reader: bool = False) -> None:
        """The store at `home`, opened read-write (made when missing, migrated to this geosched's schema). A
        `reader` (a command that only reads: `status`, `report`) whose home cannot be written (a read-only mount,
        no write permission) opens an existing, current store read-only instead of failing; a write through it is
        then one line saying it cannot write, exit 1."""
        self.home = home or default_home()
        self.path = self.home / DB_NAME
        try:
            # A home that exists already is the user's choice (GEOSCHED_HOME, the config file's `home:`, which
            # a pull request can set): geosched adds its files and never changes the directory's mode (attack
            # report 2026-12-07, finding 5: `status` narrowed a web root and /tmp to 700).
            made = not self._existing_home()
            self.home.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            self._refuse_links()
            # Created 0600 before SQLite opens it: SQLite gives its -wal and -shm files the database's mode.
            # O_NOFOLLOW: a link planted between the check above and here is refused too (ELOOP).
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, PRIVATE_FILE))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise OutputError(str(self.path), LINK_REFUSED) from None
            if reader and exc.errno in _CANNOT_WRITE and self.path.is_file():
                self._refuse_links()
                self.db = self._read_only(exc.strerror or str(exc))
                self.read_only = True
                return
            where = Path(exc.filename) if exc.filename else self.path
            if exc.errno == errno.EEXIST:
                # mkdir says only "File exists" when the home, or a folder on its way, is something else.
                raise OutputError(str(where), _not_a_directory(where)) from None
            raise OutputError(str(where), exc.strerror or str(exc)) from None
        self._narrow_modes(home_too=made)
        self.read_only = False
        db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0, factory=_Connection)
        db.path = str(self.path)
        self.db = db
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def _read_only(self, cause: str) -> sqlite3.Connection:
        """The database opened read-only (`mode=ro`, https://sqlite.org/uri.html). A WAL database needs its -shm
        file to exist or be creatable even to read (https://sqlite.org/wal.html, "Read-Only Databases"), which a
        read-only mount cannot give: there, with no -wal file left to replay, the file cannot change while mounted,
        so it is opened `immutable=1`. `cause` is why the read-write open failed, said when this fails too."""
        wal = self.home / f"{DB_NAME}-wal"
        frozen = bool(os.statvfs(self.home).f_flag & os.ST_RDONLY) and not (wal.exists() and wal.stat().st_size)
        for query in ("mode=ro", *(("immutable=1",) if frozen else ())):
            db = sqlite3.connect(f"{self.path.as_uri()}?{query}", uri=True, isolation_level=None, timeout=30.0,
                                 factory=_Connection)
            db.path = str(self.path)
            try:
                # The open is lazy: the first statement is where SQLite finds the -shm file missing.
                current = int(db.execute("PRAGMA user_version").fetchone()[0])
                db.execute("PRAGMA foreign_keys=ON")
            except OutputError:
                db.close()
                continue
            if current != len(MIGRATIONS):
                db.close()
                raise OutputError(str(self.path), f"{cause} (and the store is at schema version {current}, "
                                  f"this geosched reads {len(MIGRATIONS)}: bringing it up to date takes a write)")
            return db
        raise OutputError(str(self.path), cause)

    def _refuse_links(self) -> None:
        """SQLite follows a link where the database, its -wal or its -shm file should be, and the narrowing
        below would chmod the link's target: a link planted in a shared or restored home would point the
        store's writes and mode changes at any file its owner may touch. The home itself may be a link (the
        user chose where it lives); the files in it may not."""
        for path in self._files():
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(info.st_mode):
                raise OutputError(str(path), LINK_REFUSED)
            # A hard link is the same trap as a symbolic one (another name's file gets our tables and our
            # mode); a FIFO or device blocks or fails deep inside SQLite. Only a plain file of its own is ours.
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                raise OutputError(str(path), HARDLINK_REFUSED)
            if not stat.S_ISREG(info.st_mode) and not stat.S_ISDIR(info.st_mode):
                raise OutputError(str(path), NOT_A_FILE)

    def _existing_home(self) -> bool:
        """Whether the home is a directory already; one every user may write to is refused (exit 1): another user
        could create geosched.db there first, or swap it, and feed this user's commands their own store."""
        try:
            info = self.home.stat()  # the home may be a link (the user chose where it lives)
        except FileNotFoundError:
            return False
        if not stat.S_ISDIR(info.st_mode):
            return False  # mkdir below says what it is
        mode = stat.S_IMODE(info.st_mode)
        if mode & stat.S_IWOTH:
            raise OutputError(str(self.home), (SHARED_HOME if mode & stat.S_ISVTX else OPEN_HOME).format(mode=mode))
        return True

    def _files(self) -> tuple[Path, ...]:
        return tuple(self.home / f"{DB_NAME}{suffix}" for suffix in ("", "-wal", "-shm"))

    def _narrow_modes(self, *, home_too: bool) -> None:
        """The store says who ran what, where and at what cost, and holds the host keys geosched trusts: only
        its owner may read it. A database made before this rule (0644) is narrowed on open, with a note on stderr
        (logging's last-resort handler when the caller set none). The home directory is narrowed only when
        geosched has just made it (`home_too`): an existing one is the user's, and its mode theirs to set."""
        narrowed = []
        dirs = ((self.home, PRIVATE_DIR),) if home_too else ()
        for path, allowed in (*dirs, *((f, PRIVATE_FILE) for f in self._files())):
            try:
                mode = stat.S_IMODE(path.stat().st_mode)
            except FileNotFoundError:
                continue
            if mode & ~allowed:
                path.chmod(mode & allowed)
                narrowed.append(f"{path.name} {mode:o} -> {mode & allowed:o}")
        if narrowed:
            log.warning("note: the store at %s was readable by other users; narrowed %s", self.home,
                        ", ".join(narrowed))

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        with self.transaction():
            current = self.schema_version
            if current > len(MIGRATIONS):
                raise NewerStore(f"{self.path}: schema version {current} is newer than this geosched (it reads "
                                 f"{len(MIGRATIONS)}): a newer geosched wrote it; upgrade geosched, or point "
                                 f"{HOME_ENV} at another store")
            for version in range(current, len(MIGRATIONS)):
                for statement in MIGRATIONS[version].split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version = {version + 1}")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            # SQLite may have rolled back already (on SQLITE_FULL it can): the first error is the one to report.
            with suppress(sqlite3.Error, OutputError):
                self.db.execute("ROLLBACK")
            raise
        try:
            self.db.execute("COMMIT")
        except OutputError:
            with suppress(sqlite3.Error, OutputError):
                self.db.execute("ROLLBACK")
            raise

    # --- fleet ------------------------------------------------------------------------------------

    def save_fleet(self, fleet: Fleet) -> None:
        """Replace the stored fleet with this one, in one transaction."""
        doc = fleet_to_dict(fleet)
        now = time.time()
        with self.transaction() as db:
            db.execute("DELETE FROM nodes")
            db.executemany("INSERT INTO nodes (name, document, updated_at) VALUES (?, ?, ?)",
                           [(n["name"], json.dumps(n, sort_keys=True), now) for n in doc["nodes"]])
            db.execute("DELETE FROM fleet_meta")
            for key in ("regions", "gpu_power"):
                if key in doc:
                    db.execute("INSERT INTO fleet_meta (key, document) VALUES (?, ?)", (key, json.dumps(doc[key])))

    def load_fleet(self) -> Fleet | None:
        """The imported snapshot and the kept inventories' machines, one fleet. An imported node wins over an
        inventory's node of the same name: a snapshot says what the machine is doing (busy GPUs), an inventory
        only declares it."""
        imported = [json.loads(r[0]) for r in self.db.execute("SELECT document FROM nodes ORDER BY rowid")]
        names = {n.get("name") for n in imported}
        declared: list[dict[str, Any]] = []
        regions: list[dict[str, Any]] = []
        for inventory in self.inventories():
            if inventory.fleet is not None:
                doc = fleet_to_dict(inventory.fleet)
                declared += [n for n in doc["nodes"] if n["name"] not in names]
                regions += doc.get("regions", [])
        if not imported and not declared:
            return None
        fleet: dict[str, Any] = {"kind": "Fleet", "nodes": imported + declared}
        for key, value in self.db.execute("SELECT key, document FROM fleet_meta"):
            fleet[key] = json.loads(value)
        have = {_region_key(r) for r in fleet.get("regions", [])}
        extra = list({_region_key(r): r for r in regions if _region_key(r) not in have}.values())
        if extra:
            fleet["regions"] = [*fleet.get("regions", []), *extra]
        return parse_fleet(fleet, f"{self.path} (nodes)")

    def save_inventory(self, inventory: Inventory) -> None:
        """Keep an inventory as its file says now (see the migration), replacing what the same file said before."""
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO inventories (source, document, base, saved_at) VALUES (?, ?, ?, ?)",
                       (inventory.source, json.dumps(inventory.document, sort_keys=True),
                        None if inventory.base is None else str(inventory.base), time.time()))

    def inventories(self) -> list[Inventory]:
        return inventories_in(self.db)

    # --- network ----------------------------------------------------------------------------------

    def add_samples(self, samples: Iterable[Sample]) -> int:
        rows = [(s.scope, *pair_key(s.a, s.b), s.taken_at, s.link.rtt_p50_ms, s.link.rtt_p95_ms, s.link.loss,
                 s.link.throughput_gbps, s.link.samples) for s in samples]
        with self.transaction() as db:
            db.executemany(
                "INSERT INTO network_samples (scope, a, b, taken_at, rtt_p50_ms, rtt_p95_ms, loss, "
                "throughput_gbps, samples) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        return len(rows)

    def network_view(self, now: float | None = None, window_s: float = 24 * 3600.0,
                     stale_after_s: float = 3600.0) -> NetworkView:
        """Aggregate the samples of the last `window_s` seconds: medians of each measure (robust to one bad
        run), loss weighted by packets, age from the newest sample, sample counts summed."""
        now = time.time() if now is None else now
        groups: dict[tuple[str, str, str], list[tuple[float, LinkStats]]] = {}
        query = ("SELECT scope, a, b, taken_at, rtt_p50_ms, rtt_p95_ms, loss, throughput_gbps, samples "
                 "FROM network_samples WHERE taken_at >= ? ORDER BY id")
        for scope, a, b, at, p50, p95, loss, tput, n in self.db.execute(query, (now - window_s,)):
            groups.setdefault((scope, a, b), []).append((at, LinkStats(p50, p95, loss, tput, 0.0, n)))
        views: dict[str, dict[tuple[str, str], LinkStats]] = {"zone": {}, "node": {}}
        for (scope, a, b), items in groups.items():
            links = [link for _, link in items]
            weight = sum(max(x.samples, 1) for x in links)
            views[scope][(a, b)] = LinkStats(
                rtt_p50_ms=statistics.median(x.rtt_p50_ms for x in links),
                rtt_p95_ms=statistics.median(x.rtt_p95_ms for x in links),
                loss=sum(x.loss * max(x.samples, 1) for x in links) / weight,
                throughput_gbps=statistics.median(x.throughput_gbps for x in links),
                age_s=max(0.0, now - max(at for at, _ in items)),
                samples=sum(x.samples for x in links),
            )
        return NetworkView(zone_links=views["zone"], node_links=views["node"], stale_after_s=stale_after_s)

    def import_network(self, view: NetworkView, now: float | None = None) -> int:
        now = time.time() if now is None else now
        samples = [Sample(scope, a, b, now - link.age_s, link)
                   for scope, links in (("zone", view.zone_links), ("node", view.node_links))
                   for (a, b), link in links.items()]
        return self.add_samples(samples)

    # --- placements -------------------------------------------------------------------------------

    def record_placement(self, placement: Placement, start: Mapping[str, Any] | None = None) -> int:
        """`start`: a flexible job's start block (policies/timeshift.py `shift_doc`), kept with the placement so
        the report can say what waiting saved."""
        return self.record_placements([placement], [start])[0]

    def record_placements(self, placements: Sequence[Placement],
                          starts: Sequence[Mapping[str, Any] | None] | None = None) -> list[int]:
        """Several placements in one transaction (one commit for a dispatcher's pass, not one per decision)."""
        ids: list[int] = []
        now = time.time()
        with self.transaction() as db:
            for placement, start in zip(placements, starts or [None] * len(placements), strict=True):
                doc = placement_to_dict(placement)
                if start is not None:
                    doc["start"] = dict(start)
                cur = db.execute(
                    "INSERT INTO placements (job, policy, cluster, created_at, document) VALUES (?, ?, ?, ?, ?)",
                    (placement.job.name, placement.policy, placement.cluster, now, json.dumps(doc, sort_keys=True)))
                ids.append(int(cur.lastrowid or 0))
        return ids

    def placements(self, job: str | None = None) -> list[dict[str, Any]]:
        query = "SELECT id, created_at, document FROM placements"
        args: tuple[Any, ...] = ()
        if job:
            query += " WHERE job = ?"
            args = (job,)
        rows = self.db.execute(query + " ORDER BY id", args).fetchall()
        return [{"id": i, "created_at": at, **json.loads(doc)} for i, at, doc in rows]

    # --- snapshots --------------------------------------------------------------------------------

    def export_snapshot(self, directory: Path, fmt: str = "yaml") -> list[Path]:
        fleet = self.load_fleet()
        if fleet is None:
            raise LookupError(f"{self.path}: the store holds no fleet to export")
        return write_snapshot(directory, fleet, self.network_view(), fmt)

    def import_snapshot(self, directory: Path) -> tuple[int, int]:
        fleet_doc, network_doc = read_snapshot(directory)
        fleet = parse_fleet(fleet_doc.document, str(fleet_doc.path))
        network = parse_network(network_doc.document, str(network_doc.path), fleet)
        self.save_fleet(fleet)
        return len(fleet.nodes), self.import_network(network)


SNAPSHOT_EXTENSIONS = ("yaml", "yml", "json")
# The files a snapshot directory's set consists of (geosched.files.writes: a journal naming anything else is foreign).
SNAPSHOT_LAYOUT = tuple(f"{name}.{ext}" for name in ("fleet", "network") for ext in SNAPSHOT_EXTENSIONS)


def write_snapshot(directory: Path, fleet: Fleet, network: NetworkView, fmt: str = "yaml") -> list[Path]:
    """fleet and network committed as one unit (a crash between them would pair a fleet with another's
    network); the same files in the other formats go in the same unit, so a reader cannot pick an old one."""
    docs = {f"{name}.{fmt}": dump(doc, fmt)
            for name, doc in (("fleet", fleet_to_dict(fleet)), ("network", network_to_dict(network)))}
    stale = [f"{name}.{ext}" for name in ("fleet", "network") for ext in SNAPSHOT_EXTENSIONS
             if ext != fmt and (directory / f"{name}.{ext}").exists()]
    writes.commit(directory, docs, stale, layout=SNAPSHOT_LAYOUT)
    return [directory / name for name in docs]


@dataclass(frozen=True)
class SnapshotDocument:
    path: Path
    """The file it was read from (a staged temp file when an export was killed after its commit point)."""
    document: Any


def read_snapshot(directory: Path) -> tuple[SnapshotDocument, SnapshotDocument]:
    """fleet.{yaml,yml,json} and network.{yaml,yml,json} of a snapshot directory, read as one set: under a
    reader's lock, so no export commits between the two, and as an export a kill interrupted left them
    (geosched.files.writes.reading: the old pair before its commit point, the new one after). Nothing in the
    directory is written, whatever it holds (it may come from a pull request)."""
    texts = []
    with writes.reading(directory, layout=SNAPSHOT_LAYOUT) as view:
        for name, kind in (("fleet", Kind.FLEET), ("network", Kind.NETWORK)):
            found = (view.path(f"{name}.{ext}") for ext in SNAPSHOT_EXTENSIONS)
            path = next((p for p in found if p is not None), directory / f"{name}.{SNAPSHOT_EXTENSIONS[0]}")
            texts.append((path, read_text(path, kind)))
    (fleet_path, fleet_text), (network_path, network_text) = texts
    return (SnapshotDocument(fleet_path, parse_yaml(fleet_text, str(fleet_path))),
            SnapshotDocument(network_path, parse_yaml(network_text, str(network_path))))


def _region_key(doc: dict[str, Any]) -> str:
    return region_key(str(doc.get("provider")), str(doc.get("name")))


def inventories_in(db: sqlite3.Connection) -> list[Inventory]:
    """The kept inventories, read with `db` (a caller's transaction may hold it)."""
    return [parse_inventory(json.loads(doc), source, base=Path(base) if base else None)
            for source, doc, base in db.execute("SELECT source, document, base FROM inventories ORDER BY source")]


def inventory_site(db: sqlite3.Connection, name: str) -> tuple[str, str] | None:
    """(provider, region) a kept inventory declares for machine `name`."""
    for inventory in inventories_in(db):
        target = inventory.by_name().get(name)
        if target is not None:
            return target.provider, target.region
    return None
