"""Stable placements in a real git repository (issue 11): a job the tree already places stays where it is while it
still fits, whatever other jobs are added, changed or deleted; it moves only when its own nodes no longer hold
it, or with `--rebalance`. The command runs as a real process on a copy of examples/gitops."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from gitops_support import ROOT, git, gitops, init_repo, tree_args

EXAMPLE = ROOT / "examples" / "gitops"
LLM = "clusters/eks-us-east-1/research/llm-pretrain.yaml"
# Unrelated to llm-pretrain but placed before it in name order, on the H100s of us-east-1 it prefers.
DATA_PREP = """\
apiVersion: geosched.io/v1alpha1
kind: Job
name: data-prep
namespace: research
workers: 2
gpus_per_worker: 8
gpu: H100
regions: [us-east-1]
image: ghcr.io/example/prep:1
"""


def args(repo: Path, *extra: str) -> list[str]:
    return ["--jobs", str(repo / "jobs"), "--snapshot", str(repo / "snapshot"), "--clusters",
            str(repo / "clusters.yaml"), "--config", str(repo / "gitops.yaml"), "--out", str(repo), *extra]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """examples/gitops as a git repository, its rendered tree committed."""
    path = tmp_path / "repo"
    shutil.copytree(EXAMPLE, path)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "example")
    return path


def changed(repo: Path) -> list[str]:
    git(repo, "add", "-A")
    return sorted(git(repo, "diff", "--cached", "--no-renames", "--name-status").splitlines())


def placed(repo: Path) -> dict[str, dict[str, object]]:
    index = yaml.safe_load((repo / "placements.yaml").read_text(encoding="utf-8"))
    return {k: {f: v[f] for f in ("cluster", "zones", "assignments")} for k, v in index["placed"].items()}


def test_adding_an_unrelated_job_does_not_move_llm_pretrain(repo: Path) -> None:
    before = placed(repo)
    (repo / "jobs" / "research" / "data-prep.yaml").write_text(DATA_PREP, encoding="utf-8")
    run = gitops("render", *args(repo, "--explain"), "--at", "2025-03-02T08:00:00Z")
    assert run.returncode == 0, run.stderr
    assert "research/llm-pretrain: kept (still fits)" in run.stdout
    assert "research/data-prep: new" in run.stdout
    # Only the new job's manifest and the index change: llm-pretrain's file is untouched (Argo CD restarts nothing).
    assert changed(repo) == ["A\tclusters/eks-us-east-1/research/data-prep.yaml",
                             "A\tjobs/research/data-prep.yaml", "M\tplacements.yaml"]
    after = placed(repo)
    assert {k: after[k] for k in before} == before
    assert after["research/data-prep"]["zones"] != before["research/llm-pretrain"]["zones"]


def test_a_job_whose_node_is_drained_moves_and_says_why_the_others_stay(repo: Path) -> None:
    before = placed(repo)
    node = str(before["research/llm-pretrain"]["assignments"][0]).partition("=")[0]  # type: ignore[index]
    fleet = yaml.safe_load((repo / "snapshot" / "fleet.yaml").read_text(encoding="utf-8"))
    for n in fleet["nodes"]:
        if n["name"] == node:
            n["state"] = "not-ready"  # drained for repair
    (repo / "snapshot" / "fleet.yaml").write_text(yaml.safe_dump(fleet, sort_keys=False), encoding="utf-8")
    check = gitops("check", *args(repo))
    assert check.returncode == 1
    assert "research/llm-pretrain: moved eks-us-east-1 [use1-az2] -> " in check.stdout
    assert f"  why: node {node} is not-ready" in check.stdout
    run = gitops("render", *args(repo))
    assert run.returncode == 0, run.stderr
    assert f"research/llm-pretrain: moved: node {node} is not-ready" in run.stdout
    after = placed(repo)
    assert {k for k in before if after.get(k) != before[k]} == {"research/llm-pretrain"}


def test_rebalance_moves_a_kept_job_only_for_the_minimum_gain(repo: Path) -> None:
    # On the example as it is, every job already sits where the policy would put it: nothing moves.
    plain = gitops("render", *args(repo, "--rebalance"))
    assert plain.returncode == 0, plain.stderr
    assert changed(repo) == []
    # A slow zone where a job is kept: without --rebalance it stays (it still fits), with it it moves.
    before = placed(repo)
    zone = str(before["research/llm-pretrain"]["zones"][0])  # type: ignore[index]
    network = yaml.safe_load((repo / "snapshot" / "network.yaml").read_text(encoding="utf-8"))
    fleet = yaml.safe_load((repo / "snapshot" / "fleet.yaml").read_text(encoding="utf-8"))
    inside = {n["name"] for n in fleet["nodes"] if n["zone"] == zone}
    # The zone's own link and every measured node pair inside it (the ring model reads measured pairs first).
    for link in [*network["zones"], *(network.get("nodes") or [])]:
        if (link["a"], link["b"]) == (zone, zone) or {link["a"], link["b"]} <= inside:
            link.update(rtt_p50_ms=3.0, rtt_p95_ms=5.0, throughput_gbps=4.0)
    (repo / "snapshot" / "network.yaml").write_text(yaml.safe_dump(network, sort_keys=False), encoding="utf-8")
    kept = gitops("render", *args(repo))
    assert kept.returncode == 0, kept.stderr
    assert placed(repo)["research/llm-pretrain"] == before["research/llm-pretrain"]
    high = gitops("render", *args(repo, "--rebalance", "--min-gain", "99", "--explain"))
    assert "research/llm-pretrain: kept (still fits)" in high.stdout
    moved = gitops("render", *args(repo, "--rebalance"))
    assert moved.returncode == 0, moved.stderr
    assert "research/llm-pretrain: moved: rebalanced, total" in moved.stdout
    assert placed(repo)["research/llm-pretrain"]["zones"] != before["research/llm-pretrain"]["zones"]
    assert gitops("render", *args(repo, "--rebalance", "--min-gain", "-1")).returncode == 2


# Hourly grid intensity of the lab regions (gitops_support: r1 holds east-a and east-b, r2 holds west).
CARBON = """\
region,datetime,gco2e_per_kwh
lab:r1,2025-03-01T12:00:00Z,500
lab:r2,2025-03-01T12:00:00Z,50
lab:r1,2025-03-01T18:00:00Z,50
lab:r2,2025-03-01T18:00:00Z,500
"""
DELTA = "name: delta\nworkers: 1\ngpus_per_worker: 8\ngpu: A100\nimage: ghcr.io/example/llm:1.0\n"


def test_new_decisions_use_the_hour_of_at_and_kept_jobs_stay_when_it_changes(tmp_path: Path) -> None:
    repo = tmp_path / "lab"
    init_repo(repo)
    git(repo, "rm", "-q", "jobs/beta.yaml")  # leaves two nodes free in r2-a (west)
    (repo / "jobs" / "delta.yaml").write_text(DELTA, encoding="utf-8")
    (repo / "carbon.csv").write_text(CARBON, encoding="utf-8")
    (repo / "gitops.yaml").write_text("weights: {network: 1.0, cost: 0.0, carbon: 5.0}\n", encoding="utf-8")
    lab = [*tree_args(repo), "--config", str(repo / "gitops.yaml"), "--carbon-hourly", str(repo / "carbon.csv")]
    noon = gitops("render", *lab, "--at", "2025-03-01T12:00:00Z", "--explain")
    assert noon.returncode == 0, noon.stderr
    assert placed(repo)["delta"]["cluster"] == "west"  # r2 is the clean grid at noon
    # In a fresh tree at 18:00 the same job goes east; over the committed tree it stays where it runs.
    evening = gitops("render", *[a if a != str(repo) else str(tmp_path / "fresh") for a in lab],
                     "--at", "2025-03-01T18:00:00Z")
    assert evening.returncode == 0, evening.stderr
    fresh = yaml.safe_load((tmp_path / "fresh" / "placements.yaml").read_text(encoding="utf-8"))
    assert fresh["placed"]["delta"]["cluster"] in ("east-a", "east-b")
    again = gitops("render", *lab, "--at", "2025-03-01T18:00:00Z", "--explain")
    assert again.returncode == 0, again.stderr
    assert "delta: kept (still fits)" in again.stdout
    assert placed(repo)["delta"]["cluster"] == "west"
    outside = gitops("render", *lab, "--at", "2025-03-02T00:00:00Z", "--explain")
    assert "carbon lab:r1: yearly mean 400 gCO2e/kWh; 2025-03-02T00:00Z is outside its hourly series" in outside.stdout
    check = gitops("check", *lab, "--at", "2025-03-01T12:00:00Z")
    assert check.returncode == 1 and "inputs changed: hourly carbon" in check.stdout
