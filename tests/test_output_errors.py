"""When the file system says no (read-only, full, permission denied, a directory where a file goes, a file where
a directory goes, a name too long, the SQLite store on a full disk): one line naming the path and the cause,
exit 1, and what was there before is whole: no half-written set, no journal or temp file left behind, and the
next run works once the cause is gone (issue 19, item 6). Real file systems (tests/fs_support.py), the command
as users run it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from geosched.core.default_fleet import default_fleet, default_network
from geosched.files.fields import parse_time
from geosched.files.writes import JOURNAL, TMP_PREFIX
from geosched.gitops import render_tree
from geosched.store.db import Store, write_snapshot
from tests.fs_support import geosched_argv, listing, needs_mount, on_tmpfs, run
from tests.gitops.gitops_support import AT, tree_args, write_inputs, write_snapshot_files

pytestmark = pytest.mark.integration


def temps(listed: dict[str, str]) -> list[str]:
    return [p for p in listed if os.path.basename(p).startswith(TMP_PREFIX)]


@pytest.fixture
def rendered(tmp_path: Path) -> Path:
    """Inputs and a tree rendered from them (tmp_path/repo, the tree at tmp_path/repo/out); then the inputs
    change (r1-a is slow: alpha moves), so the next render writes and removes files."""
    repo = tmp_path / "repo"
    write_inputs(repo)
    render_tree(repo / "jobs", repo / "snapshot", repo / "clusters.yaml", repo / "out", at=parse_time(AT, "at", ""))
    write_snapshot_files(repo / "snapshot", slow_zone="r1-a")
    return repo


def imported(home: Path, snapshot: Path) -> Path:
    """A store in `home` holding `snapshot`."""
    with Store(home) as store:
        store.import_snapshot(snapshot)
    return home


def render_argv(repo: Path, out: Path) -> list[str]:
    return geosched_argv("gitops", "render", *tree_args(repo, out), "--at", AT)


def assert_failed_cleanly(outcome: object, path: Path | str, cause: str) -> None:
    code, stderr = outcome.code, outcome.stderr  # type: ignore[attr-defined]
    assert code == 1 and outcome.one_line, (code, stderr)  # type: ignore[attr-defined]
    assert str(path) in stderr and cause in stderr, stderr


@needs_mount
@pytest.mark.parametrize("how", ["read-only", "full"])
def test_a_render_into_a_read_only_or_full_file_system_changes_nothing(rendered: Path, tmp_path: Path,
                                                                        how: str) -> None:
    """Before: a traceback (OSError: [Errno 30] Read-only file system / [Errno 28] No space left on device)."""
    mount = tmp_path / "mnt"
    outcome = on_tmpfs(mount, rendered / "out", render_argv(rendered, mount), tmp_path / "home",
                       read_only=how == "read-only", full=how == "full", after=[render_argv(rendered, mount)])
    cause = "Read-only file system" if how == "read-only" else "No space left on device"
    assert_failed_cleanly(outcome, mount, cause)
    assert outcome.after == [0], "the next render, with room again, did not work"


@needs_mount
def test_a_render_that_fails_on_a_full_disk_leaves_the_old_tree_whole(rendered: Path, tmp_path: Path) -> None:
    """The listing right after the failure (the driver's `after` runs later): the old tree, byte for byte."""
    mount = tmp_path / "mnt"
    before = listing(rendered / "out")
    outcome = on_tmpfs(mount, rendered / "out", render_argv(rendered, mount), tmp_path / "home", full=True)
    assert_failed_cleanly(outcome, mount, "No space left on device")
    assert outcome.listing == before and not temps(outcome.listing)


@needs_mount
def test_a_first_render_on_a_16_kib_tmpfs_leaves_the_directory_empty(rendered: Path, tmp_path: Path) -> None:
    """Four pages: the journal and the first README fit, a later file does not. Before: exit 1 and the tree's
    directories (clusters/east-a/ml, clusters/east-b, ...) left behind without a file in them."""
    mount, empty = tmp_path / "mnt", tmp_path / "empty"
    empty.mkdir()
    outcome = on_tmpfs(mount, empty, render_argv(rendered, mount), tmp_path / "home", size=16 << 10)
    assert_failed_cleanly(outcome, mount, "No space left on device")
    assert "README.md" in outcome.stderr or ".yaml" in outcome.stderr, "did not fail half way: " + outcome.stderr
    assert outcome.listing == {}


@needs_mount
@pytest.mark.parametrize("pages", [1, 2, 3])
def test_an_update_that_runs_out_of_room_half_way_leaves_the_old_tree_byte_for_byte(rendered: Path, tmp_path: Path,
                                                                                    pages: int) -> None:
    """The update moves alpha to east-b (--rebalance: a new directory, a new file, a removal, a new index). With
    room for the journal and one or two of those pages, it fails while staging or at the commit point itself
    (the committed journal is the last page asked for). Before: at the commit point, the staged temp files and
    the journal left in the tree; the new directory clusters/east-b/ml left at every size."""
    mount = tmp_path / "mnt"
    before = listing(rendered / "out")
    argv = [*render_argv(rendered, mount), "--rebalance"]
    outcome = on_tmpfs(mount, rendered / "out", argv, tmp_path / "home", room=pages * 4096)
    assert_failed_cleanly(outcome, mount, "No space left on device")
    assert outcome.listing == before  # taken right after the failure


def test_a_render_cut_by_the_file_size_limit_half_way_leaves_the_old_tree(rendered: Path, tmp_path: Path) -> None:
    """RLIMIT_FSIZE lets the journal through and stops a manifest (EFBIG) after others are staged: the set is
    undone before its commit point. Before: a traceback, and the journal and temp files left behind."""
    out = rendered / "out"
    before = listing(out)
    outcome = run(render_argv(rendered, out), tmp_path / "home", file_size=1500)
    assert_failed_cleanly(outcome, out, "File too large")
    assert listing(out) == before and not temps(listing(out))
    assert run(render_argv(rendered, out), tmp_path / "home").code == 0


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_a_render_without_permission_is_one_line(rendered: Path, tmp_path: Path) -> None:
    """Root without CAP_DAC_OVERRIDE, so a 0555 directory binds it as it binds any user. Before: a traceback."""
    out = rendered / "out"
    before = listing(out)
    dirs = [out, *(p for p in out.rglob("*") if p.is_dir())]
    for d in dirs:
        d.chmod(0o555)
    try:
        outcome = run(render_argv(rendered, out), tmp_path / "home", without_dac_override=True)
    finally:
        for d in dirs:
            d.chmod(0o755)
    assert_failed_cleanly(outcome, out, "Permission denied")
    assert listing(out) == before


def test_an_export_into_a_regular_file_is_one_line(rendered: Path, tmp_path: Path) -> None:
    """Before: a traceback (FileExistsError)."""
    home = imported(tmp_path / "home", rendered / "snapshot")
    target = tmp_path / "not-a-directory"
    target.write_text("keep me\n")
    outcome = run(geosched_argv("snapshot", "export", target), home)
    assert_failed_cleanly(outcome, target, "not a directory")
    assert target.read_text() == "keep me\n"
    outcome = run(render_argv(rendered, target), home)
    assert_failed_cleanly(outcome, target, "not a directory")


def test_an_export_over_a_directory_named_fleet_yaml_leaves_nothing_and_blocks_nothing(rendered: Path,
                                                                                      tmp_path: Path) -> None:
    """Before: a traceback, the journal (state commit) and network.yaml's temp file left behind, and every later
    export failing on that journal even once the directory was gone."""
    home = imported(tmp_path / "home", rendered / "snapshot")
    snap = tmp_path / "snap"
    (snap / "fleet.yaml").mkdir(parents=True)
    (snap / "fleet.yaml" / "notes.txt").write_text("a directory of someone's\n")
    for _ in range(2):  # the same answer the second time: nothing was left to trip on
        outcome = run(geosched_argv("snapshot", "export", snap), home)
        assert_failed_cleanly(outcome, snap / "fleet.yaml", "is a directory")
        assert sorted(listing(snap)) == ["fleet.yaml", "fleet.yaml/notes.txt"]
    shutil.rmtree(snap / "fleet.yaml")
    assert run(geosched_argv("snapshot", "export", snap), home).code == 0
    assert sorted(listing(snap)) == ["fleet.yaml", "network.yaml"]


@needs_mount
def test_a_single_file_that_does_not_fit_leaves_no_directory_it_made(tmp_path: Path) -> None:
    """`--out` into directories that do not exist yet (as `up --out clusters/x/ml/job.yaml` into a GitOps
    repository), on a full disk: the file does not fit. Before: exit 1, and new/deeper/ left behind, empty."""
    mount, empty = tmp_path / "mnt", tmp_path / "empty"
    empty.mkdir()
    out = mount / "new" / "deeper" / "report.json"
    outcome = on_tmpfs(mount, empty, geosched_argv("report", "cost", "-o", "json", "--out", out), tmp_path / "home",
                       full=True)
    assert_failed_cleanly(outcome, out, "No space left on device")
    assert outcome.listing == {}


def test_report_out_a_directory_is_one_line(tmp_path: Path) -> None:
    """Before: a traceback (IsADirectoryError from the rename)."""
    (tmp_path / "report").mkdir()
    outcome = run(geosched_argv("report", "cost", "-o", "json", "--out", tmp_path / "report"), tmp_path / "home")
    assert_failed_cleanly(outcome, tmp_path / "report", "Is a directory")
    assert list((tmp_path / "report").iterdir()) == []


def test_a_cluster_name_of_256_characters_is_one_line(rendered: Path, tmp_path: Path) -> None:
    """A name no file system takes as a directory (NAME_MAX is 255). Before: a traceback (File name too long)."""
    name = "c" * 256
    clusters = rendered / "clusters.yaml"
    clusters.write_text(clusters.read_text().replace("  west:", f"  {name}:").replace("clusters: [west]",
                                                                                      f"clusters: [{name}]"))
    (rendered / "jobs" / "beta.yaml").write_text((rendered / "jobs" / "beta.yaml").read_text().replace(
        "clusters: [west]", f"clusters: [{name}]"))
    out = tmp_path / "fresh"
    outcome = run(render_argv(rendered, out), tmp_path / "home")
    assert_failed_cleanly(outcome, out / "clusters" / name, "File name too long")
    assert not temps(listing(out)) and not (out / JOURNAL).exists()


@needs_mount
def test_the_store_on_a_full_disk_is_one_line_and_keeps_what_it_held(rendered: Path, tmp_path: Path) -> None:
    """SQLite answers SQLITE_FULL; the transaction rolls back. Before: a traceback (sqlite3.OperationalError:
    database or disk is full)."""
    seed = imported(tmp_path / "seed", rendered / "snapshot")  # the lab: 12 nodes
    big = tmp_path / "big"
    write_snapshot(big, default_fleet(), default_network())
    mount, exported = tmp_path / "mnt", tmp_path / "exported"
    outcome = on_tmpfs(mount, seed, geosched_argv("snapshot", "import", big), mount, full=True,
                       after=[geosched_argv("snapshot", "export", exported)])
    # SQLITE_FULL ("database or disk is full") or, when the WAL append is what fails, SQLITE_IOERR.
    assert_failed_cleanly(outcome, mount / "geosched.db", "")
    assert "full" in outcome.stderr or "disk I/O error" in outcome.stderr, outcome.stderr
    assert outcome.after == [0]
    assert (exported / "fleet.yaml").read_text().count("name: a") >= 4  # still the lab's nodes a0..a3
    assert "east-a" in (exported / "fleet.yaml").read_text()
