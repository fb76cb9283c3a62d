"""The harness without the control plane: what scripts/realkube says is missing, and that a missing binary fails
the suite under CI with the build's own error (and skips it, saying why, elsewhere) instead of passing silently."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.realkube.binaries import SCRIPT
from tests.realkube.cluster import kwok_stages

ROOT = SCRIPT.parents[1]


def run(*args: str, cache: Path, ci: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GEOSCHED_REALKUBE_BUILD")}
    env["GEOSCHED_REALKUBE_CACHE"] = str(cache)
    if ci:
        env["CI"] = "true"
    return subprocess.run(list(args), capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_paths_names_every_binary_not_built(tmp_path: Path) -> None:
    proc = run(sys.executable, str(SCRIPT), "paths", cache=tmp_path, ci=False)
    assert proc.returncode == 1
    for what in ("kube-apiserver (kubernetes v1.36.3)", "kube-scheduler", "kube-controller-manager", "kubectl",
                 "etcd (etcd v3.6.8)", "kueue (kueue v0.17.0)", "kwok (kwok v0.8.0)", "jobset (jobset v0.11.1)"):
        assert what in proc.stderr


def test_jobset_is_pinned_built_by_default_and_found_where_its_build_puts_it(tmp_path: Path) -> None:
    versions = run(sys.executable, str(SCRIPT), "versions", cache=tmp_path, ci=False)
    assert versions.returncode == 0 and "jobset v0.11.1" in versions.stdout.splitlines()
    # `build` with no names (what scripts/test runs) builds every entry: an unknown name lists them all.
    unknown = run(sys.executable, str(SCRIPT), "build", "nothing", cache=tmp_path, ci=False)
    assert unknown.returncode == 2 and "known: kubernetes, kueue, kwok, jobset" in unknown.stderr
    # A finished build's layout (binary and release config beside it) is what `paths` reports, so it is reused.
    (tmp_path / "jobset-v0.11.1" / "bin").mkdir(parents=True)
    (tmp_path / "jobset-v0.11.1" / "bin" / "jobset").write_text("")
    (tmp_path / "jobset-v0.11.1" / "config" / "default").mkdir(parents=True)
    proc = run(sys.executable, str(SCRIPT), "paths", cache=tmp_path, ci=False)
    found = yaml.safe_load(proc.stdout)
    assert found["jobset"] == str(tmp_path / "jobset-v0.11.1" / "bin" / "jobset")
    assert found["jobset-config"] == str(tmp_path / "jobset-v0.11.1" / "config")
    assert "jobset (" not in proc.stderr


def test_a_missing_binary_fails_the_suite_under_ci_with_the_builds_error(tmp_path: Path) -> None:
    (tmp_path / "build-kueue.log").write_text("go: sigs.k8s.io/kueue@v0.17.0: reading go.mod: 404 Not Found\n")
    test = "tests/realkube/test_realkube_plane.py::test_every_cluster_is_kubernetes_1_36_3_with_kueue_0_17"
    under_ci = run(sys.executable, "-m", "pytest", test, "-q", "-p", "no:cacheprovider", cache=tmp_path, ci=True)
    assert under_ci.returncode == 1, under_ci.stdout
    assert "the real control plane is not built" in under_ci.stdout
    assert "reading go.mod: 404 Not Found" in under_ci.stdout  # go's own words, from the log

    locally = run(sys.executable, "-m", "pytest", test, "-q", "-rs", "-p", "no:cacheprovider", cache=tmp_path,
                  ci=False)
    assert locally.returncode == 0, locally.stdout
    assert "1 skipped" in locally.stdout and "run scripts/realkube build" in locally.stdout


def test_kwok_pods_start_at_once_unless_they_ask_for_a_delay(tmp_path: Path) -> None:
    source = tmp_path / "stages"
    source.mkdir()
    (source / "pod-ready.yaml").write_text(
        "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: pod-ready}\n"
        "spec:\n  resourceRef: {apiGroup: v1, kind: Pod}\n  delay:\n    durationMilliseconds: 1000\n"
        "    durationFrom: {expressionFrom: '.metadata.annotations[\"pod-ready.stage.kwok.x-k8s.io/delay\"]'}\n"
        "    jitterDurationMilliseconds: 5000\n")
    (source / "node-heartbeat.yaml").write_text(
        "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata: {name: node-heartbeat}\n"
        "spec:\n  resourceRef: {apiGroup: v1, kind: Node}\n  delay: {durationMilliseconds: 600000}\n")
    out = {p.name: yaml.safe_load(p.read_text()) for p in kwok_stages(source, tmp_path)}
    assert out["pod-ready.yaml"]["spec"]["delay"] == {
        "durationMilliseconds": 0, "jitterDurationMilliseconds": 0,
        "durationFrom": {"expressionFrom": '.metadata.annotations["pod-ready.stage.kwok.x-k8s.io/delay"]'}}
    assert out["node-heartbeat.yaml"]["spec"]["delay"] == {"durationMilliseconds": 600000}


def test_the_up_demo_without_the_control_plane_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """scripts/up-demo's flow (tests/realkube/updemo.py) on a machine where the plane is not built: one line naming
    what is missing and how to build it, exit 1 (an environment failure), no traceback, nothing started."""
    proc = run(sys.executable, "-m", "tests.realkube.updemo", cache=tmp_path, ci=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("up-demo: the control plane is not built (") and "kube-apiserver" in line, line
    assert line.endswith("scripts/realkube build builds it (Go 1.26 on PATH)"), line
