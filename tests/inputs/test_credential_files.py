"""Files named inside other inputs, each holding a credential (the adversarial test of 2026-12-07, findings 1, 3, 4,
9 and 10): a kubeconfig's tokenFile, client certificate and key and CA bundle, an exec credential plugin, the SSH
public key, `probe run`'s known_hosts and inventory keys. Each is read through the gate (a regular file, its size
before a byte is read) or run bounded, and a bad one is one line naming where it was named, exit 2.

FIFOs and sparse files are made in tmp_path; the server of every kubeconfig is 127.0.0.1:1, where nothing listens."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.core.errors import InputError
from geosched.kube import kubeconfig
from tests.inputs.inputs_support import ROOT, Run, geosched

JOB = ROOT / "tests" / "data" / "good" / "job.yaml"
GIB = 1 << 30

# Every command that reads a kubeconfig, as a user runs it (`{k}`: the kubeconfig).
COMMANDS: dict[str, list[str]] = {
    "jobs": ["jobs", "--kubeconfig", "{k}"],
    "submit": ["submit", str(JOB), "--kubeconfig", "{k}", "--dry-run"],
    "scheduler": ["scheduler", "run", "--kubeconfig", "{k}", "--context", "c"],
    "dispatch": ["multikueue", "dispatch", "--kubeconfig", "{k}", "--context", "c", "--once", "--no-record"],
}
# client-go's file fields (clientcmd/api/v1 types.go; loader.go GetClusterFileReferences, GetAuthInfoFileReferences)
FIELDS = {"tokenFile": "user", "client-certificate": "user", "client-key": "user", "certificate-authority": "cluster"}


def config(user: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", **(cluster or {})}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "users": [{"name": "u", "user": user or {"token": "t0ken-of-the-user-0123456789"}}]}


def with_file(field: str, path: str) -> dict[str, Any]:
    return config(user={field: path}) if FIELDS[field] == "user" else config(cluster={field: path})


def hostile_files(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Each hostile file, and what the one line says about it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sparse = tmp_path / "sparse"
    with sparse.open("wb") as f:
        f.truncate(2 * GIB)
    (tmp_path / "dir").mkdir()
    return {"fifo": (str(fifo), "not a regular file (a FIFO)"), "zero": ("/dev/zero", "not a regular file (a device)"),
            "dir": (str(tmp_path / "dir"), "not a regular file (a directory)"),
            "sparse": (str(sparse), "larger than the 1 MiB limit"), "missing": (str(tmp_path / "nope"), "no such file")}


def run(command: str, path: Path, tmp_path: Path, timeout: float = 60) -> Run:
    return geosched(*[a.replace("{k}", str(path)) for a in COMMANDS[command]], home=tmp_path, timeout=timeout)


def assert_one_line(result: Run, *needles: str) -> None:
    assert result.one_line_error, (result.code, result.stderr[-3000:])
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_file_a_kubeconfig_names_goes_through_the_gate(tmp_path: Path, field: str) -> None:
    for case, (path, reason) in hostile_files(tmp_path).items():
        with pytest.raises(kubeconfig.KubeconfigFileError) as raised:
            kubeconfig.inline_files(with_file(field, path), None, "kc.yaml")
        where = f"{FIELDS[field]} {'u' if FIELDS[field] == 'user' else 'c'}: {field}"
        assert str(raised.value).startswith(f"kc.yaml: {where}: {path}: {reason}"), (case, str(raised.value))


def test_files_are_inlined_for_the_client(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cret-token-from-a-file\n")
    (tmp_path / "ca.pem").write_bytes(b"-----BEGIN CERTIFICATE-----\nabc\n")
    document = config(user={"tokenFile": str(tmp_path / "token")},
                      cluster={"certificate-authority": str(tmp_path / "ca.pem")})
    out = kubeconfig.inline_files(document, "c", "kc.yaml")
    assert out["users"][0]["user"] == {"token": "s3cret-token-from-a-file"}
    assert out["clusters"][0]["cluster"]["certificate-authority-data"] == "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmFiYwo="
    assert "certificate-authority" not in out["clusters"][0]["cluster"]
    assert document["users"][0]["user"] == {"tokenFile": str(tmp_path / "token")}  # the caller's copy is left


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_bad_file_in_a_kubeconfig_is_one_line_exit_2_on_every_command(tmp_path: Path, command: str) -> None:
    """A FIFO tokenFile hung `jobs` and `dispatch`; a missing CA was exit 1 on `jobs` and `submit` (with
    `InputError:` in the line) and exit 2 on the others."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for field, path, reason in (("tokenFile", str(fifo), "a FIFO"), ("certificate-authority", "/nonexistent/ca.pem",
                                                                     "no such file")):
        kc = tmp_path / "kubeconfig"
        kc.write_text(yaml.safe_dump(with_file(field, path)))
        result = run(command, kc, tmp_path, timeout=30)
        assert_one_line(result, str(kc), field, path, reason)
        assert "InputError" not in result.stderr


def test_input_error_is_the_base() -> None:
    assert issubclass(kubeconfig.KubeconfigFileError, InputError)
