"""examples/gitops: its rendered tree is what its inputs render to, and its Argo CD, Flux and GitHub Actions
files fit that tree."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import yaml
from gitops_support import ROOT, gitops, kube_validator

from geosched.gitops import check_tree
from geosched.kube.config import load_cluster_config

EXAMPLE = ROOT / "examples" / "gitops"
RENDER = ("python -m geosched.gitops render --jobs jobs --snapshot snapshot --clusters clusters.yaml "
          "--config gitops.yaml --out . --at 2025-03-01T12:00:00Z   (in examples/gitops)")


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_the_example_tree_is_up_to_date() -> None:
    result = check_tree(EXAMPLE / "jobs", EXAMPLE / "snapshot", EXAMPLE / "clusters.yaml", EXAMPLE,
                        config=EXAMPLE / "gitops.yaml")
    assert result.up_to_date, f"re-render the example: {RENDER}\n{result.report()}"
    index = load(EXAMPLE / "placements.yaml")
    assert len(index["placed"]) == 4 and list(index["unplaced"]) == ["research/giant"]


def test_the_example_manifests_are_valid() -> None:
    validate = kube_validator()
    files = sorted((EXAMPLE / "clusters").glob("*/*/*.yaml"))
    assert len(files) == 4
    for path in files:
        for obj in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            validate(obj)


def test_the_applicationset_makes_one_application_per_cluster_directory() -> None:
    appset = load(EXAMPLE / "argocd" / "applicationset.yaml")
    assert (appset["apiVersion"], appset["kind"]) == ("argoproj.io/v1alpha1", "ApplicationSet")
    [generator] = appset["spec"]["generators"]
    [directories] = generator["git"]["directories"]
    assert directories == {"path": "clusters/*"}
    # What the generator would find: one directory per configured cluster (each holds at least its README).
    found = sorted(p.name for p in (EXAMPLE / "clusters").glob("*") if p.is_dir())
    assert found == sorted(load_cluster_config(EXAMPLE / "clusters.yaml"))
    spec = appset["spec"]["template"]["spec"]
    assert spec["source"]["path"] == "{{.path.path}}" and spec["source"]["directory"] == {"recurse": True}
    assert spec["destination"] == {"name": "{{.path.basename}}"}
    assert spec["syncPolicy"]["automated"]["prune"] is True


def test_argo_cd_recreates_a_moved_job_and_only_it() -> None:
    """Issue 21 item 9: a job that moves changes its pod template, which Kubernetes does not allow in place; Argo CD
    applied it and failed the sync. Argo CD deletes and recreates a resource annotated
    `argocd.argoproj.io/sync-options: Force=true,Replace=true` (argo-cd docs/user-guide/sync-options.md, "Force
    Sync"; an annotation only, there is no Application-level Force), and with ApplyOutOfSyncOnly=true a sync
    touches only the out-of-sync objects: the moved job, not every running job of the cluster."""
    spec = load(EXAMPLE / "argocd" / "applicationset.yaml")["spec"]["template"]["spec"]
    assert "ApplyOutOfSyncOnly=true" in spec["syncPolicy"]["syncOptions"]
    jobs = [obj for path in sorted((EXAMPLE / "clusters").glob("*/*/*.yaml"))
            for obj in yaml.safe_load_all(path.read_text(encoding="utf-8"))
            if "geosched.io/cluster" in (obj["metadata"].get("annotations") or {})]
    assert len(jobs) == 4
    for obj in jobs:
        options = obj["metadata"]["annotations"]["argocd.argoproj.io/sync-options"].split(",")
        assert {"Force=true", "Replace=true"} <= set(options), obj["metadata"]["name"]
    others = [obj for path in sorted((EXAMPLE / "clusters").glob("*/*/*.yaml"))
              for obj in yaml.safe_load_all(path.read_text(encoding="utf-8")) if obj not in jobs]
    assert all("argocd.argoproj.io/sync-options" not in (o["metadata"].get("annotations") or {}) for o in others)


def test_flux_has_one_kustomization_per_cluster_pointing_at_its_directory() -> None:
    clusters = sorted(load_cluster_config(EXAMPLE / "clusters.yaml"))
    assert sorted(p.name for p in (EXAMPLE / "flux").iterdir()) == clusters
    for name in clusters:
        doc = load(EXAMPLE / "flux" / name / "geosched-jobs.yaml")
        assert (doc["apiVersion"], doc["kind"]) == ("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
        assert doc["spec"]["path"] == f"./clusters/{name}"
        assert doc["spec"]["prune"] is True and doc["spec"]["force"] is True
        assert (EXAMPLE / "clusters" / name).is_dir()


def test_the_workflow_checks_pull_requests_and_renders_main_with_arguments_that_work() -> None:
    workflow = load(EXAMPLE / ".github" / "workflows" / "geosched.yaml")
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as true
    assert "pull_request" in triggers and triggers["push"]["branches"] == ["main"]
    check_steps = " ".join(s.get("run", "") for s in workflow["jobs"]["check"]["steps"])
    render_steps = " ".join(s.get("run", "") for s in workflow["jobs"]["render"]["steps"])
    assert "geosched gitops check $TREE_ARGS" in check_steps
    assert 'geosched gitops render $TREE_ARGS --at "$(git log -1 --format=%cI)"' in render_steps
    assert "git push" in render_steps and workflow["jobs"]["render"]["permissions"] == {"contents": "write"}
    # The workflow's own arguments, run from the example's root as the workflow does.
    run = gitops("check", *shlex.split(workflow["env"]["TREE_ARGS"]), cwd=EXAMPLE)
    assert (run.returncode, run.stdout) == (0, "the tree is up to date\n"), run.stderr
