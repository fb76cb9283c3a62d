"""The GitOps path on real clusters: `geosched snapshot export --from-clusters` reads the live nodes, `geosched
gitops render` places the jobs and writes the tree, `kubectl apply --server-side` (the kubectl of the same
release, as Argo CD's and Flux's server-side apply do) sends each cluster its directory, and the real scheduler
runs the pods where placements.yaml says."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.realkube.plane import EKS, GKE, Plane
from tests.realkube.realkube_support import cluster_config, geosched, job_pods_selector, kubectl, wait_all_running

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
