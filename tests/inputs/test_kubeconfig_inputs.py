"""Hostile kubeconfigs (issue 19, items 2 and 3): every kubeconfig a command reads (a file, each file of a
$KUBECONFIG list, a MultiKueue worker's Secret) passes the input gate before the Kubernetes client sees it, and
no output of any command that reads one carries a credential.

The real shapes are tests/data/kubeconfigs (EKS's and GKE's, from the clouds' docs); the server of each is
127.0.0.1:1, where nothing listens, so a command that gets as far as dialling fails at once."""

from __future__ import annotations

import base64
import copy
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.core.errors import InputError
from geosched.kube.multikueue.workers import parse_kubeconfig
from tests.inputs.inputs_support import ROOT, Run, geosched

KUBECONFIGS = ROOT / "tests" / "data" / "kubeconfigs"
EKS = yaml.safe_load((KUBECONFIGS / "eks.yaml").read_text())
JOB = ROOT / "tests" / "data" / "good" / "job.yaml"

# Every command that reads a kubeconfig, as a user runs it (`{k}`: the kubeconfig).
COMMANDS: dict[str, list[str]] = {
    "jobs": ["jobs", "--kubeconfig", "{k}"],
    "submit": ["submit", str(JOB), "--kubeconfig", "{k}", "--dry-run"],
    "export": ["snapshot", "export", "{out}", "--from-clusters", "--kubeconfig", "{k}"],
    "scheduler": ["scheduler", "run", "--kubeconfig", "{k}", "--context", "c"],
    "dispatch": ["multikueue", "dispatch", "--kubeconfig", "{k}", "--context", "c", "--once", "--no-record"],
}


def run(command: str, kubeconfig: Path | str, tmp_path: Path, env: dict[str, str] | None = None,
        timeout: float = 60) -> Run:
    args = [a.replace("{k}", str(kubeconfig)).replace("{out}", str(tmp_path / "snapshot"))
            for a in COMMANDS[command]]
    if not kubeconfig:  # read from $KUBECONFIG
        i = args.index("--kubeconfig")
        del args[i:i + 2]
    return geosched(*args, home=tmp_path, env=env, timeout=timeout)


def assert_one_line(result: Run, *needles: str) -> None:
    assert result.one_line_error, (result.code, result.stderr[-3000:])
    for needle in needles:
        assert needle in result.stderr, result.stderr


def write(tmp_path: Path, text: str, name: str = "kubeconfig") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def token_config(token: str = "t0ken-of-the-user-0123456789", **cluster: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", **cluster}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "users": [{"name": "u", "user": {"token": token}}]}


def bomb_text(field: str) -> str:
    """A kubeconfig whose `field` holds 9^9 strings through nested aliases (the audit's billion laughs)."""
    lines = ["x0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"x{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    config = token_config()
    if field == "users":
        return "\n".join(lines) + "\n" + yaml.safe_dump(config).replace("users:\n", "users: [*l8]\nold_users:\n")
    # the bomb in a context's namespace: a field the client reads only when it uses the context
    return "\n".join(lines) + "\n" + yaml.safe_dump(config).replace("user: u", "user: u\n    namespace: *l8")


HUGE_INT = "1" * 4300

# Each a case the audit reproduced as a traceback, a hang or a blow-up: (kubeconfig text, what the line names).
HOSTILE: dict[str, tuple[str, tuple[str, ...]]] = {
    "unterminated": ('users: "abc\n', ("not valid YAML",)),
    "billion-laughs": (bomb_text("users"), ("aliases expand the document",)),
    "bomb-in-namespace": (bomb_text("namespace"), ("aliases expand the document",)),
    "keyerror": (yaml.safe_dump({**token_config(), "users": [{"user": {"token": "x"}}]}), ("users[0].name",)),
    "typeerror": (yaml.safe_dump({**token_config(), "contexts": [{"name": "c", "context": "abc"}]}),
                  ("contexts[0].context", "not a mapping")),
    "typeerror-list": (yaml.safe_dump({**token_config(), "clusters": "abc"}), ("clusters", "expected a list")),
    "recursion": ("preferences: " + "[" * 200 + "]" * 200 + "\n" + yaml.safe_dump(token_config()),
                  ("nested deeper",)),
    "huge-int": (f"current-context: {HUGE_INT}\n" + yaml.safe_dump(token_config()).replace(
        "current-context: c\n", ""), ("current-context", "expected a string")),
    "huge-int-name": (yaml.safe_dump(token_config()).replace("- name: u", f"- name: {HUGE_INT}"),
                      ("users[0].name",)),
    "bool-as-string": (yaml.safe_dump(token_config(**{"insecure-skip-tls-verify": "false"})),
                       ("insecure-skip-tls-verify", "true or false")),
    # Found by the fuzz suite's kubeconfig kind: a server with no scheme was dialled over plain http
    # (`cannot connect to 1e308:80`, after urllib3's FutureWarning), the token in the clear.
    "server-without-scheme": (yaml.safe_dump(token_config(server="1e308")),
                              ("clusters[0].cluster.server", "https://")),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_kubeconfig_is_one_line_before_the_client_reads_it(tmp_path: Path, case: str) -> None:
    text, needles = HOSTILE[case]
    path = write(tmp_path, text)
    started = time.monotonic()
    assert_one_line(run("jobs", path, tmp_path), str(path), *needles)
    assert time.monotonic() - started < 20  # the bomb took 7.7 s and 733 MB, or 1.78 GB and a crash


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_reading_a_kubeconfig_goes_through_the_gate(tmp_path: Path, command: str) -> None:
    for case in ("billion-laughs", "keyerror"):
        text, needles = HOSTILE[case]
        path = write(tmp_path, text)
        assert_one_line(run(command, path, tmp_path), str(path), *needles)


def test_each_file_of_a_kubeconfig_list_goes_through_the_gate(tmp_path: Path) -> None:
    good = write(tmp_path, yaml.safe_dump(token_config()), "good")
    bad = write(tmp_path, HOSTILE["bomb-in-namespace"][0], "bad")
    listed = os.pathsep.join([str(good), str(tmp_path / "missing"), str(bad)])
    result = run("jobs", "", tmp_path, env={"KUBECONFIG": listed})
    assert_one_line(result, str(bad), "aliases expand the document")


def test_a_kubeconfig_list_merges_as_kubectl_does(tmp_path: Path) -> None:
    """The first file to name a context or set current-context wins (kubectl's rule), relative certificate
    paths resolve against the file that names them."""
    from geosched.kube import kubeconfig

    first = token_config()
    first["clusters"][0]["cluster"]["certificate-authority"] = "ca.crt"
    second = token_config("other-token-0123456789")
    second["current-context"] = "d"
    second["contexts"].append({"name": "d", "context": {"cluster": "c", "user": "u"}})
    (tmp_path / "a").mkdir()
    write(tmp_path / "a", yaml.safe_dump(first), "config")
    write(tmp_path, yaml.safe_dump(second), "second")
    merged = kubeconfig.read(Path(os.pathsep.join([str(tmp_path / "a" / "config"), str(tmp_path / "second")])))
    assert merged.contexts == ["c", "d"] and merged.current == "c"
    assert merged.config["users"][0]["user"]["token"] == "t0ken-of-the-user-0123456789"
    assert merged.config["clusters"][0]["cluster"]["certificate-authority"] == str(tmp_path / "a" / "ca.crt")


@pytest.mark.parametrize("name", ["eks.yaml", "gke.yaml"])
def test_real_kubeconfig_shapes_pass_the_gate(name: str) -> None:
    from geosched.kube import kubeconfig

    config = kubeconfig.read(KUBECONFIGS / name)
    assert len(config.contexts) == 1 and config.current == config.contexts[0]
    plugin = config.config["users"][0]["user"]["exec"]
    assert plugin["command"] in {"aws", "gke-gcloud-auth-plugin"}  # a name on the PATH stays a name


# --- 3. no credential in any output -------------------------------------------------------------

CANARY = "CANARY-0c1e2d3f4a5b6c7d"


def canaries(label: str) -> str:
    return f"{CANARY}-{label}"


def planted() -> dict[str, Any]:
    """A kubeconfig with a canary in every credential field: a token, a password, key and certificate data, CA
    data, auth-provider config and an exec plugin's env."""
    config = copy.deepcopy(EKS)
    config["clusters"][0]["cluster"]["certificate-authority-data"] = canaries("ca")
    config["clusters"][0]["name"] = config["contexts"][0]["context"]["cluster"] = "c"
    config["contexts"][0]["name"] = config["current-context"] = "c"
    config["users"] = [
        {"name": "u", "user": {"token": canaries("token"), "client-key-data": canaries("key"),
                               "client-certificate-data": canaries("cert")}},
        {"name": "basic", "user": {"username": "admin", "password": canaries("password")}},
        {"name": "oidc", "user": {"auth-provider": {"name": "oidc", "config": {
            "id-token": canaries("id-token"), "refresh-token": canaries("refresh"), "client-secret":
            canaries("client-secret")}}}},
        {"name": "plugin", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                             "command": "sh", "args": ["-c", "echo \"$AWS_SECRET\" >&2; exit 3"],
                                             "env": [{"name": "AWS_SECRET", "value": canaries("exec-env")}]}}},
    ]
    config["contexts"][0]["context"]["user"] = "u"
    return config


def assert_no_canary(result: Run) -> None:
    assert not result.traceback, result.stderr[-3000:]
    assert CANARY not in result.stdout + result.stderr, (result.stdout + result.stderr)[-3000:]


def with_user(config: dict[str, Any], user: str) -> dict[str, Any]:
    config = copy.deepcopy(config)
    config["contexts"][0]["context"]["user"] = user
    return config


# Ways a kubeconfig holding credentials goes wrong, each of which the audit or the client's messages made print
# one: a nameless entry beside named ones, a cluster whose server is null, a context naming no user, an exec
# plugin that fails (printing its env), a server that does not answer.
def leaks() -> dict[str, dict[str, Any]]:
    config = planted()
    nameless = copy.deepcopy(config)
    nameless["users"].append({"user": {"token": canaries("nameless")}})
    no_server = copy.deepcopy(config)
    no_server["clusters"][0]["cluster"]["server"] = None
    missing_user = with_user(config, "nobody")
    duplicated = copy.deepcopy(config)
    duplicated["users"].append(copy.deepcopy(duplicated["users"][0]))
    return {"nameless-user": nameless, "server-null": no_server, "missing-user": missing_user,
            "duplicate-user": duplicated, "exec-fails": with_user(config, "plugin"),
            "unreachable": config, "unreachable-basic": with_user(config, "basic"),
            "unreachable-oidc": with_user(config, "oidc")}


@pytest.mark.parametrize("case", sorted(leaks()))
def test_no_credential_in_the_output_of_jobs(tmp_path: Path, case: str) -> None:
    path = write(tmp_path, yaml.safe_dump(leaks()[case]))
    result = run("jobs", path, tmp_path)
    assert result.code in (1, 2), result.stderr
    assert_no_canary(result)


@pytest.mark.parametrize("command", ["jobs", "submit", "export", "dispatch"])
@pytest.mark.parametrize("case", ["nameless-user", "server-null", "exec-fails", "unreachable"])
def test_no_credential_in_the_output_of_any_command(tmp_path: Path, command: str, case: str) -> None:
    path = write(tmp_path, yaml.safe_dump(leaks()[case]))
    result = run(command, path, tmp_path)
    assert result.code in (1, 2), result.stderr
    assert_no_canary(result)
    # And as JSON, where the command has it (`snapshot export` and `multikueue dispatch` have no -o: their second
    # run was the first one again, the same process and the same output, twice the time and nothing more checked).
    if command in ("jobs", "submit"):
        args = [a.replace("{k}", str(path)) for a in COMMANDS[command]]
        json_result = geosched(*args, "-o", "json", home=tmp_path)
        assert json_result.code == result.code, json_result.stderr
        assert_no_canary(json_result)


def test_the_scheduler_logs_no_credential(tmp_path: Path) -> None:
    """The scheduler retries an unreachable cluster and logs each failure: a log line, not an error, and the
    place an exec plugin's failure (its stderr, here its env) would surface."""
    import signal
    import subprocess
    import sys
    import threading

    for case in ("exec-fails", "unreachable"):
        path = write(tmp_path, yaml.safe_dump(leaks()[case]))
        env = {**os.environ, "GEOSCHED_HOME": str(tmp_path)}
        proc = subprocess.Popen([sys.executable, "-m", "geosched", "scheduler", "run", "--kubeconfig", str(path),
                                 "--context", "c", "--no-leader-elect"], cwd=ROOT, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # Until the real process has tried its cluster and reported the failure (its first line on stderr, or its
        # exit), not a fixed pause: a start slowed by a busy machine must not end the run before the attempt.
        reported = threading.Event()
        read: dict[str, list[str]] = {"out": [], "err": []}

        def drain(stream: Any, into: list[str], first_line: threading.Event | None) -> None:
            for line in stream:
                into.append(line)
                if first_line is not None:
                    first_line.set()
            if first_line is not None:
                first_line.set()  # ended (the process exited) without a line: the assertion below says so

        readers = [threading.Thread(target=drain, args=(proc.stdout, read["out"], None), daemon=True),
                   threading.Thread(target=drain, args=(proc.stderr, read["err"], reported), daemon=True)]
        for reader in readers:
            reader.start()
        assert reported.wait(120), "the scheduler neither logged nor exited within 120 s"
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for reader in readers:
            reader.join(10)
        out, err = "".join(read["out"]), "".join(read["err"])
        assert err.strip(), "the scheduler logged nothing about an unreachable cluster"
        assert_no_canary(Run(proc.returncode, out, err))


# --- MultiKueue worker Secrets --------------------------------------------------------------------

def secret(text: str) -> dict[str, Any]:
    return {"data": {"kubeconfig": base64.b64encode(text.encode()).decode()}}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_worker_secret_is_one_input_error(case: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_kubeconfig(secret(HOSTILE[case][0]), "Secret kueue-system/w1")
    assert str(raised.value).startswith("Secret kueue-system/w1: data.kubeconfig")


def test_a_worker_secret_error_names_no_credential() -> None:
    config = token_config(canaries("secret-token"))
    config["users"].append({"user": {"token": canaries("nameless")}})
    with pytest.raises(InputError) as raised:
        parse_kubeconfig(secret(yaml.safe_dump(config)), "Secret kueue-system/w1")
    assert "users[1].name" in str(raised.value) and CANARY not in str(raised.value)
