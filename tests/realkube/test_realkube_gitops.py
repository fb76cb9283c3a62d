"""The GitOps path on real clusters: `geosched snapshot export --from-clusters` reads the live nodes, `geosched
gitops render` places the jobs and writes the tree, `kubectl apply --server-side` (the kubectl of the same
release, as Argo CD's and Flux's server-side apply do) sends each cluster its directory, and the real scheduler
runs the pods where placements.yaml says."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.realkube import binaries
from tests.realkube.plane import EKS, GKE, Plane
from tests.realkube.realkube_support import (
    cluster_config,
    geosched,
    job_pods_selector,
    kubectl,
    pods,
    wait_all_running,
    wait_until,
)

pytestmark = pytest.mark.realkube


def test_exported_snapshot_rendered_tree_applied_runs_where_placements_say(realkube: Plane, tmp_path: Path) -> None:
    with realkube.namespace("gitops") as ns:
        clusters = cluster_config(tmp_path / "clusters.yaml", {GKE: {"namespace": ns}, EKS: {"namespace": ns}})
        jobs = tmp_path / "jobs" / ns
        jobs.mkdir(parents=True)
        for name, gpu in (("resnet", "A100"), ("llm", "H100")):
            (jobs / f"{name}.yaml").write_text(
                f"apiVersion: geosched.io/v1alpha1\nkind: Job\nname: {name}\nnamespace: {ns}\n"
                f"image: ghcr.io/example/{name}:1\nworkers: 2\ngpus_per_worker: 8\ngpu: {gpu}\n")
        home = tmp_path / "home"
        export = geosched("snapshot", "export", str(tmp_path / "snapshot"), "--from-clusters", "--kubeconfig",
                          str(realkube.kubeconfig), "--clusters", str(clusters), home=home)
        assert export.returncode == 0, export.stderr
        tree = tmp_path / "tree"
        render = geosched("gitops", "render", "--jobs", str(tmp_path / "jobs"), "--snapshot",
                          str(tmp_path / "snapshot"), "--clusters", str(clusters), "--out", str(tree), home=home)
        assert render.returncode == 0, render.stderr
        placed = yaml.safe_load((tree / "placements.yaml").read_text())["placed"]
        assert set(placed) == {f"{ns}/resnet", f"{ns}/llm"}
        assert placed[f"{ns}/resnet"]["cluster"] == EKS and placed[f"{ns}/resnet"]["zones"] == ["use1-az2"]

        for cluster in sorted({p["cluster"] for p in placed.values()}):
            applied = kubectl(realkube, cluster, "apply", "--server-side", "--field-manager=gitops", "-R", "-f",
                              str(tree / "clusters" / cluster))
            assert applied.returncode == 0, applied.stderr
        for name, where in placed.items():
            job = name.split("/", 1)[1]
            with realkube.kube(where["cluster"]) as kube:
                bound = wait_all_running(kube, ns, 2, job_pods_selector(job))
            assert {b.fleet_zone for b in bound} <= set(where["zones"]), (name, bound, where)


def test_job_removed_from_the_repository_takes_its_companions_with_it(realkube: Plane, tmp_path: Path) -> None:
    """Issue 21 item 5 on the GitOps path. A rendered Job cannot carry its companions' ownerReferences (its UID
    exists only once the cluster has created it), so a GitOps tree relies on what Argo CD and Flux do instead:
    prune what left the repository. A job's companions live in the job's own file, so removing the job's input
    removes the Job, its Service and its pods together, and nothing of the other job. Pruned here with kubectl's
    own `apply --prune` as an ApplySet (its inventory, as Flux's kustomize controller prunes by its inventory and
    Argo CD by its tracking label)."""
    with realkube.namespace("gitops-prune") as ns:
        clusters = cluster_config(tmp_path / "clusters.yaml", {EKS: {"namespace": ns}})
        jobs = tmp_path / "jobs" / ns
        jobs.mkdir(parents=True)
        for name, gpu in (("keep", "A100"), ("drop", "H100")):  # the plane's EKS cluster: 2 nodes of each
            (jobs / f"{name}.yaml").write_text(
                f"apiVersion: geosched.io/v1alpha1\nkind: Job\nname: {name}\nnamespace: {ns}\n"
                f"image: ghcr.io/example/{name}:1\nworkers: 2\ngpus_per_worker: 8\ngpu: {gpu}\n")
        home = tmp_path / "home"
        snapshot = tmp_path / "snapshot"
        export = geosched("snapshot", "export", str(snapshot), "--from-clusters", "--kubeconfig",
                          str(realkube.kubeconfig), "--clusters", str(clusters), home=home)
        assert export.returncode == 0, export.stderr
        tree = tmp_path / "tree"

        def render_and_apply() -> None:
            render = geosched("gitops", "render", "--jobs", str(tmp_path / "jobs"), "--snapshot", str(snapshot),
                              "--clusters", str(clusters), "--out", str(tree), home=home)
            assert render.returncode == 0, render.stderr
            # kubectl's prune of server-side-applied objects is the ApplySet one (alpha, behind KUBECTL_APPLYSET;
            # the older label-selector prune refuses server-side apply).
            applied = subprocess.run(
                [binaries.find()["kubectl"], "--kubeconfig", str(realkube.kubeconfig), "--context", EKS, "apply",
                 "--server-side", "--field-manager=gitops", "-n", ns, "--prune", "--applyset=geosched-jobs",
                 "-R", "-f", str(tree / "clusters" / EKS)],
                capture_output=True, text=True, timeout=120, env={**os.environ, "KUBECTL_APPLYSET": "true"})
            assert applied.returncode == 0, applied.stderr

        render_and_apply()
        with realkube.kube(EKS) as kube:
            for job in ("keep", "drop"):
                wait_all_running(kube, ns, 2, job_pods_selector(job))
            services = {s["metadata"]["name"]: s for s in kube.list_all(f"/api/v1/namespaces/{ns}/services")[0]}
            companions = {n for n, s in services.items()
                          if (s["metadata"].get("labels") or {}).get("geosched.io/job") == "drop"}
            assert companions, f"a compact Job renders its headless Service beside it: {sorted(services)}"

            (jobs / "drop.yaml").unlink()
            render_and_apply()

            def gone() -> bool:
                left = kube.list_all(f"/api/v1/namespaces/{ns}/services")[0]
                return (not any(s["metadata"]["name"] in companions for s in left)
                        and not kube.list_all(f"/apis/batch/v1/namespaces/{ns}/jobs",
                                              field_selector="metadata.name=drop")[0]
                        and not pods(kube, ns, job_pods_selector("drop")))
            wait_until(gone, 90, what="the dropped job, its Service and its pods deleted")
            assert len(wait_all_running(kube, ns, 2, job_pods_selector("keep"))) == 2
            assert kube.list_all(f"/apis/batch/v1/namespaces/{ns}/jobs", field_selector="metadata.name=keep")[0]
