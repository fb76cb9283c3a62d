"""A small repository of job specs, snapshot and cluster config whose right tree can be worked out by hand,
and a real git repository to hold it. (A uniquely named module rather than conftest, so another test folder's
conftest cannot shadow it.)

Fleet: three clusters, one zone each, four 8 x A100 nodes per zone.

    east-a  zone r1-a (region r1)  $16/h per node   kueue, namespace ml
    east-b  zone r1-b (region r1)  $17/h per node   kueue, namespace ml
    west    zone r2-a (region r2)  $16/h per node   coscheduling

Jobs, placed by name: alpha (batch/v1 Job, 2 x 8, region r1) takes r1-a, the cheaper zone of r1; beta
(compact, 2 x 8, cluster west) and gamma (PyTorchJob, 1 + 1 x 8, region r2) share r2-a; huge (40 x 8) fits
nowhere. Making r1-a's own links slow moves alpha (with --rebalance), and only alpha, to r1-b.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from geosched.core.models import Fleet, NetworkView, pair_key
from geosched.store.db import write_snapshot
from tests.handmade import SLOW, fleet, network, node

ROOT = Path(__file__).resolve().parents[2]
AT = "2025-03-01T12:00:00Z"

ALPHA = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: alpha
  namespace: ml
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      nodeSelector:
        topology.kubernetes.io/region: r1
      containers:
        - name: trainer
          image: ghcr.io/example/llm:1.0
          resources:
            limits:
              nvidia.com/gpu: 8
"""

BETA = """\
# A compact geosched job: rendered as an Indexed Job with its headless Service.
apiVersion: geosched.io/v1alpha1
kind: Job
name: beta
workers: 2
gpus_per_worker: 8
gpu: A100
clusters: [west]
image: ghcr.io/example/vision:2
"""

GAMMA = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: gamma
  namespace: research
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          nodeSelector:
            topology.kubernetes.io/region: r2
          containers:
            - name: pytorch
              image: ghcr.io/example/bert:3
              resources:
                limits:
                  nvidia.com/gpu: 8
    Worker:
      replicas: 1
      template:
        spec:
          nodeSelector:
            topology.kubernetes.io/region: r2
          containers:
            - name: pytorch
              image: ghcr.io/example/bert:3
              resources:
                limits:
                  nvidia.com/gpu: 8
"""

HUGE = """\
name: huge
workers: 40
gpus_per_worker: 8
image: ghcr.io/example/llm:1.0
"""

CLUSTERS = """\
apiVersion: geosched.io/v1alpha1
kind: ClusterConfig
clusters:
  east-a: {backend: kueue, queue: team-a, namespace: ml}
  east-b: {backend: kueue, queue: team-a, namespace: ml}
  west: {backend: coscheduling}
"""

JOBS = {"alpha.yaml": ALPHA, "beta.yaml": BETA, "team-b/gamma.yaml": GAMMA, "huge.yaml": HUGE}


def lab_fleet() -> tuple[Fleet, NetworkView]:
    nodes = [node(f"{prefix}{i}", zone, region, price=price, cluster=cluster)
             for prefix, zone, region, price, cluster in (("a", "r1-a", "r1", 16.0, "east-a"),
                                                          ("b", "r1-b", "r1", 17.0, "east-b"),
                                                          ("w", "r2-a", "r2", 16.0, "west"))
             for i in range(4)]
    f = fleet(nodes)
    return f, network(f)


def write_inputs(repo: Path, *, slow_zone: str | None = None) -> None:
    """jobs/, snapshot/ and clusters.yaml; with `slow_zone`, that zone's own links are slow."""
    for name, text in JOBS.items():
        path = repo / "jobs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (repo / "clusters.yaml").write_text(CLUSTERS, encoding="utf-8")
    write_snapshot_files(repo / "snapshot", slow_zone=slow_zone)


def write_snapshot_files(directory: Path, *, slow_zone: str | None = None) -> None:
    f, view = lab_fleet()
    links = dict(view.zone_links)
    if slow_zone is not None:
        links[pair_key(slow_zone, slow_zone)] = SLOW
    directory.mkdir(parents=True, exist_ok=True)
    write_snapshot(directory, f, NetworkView(zone_links=links))


def tree_args(repo: Path, out: Path | None = None) -> list[str]:
    return ["--jobs", str(repo / "jobs"), "--snapshot", str(repo / "snapshot"),
            "--clusters", str(repo / "clusters.yaml"), "--out", str(out or repo)]


def gitops(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """`geosched gitops ...` as a real process (the sub-app runs on its own as `python -m geosched.gitops`)."""
    return subprocess.run([sys.executable, "-m", "geosched.gitops", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def git(repo: Path, *args: str) -> str:
    """git with a fixed identity and no user or system config, so the machine's settings change nothing."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "HOME": str(repo),
           "GIT_AUTHOR_NAME": "geosched tests", "GIT_AUTHOR_EMAIL": "tests@geosched.invalid",
           "GIT_COMMITTER_NAME": "geosched tests", "GIT_COMMITTER_EMAIL": "tests@geosched.invalid"}
    run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, f"git {' '.join(args)}: {run.stderr}"
    return run.stdout


def init_repo(repo: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    write_inputs(repo)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "jobs and snapshot")


def kube_validator() -> Callable[..., None]:
    """The kube tests' schema check for rendered manifests (CRDs and the Kubernetes OpenAPI), loaded by path
    so this folder does not depend on the order pytest collects folders in."""
    spec = importlib.util.spec_from_file_location("kube_support", ROOT / "tests" / "kube" / "kube_support.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check: Callable[..., None] = module.validate_manifest
    return check
