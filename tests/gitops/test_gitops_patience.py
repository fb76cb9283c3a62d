"""Zone-first's patience in a GitOps render (policies/patience.py, issue 22): a job whose manifest says when it was
submitted (`geosched.io/submitted-at`), rendered at a known time (`--at`), is left unplaced with the reason
"waiting for a healthy ring" while the only free cluster would run it far slower than a healthy one, and placed
there by a later render once its patience has run out. Real processes, real files.

The fleet: the lab's three clusters of four 8-GPU nodes; east-b and west are full (other workloads), east-a is free
but its zone's links crawl (1 Gbit/s): a 2 x 8 GPU gang steps 7.8x slower there than on a healthy cluster."""

from __future__ import annotations

from pathlib import Path

import yaml
from gitops_support import CLUSTERS, gitops, tree_args

from geosched.core.models import LinkStats, NetworkView, pair_key
from geosched.store.db import write_snapshot
from tests.handmade import fleet, network, node

CRAWL = LinkStats(rtt_p50_ms=3.0, rtt_p95_ms=5.0, loss=0.0, throughput_gbps=1.0)
SUBMITTED = "2025-03-02T08:00:00Z"
GANG = f"""\
apiVersion: batch/v1
kind: Job
metadata:
  name: gang
  namespace: ml
  annotations:
    geosched.io/submitted-at: "{SUBMITTED}"
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: trainer
          image: ghcr.io/example/llm:1.0
          resources:
            limits:
              nvidia.com/gpu: 8
"""


def repo(tmp_path: Path) -> Path:
    root = tmp_path / "lab"
    (root / "jobs").mkdir(parents=True)
    (root / "jobs" / "gang.yaml").write_text(GANG, encoding="utf-8")
    (root / "clusters.yaml").write_text(CLUSTERS, encoding="utf-8")
    nodes = [
        node(f"{prefix}{i}", zone, region, cluster=cluster, free=free)
        for prefix, zone, region, cluster, free in (
            ("a", "r1-a", "r1", "east-a", 8),
            ("b", "r1-b", "r1", "east-b", 0),
            ("w", "r2-a", "r2", "west", 0),
        )
        for i in range(4)
    ]
    f = fleet(nodes)
    links = {**network(f).zone_links, pair_key("r1-a", "r1-a"): CRAWL}
    write_snapshot(root / "snapshot", f, NetworkView(zone_links=links))
    return root


def test_a_gang_waits_for_a_healthy_cluster_then_takes_the_slow_one_when_its_patience_runs_out(tmp_path: Path) -> None:
    root = repo(tmp_path)
    waiting = gitops("render", *tree_args(root), "--at", "2025-03-02T08:10:00Z")
    assert waiting.returncode == 0, waiting.stderr
    assert "unplaced ml/gang (16 GPUs): patience: waiting for a healthy ring: best now is 7.8x slower" in waiting.stdout
    assert "waited 600 s" in waiting.stdout and "its run time unknown" in waiting.stdout
    index = yaml.safe_load((root / "placements.yaml").read_text(encoding="utf-8"))
    assert index["unplaced"]["ml/gang"]["reasons"][0].startswith("patience: waiting for a healthy ring")
    later = gitops("render", *tree_args(root), "--at", "2025-03-02T09:00:00Z")  # an hour: patience ran out
    assert later.returncode == 0, later.stderr
    assert "0 unplaced" in later.stdout and list((root / "clusters" / "east-a").rglob("gang.yaml"))


def test_without_a_render_time_the_wait_is_unknown_and_the_gang_is_placed_as_always(tmp_path: Path) -> None:
    root = repo(tmp_path)
    run = gitops("render", *tree_args(root))
    assert run.returncode == 0, run.stderr
    assert "0 unplaced" in run.stdout and "waiting" not in run.stdout


def test_a_submitted_at_that_is_no_time_is_one_line_naming_the_file_and_field(tmp_path: Path) -> None:
    root = repo(tmp_path)
    (root / "jobs" / "gang.yaml").write_text(GANG.replace(SUBMITTED, "yesterday"), encoding="utf-8")
    run = gitops("render", *tree_args(root), "--at", "2025-03-02T08:10:00Z")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "gang.yaml" in run.stderr and "geosched.io/submitted-at" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
