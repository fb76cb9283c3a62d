"""`geosched jobs` writes each placed job's run (start and end from its status on the cluster) into the usage
ledger, and `geosched report cost` prices it: against emulated clusters over real HTTP, the official client
unchanged, the real CLI (typer's CliRunner) and a real sqlite store."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from geosched.cli.main import app
from geosched.core.retry import RetryPolicy
from geosched.kube.submit import SubmitOptions, submit
from geosched.report.ledger import intervals
from geosched.report.records import Interval
from geosched.store.db import Store
from tests.kubeemu import MultiCluster, node_manifest

pytestmark = pytest.mark.integration
A100 = "NVIDIA-A100-SXM4-40GB"
# The shipped catalog's on-demand price of a2-highgpu-8g (8 x A100) in us-central1.
USD_PER_NODE_HOUR = 29.38708


@pytest.fixture
def fleet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MultiCluster]:
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    with MultiCluster(2, directory=tmp_path) as mc:
        monkeypatch.setenv("KUBECONFIG", str(mc.kubeconfig))
        for i in range(2):
            # GKE nodes as the cloud provider registers them: the providerID names the provider (gcp).
            name = f"gke-a100-{i}"
            node = node_manifest(name, region="us-central1", zone="us-central1-a", instance_type="a2-highgpu-8g",
                                 gpu_product=A100, gpus=8)
            node["spec"]["providerID"] = f"gce://geosched-test/us-central1-a/{name}"
            mc["cluster-a"].create(node)
        yield mc
        for cluster in mc:
            assert cluster.server_errors == [], cluster.server_errors


def stamp(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def geosched(home: Path, *args: str) -> Any:
    run = CliRunner().invoke(app, ["--home", str(home), *args])
    assert run.exit_code == 0, run.output
    return json.loads(run.stdout)


def jobs(home: Path, *args: str) -> list[dict[str, Any]]:
    """`geosched jobs ... -o json`: a PlacedJobList document (the output contract, docs/schemas); its items."""
    doc = geosched(home, "jobs", *args, "-o", "json")
    assert (doc["apiVersion"], doc["kind"]) == ("geosched.io/v1alpha1", "PlacedJobList"), doc
    return doc["items"]  # type: ignore[no-any-return]


def job_rows(home: Path) -> list[Interval]:
    with Store(home) as store:
        return sorted((i for i in intervals(store) if i.kind == "job"), key=lambda i: i.name)


def test_jobs_syncs_the_run_into_the_ledger_and_the_report_prices_it(fleet: MultiCluster, tmp_path: Path) -> None:
    home = tmp_path / "home"
    job = tmp_path / "train.yaml"
    job.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/t:1\n"
                   "workers: 2\ngpus_per_worker: 8\ngpu: A100\n", encoding="utf-8")
    outcome = submit(job, kubeconfig=fleet.kubeconfig,
                     options=SubmitOptions(retry=RetryPolicy(attempts=4, initial_s=0.05, max_s=0.2)))
    assert (outcome.status, outcome.cluster, outcome.zones) == ("applied", "cluster-a", ("us-central1-a",))
    cluster = fleet["cluster-a"]
    uid = cluster.get("batch/v1/jobs", "train", "default")["metadata"]["uid"]  # type: ignore[index]

    # Not started yet: listed, nothing to account.
    (pending,) = jobs(home, "--record")
    assert (pending["state"], pending["started"], pending["ended"]) == ("Pending", None, None)
    assert not (home / "geosched.db").exists() or job_rows(home) == []

    start = float(int(time.time()) - 3 * 3600)
    cluster.set_status("batch/v1/jobs", "train", {"startTime": stamp(start), "active": 2}, "default")
    # Without --record, `jobs` only reads (issue 14): the run it sees is not written to the ledger.
    (seen,) = jobs(home)
    assert seen["state"] == "Running" and (not (home / "geosched.db").exists() or job_rows(home) == [])
    cluster.set_status("batch/v1/jobs", "train", {"startTime": stamp(start), "active": 2}, "default")
    for _ in range(2):  # a second sync changes nothing
        (running,) = jobs(home, "--record")
    assert (running["state"], running["started"], running["ended"]) == ("Running", stamp(start), None)
    opened = job_rows(home)
    # One row per node of the placement, each with its node's 8 GPUs (2 workers x 8 GPUs in all).
    assert [(i.name, i.job, i.ref, i.source, i.cluster, i.gpus, i.start, i.end) for i in opened] == [
        (f"default/train@gke-a100-{n}", "train", uid, "kube", "cluster-a", 8, start, None) for n in (0, 1)]
    assert {(i.provider, i.region, i.zone, i.instance_type, i.gpu, i.pricing) for i in opened} == \
        {("gcp", "us-central1", "us-central1-a", "a2-highgpu-8g", "A100", "on-demand")}

    end = start + 2 * 3600
    cluster.set_status("batch/v1/jobs", "train", {
        "active": 0, "succeeded": 2, "completionTime": stamp(end),
        "conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": stamp(end)}]}, "default")
    for _ in range(2):
        (done,) = jobs(home, "--record")
    assert (done["state"], done["ended"]) == ("Succeeded", stamp(end))
    closed = job_rows(home)
    assert [(i.id, i.start, i.end) for i in closed] == [(i.id, start, end) for i in opened]

    # Priced once: 2 nodes x 2 h at the catalog's price (each row pays its 8 GPUs' share of one 8-GPU node).
    doc = geosched(home, "report", "cost", "--by", "job", "--since", "1d", "-o", "json")
    (row,) = doc["rows"]
    assert (row["job"], row["intervals"], row["gpu_hours"]) == ("train", 2, 32.0)
    assert row["cost_usd"] == pytest.approx(2 * 2 * USD_PER_NODE_HOUR, rel=1e-9)
    assert row["priced_from"] == "catalog"

    # Deleted (a TTL after finishing): its rows stay as they are.
    cluster.delete("batch/v1/jobs", "train", "default")
    assert jobs(home, "--record") == []
    assert [(i.start, i.end) for i in job_rows(home)] == [(start, end), (start, end)]


def test_a_job_deleted_while_running_is_closed_when_a_sync_sees_it_gone(fleet: MultiCluster, tmp_path: Path) -> None:
    home = tmp_path / "home"
    job = tmp_path / "short.yaml"
    job.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: short\nimage: ghcr.io/example/t:1\n"
                   "workers: 1\ngpus_per_worker: 4\ngpu: A100\n", encoding="utf-8")
    submit(job, kubeconfig=fleet.kubeconfig)
    start = float(int(time.time()) - 600)
    fleet["cluster-a"].set_status("batch/v1/jobs", "short", {"startTime": stamp(start), "active": 1}, "default")
    jobs(home, "--record")
    (row,) = job_rows(home)
    assert (row.name, row.gpus, row.end) == ("default/short", 4, None)

    # A listing of cluster-b alone says nothing about cluster-a's jobs; cluster-a answering without it does.
    jobs(home, "--record", "--context", "cluster-b")
    assert job_rows(home)[0].end is None
    fleet["cluster-a"].delete("batch/v1/jobs", "short", "default")
    seen_gone = time.time()
    jobs(home, "--record")
    (gone,) = job_rows(home)
    assert gone.end is not None and gone.end >= seen_gone
