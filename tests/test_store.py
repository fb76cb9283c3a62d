"""The store: migrations, WAL, transactions, sample aggregation, placements, snapshots."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from geosched.default_fleet import default_fleet, default_network
from geosched.models import Job, LinkStats, Placement
from geosched.policies import PlacementContext, place
from geosched.store import DB_NAME, HOME_ENV, MIGRATIONS, Sample, Store, default_home, write_snapshot


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
    with pytest.raises(RuntimeError, match="newer than this geosched"):
        Store(tmp_path)


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
    from geosched.store import snapshot_paths
    from geosched.testing import fleet, network, node

    snap = tmp_path / "snap"
    write_snapshot(snap, default_fleet(), default_network())
    small = fleet([node("a-1", "a"), node("b-1", "b")])
    write_snapshot(snap, small, network(small), "json")
    assert sorted(p.name for p in snap.iterdir()) == ["fleet.json", "network.json"]
    assert snapshot_paths(snap) == (snap / "fleet.json", snap / "network.json")


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
    with caplog.at_level("WARNING", logger="geosched.store"), Store(home) as store:
        assert store.load_fleet() is not None
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "readable by other users" in notes[0] and "geosched.db 644 -> 600" in notes[0]
    assert _mode(home) == 0o700 and _mode(home / DB_NAME) == 0o600
    caplog.clear()
    with caplog.at_level("WARNING", logger="geosched.store"), Store(home):
        pass
    assert caplog.records == []
