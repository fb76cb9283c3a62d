"""Sizes are checked before reading (issue 19, item 4): every file a command reads, those inside a GitOps tree
included, is refused by the size its file system reports before a byte of it is in memory. Sparse files
(`truncate -s`: gigabytes that take no disk) through the command as users run it, with 1 GiB of address space
(tests/inputs/inputs_support.py): reading first and refusing after raised MemoryError there."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from geosched.files.fields import parse_time
from geosched.files.gate import LIMITS_MIB
from geosched.files.writes import JOURNAL
from geosched.gitops import render_tree
from tests.gitops import gitops_support
from tests.inputs.inputs_support import ROOT, geosched

GOOD = ROOT / "tests" / "data" / "good"
GIB = 1 << 30


def sparse(path: Path, size: int, head: bytes = b"") -> Path:
    """A file of `size` bytes of which only `head` is on disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head)
    os.truncate(path, size)
    return path


@pytest.fixture(scope="module")
def baseline_s(tmp_path_factory: pytest.TempPathFactory) -> float:
    """A command that reads nothing large, timed here, on this machine, now (no fixed wall-clock number)."""
    started = time.monotonic()
    run = geosched("place", GOOD / "job.yaml", "--fleet", GOOD / "fleet.yaml", "-o", "json",
                   home=tmp_path_factory.mktemp("home"))
    assert run.code == 0, run.stderr
    return time.monotonic() - started


def assert_refused_by_size(args: list[str | Path], home: Path, path: Path, kind: str, baseline_s: float) -> None:
    started = time.monotonic()
    run = geosched(*args, home=home, timeout=120)
    elapsed = time.monotonic() - started
    assert run.one_line_error, (run.code, run.stderr[-2000:])
    assert str(path) in run.stderr and f"limit for {kind} files" in run.stderr, run.stderr
    # Refused without reading: the same order of time as the baseline (reading a gigabyte is not).
    assert elapsed < 3 * baseline_s + 2, (elapsed, baseline_s)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The GitOps tests' repository, rendered (tree at its root; the library call, to keep the test short)."""
    path = tmp_path / "repo"
    gitops_support.write_inputs(path)
    render_tree(path / "jobs", path / "snapshot", path / "clusters.yaml", path,
                at=parse_time(gitops_support.AT, "at", ""))
    return path


@pytest.mark.parametrize(("where", "kind"), [
    ("clusters/east-a/ml/alpha.yaml", "manifest"),  # a file geosched rendered, grown to 3 GiB
    ("placements.yaml", "index"),
    ("jobs/alpha.yaml", "job"),
    ("snapshot/fleet.yaml", "fleet"),
    ("snapshot/network.yaml", "network"),
    (f"snapshot/{JOURNAL}", "journal"),
])
def test_a_3_gib_sparse_file_in_a_gitops_repository_is_refused_by_its_size(repo: Path, where: str, kind: str,
                                                                          baseline_s: float) -> None:
    """`gitops check` as a CI job runs it on a pull request. Before: MemoryError for the tree's own files (no
    limit at all) and the journal; the others read 64 to 512 MiB before refusing."""
    path = repo / where
    head = path.read_bytes()[:4096] if path.exists() else b"{}"
    sparse(path, 3 * GIB, head)
    assert_refused_by_size(["gitops", "check", *gitops_support.tree_args(repo)], repo.parent, path, kind, baseline_s)


def test_a_sparse_trace_over_its_limit_is_refused_before_it_is_read(tmp_path: Path, baseline_s: float) -> None:
    """The issue's 1.1 GB trace: over the 1 GiB limit. Before: read (1 GiB) first, MemoryError."""
    trace = sparse(tmp_path / "big.csv", int(1.1e9), b"submit_time,gpus,duration,model\n")
    assert_refused_by_size(["simulate", "--trace", trace, "--fleet", GOOD / "fleet.yaml"], tmp_path, trace, "trace",
                           baseline_s)


def test_a_sparse_network_file_over_its_limit_is_refused_before_it_is_read(tmp_path: Path, baseline_s: float) -> None:
    """The issue's 600 MiB network file (limit 512 MiB). Before: 512 MiB read, then joined: 1.1 GB, MemoryError
    here."""
    network = sparse(tmp_path / "network.yaml", 600 << 20, (GOOD / "network.yaml").read_bytes())
    assert_refused_by_size(["place", GOOD / "job.yaml", "--fleet", GOOD / "fleet.yaml", "--network", network],
                           tmp_path, network, "network", baseline_s)


def test_the_limits_in_the_threat_model_are_the_gates() -> None:
    text = (ROOT / "docs" / "security.md").read_text()
    for kind, mib in LIMITS_MIB.items():
        assert re.search(rf"\| {kind.value}( \([^)]*\))? \| {mib} \|", text), f"docs/security.md: {kind.value}"
