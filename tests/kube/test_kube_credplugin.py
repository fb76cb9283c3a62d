"""A kubeconfig's exec credential plugin that cannot run or fails (audit finding 7): one error line naming the
kubeconfig, the user entry, the plugin and its cause (not on the PATH; its exit code and first stderr line), and no
library log line (`ERROR:root:`, `WARNING:urllib3...`) on stderr. The kubeconfigs are the shapes `aws eks
update-kubeconfig` and `gcloud container clusters get-credentials` write (tests/data/kubeconfigs/eks.yaml and
gke.yaml cite their sources); the plugins are scripts on a PATH of the test's own, as the real ones fail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KUBECONFIGS = ROOT / "tests" / "data" / "kubeconfigs"
EKS, GKE = KUBECONFIGS / "eks.yaml", KUBECONFIGS / "gke.yaml"
EKS_USER = "arn:aws:eks:us-east-1:111122223333:cluster/gpu-east"
TOKEN = "k8s-aws-v1.aHR0cHM6Ly9zdHMuYW1hem9uYXdzLmNvbS8_QWN0aW9uPUdldENhbGxlcklkZW50aXR5"
# What `aws eks get-token` prints when the profile of the plugin's env does not exist (AWS CLI v2: a blank line,
# then the message), exit 255.
AWS_NO_PROFILE = 'printf "\\nThe config profile (ml-platform) could not be found\\n" >&2; exit 255'
# What gke-gcloud-auth-plugin prints with no active gcloud account (its glog line, then gcloud's own message over
# several lines), exit 1: as captured by the audit (tests' input, not geosched's output).
GKE_NO_ACCOUNT = ("printf 'F1206 23:48:31.954879   19178 cred.go:145] print credential failed with error: Failed to "
                  "retrieve access token:: failure while executing gcloud, with args [config config-helper "
                  "--format=json]: exit status 1 (err: ERROR: (gcloud.config.config-helper) You do not currently "
                  "have an active account selected.\\nPlease run:\\n\\n  $ gcloud auth login\\n' >&2; exit 1")
# A working plugin's answer (client.authentication.k8s.io/v1beta1 ExecCredential), for a server that is down.
AWS_OK = ("printf '{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"spec\":{},"
          f"\"status\":{{\"expirationTimestamp\":\"2099-01-01T00:00:00Z\",\"token\":\"{TOKEN}\"}}}}'")


def _bin(tmp_path: Path, **scripts: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = folder / name.replace("_", "-")
        path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        path.chmod(0o755)
    return folder


def _run(tmp_path: Path, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "KUBECONFIG", "CLOUDSDK_"))}
    env.update(PATH=str(folder), GEOSCHED_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "geosched", *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=tmp_path)


def _one_line(run: subprocess.CompletedProcess[str]) -> str:
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert "ERROR:root" not in run.stderr and "urllib3" not in run.stderr and "Traceback" not in run.stderr
    return lines[0]


def test_a_plugin_not_on_the_path_is_named(tmp_path: Path) -> None:
    run = _run(tmp_path, _bin(tmp_path), "jobs", "--kubeconfig", str(EKS))
    assert run.returncode == 1
    line = _one_line(run)
    assert f"{EKS}: context eks-us-east-1: user {EKS_USER}: credential plugin `aws` not found on PATH" in line, line
    assert "401" not in line


def test_the_gke_plugins_install_hint_is_given_when_it_is_missing(tmp_path: Path) -> None:
    run = _run(tmp_path, _bin(tmp_path), "snapshot", "export", "--from-clusters", "--kubeconfig", str(GKE),
               str(tmp_path / "snap"))
    assert run.returncode == 1
    line = _one_line(run)
    assert "credential plugin `gke-gcloud-auth-plugin` not found on PATH (Install gke-gcloud-auth-plugin" in line
    assert not (tmp_path / "snap").exists()


def test_a_failing_plugin_gives_its_exit_code_and_first_stderr_line(tmp_path: Path) -> None:
    run = _run(tmp_path, _bin(tmp_path, aws=AWS_NO_PROFILE), "jobs", "--kubeconfig", str(EKS))
    assert run.returncode == 1
    line = _one_line(run)
    # The profile (the plugin's AWS_PROFILE) is a name, not a secret: the user needs it to fix the config.
    assert (f"{EKS}: context eks-us-east-1: user {EKS_USER}: credential plugin `aws` failed (exit 255): "
            "The config profile (ml-platform) could not be found") in line, line


def test_env_values_that_select_a_config_are_shown_and_every_other_env_value_is_redacted(tmp_path: Path) -> None:
    """`aws eks update-kubeconfig --profile gpu-east` for the cluster gpu-east writes AWS_PROFILE=gpu-east: the
    cluster's name must print as itself; a secret a colleague put in the plugin's env (a key, a session token, a
    name geosched does not know) is never printed."""
    text = EKS.read_text(encoding="utf-8").replace(
        "        value: ml-platform\n",
        "        value: gpu-east\n      - name: AWS_SECRET_ACCESS_KEY\n"
        "        value: wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLE\n"
        "      - name: MY_TEAM_TOKEN\n        value: s3cr3t-team-token-0042\n")
    assert "gpu-east\n      - name: AWS_SECRET" in text
    config = tmp_path / "eks.yaml"
    config.write_text(text, encoding="utf-8")
    failing = ('printf "\\nThe config profile (gpu-east) could not be found '
               'wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLE s3cr3t-team-token-0042\\n" >&2; exit 255')
    run = _run(tmp_path, _bin(tmp_path, aws=failing), "jobs", "--kubeconfig", str(config))
    assert run.returncode == 1
    line = _one_line(run)
    assert "cluster/gpu-east: credential plugin `aws` failed (exit 255): The config profile (gpu-east)" in line, line
    assert "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLE" not in run.stderr + run.stdout
    assert "s3cr3t-team-token-0042" not in run.stderr + run.stdout


def test_a_failing_gke_plugin_gives_its_first_line_only(tmp_path: Path) -> None:
    run = _run(tmp_path, _bin(tmp_path, gke_gcloud_auth_plugin=GKE_NO_ACCOUNT), "jobs", "--kubeconfig", str(GKE))
    assert run.returncode == 1
    line = _one_line(run)
    assert "credential plugin `gke-gcloud-auth-plugin` failed (exit 1): F1206 23:48:31.954879" in line, line
    assert "You do not currently have an active account selected." in line and "gcloud auth login" not in line


def test_a_working_plugin_and_a_server_that_is_down_print_no_retry_lines_and_no_token(tmp_path: Path) -> None:
    run = _run(tmp_path, _bin(tmp_path, aws=AWS_OK), "jobs", "--kubeconfig", str(EKS))
    assert run.returncode == 1
    line = _one_line(run)
    assert "cannot connect to 127.0.0.1:1" in line, line
    assert TOKEN not in run.stdout + run.stderr
