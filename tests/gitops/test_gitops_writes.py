"""How `geosched gitops render` writes, against a real git repository with the command as a real process: never
through a link out of the tree, modes kept, and a render killed in the middle leaves nothing `git add -A`
would commit, is reported by `check` and is finished by the next render."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from gitops_support import AT, ROOT, git, gitops, init_repo, tree_args, write_snapshot_files

from geosched.files.writes import TMP_PREFIX

pytestmark = pytest.mark.integration


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    init_repo(path)
    old = os.umask(0o022)
    try:
        run = gitops("render", *tree_args(path), "--at", AT)
    finally:
        os.umask(old)
    assert run.returncode == 0, run.stderr
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "render")
    return path


def test_a_cluster_directory_linked_out_of_the_tree_is_refused_and_nothing_is_written_there(tmp_path: Path) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    init_repo(repo)
    outside.mkdir()
    (repo / "clusters").mkdir()
    (repo / "clusters" / "east-a").symlink_to(outside, target_is_directory=True)
    run = gitops("render", *tree_args(repo), "--at", AT)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "symbolic link" in run.stderr and str(repo / "clusters" / "east-a") in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert list(outside.iterdir()) == []
    assert list(repo.rglob(f"{TMP_PREFIX}*")) == []


def test_new_files_are_0644_and_a_changed_file_keeps_its_mode(repo: Path) -> None:
    assert stat.S_IMODE((repo / "clusters" / "west" / "default" / "beta.yaml").stat().st_mode) == 0o644
    (repo / "placements.yaml").chmod(0o664)
    write_snapshot_files(repo / "snapshot", slow_zone="r1-a")  # alpha moves: the index changes
    run = gitops("render", *tree_args(repo), "--at", AT)
    assert run.returncode == 0 and "wrote   placements.yaml" in run.stdout, run.stderr
    assert stat.S_IMODE((repo / "placements.yaml").stat().st_mode) == 0o664


KILL_AT_FIRST_RENAME = textwrap.dedent("""
    import os, signal, sys
    def hook(event, args):
        # SIGKILL as the first staged file is renamed into place: the tree is half new, half old.
        if event == "os.rename" and str(args[1]).endswith(".yaml") and "journal" not in str(args[0]):
            os.kill(os.getpid(), signal.SIGKILL)
    sys.addaudithook(hook)
    from geosched.gitops.cli import main
    sys.argv = ["geosched gitops", *sys.argv[1:]]
    main()
""")


def test_a_killed_render_leaves_nothing_to_commit_is_reported_by_check_and_finished_by_the_next(repo: Path) -> None:
    write_snapshot_files(repo / "snapshot", slow_zone="r1-a")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "r1-a is slow")
    killed = subprocess.run([sys.executable, "-c", KILL_AT_FIRST_RENAME, "render", *tree_args(repo), "--at", AT],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert list(repo.rglob(f"{TMP_PREFIX}*")), "the kill left no temp file: it came too late to test anything"
    git(repo, "add", "-A")
    staged = git(repo, "diff", "--cached", "--name-only").split()
    assert not [p for p in staged if TMP_PREFIX in p], staged
    check = gitops("check", *tree_args(repo))
    assert check.returncode == 1 and "a render was interrupted" in check.stdout, check.stdout
    again = gitops("render", *tree_args(repo), "--at", AT)
    assert again.returncode == 0, again.stderr
    assert list(repo.rglob(f"{TMP_PREFIX}*")) == []
    assert gitops("check", *tree_args(repo)).returncode == 0


def test_the_tree_ships_a_gitignore_for_temp_files_unless_the_repository_has_its_own(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init_repo(repo)
    run = gitops("render", *tree_args(repo), "--at", AT)
    assert run.returncode == 0, run.stderr
    assert f"{TMP_PREFIX}*" in (repo / ".gitignore").read_text().splitlines()
    own = "# the repository's own\n*.swp\n.geosched-tmp.*\n"
    (repo / ".gitignore").write_text(own)
    again = gitops("render", *tree_args(repo), "--at", AT)
    assert again.returncode == 0 and "0 written, 0 removed" in again.stdout, again.stdout + again.stderr
    assert (repo / ".gitignore").read_text() == own
    assert gitops("check", *tree_args(repo)).returncode == 0
