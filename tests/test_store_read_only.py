"""A store the user cannot write (its home on a read-only mount, as a backup or a shared volume is mounted, or its
database file made read-only): the commands that only read it (`status`, `report`, `down` of a gang it does not
know) work from it; a command that writes still says, in one line, that it cannot write (exit 1). Real file
systems (tests/fs_support.py: a tmpfs remounted read-only in a private mount namespace), the command as users
run it (`python -m geosched`)."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from pathlib import Path

import pytest

from geosched.core.default_fleet import default_fleet, default_network
from geosched.providers import journal
from geosched.store.db import DB_NAME, Store, write_snapshot
from tests.fs_support import geosched_argv, listing, needs_mount, on_tmpfs, run
from tests.report.report_support import T0, H, price, used

pytestmark = pytest.mark.integration
WINDOW = ("--since", "2024-01-01", "--until", "2024-01-03")


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    """A store with one gang (`g1`, launched by nothing yet) and 4 h of one 8-GPU node priced at $32/h."""
    home = tmp_path / "seed"
    with Store(home) as store:
        journal.create_gang(store, "g1", journal.owner(store), None)
        price(store, "aws", "p4d.24xlarge", "us-east-1", "use1-az1", 32.0, T0 - 24 * H)
        used(store, "a1", T0, T0 + 4 * H, job="alpha", cluster="eks-a")
    assert sorted(p.name for p in home.iterdir()) == [DB_NAME]  # closed cleanly: no -wal, no -shm
    return home


def reads(outcome_stdout: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(outcome_stdout)))


@needs_mount
@pytest.mark.parametrize(("args", "check"), [
    (("status", "-o", "json"), lambda out: [g["gang"] for g in json.loads(out)["items"]] == ["g1"]),
    (("status", "g1", "-o", "json"), lambda out: json.loads(out)["gang"] == "g1"),
    (("status",), lambda out: "g1" in out and "owner id of this store: o" in out),
    (("report", "cost", "--by", "job", *WINDOW, "-o", "csv"),
     lambda out: [(r["job"], r["cost_usd"]) for r in reads(out)] == [("alpha", "128.0")]),
])
def test_a_reader_works_on_a_read_only_mount_and_leaves_it_as_it_was(seed: Path, tmp_path: Path, args: tuple[str, ...],
                                                                     check: object) -> None:
    mount = tmp_path / "mnt"
    outcome = on_tmpfs(mount, seed, geosched_argv(*args), mount, read_only=True)
    assert outcome.code == 0, outcome.stderr
    assert callable(check) and check(outcome.stdout), outcome.stdout
    assert outcome.listing == listing(seed)


@needs_mount
def test_down_of_an_unknown_gang_is_the_users_mistake_not_the_disks(seed: Path, tmp_path: Path) -> None:
    mount = tmp_path / "mnt"
    outcome = on_tmpfs(mount, seed, geosched_argv("down", "nope", "-y"), mount, read_only=True)
    assert (outcome.code, outcome.stderr) == (2, f"error: GANG: no gang 'nope' in {mount / DB_NAME}\n")
    assert outcome.listing == listing(seed)


@needs_mount
def test_a_writer_on_a_read_only_mount_says_it_cannot_write(seed: Path, tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot"
    write_snapshot(snapshot, default_fleet(), default_network())
    mount = tmp_path / "mnt"
    outcome = on_tmpfs(mount, seed, geosched_argv("snapshot", "import", snapshot), mount, read_only=True)
    assert (outcome.code, outcome.stderr) == (1, f"error: {mount / DB_NAME}: cannot write: Read-only file system\n")
    assert outcome.listing == listing(seed)


def test_a_read_only_database_file_is_read_and_a_write_to_it_is_one_line(seed: Path) -> None:
    """The file's mode says read-only (its home stays writable, so SQLite makes its -shm there). As root, the
    command runs without CAP_DAC_OVERRIDE, so the mode binds as it does for everyone else."""
    (seed / DB_NAME).chmod(stat.S_IRUSR)
    as_user = {"without_dac_override": os.geteuid() == 0}
    status = run(geosched_argv("status", "-o", "json"), seed, **as_user)
    assert status.code == 0, status.stderr
    assert [g["gang"] for g in json.loads(status.stdout)["items"]] == ["g1"]
    report = run(geosched_argv("report", "cost", "--by", "job", *WINDOW, "-o", "csv"), seed, **as_user)
    assert [(r["job"], r["cost_usd"]) for r in reads(report.stdout)] == [("alpha", "128.0")], report.stderr
    snapshot = seed.parent / "snapshot"
    write_snapshot(snapshot, default_fleet(), default_network())
    written = run(geosched_argv("snapshot", "import", snapshot), seed, **as_user)
    assert (written.code, written.stderr) == (1, f"error: {seed / DB_NAME}: cannot write: Permission denied\n")


@needs_mount
def test_an_older_store_on_a_read_only_mount_says_it_needs_a_write_to_update(seed: Path, tmp_path: Path) -> None:
    with Store(seed) as store:
        current = store.schema_version
        store.db.execute(f"PRAGMA user_version = {current - 1}")
    mount = tmp_path / "mnt"
    outcome = on_tmpfs(mount, seed, geosched_argv("status", "-o", "json"), mount, read_only=True)
    assert (outcome.code, outcome.stderr) == (1, f"error: {mount / DB_NAME}: cannot write: Read-only file system (and "
                                                 f"the store is at schema version {current - 1}, this geosched reads "
                                                 f"{current}: bringing it up to date takes a write)\n")
