"""The provisioning log (geosched/providers/provlog.py, issue 25): every provision writes a file under the home that
a user can attach to a bug report, with each cloud call and decision; `-v` prints the same to stderr; no credential
reaches either. Against the AWS emulator (moto server behind the fault proxy), as tests/providers/test_prov_cli.py."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from geosched.providers.provlog import LOG_DIR
from geosched_emulators import Ec2Fault, Ec2FaultProxy, MotoServer
from tests.providers.prov_support import aws_alive
from tests.providers.test_prov_cli import root_app

pytestmark = pytest.mark.integration

# Planted credentials, long and unique so any leak is found by a substring search. The shapes are AWS's: a secret
# access key is 40 characters of base64, a session token a long base64 blob (docs.aws.amazon.com, "Managing access
# keys for IAM users" and "Temporary security credentials").
SECRET_KEY = "Cn4ryS3cr3tK3yCn4ryS3cr3tK3yCn4ryS3cr3tK"
SESSION_TOKEN = "IQoJb3JpZ2luX2VjEC4NARYtokenCANARYtokenCANARYtokenCANARY/+=="
FILE_SECRET = "Fi1eS3cr3tCanaryFi1eS3cr3tCanaryFi1eS3cr"
CANARIES = (SECRET_KEY, SESSION_TOKEN, FILE_SECRET)


@pytest.fixture
def home(tmp_path: Path, proxy: Ec2FaultProxy, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEOSCHED_AWS_REGIONS", "us-east-1")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-credentials.json"))
    key = tmp_path / "id_ed25519.pub"
    key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me\n")
    monkeypatch.setenv("GEOSCHED_SSH_PUBLIC_KEY", str(key))
    # The credentials boto3 signs with (moto accepts any), and a shared credentials file's profile beside them.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    credentials = tmp_path / "aws-credentials"
    credentials.write_text(f"[other]\naws_access_key_id = AKIAOTHERPROFILE0001\n"
                           f"aws_secret_access_key = {FILE_SECRET}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    return tmp_path / "home"


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(root_app(), ["--home", str(home), *args])


def logs(home: Path, verb: str = "provision") -> list[Path]:
    return sorted((home / LOG_DIR).glob(f"{verb}-*.log"))


def test_a_provision_writes_its_calls_and_decisions_to_a_private_log(home: Path, proxy: Ec2FaultProxy,
                                                                      moto: MotoServer) -> None:
    # The first zone has no capacity, and its error message echoes the session token (a proxy or a misconfigured
    # endpoint can quote a request's headers back; the message is cut to its start, so the echo comes first): the
    # log must carry the error but not the token.
    capacity = Ec2Fault.insufficient_instance_capacity()
    proxy.inject(Ec2Fault.error(capacity.code, f"(token {SESSION_TOKEN}) {capacity.message}", 500),
                 zone="us-east-1b", action="RunInstances")
    result = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--regions",
                 "us-east-1", "--yes", "--name", "gang-log00001")
    assert result.exit_code == 0, result.output
    [path] = logs(home)
    assert path.name.startswith("provision-gang-log00001-")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert f"provision log: {path}" in result.stderr  # said where it is, for the bug report
    text = path.read_text()
    launched = sorted(aws_alive(moto.url, "gang-log00001"))
    assert len(launched) == 2
    for expected in ("gang gang-log00001: 2 x A100:8", "candidates",  # the plan
                     "#1 aws/use1-az1", "start",  # the zone tried
                     "failed: capacity: InsufficientInstanceCapacity",  # its error, so the hop to the next zone
                     "#2 aws/use1-az2", "launched",
                     "aws us-east-1 ec2 RunInstances: HTTP 500 InsufficientInstanceCapacity",  # each call
                     "aws us-east-1 ec2 RunInstances: HTTP 200", "aws us-east-1 ec2 DescribeInstances: HTTP 200",
                     *launched):  # the instance ids
        assert expected in text, expected
    assert "<redacted>" in text  # the echoed token was there, and was replaced
    for canary in CANARIES:
        assert canary not in text and canary not in result.output

    # The teardown has its own log: each instance terminated, and the calls that did it.
    down = run(home, "down", "gang-log00001", "--yes")
    assert down.exit_code == 0, down.output
    [teardown] = logs(home, "down")
    text = teardown.read_text()
    terminating = next(line for line in text.splitlines() if "aws: terminating" in line)
    assert all(i in terminating for i in launched)
    assert "aws us-east-1 ec2 TerminateInstances: HTTP 200" in text and "aws: terminated" in text
    assert not any(c in text for c in CANARIES)


def test_verbose_prints_each_hop_to_stderr_as_the_log_has_it(home: Path, proxy: Ec2FaultProxy) -> None:
    # No zone of the region has capacity: each hop is on stderr as it happens, and the gang fails.
    proxy.inject(Ec2Fault.insufficient_instance_capacity(), action="RunInstances", times="always")
    result = run(home, "provision", "--gpu", "A100:8", "--nodes", "1", "--provider", "aws", "--regions",
                 "us-east-1", "--yes", "--name", "gang-log00002", "-v")
    assert result.exit_code != 0
    [path] = logs(home)
    text = path.read_text()
    hops = [line for line in result.stderr.splitlines() if "failed: capacity" in line]
    assert len(hops) >= 2 and all(line.split(" ", 1)[1] in text for line in hops)  # the file has what -v showed
    assert "RunInstances: HTTP 500 InsufficientInstanceCapacity" in result.stderr
    assert not any(c in result.stderr or c in text for c in CANARIES)

