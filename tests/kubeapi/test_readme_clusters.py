"""README.md "Run it on your clusters": every command the section shows, run as a user would type it.

The clusters are emulated API servers (tests/kubeemu) holding nodes shaped as EKS and GKE register them
(tests/kubeapi/real_nodes.py), reached through a kubeconfig whose contexts are what `aws eks update-kubeconfig
--alias` and `gcloud container clusters get-credentials` create; the MultiKueue step runs against an emulated
manager and workers set up as Kueue's MultiKueue guide does (tests/kubeapi/multikueue_support.py). kubectl is the
real one (when the machine has it): it renames the context, lists contexts and builds every kustomization.

Not run here, and why (each is still checked for what it references): the cloud CLIs (`aws`, `gcloud`: an
account), `docker build`/`push` (a container engine), `kustomize edit` (the edit is made to a copy and built with
`kubectl kustomize`), and the `kubectl` verbs that need a whole control plane: `apply -k` is built offline here
and runs as written on the real control plane, with the section's geosched commands and the MultiKueue pass
(tests/realkube/test_realkube_readme_clusters.py); `edit` and `rollout restart` of Kueue's own Deployment run
nowhere (the real plane runs Kueue as a process, not as Kueue's Deployment). This test stays for what the real
plane does not have: the cloud CLIs' context names, the image build and the `kustomize edit` lines.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.kubeapi.multikueue_support import SITES, kueue_world, reserve_quota, seeded, workload
from tests.kubeapi.readme_section import GKE_CONTEXT, ROOT, as_cloud_cli_left_it, commands, write_files
from tests.kubeapi.real_nodes import eks_us_east_1, gke_us_central1, seed
from tests.kubeemu import MultiCluster

pytestmark = pytest.mark.integration
KUBECTL = shutil.which("kubectl")


@dataclass
class Run:
    """Where the section's commands run: a working directory with its files, the kubeconfig, the home."""

    cwd: Path
    env: dict[str, str]
    ran: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    def shell(self, line: str, *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", line], cwd=cwd or self.cwd, env=self.env, capture_output=True,
                              text=True, timeout=300)

    def geosched(self, line: str) -> subprocess.CompletedProcess[str]:
        argv = shlex.split(line)
        assert argv[0] == "geosched"
        return subprocess.run([sys.executable, "-m", "geosched", *argv[1:]], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=300)


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[MultiCluster]:
    (tmp_path / "api").mkdir()
    with MultiCluster(names=["eks-us-east-1", "gke-us-central1"], directory=tmp_path / "api") as mc:
        seed(mc["eks-us-east-1"], eks_us_east_1())
        seed(mc["gke-us-central1"], gke_us_central1())
        for cluster in mc:
            cluster.add_namespace("ml")
        yield mc
        for cluster in mc:
            assert cluster.server_errors == [], cluster.server_errors


def test_the_readme_section_runs_as_written(clusters: MultiCluster, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    write_files(work)
    kubeconfig = as_cloud_cli_left_it(clusters.kubeconfig, tmp_path / "kubeconfig")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "GEOSCHED_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    run = Run(work, env)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    for line in commands():
        argv = shlex.split(line)
        if line.startswith("VERSION="):
            got = run.shell(f"{line}; echo $VERSION", cwd=ROOT)
            assert got.returncode == 0 and got.stdout.strip() == version, got.stderr
            run.ran.append(line)
        elif argv[0] in ("aws", "gcloud"):
            # A cloud account: the contexts they create are what as_cloud_cli_left_it wrote.
            assert "--alias" in argv if argv[0] == "aws" else GKE_CONTEXT.split("_")[1] in argv
            run.checked.append(line)
        elif argv[0] == "docker":
            if argv[1] == "build":
                assert (ROOT / argv[argv.index("-f") + 1]).is_file() and argv[-1] == "."
            assert any(a.startswith("registry.example.com/ml/geosched:") for a in argv)
            run.checked.append(line)
        elif line.startswith("(cd deploy/") and "kustomize edit set image" in line:
            kustomize_edit(run, line, version, tmp_path)
        elif argv[0] == "kubectl":
            kubectl(run, argv, line)
        elif argv[0] == "geosched" and argv[1:3] == ["multikueue", "dispatch"]:
            dispatch_once(run, line, tmp_path)
        elif argv[0] == "geosched":
            done = run.geosched(line)
            assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
            run.ran.append(line)
        else:
            raise AssertionError(f"the README shows a command this test does not know how to run: {line}")
    assert len(run.ran) + len(run.checked) == len(commands())
    assert [c.split()[0] for c in run.ran].count("geosched") == 7 and len(run.ran) == 10, run.ran
    # What the section promises happened: the job is on the EKS cluster, in the zone its nodes call us-east-1a,
    # admitted through the Kueue objects --kueue-objects made.
    job = clusters["eks-us-east-1"].get("batch/v1/jobs", "train", "ml")
    assert job is not None and job["metadata"]["annotations"]["geosched.io/zones"] == "use1-az6"
    queue = clusters["eks-us-east-1"].get("kueue.x-k8s.io/v1beta2/localqueues", "team-a", "ml")
    assert queue is not None and queue["spec"]["clusterQueue"] == "geosched"
    assert (work / "snapshot" / "fleet.yaml").is_file()


def kubectl(run: Run, argv: list[str], line: str) -> None:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed on this machine")
    verb = [a for a in argv[1:] if not a.startswith("-") and a not in _flag_values(argv)]
    if verb[:1] == ["config"]:
        done = run.shell(line)
        assert done.returncode == 0, done.stderr
        if verb[1] == "get-contexts":
            assert {"eks-us-east-1", "gke-us-central1"} <= set(done.stdout.split())
        run.ran.append(line)
    elif verb[:1] == ["apply"] and "-k" in argv:
        directory = ROOT / argv[argv.index("-k") + 1]
        built = subprocess.run([KUBECTL, "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
        assert built.returncode == 0 and "kind:" in built.stdout, built.stderr
        run.checked.append(line)
    elif verb[:2] == ["edit", "configmap"]:
        config = yaml.safe_load((ROOT / "deploy" / "multikueue" / "kueue-configuration.yaml").read_text())
        assert argv[argv.index("edit") + 2] == "kueue-manager-config"
        assert config["multiKueue"]["dispatcherName"] == "geosched.io/dispatcher"
        run.checked.append(line)
    elif verb[:2] == ["rollout", "restart"]:
        assert "deployment" in argv and "kueue-controller-manager" in argv
        run.checked.append(line)
    else:
        raise AssertionError(f"kubectl verb this test does not know how to run: {line}")


def _flag_values(argv: list[str]) -> set[str]:
    return {argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--context", "-n", "-k", "--namespace")}


def kustomize_edit(run: Run, line: str, version: str, tmp_path: Path) -> None:
    """`kustomize edit set image geosched=REF` on a copy of the kustomization, then built by kubectl: the rendered
    Deployment runs REF."""
    directory = line.split("(cd ", 1)[1].split(" ", 1)[0]
    ref = line.split("geosched=", 1)[1].rstrip(")").replace("$VERSION", version)
    copy = tmp_path / "deploy-copy" / directory
    shutil.copytree(ROOT / directory, copy, dirs_exist_ok=True)
    kustomization = yaml.safe_load((copy / "kustomization.yaml").read_text(encoding="utf-8"))
    [image] = [i for i in kustomization["images"] if i["name"] == "geosched"]
    image["newName"], image["newTag"] = ref.rsplit(":", 1)
    (copy / "kustomization.yaml").write_text(yaml.safe_dump(kustomization), encoding="utf-8")
    if KUBECTL is None:
        pytest.skip("kubectl is not installed on this machine")
    built = subprocess.run([KUBECTL, "kustomize", str(copy)], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    images = {c["image"] for d in yaml.safe_load_all(built.stdout) if d and d["kind"] == "Deployment"
              for c in d["spec"]["template"]["spec"]["containers"]}
    assert images == {ref}
    run.checked.append(line)


def dispatch_once(run: Run, line: str, tmp_path: Path) -> None:
    (tmp_path / "multikueue").mkdir()
    with kueue_world(tmp_path / "multikueue", SITES) as world:
        from geosched.kube.client import Kube

        with Kube.open("manager", world.kubeconfig) as kube:
            reserve_quota(kube, seeded(world["manager"], workload("big", 4, 8)))
        env = {**run.env, "KUBECONFIG": str(world.kubeconfig)}
        done = subprocess.run([sys.executable, "-m", "geosched", *shlex.split(line)[1:]], cwd=run.cwd, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "nominated 1 Workload(s)" in done.stderr
    run.ran.append(line)
