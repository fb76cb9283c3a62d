"""README.md "Run it on your clusters" on the real control plane: the section's kubectl and geosched commands as
written, against the plane's EKS- and GKE-shaped clusters with real Kueue, and the MultiKueue manager.

The kubeconfig is the plane's, its contexts as the cloud CLIs leave them (the GKE context under the name `gcloud
container clusters get-credentials` gives it, which the section's `kubectl config rename-context` renames back) and
`worker1`, the section's name for a MultiKueue worker, another context of the EKS worker. kubectl is the plane's
own release (v1.36.3). Every `kubectl ... apply -k` runs as written (client-side apply, exit 0) and then every
object its kustomization builds must exist in that cluster (`kubectl get -k`). The geosched commands run as
written, from a directory holding the section's yaml files; the job must end up admitted by real Kueue and running
in us-east-1a, through the Kueue objects `--kueue-objects` made, and `multikueue dispatch --once` makes one pass on
the real manager, holding its Lease in the namespace `apply -k deploy/multikueue` made.

Not run here, and why: the cloud CLIs (an account), `docker build`/`push` (a container engine) and `kustomize
edit` (it edits the checkout): tests/kubeapi/test_readme_clusters.py checks what they reference; `kubectl edit
configmap kueue-manager-config` and `rollout restart deployment kueue-controller-manager`: the plane runs Kueue
as a process with that configuration (tests/realkube/kueue.py), not as Kueue's Deployment.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kubeapi.readme_section import ROOT, as_cloud_cli_left_it, commands, write_files
from tests.realkube import binaries
from tests.realkube.cluster import condition
from tests.realkube.plane import EKS, GKE, MANAGER, Plane
from tests.realkube.realkube_support import job_pods_selector, wait_all_running, wait_until

pytestmark = pytest.mark.realkube
NOT_HERE = ("aws ", "gcloud ", "docker ", "(cd deploy/", "kubectl --context manager -n kueue-system ")
KUEUE_KINDS = ("clusterqueues", "resourceflavors", "topologies")


def readme_kubeconfig(plane: Plane, out: Path) -> Path:
    """The plane's kubeconfig as the cloud CLIs leave it, plus `worker1` (the EKS worker's cluster and user)."""
    left = as_cloud_cli_left_it(plane.kubeconfig, out, gke=GKE)
    config = yaml.safe_load(left.read_text(encoding="utf-8"))
    [eks] = [c for c in config["contexts"] if c["name"] == EKS]
    config["contexts"].append({"name": "worker1", "context": dict(eks["context"])})
    left.write_text(yaml.safe_dump(config), encoding="utf-8")
    return left


@pytest.fixture
def ml(realkube: Plane) -> Iterator[str]:
    """The namespace the section's cluster config names, and afterwards nothing the section made: what `apply -k`
    made on the manager and the EKS cluster (not deploy/multikueue/worker, which the plane itself applied), and the
    cluster-scoped Kueue objects `--kueue-objects` made (named geosched...)."""
    with realkube.namespace("ml", clusters=(GKE, EKS)) as ns:
        yield ns
    kubectl = binaries.find()["kubectl"]
    for context, directory in ((EKS, "deploy/scheduler"), (MANAGER, "deploy/multikueue")):
        done = subprocess.run([kubectl, "--kubeconfig", str(realkube.kubeconfig), "--context", context, "delete",
                               "-k", directory, "--ignore-not-found", "--wait", "--timeout=120s"], cwd=ROOT,
                              capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr  # the next test finds the plane as the session made it
    for cluster in (GKE, EKS):
        with realkube.kube(cluster) as kube:
            def ours(k: Any = kube) -> list[str]:
                return [f"{kind}/{o['metadata']['name']}" for kind in KUEUE_KINDS
                        for o in k.list_all(f"/apis/kueue.x-k8s.io/v1beta2/{kind}")[0]
                        if o["metadata"]["name"].startswith("geosched")]

            for path in ours():
                kube.request("DELETE", f"/apis/kueue.x-k8s.io/v1beta2/{path}")
            wait_until(lambda o=ours: not o() or None, 60, what=f"{cluster}: the Kueue objects of --kueue-objects gone")


def test_the_readme_section_runs_on_the_real_control_plane(realkube: Plane, ml: str, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    write_files(work)
    kubectl = binaries.find()["kubectl"]
    env = {**os.environ, "KUBECONFIG": str(readme_kubeconfig(realkube, tmp_path / "kubeconfig")),
           "GEOSCHED_HOME": str(tmp_path / "home"), "COLUMNS": "200",
           "PATH": f"{Path(kubectl).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    ran: list[str] = []
    for line in commands():
        if line.startswith(NOT_HERE):
            continue
        argv = shlex.split(line)
        if line.startswith("VERSION="):
            done = subprocess.run(["bash", "-c", f"{line}; echo $VERSION"], cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=60)
        elif argv[0] == "kubectl":
            # deploy/ paths are the checkout's: run from its root, as the section's `(cd deploy/...)` lines imply.
            done = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=180)
        else:
            assert argv[0] == "geosched", f"the README shows a command this test does not know how to run: {line}"
            done = subprocess.run([sys.executable, "-m", "geosched", *argv[1:]], cwd=work, env=env,
                                  capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        ran.append(line)
        if "apply -k" in line:
            # Every object of the kustomization is in that cluster now (kubectl exits 1 naming any it cannot find).
            context = argv[argv.index("--context") + 1]
            got = subprocess.run([kubectl, "--context", context, "get", "-k", argv[argv.index("-k") + 1],
                                  "-o", "name"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
            built = [d for d in yaml.safe_load_all(subprocess.run(
                [kubectl, "kustomize", argv[argv.index("-k") + 1]], cwd=ROOT, capture_output=True, text=True,
                timeout=60, check=True).stdout) if d]
            assert got.returncode == 0 and len(got.stdout.split()) == len(built), (line, got.stdout, got.stderr)
        elif argv[:3] == ["kubectl", "config", "get-contexts"]:
            assert {EKS, GKE, MANAGER, "worker1"} <= set(done.stdout.split()), done.stdout
        elif argv[:3] == ["geosched", "multikueue", "dispatch"]:
            # One pass, as the leader (a Lease it could not take, for a missing namespace or RBAC, exits 1).
            assert "nominated 0 Workload(s)" in done.stderr, done.stderr
    geosched_lines = [c for c in ran if c.startswith("geosched")]
    kubectl_lines = [c for c in ran if c.startswith("kubectl")]
    assert len(geosched_lines) == 7, ran
    assert sum("apply -k" in c for c in kubectl_lines) == 3 and len(kubectl_lines) == 5, ran
    # What the section promises happened, as the real system did it: the job on the EKS cluster, admitted by real
    # Kueue through the LocalQueue --kueue-objects made, its pods running in the zone its nodes call us-east-1a.
    with realkube.kube(EKS) as kube:
        job = kube.get(f"/apis/batch/v1/namespaces/{ml}/jobs/train") or {}
        assert job["metadata"]["annotations"]["geosched.io/zones"] == "use1-az6"
        queue = kube.get(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ml}/localqueues/team-a") or {}
        assert queue["spec"]["clusterQueue"] == "geosched"
        bound = wait_all_running(kube, ml, 2, job_pods_selector("train"), timeout=120)
        assert {b.zone for b in bound} == {"us-east-1a"}
        workloads = wait_until(lambda: kube.list_all(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ml}/workloads")[0],
                               30, what="the job's Workload")
        assert [condition(w, "Admitted") for w in workloads] == [True]
    with realkube.kube(MANAGER) as kube:
        lease = kube.get("/apis/coordination.k8s.io/v1/namespaces/geosched-system/leases/geosched-multikueue")
    assert lease is not None  # the pass held the dispatcher's Lease where deploy/multikueue's namespace is
    assert (work / "snapshot" / "fleet.yaml").is_file()
