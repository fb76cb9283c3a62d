"""The scheduler image (deploy/scheduler/Dockerfile) and its Deployment: the command the pod runs exists, and
starts as the pod runs it.

No Docker engine runs here, so the test reads the Dockerfile (ENTRYPOINT, CMD, ENV, USER, WORKDIR) and the
Deployment (command, args, securityContext, volumes), composes the argv Kubernetes runs (a container's `command`
replaces the image's ENTRYPOINT, its `args` the CMD:
https://kubernetes.io/docs/tasks/inject-data-application/define-command-argument-container/#notes), and runs
exactly that, with the installed package standing in for the image's venv, in a sandbox shaped like the pod:
read-only root filesystem, tmpfs at the emptyDir mounts, the ConfigMap at its mount, uid 65532.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "scheduler"
DOCKERFILE = DEPLOY / "Dockerfile"
IMAGE_VENV_BIN = "/opt/geosched/bin"


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def last(self, keyword: str) -> str | None:
        return next((arg for kw, arg in reversed(self.instructions) if kw == keyword), None)

    def all(self, keyword: str) -> list[str]:
        return [arg for kw, arg in self.instructions if kw == keyword]


def parse_dockerfile(path: Path) -> list[Stage]:
    """The instructions per stage: comments dropped, continuation lines joined, ARG defaults substituted in FROM."""
    logical: list[str] = []
    pending = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            words = rest.split()
            base = words[0]
            for name, value in args.items():
                base = base.replace("${" + name + "}", value).replace("$" + name, value)
            stages.append(Stage(base, words[2] if len(words) == 3 and words[1].upper() == "AS" else None))
        else:
            stages[-1].instructions.append((keyword, rest))
    return stages


def exec_form(arg: str | None) -> list[str]:
    """ENTRYPOINT/CMD in exec (JSON) form; the shell form would run under /bin/sh -c and lose signals."""
    assert arg is not None and arg.startswith("["), f"not in exec form: {arg!r}"
    value = json.loads(arg)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value)
    return value


def image_env(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for arg in stage.all("ENV"):
        for word in shlex.split(arg):
            name, _, value = word.partition("=")
            env[name] = value
    return env


def manifest(kind: str) -> dict[str, Any]:
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc and doc.get("kind") == kind:
                return dict(doc)
    raise AssertionError(f"no {kind} in {DEPLOY}")


def pod_argv(container: dict[str, Any], entrypoint: list[str], cmd: list[str]) -> list[str]:
    """What the kubelet runs: command replaces ENTRYPOINT (and drops CMD), args replace CMD."""
    if "command" in container:
        return [*container["command"], *container.get("args", [])]
    return [*entrypoint, *container.get("args", cmd)]


@pytest.fixture(scope="module")
def runtime() -> Stage:
    return parse_dockerfile(DOCKERFILE)[-1]


@pytest.fixture(scope="module")
def pod() -> dict[str, Any]:
    return dict(manifest("Deployment")["spec"]["template"]["spec"])


def test_the_image_is_multi_stage_slim_and_non_root(runtime: Stage) -> None:
    stages = parse_dockerfile(DOCKERFILE)
    builder = stages[0]
    assert len(stages) == 2 and builder.name == "builder"
    assert runtime.base == "python:3.11-slim" == builder.base
    # The runtime stage only copies the builder's venv: no compiler, no build tools, no test dependencies.
    assert [kw for kw, _ in runtime.instructions if kw in ("RUN", "COPY", "ADD")] == ["COPY"]
    assert runtime.all("COPY") == ["--from=builder /opt/geosched /opt/geosched"]
    install = " ".join(builder.all("RUN"))
    assert "-c constraints.txt" in install and "/dist/geosched-*.whl" in install and "[dev]" not in install
    assert runtime.last("USER") == "65532:65532"


def test_the_deployment_runs_the_images_entrypoint_as_its_user(runtime: Stage, pod: dict[str, Any]) -> None:
    container = pod["containers"][0]
    entrypoint = exec_form(runtime.last("ENTRYPOINT"))
    argv = pod_argv(container, entrypoint, exec_form(runtime.last("CMD")))
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert argv[0] in scripts, f"{argv[0]} is not a console script of the package ({sorted(scripts)})"
    assert argv[:3] == ["geosched", "scheduler", "run"]
    uid, gid = (int(x) for x in str(runtime.last("USER")).split(":"))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (uid, gid)
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    # Every place the image writes to (HOME, the store, matplotlib's cache, the working directory) is inside an
    # emptyDir: the rest of the filesystem is read-only.
    writable = empty_dir_mounts(pod)
    env = image_env(runtime)
    for where in (env["HOME"], env["GEOSCHED_HOME"], env["MPLCONFIGDIR"], runtime.last("WORKDIR")):
        assert any(Path(str(where)) == Path(w) or Path(w) in Path(str(where)).parents for w in writable), where


def test_kustomize_sets_the_image_the_deployment_names() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text(encoding="utf-8"))
    container = manifest("Deployment")["spec"]["template"]["spec"]["containers"][0]
    image = next(i for i in kustomization["images"] if i["name"] == container["image"])
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert image["newTag"] == version and image["newName"].endswith("/geosched")


def test_the_docker_context_holds_what_the_builder_needs(tmp_path: Path) -> None:
    # The builder sees only what its COPY lines name (and .dockerignore lets through): build the wheel from a
    # context holding exactly that.
    builder = parse_dockerfile(DOCKERFILE)[0]
    context = tmp_path / "src"
    context.mkdir()
    for arg in builder.all("COPY"):
        *sources, _dest = arg.split()
        for source in sources:
            src = ROOT / source
            if src.is_dir():
                shutil.copytree(src, context / source, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(src, context / source)
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert all(f"!{source.rstrip('/')}" in [i.rstrip("/") for i in ignored]
               for arg in builder.all("COPY") for source in arg.split()[:-1])
    run = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                          str(tmp_path / "dist"), str(context)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert list((tmp_path / "dist").glob("geosched-*.whl"))


def empty_dir_mounts(pod: dict[str, Any]) -> list[str]:
    empty = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    return [m["mountPath"] for m in pod["containers"][0]["volumeMounts"] if m["name"] in empty]


def run_as_in_the_pod(argv: list[str], runtime: Stage, pod: dict[str, Any],
                      tmp_path: Path) -> subprocess.CompletedProcess[str]:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or shutil.which("unshare") is None or setpriv is None:
        if os.environ.get("CI"):
            pytest.fail("needs root, unshare and setpriv (util-linux) to build the pod's sandbox")
        pytest.skip("needs root, unshare and setpriv (util-linux); set CI=1 to make this a failure")
    container = pod["containers"][0]
    config_maps: dict[str, dict[str, str]] = {}
    for volume in pod["volumes"]:
        if "configMap" in volume:
            data = manifest("ConfigMap")
            assert data["metadata"]["name"] == volume["configMap"]["name"]
            mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
            config_maps[mount["mountPath"]] = dict(data["data"])
    created = [p for p in config_maps if not Path(p).exists()]
    for path in created:
        Path(path).mkdir(parents=True)  # a mount point; removed below
    # The installed package stands in for the image's venv: its bin directory takes /opt/geosched/bin's place.
    env = {k: v.replace(IMAGE_VENV_BIN, str(Path(sys.executable).parent)) for k, v in image_env(runtime).items()}
    env["PATH"] = env["PATH"].replace("$PATH", "/usr/local/bin:/usr/bin:/bin")
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    for item in container.get("env", []):
        env[item["name"]] = item["value"]
    uid, gid = (int(x) for x in str(runtime.last("USER")).split(":"))
    spec = {"empty_dirs": empty_dir_mounts(pod), "config_maps": config_maps, "uid": uid, "gid": gid,
            "keep": [sys.prefix, sys.base_prefix, str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(":"))],
            "read_search": not world_readable(Path(sys.executable).resolve()), "setpriv": setpriv,
            "workdir": runtime.last("WORKDIR"), "env": env, "argv": argv}
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    try:
        return subprocess.run(["unshare", "--mount", sys.executable, str(Path(__file__).parent / "pod_sandbox.py"),
                               str(spec_file)], capture_output=True, text=True, timeout=120)
    finally:
        for path in created:
            Path(path).rmdir()


def world_readable(path: Path) -> bool:
    return all(p.stat().st_mode & 0o001 for p in path.parents) and path.stat().st_mode & 0o005 == 0o005


def test_the_pods_command_starts_in_a_pod_shaped_sandbox(runtime: Stage, pod: dict[str, Any],
                                                          tmp_path: Path) -> None:
    argv = pod_argv(pod["containers"][0], exec_form(runtime.last("ENTRYPOINT")), exec_form(runtime.last("CMD")))
    helped = run_as_in_the_pod([*argv, "--help"], runtime, pod, tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "Bind pending pods" in helped.stdout
    # Exactly the pod's command: it parses its arguments, reads the SchedulerConfig from the ConfigMap, imports the
    # scheduler and the kubernetes client under a read-only root as uid 65532, and stops only at the one thing a
    # pod has and this sandbox has not: the service account's credentials.
    started = run_as_in_the_pod(argv, runtime, pod, tmp_path)
    assert started.returncode == 2, started.stderr
    assert started.stderr.strip().splitlines() == [
        "error: --in-cluster: no in-cluster credentials: Service host/port is not set."]


def test_the_sandbox_is_read_only_and_runs_as_the_images_user(runtime: Stage, pod: dict[str, Any],
                                                              tmp_path: Path) -> None:
    # The sandbox itself: writes outside the emptyDirs fail, inside succeed, as uid 65532; and the command this
    # file replaced (`geosched kube scheduler run`) fails there, so the test above can fail.
    probe = ("import os, pathlib, sys; print(os.getuid());"
             "pathlib.Path('/tmp/x').write_text('ok');"
             "\ntry:\n    pathlib.Path(sys.prefix, 'x').write_text('no')\nexcept OSError as e:\n    print(e.errno)")
    run = run_as_in_the_pod([sys.executable, "-c", probe], runtime, pod, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["65532", "30"]  # EROFS
    old = run_as_in_the_pod(["geosched", "kube", "scheduler", "run", "--help"], runtime, pod, tmp_path)
    assert old.returncode == 2 and "No such command 'kube'" in old.stderr
