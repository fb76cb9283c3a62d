"""geosched.files.writes: no write through a link, temp files never left behind, modes kept, flushed before the
rename, and sets committed whole. Real files, real processes (and strace for the order of system calls)."""

from __future__ import annotations

import fnmatch
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from geosched.core.errors import InputError, OutputError
from geosched.files.writes import IGNORE_PATTERN, JOURNAL, PRIVATE, TMP_PREFIX, commit, pending, recover, write_file

LAYOUT = ("*", "*/*/*")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def temps(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(f"{TMP_PREFIX}*"))


@contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def test_a_new_shared_file_is_0644_less_the_umask_and_a_private_one_0600(tmp_path: Path) -> None:
    with umask(0o022):
        write_file(tmp_path / "report.html", "<html></html>")
        write_file(tmp_path / "store" / "state.json", "{}", mode=PRIVATE)
    with umask(0o077):
        write_file(tmp_path / "strict.html", "x")
    assert mode(tmp_path / "report.html") == 0o644
    assert mode(tmp_path / "store" / "state.json") == 0o600
    assert mode(tmp_path / "strict.html") == 0o600


def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "placements.yaml"
    path.write_text("old")
    path.chmod(0o664)
    write_file(path, "new")
    assert path.read_text() == "new" and mode(path) == 0o664
    path.chmod(0o640)
    write_file(path, "newer", mode=PRIVATE)  # the default applies to new files only
    assert mode(path) == 0o640


def test_a_symlinked_directory_inside_the_tree_is_refused_and_nothing_is_written_outside(tmp_path: Path) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "clusters").mkdir(parents=True)
    outside.mkdir()
    (tree / "clusters" / "prod").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InputError, match="symbolic link"):
        write_file(tree / "clusters" / "prod" / "ml" / "job.yaml", "x", root=tree)
    with pytest.raises(InputError, match="symbolic link"):
        commit(tree, {"clusters/prod/job.yaml": "x", "placements.yaml": "y"}, layout=("*", "clusters/*/*"))
    assert list(outside.iterdir()) == []
    assert temps(tree) == [] and not pending(tree)


def test_a_link_at_the_file_name_is_replaced_not_written_through(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    link = tmp_path / "out" / "report.html"
    link.parent.mkdir()
    link.symlink_to(target)
    write_file(link, "report")
    assert target.read_text() == "keep me"
    assert not link.is_symlink() and link.read_text() == "report"


def test_the_temp_file_is_removed_when_the_rename_fails(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "inside").write_text("a non-empty directory cannot be replaced by a file")
    with pytest.raises(OutputError, match="busy: cannot write: Is a directory"):
        write_file(tmp_path / "busy", "x")
    assert temps(tmp_path) == []


def test_temp_files_of_a_killed_writer_are_removed_by_the_next_write_but_a_live_ones_are_not(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    stale = tmp_path / f"{TMP_PREFIX}fleet.yaml.{dead.stdout.strip()}.0a1b2c3d"
    live = tmp_path / f"{TMP_PREFIX}fleet.yaml.{os.getppid()}.0a1b2c3d"
    other = tmp_path / f"{TMP_PREFIX}fleet.yaml.{dead.stdout.strip()}.{os.getpid()}.0a1b2c3d"  # fleet.yaml.<pid>'s
    for p in (stale, live, other):
        p.write_text("")
    write_file(tmp_path / "fleet.yaml", "nodes: []\n")
    assert not stale.exists() and live.exists() and other.exists()


def test_the_file_is_flushed_before_the_rename_and_the_directory_after(tmp_path: Path) -> None:
    """The order of system calls, seen by strace in a real process: fsync(temp) < rename < fsync(dir)."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    script = "from pathlib import Path; from geosched.files.writes import write_file; " \
             f"write_file(Path({str(tmp_path / 'out.yaml')!r}), 'a: 1')"
    log = tmp_path / "trace"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,fsync,rename,renameat,renameat2", "-o", str(log),
                    sys.executable, "-c", script], check=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    lines = [line for line in log.read_text().splitlines() if TMP_PREFIX in line or "fsync(" in line
             or "rename" in line]
    opened = next(i for i, line in enumerate(lines) if "openat" in line and "O_CREAT" in line)
    fd = lines[opened].rsplit("=", 1)[1].strip()
    renamed = next(i for i, line in enumerate(lines) if "rename" in line and "out.yaml" in line)
    synced = [i for i, line in enumerate(lines) if f"fsync({fd})" in line]
    assert synced and opened < synced[0] < renamed, "\n".join(lines)
    assert any("fsync(" in line for line in lines[renamed + 1:]), "the directory is not flushed after the rename"


def test_a_set_is_written_whole_and_old_files_in_it_removed(tmp_path: Path) -> None:
    (tmp_path / "fleet.json").write_text("old")
    commit(tmp_path, {"fleet.yaml": "f", "network.yaml": "n", "deep/a/b.yaml": "b"}, ["fleet.json"], layout=LAYOUT)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == \
        ["deep/a/b.yaml", "fleet.yaml", "network.yaml"]
    assert not pending(tmp_path) and not recover(tmp_path, layout=LAYOUT)


KILLED_COMMIT = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from geosched.files import writes
    stop_at = sys.argv[2]
    real = os.replace
    def replace(src, dst, **kw):
        # Die at a chosen point of the commit, as a SIGKILL would: no cleanup, no finally.
        if stop_at == "staged" and str(dst) == writes.JOURNAL and "commit" in open(
                os.path.join(sys.argv[1], str(src))).read():
            os.kill(os.getpid(), 9)
        real(src, dst, **kw)
        if stop_at == "half" and str(dst) == "fleet.yaml":
            os.kill(os.getpid(), 9)
    os.replace = replace
    writes.commit(Path(sys.argv[1]), {"fleet.yaml": "new fleet", "network.yaml": "new network"}, layout=["*"])
""")


@pytest.mark.parametrize(("stop_at", "after"), [("staged", "old"), ("half", "new")])
def test_a_set_killed_before_its_commit_point_stays_old_and_after_it_is_finished(tmp_path: Path, stop_at: str,
                                                                                   after: str) -> None:
    (tmp_path / "fleet.yaml").write_text("old fleet")
    (tmp_path / "network.yaml").write_text("old network")
    run = subprocess.run([sys.executable, "-c", KILLED_COMMIT, str(tmp_path), stop_at],
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert run.returncode == -signal.SIGKILL
    assert pending(tmp_path)
    assert recover(tmp_path, layout=LAYOUT)
    assert (tmp_path / "fleet.yaml").read_text() == f"{after} fleet"
    assert (tmp_path / "network.yaml").read_text() == f"{after} network"
    assert temps(tmp_path) == []


def test_the_ignore_pattern_covers_temp_files_and_the_journal() -> None:
    assert fnmatch.fnmatch(JOURNAL, IGNORE_PATTERN)
    assert fnmatch.fnmatch(f"{TMP_PREFIX}job.yaml.123.0a1b2c3d", IGNORE_PATTERN)


def test_a_plot_replaces_a_link_at_its_path_instead_of_writing_through_it(tmp_path: Path) -> None:
    from geosched.plots.write import heatmap_plot
    from tests.handmade import fleet, network, node

    target = tmp_path / "precious.png"
    target.write_bytes(b"not yours")
    link = tmp_path / "heatmap.png"
    link.symlink_to(target)
    f = fleet([node("a-1", "a"), node("b-1", "b")])
    heatmap_plot(link, network(f), f.nodes, "zone")
    assert target.read_bytes() == b"not yours"
    assert not link.is_symlink() and link.read_bytes().startswith(b"\x89PNG")
    assert temps(tmp_path) == []


def test_state_kept_beside_the_store_is_private(tmp_path: Path) -> None:
    import asyncssh

    from geosched.files.inventory import SshTarget
    from geosched.probes.hostkeys import HostKeys
    from geosched.probes.service import next_run

    with umask(0o022):
        keys = HostKeys(tmp_path / "home" / "known_hosts")
        keys.pin(SshTarget(name="n1", address="192.0.2.1", zone="z", region="r"),
                 asyncssh.generate_private_key("ssh-ed25519").convert_to_public())
        next_run(tmp_path / "home")
    assert {p.name: mode(p) for p in (tmp_path / "home").iterdir() if not p.name.endswith(".lock")} == \
        {"known_hosts": 0o600, "probes-state.json": 0o600}


def test_a_journal_whose_directory_became_a_link_is_dropped_without_writing_through_it(tmp_path: Path) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "clusters").mkdir(parents=True)
    outside.mkdir()
    (outside / "job.yaml").write_text("not geosched's")
    (tree / "clusters" / "east").symlink_to(outside, target_is_directory=True)
    (tree / JOURNAL).write_text('{"state": "commit", "write": [["clusters/east/new.yaml", '
                                '".geosched-tmp.new.yaml.1.0a1b2c3d"]], "remove": ["clusters/east/job.yaml"]}')
    assert recover(tree, layout=("clusters/*/*",))
    assert not pending(tree) and sorted(p.name for p in outside.iterdir()) == ["job.yaml"]
