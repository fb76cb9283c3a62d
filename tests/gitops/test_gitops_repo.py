"""`geosched gitops` against a real git repository: render, commit, re-render, a slow zone, a deleted job,
`check`'s exit codes, and determinism across processes. The command runs as a real process throughout."""

from __future__ import annotations

import filecmp
import shutil
from pathlib import Path

import pytest
import yaml
from gitops_support import AT, git, gitops, init_repo, tree_args, write_snapshot_files

MOVED_FROM = "clusters/east-a/ml/alpha.yaml"
MOVED_TO = "clusters/east-b/ml/alpha.yaml"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with job specs, snapshot and cluster config committed, then the rendered tree committed."""
    path = tmp_path / "repo"
    init_repo(path)
    run = gitops("render", *tree_args(path), "--at", AT)
    assert run.returncode == 0, run.stderr
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "render")
    return path


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def test_the_first_render_writes_one_file_per_placed_job_and_reports_the_rest(repo: Path) -> None:
    files = git(repo, "ls-files", "clusters", "placements.yaml").split()
    assert sorted(files) == ["clusters/east-a/README.md", MOVED_FROM, "clusters/east-b/README.md",
                             "clusters/west/README.md", "clusters/west/default/beta.yaml",
                             "clusters/west/research/gamma.yaml", "placements.yaml"]
    index = yaml.safe_load((repo / "placements.yaml").read_text())
    assert set(index["placed"]) == {"ml/alpha", "beta", "research/gamma"}
    assert index["placed"]["ml/alpha"]["zones"] == ["r1-a"]
    assert list(index["unplaced"]) == ["huge"]
    assert any("holds 4 of 40 workers" in r for r in index["unplaced"]["huge"]["reasons"])
    manifests = list(yaml.safe_load_all((repo / MOVED_FROM).read_text()))
    job = manifests[-1]
    assert job["kind"] == "Job" and job["metadata"]["namespace"] == "ml"
    assert job["metadata"]["annotations"]["geosched.io/placed-at"] == AT
    assert job["metadata"]["annotations"]["geosched.io/zones"] == "r1-a"


def test_rendering_again_changes_nothing_not_even_mtimes(repo: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in (repo / "clusters").rglob("*") if p.is_file()}
    before[repo / "placements.yaml"] = (repo / "placements.yaml").stat().st_mtime_ns
    # Another --at too: a decision that did not change keeps the time it was first rendered at.
    for at in (AT, "2026-01-01T00:00:00+02:00"):
        run = gitops("render", *tree_args(repo), "--at", at)
        assert run.returncode == 0, run.stderr
        assert "0 written, 0 removed" in run.stdout
        assert git(repo, "status", "--porcelain") == ""
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_a_slow_zone_moves_only_the_job_placed_there_and_check_says_why(repo: Path) -> None:
    old_index = yaml.safe_load((repo / "placements.yaml").read_text())
    write_snapshot_files(repo / "snapshot", slow_zone="r1-a")
    git(repo, "commit", "-q", "-am", "r1-a is slow now")

    # alpha still fits where it is: without --rebalance it stays (only its scores are re-rendered in place).
    stay = gitops("check", *tree_args(repo))
    assert stay.returncode == 1, stay.stderr
    assert "ml/alpha: re-rendered in place on east-a [r1-a]: total 1.09697 -> 2.685317" in stay.stdout
    assert "moved" not in stay.stdout
    check = gitops("check", *tree_args(repo), "--rebalance")
    assert check.returncode == 1, check.stderr
    out = check.stdout
    assert "inputs changed: network snapshot" in out
    assert "ml/alpha: moved east-a [r1-a] -> east-b [r1-b]" in out
    assert "why: rebalanced, total 2.685 -> 1.103 (-59%; the minimum gain is 10%)" in out
    # The old zone scored again on the new snapshot: its network term and worst RTT went up.
    assert "east-a [r1-a] before -> now: total 1.09697 -> 2.685317, network 1.0 -> 2.588347" in out
    assert "worst_rtt_ms 0.2 -> 3.0" in out
    assert f"--- a/{MOVED_FROM}\n+++ /dev/null" in out
    assert f"--- /dev/null\n+++ b/{MOVED_TO}" in out
    assert "beta" not in out.split("why:")[1].split("---")[0]

    run = gitops("render", *tree_args(repo), "--at", "2025-03-02T08:00:00Z", "--rebalance")
    assert run.returncode == 0, run.stderr
    git(repo, "add", "-A")
    stat = git(repo, "diff", "--cached", "--no-renames", "--name-status")
    assert sorted(stat.splitlines()) == sorted([f"D\t{MOVED_FROM}", f"A\t{MOVED_TO}", "M\tplacements.yaml"])
    new_index = yaml.safe_load((repo / "placements.yaml").read_text())
    assert {k for k in old_index["inputs"] if old_index["inputs"][k] != new_index["inputs"][k]} == {"network"}
    assert {k for k in new_index["placed"] if old_index["placed"][k] != new_index["placed"][k]} == {"ml/alpha"}
    assert new_index["placed"]["ml/alpha"]["placed_at"] == "2025-03-02T08:00:00Z"
    assert gitops("check", *tree_args(repo)).returncode == 0
    assert gitops("check", *tree_args(repo), "--rebalance").returncode == 0


def test_check_exits_1_on_a_stale_tree_0_after_render_2_on_bad_input(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init_repo(repo)
    stale = gitops("check", *tree_args(repo))
    assert stale.returncode == 1
    assert stale.stdout.startswith("the tree is stale")
    assert "ml/alpha: new, placed on east-a [r1-a]" in stale.stdout
    assert gitops("render", *tree_args(repo)).returncode == 0
    fresh = gitops("check", *tree_args(repo))
    assert (fresh.returncode, fresh.stdout) == (0, "the tree is up to date\n")

    (repo / "clusters.yaml").write_text("clusters:\n  west: {backend: kueue}\n")
    bad = gitops("check", *tree_args(repo))
    assert bad.returncode == 2
    assert bad.stderr.strip().endswith("clusters.west.queue: required for backend kueue (the LocalQueue the job is "
                                       "submitted to)")
    assert gitops("render", *tree_args(repo), "--at", "yesterday").returncode == 2


def test_a_deleted_job_loses_its_manifest(repo: Path) -> None:
    git(repo, "rm", "-q", "jobs/beta.yaml")
    git(repo, "commit", "-q", "-m", "beta is done")
    check = gitops("check", *tree_args(repo))
    assert check.returncode == 1
    assert "beta: removed from the job specs; its manifest clusters/west/default/beta.yaml goes" in check.stdout
    # gamma, placed after beta in the same zone, keeps its nodes rather than taking the ones beta left.
    assert "gamma" not in check.stdout
    assert gitops("render", *tree_args(repo)).returncode == 0
    git(repo, "add", "-A")
    stat = git(repo, "diff", "--cached", "--no-renames", "--name-status")
    assert sorted(stat.splitlines()) == ["D\tclusters/west/default/beta.yaml", "M\tplacements.yaml"]
    # The namespace directory went with its last file; the cluster's own directory stays.
    assert not (repo / "clusters/west/default").exists()
    assert (repo / "clusters/west/research/gamma.yaml").is_file()


def test_two_processes_render_byte_identical_trees(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    init_repo(first)
    shutil.copytree(first, second)  # the same inputs at another path: no path may leak into the tree
    for repo in (first, second):
        run = gitops("render", *tree_args(repo, repo / "out"), "--at", AT)
        assert run.returncode == 0, run.stderr
    one, two = tree_bytes(first / "out"), tree_bytes(second / "out")
    assert one == two and len(one) == 8  # 3 READMEs, 3 manifests, the index, .gitignore
    assert not filecmp.dircmp(first / "out", second / "out").diff_files
