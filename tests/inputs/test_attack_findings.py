"""The adversarial tester's findings of 2026-12-07 (/work/lanes/attack/REPORT.md) that lane harden-b fixed, each
reproduced through the command a user runs: a secret passed as a document, a full disk on stdout, a home directory
the user did not make, credentials in an endpoint URL, and daemons' log lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.inputs.inputs_support import ROOT, in_process

JOB = ROOT / "examples" / "jobs" / "train-8.yaml"
GITOPS = ROOT / "examples" / "gitops"
# A GitHub personal access token's shape (ghp_ and 36 characters):
# https://github.blog/engineering/platform-security/behind-githubs-new-authentication-token-formats/
TOKEN = "ghp_SUPERSECRETabcdefghijklmnopqrstuvwxyz"


# --- finding 8: a token file passed as a document ---------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["place", "{doc}"],
        ["place", str(JOB), "--fleet", "{doc}"],
        ["probe", "run", "-i", "{doc}"],
        ["jobs", "--clusters", "{doc}"],
        ["multikueue", "dispatch", "--once", "--config", "{doc}", "--context", "c"],
        [
            "gitops",
            "render",
            "--jobs",
            GITOPS / "jobs",
            "--snapshot",
            GITOPS / "snapshot",
            "--clusters",
            GITOPS / "clusters.yaml",
            "--out",
            "{out}",
            "--config",
            "{doc}",
        ],
    ],
    ids=["job", "fleet", "inventory", "clusters", "dispatcher-config", "gitops-config"],
)
def test_a_token_passed_as_a_document_is_named_by_type_and_size_never_by_its_content(
    tmp_path: Path, args: list[str | Path]
) -> None:
    doc = tmp_path / "ghtoken"
    doc.write_text(TOKEN + "\n", encoding="utf-8")
    argv = [str(a).replace("{doc}", str(doc)).replace("{out}", str(tmp_path / "out")) for a in args]
    run = in_process(argv, home=tmp_path / "home")
    assert run.one_line_error, (run.code, run.stderr)
    assert f"expected a mapping, got a string of {len(TOKEN)} characters" in run.stderr
    assert "SUPERSECRET" not in run.stderr + run.stdout


# --- finding 2: a full disk or a closed pipe on stdout ----------------------------------------------------------


def _run_to(stdout: int, home: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GEOSCHED_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "geosched", *map(str, args)],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["config", "show"],
        ["place", JOB],
        ["place", JOB, "--record", "-o", "json"],
        ["policies", "-o", "json"],
        ["--version"],
    ],
    ids=["config-show", "place", "place-record-json", "policies-json", "version"],
)
def test_a_full_disk_on_stdout_is_one_line_and_exit_1(tmp_path: Path, args: list[str | Path]) -> None:
    with open("/dev/full", "w") as full:  # Linux's always-full device: every write is ENOSPC
        done = _run_to(full.fileno(), tmp_path, *args)
    assert done.stderr == "error: cannot write the output: No space left on device\n", done.stderr
    assert done.returncode == 1


def test_a_closed_pipe_on_stdout_ends_quietly(tmp_path: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte, as `| head -0` would be: every write is EPIPE
    try:
        done = _run_to(write, tmp_path, "policies", "-o", "json")
    finally:
        os.close(write)
    assert done.stderr == "", done.stderr  # no "Exception ignored ... BrokenPipeError"
    assert done.returncode == 141  # 128 + SIGPIPE, what a shell reports for a C tool in the same place


# --- finding 11: credentials in an endpoint URL -----------------------------------------------------------------

ENDPOINTS = {
    "GEOSCHED_GCP_ENDPOINT": "https://admin:SUPERSECRETPW@gce.example.com:8443/compute/v1",
    "GEOSCHED_GKE_ENDPOINT": "https://gke.example.com/?access_token=SUPERSECRETTOK&alt=json",
}


@pytest.mark.parametrize("output", ["table", "json"])
def test_config_show_redacts_credentials_in_endpoint_urls(tmp_path: Path, output: str) -> None:
    run = in_process(["config", "show", "-o", output], home=tmp_path / "home", env=ENDPOINTS)
    assert run.code == 0, run.stderr
    assert "SUPERSECRET" not in run.stdout + run.stderr
    # What a reader checks stays: scheme, host, port, path and the query's names.
    assert "https://<redacted>@gce.example.com:8443/compute/v1" in run.stdout
    assert "https://gke.example.com/?access_token=<redacted>&alt=<redacted>" in run.stdout


def test_an_endpoint_without_credentials_is_shown_as_it_is(tmp_path: Path) -> None:
    plain = "https://compute.example.com:8443/compute/v1"
    run = in_process(["config", "show", "-o", "json"], home=tmp_path / "home", env={"GEOSCHED_GCP_ENDPOINT": plain})
    assert f'"{plain}"' in run.stdout


# --- finding 5: a home directory geosched did not make ----------------------------------------------------------


def _status(tmp_path: Path, home: Path, via: str) -> subprocess.CompletedProcess[str]:
    """`geosched status` with its home named by GEOSCHED_HOME or by the config file's `home:`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEOSCHED_")}
    env["HOME"] = str(tmp_path / "user")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "user" / ".config")  # no config file there
    if via == "env":
        env["GEOSCHED_HOME"] = str(home)
    else:
        config = tmp_path / "config.yaml"
        config.write_text(f"home: {home}\n", encoding="utf-8")
        env["GEOSCHED_CONFIG"] = str(config)
    return subprocess.run(
        [sys.executable, "-m", "geosched", "status"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


@pytest.mark.parametrize("via", ["env", "config"])
def test_an_existing_home_keeps_its_mode(tmp_path: Path, via: str) -> None:
    www = tmp_path / "www"
    www.mkdir()
    (www / "index.html").write_text("<p>hello</p>\n", encoding="utf-8")
    www.chmod(0o755)
    done = _status(tmp_path, www, via)
    assert done.returncode == 0, done.stderr
    assert _mode(www) == 0o755, "a read-only command changed the mode of a directory it did not make"
    assert "narrowed www" not in done.stderr
    # The store the user asked for is there, private (its file is geosched's own).
    assert _mode(www / "geosched.db") == 0o600


@pytest.mark.parametrize("via", ["env", "config"])
def test_a_home_geosched_makes_is_private(tmp_path: Path, via: str) -> None:
    home = tmp_path / "new" / "home"
    done = _status(tmp_path, home, via)
    assert done.returncode == 0, done.stderr
    assert _mode(home) == 0o700 and _mode(home / "geosched.db") == 0o600


@pytest.mark.parametrize(
    ("mode", "needle"),
    [(0o1777, "a shared directory (mode 1777"), (0o777, "writable by every user (mode 777)")],
    ids=["sticky-like-tmp", "world-writable"],
)
@pytest.mark.parametrize("via", ["env", "config"])
def test_a_home_every_user_may_write_is_refused_in_one_line(tmp_path: Path, via: str, mode: int, needle: str) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    done = _status(tmp_path, shared, via)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {shared}: ") and needle in lines[0], done.stderr
    assert _mode(shared) == mode and list(shared.iterdir()) == []


# --- findings 6 and 7: the daemons' log lines -------------------------------------------------------------------

# A kubeconfig's shape: https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/ (exec: client-go's credential
# plugins, https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins).
# Port 1 on loopback: nothing listens, every connection is refused at once.
PLUGIN_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {{server: "https://127.0.0.1:1"}}
contexts:
- name: ctx1
  context: {{cluster: c1, user: u1}}
users:
- name: u1
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: {plugin}
      args: []
"""
NAMED_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: u1
  user: {token: "a-token-for-the-test-0123456789"}
contexts:
- name: "ctx\\e]0;pwn\\a1"
  context: {cluster: c1, user: u1}
"""
HOSTILE_CONTEXT = "ctx\x1b]0;pwn\x071"


def _daemon(tmp_path: Path, *args: str | Path, seconds: float) -> tuple[int | None, str]:
    """Run a daemon verb for at most `seconds`, then stop it (SIGTERM); its exit code (None when stopped) and
    stderr."""
    env = {**os.environ, "GEOSCHED_HOME": str(tmp_path / "home"), "COLUMNS": "200"}
    with subprocess.Popen(
        [sys.executable, "-m", "geosched", *map(str, args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    ) as proc:
        try:
            proc.wait(timeout=seconds)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(timeout=30)
            code = None
        assert proc.stderr is not None
        return code, proc.stderr.read()


@pytest.mark.parametrize(
    "verb", [["multikueue", "dispatch", "--once"], ["scheduler", "run"]], ids=["dispatch-once", "scheduler-run"]
)
def test_a_failing_credential_plugin_is_one_escaped_line_in_the_daemons(tmp_path: Path, verb: list[str]) -> None:
    plugin = tmp_path / "plugin.sh"
    plugin.write_text('#!/bin/sh\nprintf "bad\\033]0;pwn\\007\\033[2Jcreds\\nsecond line\\n" >&2\nexit 1\n')
    plugin.chmod(0o755)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(PLUGIN_KUBECONFIG.format(plugin=plugin), encoding="utf-8")
    code, stderr = _daemon(tmp_path, *verb, "--kubeconfig", kubeconfig, "--context", "ctx1", seconds=60)
    assert code == 1, stderr
    lines = stderr.splitlines()
    # The client's own `ERROR root: exec: process returned 1. ...` record is gone; geosched's line stays.
    assert len(lines) == 1 and lines[0].startswith("error: ") and "credential plugin" in lines[0], stderr
    assert "\x1b" not in stderr and "\x07" not in stderr


def test_scheduler_run_escapes_a_context_name_in_its_outage_lines(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(NAMED_KUBECONFIG, encoding="utf-8")
    _, stderr = _daemon(
        tmp_path, "scheduler", "run", "--kubeconfig", kubeconfig, "--context", HOSTILE_CONTEXT, seconds=8
    )
    outages = [line for line in stderr.splitlines() if "cannot reach the API server" in line]
    assert outages, stderr
    assert all("context ctx\\x1b]0;pwn\\x071:" in line for line in outages), outages
    assert not any(c in stderr for c in "\x1b\x07"), stderr
