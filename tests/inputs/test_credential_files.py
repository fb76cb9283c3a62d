"""Files named inside other inputs, each holding a credential (the adversarial test of 2026-12-07, findings 1, 3, 4,
9 and 10): a kubeconfig's tokenFile, client certificate and key and CA bundle, an exec credential plugin, the SSH
public key, `probe run`'s known_hosts and inventory keys. Each is read through the gate (a regular file, its size
before a byte is read) or run bounded, and a bad one is one line naming where it was named, exit 2.

FIFOs and sparse files are made in tmp_path; the server of every kubeconfig is 127.0.0.1:1, where nothing listens."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.core.errors import InputError
from geosched.kube import client, credplugin, kubeconfig
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
        with pytest.raises(kubeconfig.KubeconfigError) as raised:
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
    # a context whose cluster is missing: the client's refusal, the same shape and exit code
    kc.write_text(yaml.safe_dump({**config(), "clusters": []}))
    result = run(command, kc, tmp_path, timeout=30)
    assert_one_line(result, str(kc), "context c", "Expected object with name")
    assert "InputError" not in result.stderr


def test_input_error_is_the_base() -> None:
    assert issubclass(kubeconfig.KubeconfigError, InputError)


# --- exec credential plugins ------------------------------------------------------------------------

def exec_config(command: str, *args: str) -> dict[str, Any]:
    # the exec block as `aws eks update-kubeconfig` writes it (tests/data/kubeconfigs/eks.yaml cites the source)
    return config(user={"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": command,
                                 "args": list(args)}})


def test_a_plugin_that_never_answers_is_killed_at_its_deadline() -> None:
    """`sleep 1000` held `jobs` until the test's own timeout killed it; a shell's child holding the pipe open
    would outlive a kill of the shell alone."""
    started = time.monotonic()
    with pytest.raises(credplugin.PluginBound, match="gave no credential within 1 s"):
        credplugin.run_plugin(["/bin/sh", "-c", "sleep 1000 & sleep 1000"], env=dict(os.environ), cwd=None,
                              timeout_s=1)
    assert time.monotonic() - started < 5


def test_a_plugin_flooding_stdout_is_stopped_at_the_cap() -> None:
    """`head -c 3000000000 /dev/zero` took 2.98 GB of memory before the client failed to decode it."""
    started = time.monotonic()
    with pytest.raises(credplugin.PluginBound, match="more than 1 MiB"):
        credplugin.run_plugin(["/usr/bin/head", "-c", "3000000000", "/dev/zero"], env=dict(os.environ), cwd=None)
    assert time.monotonic() - started < 5


def test_a_plugin_that_answers_is_read_as_the_client_would() -> None:
    code, out, err = credplugin.run_plugin(["/bin/sh", "-c", "echo '{}'; echo oops >&2; exit 3"],
                                           env=dict(os.environ), cwd=None)
    assert (code, out, err) == (3, b"{}\n", b"oops\n")


def test_a_hanging_plugin_is_one_line_naming_context_and_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(credplugin, "TIMEOUT_S", 1.0)
    started = time.monotonic()
    with pytest.raises(credplugin.CredentialPluginError) as raised:
        client.connect_config(exec_config("/bin/sleep", "1000"), "kc.yaml", context="c")
    assert str(raised.value) == ("kc.yaml: context c: user u: credential plugin `sleep` failed: "
                                 "gave no credential within 1 s")
    assert time.monotonic() - started < 5


def test_a_flooding_plugin_through_jobs_is_one_line_in_bounded_memory(tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump(exec_config("/usr/bin/head", "-c", "3000000000", "/dev/zero")))
    result = run("jobs", kc, tmp_path)  # under 1 GiB of address space (inputs_support)
    assert result.code == 1 and len(result.stderr.splitlines()) == 1, result.stderr[-2000:]
    assert "context c: user u: credential plugin `head` failed: wrote more than 1 MiB to stdout" in result.stderr


# --- the SSH public key -------------------------------------------------------------------------------

def test_a_public_key_that_is_not_utf8_or_too_large_is_one_line(tmp_path: Path) -> None:
    """A key saved by PowerShell's `>` (UTF-16, BOM ff fe) was a 55-line UnicodeDecodeError traceback from
    `check --provider aws`; a 2 GiB sparse key file or /dev/zero was read whole (MemoryError)."""
    files = hostile_files(tmp_path)
    utf16 = tmp_path / "id_ed25519.pub"
    utf16.write_bytes("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI user@host\n".encode("utf-16"))
    cases = {"utf16": (str(utf16), "not UTF-8 text (byte 0)"), **{k: files[k] for k in ("fifo", "zero", "sparse")}}
    for case, (path, reason) in cases.items():
        result = geosched("check", "--provider", "aws", home=tmp_path, env={"GEOSCHED_SSH_PUBLIC_KEY": path},
                          timeout=60)
        assert_one_line(result, path, reason)
        assert "OpenSSH public key" in result.stderr, case


def test_a_missing_or_good_public_key_reads_as_before(tmp_path: Path) -> None:
    from geosched.providers.config import read_public_key

    key = tmp_path / "id.pub"
    key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI josé@host\n")
    assert read_public_key({}, explicit=key) == "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI josé@host"
    assert read_public_key({}, explicit=tmp_path / "missing.pub", named=tmp_path / "missing2.pub") is None


# --- probe run's SSH files ----------------------------------------------------------------------------

# The shape of tests/data/good/inventory.yaml; 127.0.0.1:1, where nothing listens.
PROBE_INVENTORY = """
regions: [{provider: onprem, name: zurich, grid_gco2e_per_kwh: 30, pue: 1.25}]
nodes:
  - {name: n1, address: 127.0.0.1, port: 1, zone: zrh-a, region: zurich, gpu: A100, gpus: 8}
"""


@pytest.mark.parametrize("case", ["fifo", "zero", "sparse"])
def test_a_known_hosts_file_goes_through_the_gate_before_dialling(tmp_path: Path, case: str) -> None:
    """`--known-hosts` as a FIFO held `probe run` past --deadline 10; /dev/zero or a 2 GiB sparse file took 2 GB
    to a MemoryError row."""
    path, reason = hostile_files(tmp_path)[case]
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(PROBE_INVENTORY)
    started = time.monotonic()
    result = geosched("probe", "run", "--inventory", inventory, "--known-hosts", path, "--deadline", "10",
                      "--kinds", "rtt", home=tmp_path, timeout=30)
    assert_one_line(result, path, reason.replace("1 MiB", "16 MiB"))
    assert time.monotonic() - started < 15


def test_an_inventory_key_goes_through_the_gate(tmp_path: Path) -> None:
    """A 2 GiB sparse `key:` took 2.16 GB before asyncssh's MemoryError; its `.pub` beside it is read too."""
    from geosched.files.inventory import SshTarget
    from geosched.probes.failures import ProbeError
    from geosched.probes.ssh import check_key_file

    files = hostile_files(tmp_path)
    target = SshTarget("n1", "127.0.0.1", "z", "r", key=Path(files["sparse"][0]))
    with pytest.raises(ProbeError, match=r"private key .*sparse for n1: .*sparse: larger than the 1 MiB limit"):
        check_key_file(target)
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    check_key_file(SshTarget("n1", "127.0.0.1", "z", "r", key=key))
    os.mkfifo(tmp_path / "id_ed25519.pub")
    with pytest.raises(ProbeError, match=r"id_ed25519.pub: not a regular file \(a FIFO\)"):
        check_key_file(SshTarget("n1", "127.0.0.1", "z", "r", key=key))


def test_the_client_gets_each_file_s_content(tmp_path: Path) -> None:
    """The inlined fields reach the client as the files did: the CA, certificate and key it writes for urllib3 hold
    the same bytes, the token is the file's (trimmed, as client-go does)."""
    contents = {"ca.pem": b"-----BEGIN CERTIFICATE-----\nca\n", "crt.pem": b"-----BEGIN CERTIFICATE-----\ncrt\n",
                "key.pem": b"-----BEGIN PRIVATE KEY-----\nkey\n", "token": b"t0ken-from-a-file-0123456789\n"}
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
    document = config(user={"client-certificate": str(tmp_path / "crt.pem"), "client-key": str(tmp_path / "key.pem"),
                            "tokenFile": str(tmp_path / "token")},
                      cluster={"certificate-authority": str(tmp_path / "ca.pem")})
    api = client.connect_config(document, "kc.yaml", context="c")
    try:
        settings = api.configuration
        assert Path(settings.ssl_ca_cert).read_bytes() == contents["ca.pem"]
        assert Path(settings.cert_file).read_bytes() == contents["crt.pem"]
        assert Path(settings.key_file).read_bytes() == contents["key.pem"]
        assert settings.api_key["BearerToken"] == "Bearer t0ken-from-a-file-0123456789"
    finally:
        api.close()
