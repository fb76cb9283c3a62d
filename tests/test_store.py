"""The store: migrations, WAL, transactions, sample aggregation, placements, snapshots."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.errors import OutputError
from geosched.core.models import Job, LinkStats, Placement
from geosched.policies import PlacementContext, place
from geosched.store.db import DB_NAME, HOME_ENV, MIGRATIONS, NewerStore, Sample, Store, default_home, write_snapshot


def test_fresh_store_is_migrated_and_in_wal_mode(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        assert store.schema_version == len(MIGRATIONS)
        assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with Store(tmp_path) as again:  # reopening migrates nothing twice
        assert again.schema_version == len(MIGRATIONS)


def test_store_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / DB_NAME)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    with pytest.raises(NewerStore, match="newer than this geosched"):
        Store(tmp_path)


def test_a_newer_store_is_one_line_exit_1_from_the_cli(tmp_path: Path) -> None:
    """A store a newer geosched wrote (review finding of stop 36: it ended every command in a RuntimeError
    traceback): one line naming the file and what to do, exit 1, no traceback."""
    import subprocess
    import sys

    (tmp_path / "h").mkdir(mode=0o700)
    db = sqlite3.connect(tmp_path / "h" / DB_NAME)
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 3}")
    db.close()
    (tmp_path / "h" / DB_NAME).chmod(0o600)
    env = {**os.environ, HOME_ENV: str(tmp_path / "h")}
    done = subprocess.run([sys.executable, "-m", "geosched", "status"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert f"schema version {len(MIGRATIONS) + 3} is newer than this geosched (it reads {len(MIGRATIONS)})" in line


def test_home_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "h"))
    assert default_home() == tmp_path / "h"


def test_a_failed_transaction_leaves_nothing(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        store.save_fleet(default_fleet())
        with pytest.raises(RuntimeError), store.transaction() as db:
            db.execute("DELETE FROM nodes")
            raise RuntimeError("crash half way")
        fleet = store.load_fleet()
        assert fleet is not None and fleet.nodes == default_fleet().nodes


def test_samples_aggregate_into_a_network_view(tmp_path: Path) -> None:
    now = 1_000_000.0
    samples = [
        Sample("node", "b", "a", now - 100, LinkStats(1.0, 2.0, 0.0, 10.0, samples=10)),
        Sample("node", "a", "b", now - 50, LinkStats(3.0, 4.0, 0.1, 30.0, samples=10)),
        Sample("node", "a", "b", now - 10, LinkStats(2.0, 3.0, 0.0, 20.0, samples=20)),
        Sample("zone", "z1", "z2", now - 7200, LinkStats(9.0, 9.0, 0.0, 1.0)),
        Sample("zone", "z1", "z2", now - 90000, LinkStats(99.0, 99.0, 0.0, 1.0)),
    ]
    with Store(tmp_path) as store:
        store.add_samples(samples)
        view = store.network_view(now=now, window_s=86400)
    link = view.node_link("a", "b")
    assert link is not None
    assert (link.rtt_p50_ms, link.rtt_p95_ms, link.throughput_gbps) == (2.0, 3.0, 20.0)
    assert link.loss == pytest.approx(0.1 * 10 / 40)
    assert (link.age_s, link.samples) == (10.0, 40)
    zone = view.zone_link("z2", "z1")
    assert zone is not None and zone.rtt_p50_ms == 9.0  # the sample outside the window is ignored
    assert view.is_stale(zone)


def test_placements_are_recorded(tmp_path: Path) -> None:
    ctx = PlacementContext(default_fleet(), default_network())
    result = place(Job("rec", 2, 8), ctx)
    assert isinstance(result, Placement)
    with Store(tmp_path) as store:
        store.record_placement(result)
        rows = store.placements("rec")
    assert [r["job"] for r in rows] == ["rec"]
    assert rows[0]["zones"] == list(result.zones)


def test_snapshot_export_import_reproduces_fleet_and_network(tmp_path: Path) -> None:
    written = write_snapshot(tmp_path / "snap", default_fleet(), default_network())
    assert [p.name for p in written] == ["fleet.yaml", "network.yaml"]
    with Store(tmp_path / "s1") as store:
        nodes, _samples = store.import_snapshot(tmp_path / "snap")
        assert nodes == len(default_fleet().nodes)
        store.export_snapshot(tmp_path / "again")
        fleet = store.load_fleet()
        view = store.network_view()
    assert fleet is not None and fleet.nodes == default_fleet().nodes
    assert set(view.zone_links) == set(default_network().zone_links)
    original = default_network().zone_links
    assert all(view.zone_links[k].rtt_p50_ms == v.rtt_p50_ms for k, v in original.items())
    assert (tmp_path / "again" / "fleet.yaml").read_text() == (tmp_path / "snap" / "fleet.yaml").read_text()


def test_a_bad_snapshot_writes_nothing(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    write_snapshot(snap, default_fleet(), default_network())
    (snap / "network.yaml").write_text("zones: [{a: nowhere, b: x, rtt_p50_ms: 1, throughput_gbps: 1}]\n")
    with Store(tmp_path / "s") as store:
        with pytest.raises(Exception, match="unknown zone 'nowhere'"):
            store.import_snapshot(snap)
        assert store.load_fleet() is None


def test_an_export_in_another_format_replaces_the_pair_so_a_reader_cannot_pick_an_old_file(tmp_path: Path) -> None:
    from geosched.store.db import read_snapshot
    from tests.handmade import fleet, network, node

    snap = tmp_path / "snap"
    write_snapshot(snap, default_fleet(), default_network())
    small = fleet([node("a-1", "a"), node("b-1", "b")])
    write_snapshot(snap, small, network(small), "json")
    assert sorted(p.name for p in snap.iterdir()) == ["fleet.json", "network.json"]
    assert [d.path for d in read_snapshot(snap)] == [snap / "fleet.json", snap / "network.json"]


def _mode(path: Path) -> int:
    import stat

    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_store_is_private_down_to_its_wal_and_shm_files(tmp_path: Path) -> None:
    import os

    old = os.umask(0o022)
    try:
        with Store(tmp_path / "home") as store:
            store.save_fleet(default_fleet())
            files = sorted(p.name for p in (tmp_path / "home").iterdir())
            assert {DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"} <= set(files)
            assert {p: _mode(tmp_path / "home" / p) for p in files} == {p: 0o600 for p in files}
    finally:
        os.umask(old)
    assert _mode(tmp_path / "home") == 0o700


def test_an_older_world_readable_store_is_narrowed_on_open_with_one_note(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "home"
    with Store(home) as store:
        store.save_fleet(default_fleet())
    home.chmod(0o755)
    (home / DB_NAME).chmod(0o644)
    with caplog.at_level("WARNING", logger="geosched.store.db"), Store(home) as store:
        assert store.load_fleet() is not None
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "readable by other users" in notes[0] and "geosched.db 644 -> 600" in notes[0]
    # The directory exists already: it is the user's, and keeps its mode (attack report 2026-12-07, finding 5).
    assert _mode(home) == 0o755 and _mode(home / DB_NAME) == 0o600
    caplog.clear()
    with caplog.at_level("WARNING", logger="geosched.store.db"), Store(home):
        pass
    assert caplog.records == []


# --- a linked store (issue 19 item 9) --------------------------------------------------------------

@pytest.mark.parametrize("name", [DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"])
def test_a_store_file_that_is_a_symbolic_link_is_refused_and_its_target_untouched(tmp_path: Path,
                                                                                   name: str) -> None:
    """A link planted where the store lives (a shared or restored home) would have SQLite write through it and
    the mode narrowing chmod its target: another user's file, or one of ours that must stay as it is."""
    home, victim = tmp_path / "home", tmp_path / "victim"
    with Store(home) as store:
        store.save_fleet(default_fleet())
    for suffix in ("-wal", "-shm"):
        (home / f"{DB_NAME}{suffix}").unlink(missing_ok=True)
    victim.write_bytes(b"someone else's file\n")
    victim.chmod(0o644)
    target = home / name
    target.unlink(missing_ok=True)
    target.symlink_to(victim)
    with pytest.raises(OutputError) as caught:
        Store(home)
    assert str(caught.value) == f"{target}: cannot write: a symbolic link (geosched does not follow links in " \
                                "its store; replace it with the file itself, or point GEOSCHED_HOME elsewhere)"
    assert caught.value.exit_code == 1
    assert _mode(victim) == 0o644 and victim.read_bytes() == b"someone else's file\n"


def test_a_linked_store_is_one_line_exit_1_through_the_cli(tmp_path: Path) -> None:
    from tests.inputs.inputs_support import in_process

    home, victim, snap = tmp_path / "home", tmp_path / "victim.db", tmp_path / "snap"
    home.mkdir()
    with Store(tmp_path / "elsewhere"):  # a real SQLite file, which SQLite would happily open through the link
        pass
    (tmp_path / "elsewhere" / DB_NAME).rename(victim)
    victim.chmod(0o644)
    (home / DB_NAME).symlink_to(victim)
    write_snapshot(snap, default_fleet(), default_network())
    run = in_process(["snapshot", "import", snap], home)
    assert run.code == 1 and run.stderr.count("\n") == 1, (run.code, run.stderr)
    assert f"{home / DB_NAME}: cannot write: a symbolic link" in run.stderr
    assert _mode(victim) == 0o644


def test_a_store_file_with_another_hard_link_is_refused_and_the_other_file_untouched(tmp_path: Path) -> None:
    """A hard link is the symbolic link's trap without the link bit: before, `status` wrote geosched's tables into
    the other name's SQLite file and narrowed its mode to 600 (found by an audit, issue 19 item 9)."""
    home, victim = tmp_path / "home", tmp_path / "other.db"
    with Store(tmp_path / "elsewhere"):
        pass
    (tmp_path / "elsewhere" / DB_NAME).rename(victim)
    victim.chmod(0o644)
    before = victim.read_bytes()
    home.mkdir(mode=0o700)
    os.link(victim, home / DB_NAME)
    with pytest.raises(OutputError) as caught:
        Store(home)
    assert "other hard links" in str(caught.value) and caught.value.exit_code == 1
    assert _mode(victim) == 0o644 and victim.read_bytes() == before


def test_a_fifo_where_the_store_should_be_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    os.mkfifo(home / DB_NAME, 0o644)
    with pytest.raises(OutputError) as caught:
        Store(home)
    assert "not a regular file" in str(caught.value) and caught.value.exit_code == 1
    assert _mode(home / DB_NAME) == 0o644


@pytest.mark.parametrize(("make", "cause"), [
    # A home on a removed mount or a deleted folder that the link still names: before, "File exists".
    (lambda home, tmp: home.symlink_to(tmp / "gone"), "a dangling symbolic link (to {tmp}/gone, which does not exist)"),
    (lambda home, tmp: home.write_text("x"), "exists and is not a directory"),
    (lambda home, tmp: [(tmp / "file").write_text("x"), home.symlink_to(tmp / "file")],
     "a symbolic link to {tmp}/file, which is not a directory"),
])
def test_a_home_that_cannot_be_a_directory_is_named_in_one_line_through_the_cli(
        tmp_path: Path, make: object, cause: str) -> None:
    from tests.inputs.inputs_support import in_process

    home = tmp_path / "home"
    make(home, tmp_path)  # type: ignore[operator]
    run = in_process(["status"], home)
    assert run.code == 1 and run.stderr.count("\n") == 1, (run.code, run.stderr)
    assert run.stderr.startswith(f"error: {home}: cannot write: {cause.format(tmp=tmp_path)}"), run.stderr


def test_a_dangling_link_on_the_way_to_the_home_is_the_one_named(tmp_path: Path) -> None:
    (tmp_path / "data").symlink_to(tmp_path / "unmounted")
    with pytest.raises(OutputError) as caught:
        Store(tmp_path / "data" / "geosched")
    assert str(caught.value).startswith(f"{tmp_path / 'data'}: cannot write: a dangling symbolic link")
