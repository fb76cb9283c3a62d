"""`geosched kube ...`: the sub-app end to end against emulated clusters."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from geosched.kube.cli import app
from tests.clock import FakeClock
from tests.kubeapi.kubeapi_support import REGIONS, add_gang, add_nodes, nodes_of, wait_until
from tests.kubeemu import MultiCluster
from tests.output_support import valid

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/t:1\n"
                    "workers: 2\ngpus_per_worker: 8\ngpu: H100\n", encoding="utf-8")
    return path


@pytest.fixture
def fleet(clusters: MultiCluster) -> MultiCluster:
    for name, region in REGIONS.items():
        add_nodes(clusters[name], region, "a", 2)
    return clusters


def test_dry_run_prints_the_manifests_and_applies_nothing(fleet: MultiCluster, job: Path) -> None:
    result = CliRunner().invoke(app, ["submit", str(job), "--dry-run", "--kubeconfig", str(fleet.kubeconfig),
                                      "--context", "cluster-b"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["Service", "Job"]
    assert docs[1]["metadata"]["annotations"]["geosched.io/cluster"] == "cluster-b"
    assert "dry run: nothing applied" in result.stderr
    as_json = CliRunner().invoke(app, ["submit", str(job), "--dry-run", "--kubeconfig", str(fleet.kubeconfig),
                                       "--context", "cluster-b", "-o", "json"])
    doc = valid(json.loads(as_json.stdout))  # the manifests as the API takes them, nothing applied
    assert doc["status"] == "dry-run" and [m["kind"] for m in doc["manifests"]] == ["Service", "Job"]
    assert doc["applied"] == [] and doc["unreachable"] == []
    assert all(c.count("PATCH") == 0 for c in fleet)


def test_submit_then_jobs(fleet: MultiCluster, job: Path) -> None:
    runner = CliRunner()
    applied = runner.invoke(app, ["submit", str(job), "--kubeconfig", str(fleet.kubeconfig), "-o", "json"])
    assert applied.exit_code == 0, applied.output
    doc = valid(json.loads(applied.stdout))
    assert doc["status"] == "applied" and [a["action"] for a in doc["applied"]] == ["created", "created"]
    # The schema knows an applied object's shape: a key it does not know is an error.
    with pytest.raises(AssertionError, match="applied/0"):
        valid({**doc, "applied": [{**doc["applied"][0], "apiVersion": "v1"}]})

    again = runner.invoke(app, ["submit", str(job), "--kubeconfig", str(fleet.kubeconfig)])
    assert again.exit_code == 0 and "already placed on cluster" in again.stdout

    listed = runner.invoke(app, ["jobs", "--kubeconfig", str(fleet.kubeconfig), "-o", "json"])
    assert listed.exit_code == 0, listed.output
    rows = valid(json.loads(listed.stdout))["items"]
    assert [(r["cluster"], r["name"], r["state"]) for r in rows] == [(doc["cluster"], "train", "Pending")]
    table = runner.invoke(app, ["jobs", "--kubeconfig", str(fleet.kubeconfig)])
    assert "train" in table.stdout


def test_bad_input_and_no_fit_exit_codes(fleet: MultiCluster, job: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    unknown = runner.invoke(app, ["submit", str(job), "--kubeconfig", str(fleet.kubeconfig), "--context", "nope"])
    assert unknown.exit_code == 2 and "unknown context or cluster nope" in unknown.stderr
    policy = runner.invoke(app, ["submit", str(job), "--policy", "best", "--kubeconfig", str(fleet.kubeconfig)])
    assert policy.exit_code == 2
    big = tmp_path / "big.yaml"
    big.write_text(job.read_text(encoding="utf-8").replace("workers: 2", "workers: 64"), encoding="utf-8")
    nofit = runner.invoke(app, ["submit", str(big), "--kubeconfig", str(fleet.kubeconfig)])
    assert nofit.exit_code == 3 and "no fit" in nofit.stderr
    assert runner.invoke(app, ["scheduler", "run"]).exit_code == 2


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def with_dead_context(kubeconfig: Path, directory: Path) -> Path:
    """The kubeconfig plus context `dead`, whose server refuses connections (a port nothing listens on)."""
    config = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
    config["clusters"].append({"name": "dead", "cluster": {"server": f"https://127.0.0.1:{closed_port()}",
                                                           "insecure-skip-tls-verify": True}})
    config["users"].append({"name": "dead", "user": {"token": "t"}})
    config["contexts"].append({"name": "dead", "context": {"cluster": "dead", "user": "dead"}})
    path = directory / "with-dead.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_a_dead_context_is_named_with_its_cause_not_a_no_fit(fleet: MultiCluster, job: Path, tmp_path: Path) -> None:
    """Issue 21 item 12: `submit --dry-run` against a dead context said "no fit" (exit 3) and `jobs` "nothing to
    show" (exit 0). docs/exit-codes.md: 1 when a cluster could not be read."""
    kubeconfig = str(with_dead_context(fleet.kubeconfig, tmp_path))
    runner = CliRunner()
    alone = runner.invoke(app, ["submit", str(job), "--dry-run", "--kubeconfig", kubeconfig, "--context", "dead"])
    assert alone.exit_code == 1, alone.output
    assert "no fit" not in alone.stderr and "context dead" in alone.stderr and "refused" in alone.stderr
    assert alone.stdout == ""
    big = tmp_path / "big.yaml"
    big.write_text(job.read_text(encoding="utf-8").replace("workers: 2", "workers: 64"), encoding="utf-8")
    partial = runner.invoke(app, ["submit", str(big), "--dry-run", "--kubeconfig", kubeconfig])
    assert partial.exit_code == 1, partial.output  # the dead cluster might have held it
    assert "context dead" in partial.stderr and "could not be read" in partial.stderr
    listed = runner.invoke(app, ["jobs", "--kubeconfig", kubeconfig, "--context", "dead"])
    assert listed.exit_code == 1, listed.output
    assert "nothing to show" not in listed.output and "context dead" in listed.stderr
    assert "refused" in listed.stderr
    some = runner.invoke(app, ["jobs", "--kubeconfig", kubeconfig, "-o", "json"])
    assert some.exit_code == 1 and valid(json.loads(some.stdout))["items"] == []
    assert "context dead" in some.stderr


def dead_only(directory: Path) -> tuple[Path, int]:
    """A kubeconfig of one context, `dead`, whose server is a loopback port nothing listens on."""
    port = closed_port()
    path = directory / "dead.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "dead",
        "clusters": [{"name": "dead", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                  "insecure-skip-tls-verify": True}}],
        "users": [{"name": "dead", "user": {"token": "t0ken-not-to-be-shown"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "dead"}}]}), encoding="utf-8")
    return path, port


def test_dispatch_once_on_a_dead_context_is_one_line_naming_the_context_and_cause(tmp_path: Path) -> None:
    """Issue 21 item 12: `multikueue dispatch --once` on a dead context printed urllib3's three `Retrying ...`
    WARNING lines, then "cannot reach the cluster" without naming the context."""
    kubeconfig, port = dead_only(tmp_path)
    done = subprocess.run([sys.executable, "-m", "geosched", "multikueue", "dispatch", "--kubeconfig", str(kubeconfig),
                           "--context", "dead", "--once", "--no-record"], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "GEOSCHED_HOME": str(tmp_path)})
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"error: cannot reach the cluster of context dead: cannot connect to 127.0.0.1:{port}: Failed to establish a "
        "new connection: [Errno 111] Connection refused"], done.stderr
    assert done.stdout == ""


def test_scheduler_run_on_a_dead_server_keeps_trying_with_a_backoff_said_once_a_step(tmp_path: Path) -> None:
    """Issue 21 item 12: `scheduler run` on an API server that cannot be reached logged urllib3's retries forever
    (three lines per request) and each of its five resources' own failure at every step. It must keep trying (a
    long-running loop), on a bounded backoff (0.5 s doubling to 30 s), one line per step naming the context and
    the cause, and stop cleanly on SIGTERM."""
    kubeconfig, port = dead_only(tmp_path)
    log = tmp_path / "stderr"
    with log.open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "geosched", "scheduler", "run", "--kubeconfig", str(kubeconfig), "--context", "dead",
             "--no-leader-elect"], stdout=subprocess.DEVNULL, stderr=err, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "GEOSCHED_HOME": str(tmp_path)})
        try:
            # Three steps: 0.5 s, 1 s, then 2 s after the first failure (3.5 s of backoff in all).
            wait_until(lambda: log.read_text().count("trying again in") >= 3, timeout=60, what="three steps")
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    lines = log.read_text().splitlines()
    assert process.returncode == 0, lines
    assert lines[-1].startswith("stopped: 0 gang(s)"), lines
    steps = lines[:-1]
    assert not [line for line in steps if "urllib3" in line or "Retrying" in line], steps
    cause = (f"context dead: cannot reach the API server (cannot connect to 127.0.0.1:{port}: Failed to establish "
             "a new connection: [Errno 111] Connection refused); trying again in ")
    assert all(cause in line for line in steps), steps
    delays = [float(line.rsplit(" ", 1)[1].removesuffix("s")) for line in steps]
    # One line a step (five resources failing at each step would repeat each delay), each step twice the last.
    assert delays == [0.5 * 2**i for i in range(len(delays))], steps
    assert "t0ken-not-to-be-shown" not in log.read_text()


def test_scheduler_run_binds_and_stops_on_sigterm(fleet: MultiCluster, tmp_path: Path) -> None:
    cluster = fleet["cluster-a"]
    pods = add_gang(cluster, "g", 2)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", "from geosched.kube.cli import main; main()", "scheduler", "run",
               "--context", "cluster-a", "--kubeconfig", str(fleet.kubeconfig), "--no-leader-elect"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: all(nodes_of(cluster, pods).values()), timeout=30, what="the CLI's scheduler binds")
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "stopped: 1 gang(s), 2 pod(s) bound" in err
    assert cluster.token not in err  # no credentials in the log


def test_an_outage_is_one_backoff_for_every_reflector_bounded_and_said_once_a_step(
        caplog: pytest.LogCaptureFixture) -> None:
    """The backoff itself, on a clock the test moves: five reflectors failing at every step make one line; the
    delay doubles to 30 s and stays there (the loop keeps trying); the first list that answers ends the outage."""
    from geosched.kube.scheduler.reflector import Outage

    clock = FakeClock(100.0)
    outage = Outage("context dead", clock=clock)
    cause = ConnectionRefusedError(111, "Connection refused")
    waits = []
    with caplog.at_level("WARNING", logger="geosched.kube.scheduler.reflector"):
        for _ in range(10):
            step = [outage.failed(cause) for _ in range(5)]  # the five resources, a moment apart
            waits.append(step[0])
            assert all(w == step[0] for w in step)
            clock.advance(step[0])
        outage.reached()
        outage.reached()
        assert outage.failed(cause) == 0.5  # a new outage starts at the first step again
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 12, lines  # ten steps, one recovery, the new outage's first step
    assert lines[0] == ("context dead: cannot reach the API server (ConnectionRefusedError: [Errno 111] Connection "
                        "refused); trying again in 0.5s")
    assert lines[10] == "context dead: the API server answers again, after 152s"
