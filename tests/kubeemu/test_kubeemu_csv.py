"""A kubeconfig context is a cluster's name in geosched: `submit` places on it, `jobs --record` writes it into the
usage ledger, `report cost --by cluster -o csv` prints it. A context named like a spreadsheet formula (OWASP "CSV
Injection", https://owasp.org/www-community/attacks/CSV_Injection) comes out of the CSV as text (a leading `'`), and
as it is in JSON. Emulated cluster over real HTTP, the official client unchanged, the
real CLI and a real sqlite store."""

from __future__ import annotations

import csv
import io
import json
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from geosched.cli.main import app
from tests.kubeemu import MultiCluster, node_manifest
from tests.test_csv_text import DANGEROUS

pytestmark = pytest.mark.integration
A100 = "NVIDIA-A100-SXM4-40GB"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[MultiCluster]:
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    with MultiCluster(1, directory=tmp_path) as mc:
        node = node_manifest("gke-a100-0", region="us-central1", zone="us-central1-a", instance_type="a2-highgpu-8g",
                             gpu_product=A100, gpus=8)
        node["spec"]["providerID"] = "gce://geosched-test/us-central1-a/gke-a100-0"
        mc["cluster-a"].create(node)
        yield mc
        assert mc["cluster-a"].server_errors == [], mc["cluster-a"].server_errors


def renamed(kubeconfig: Path, context: str) -> Path:
    """The kubeconfig with its one context renamed: a context's name is the user's to choose (kubectl config
    rename-context takes any string), and it is what geosched calls the cluster."""
    doc = yaml.safe_load(kubeconfig.read_text(encoding="utf-8"))
    doc["contexts"][0]["name"] = doc["current-context"] = context
    kubeconfig.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return kubeconfig


def geosched(home: Path, kubeconfig: Path, *args: str) -> str:
    run = CliRunner().invoke(app, ["--home", str(home), *args], env={"KUBECONFIG": str(kubeconfig)})
    assert run.exit_code == 0, run.output
    return run.stdout


@pytest.mark.parametrize("context", DANGEROUS)
def test_a_formula_shaped_context_is_text_in_the_report_csv(cluster: MultiCluster, tmp_path: Path,
                                                               context: str) -> None:
    home, kubeconfig = tmp_path / "home", renamed(cluster.kubeconfig, context)
    job = tmp_path / "train.yaml"
    job.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/t:1\n"
                   "workers: 1\ngpus_per_worker: 8\ngpu: A100\n", encoding="utf-8")
    placed = json.loads(geosched(home, kubeconfig, "submit", str(job), "-o", "json"))
    assert (placed["status"], placed["cluster"]) == ("applied", context)
    start = float(int(time.time()) - 2 * 3600)
    cluster["cluster-a"].set_status("batch/v1/jobs", "train", {
        "startTime": datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "active": 1}, "default")

    (listed,) = json.loads(geosched(home, kubeconfig, "jobs", "--record", "-o", "json"))["items"]
    assert (listed["cluster"], listed["name"], listed["state"]) == (context, "train", "Running")

    (row,) = csv.DictReader(io.StringIO(geosched(home, kubeconfig, "report", "cost", "--by", "cluster",
                                                 "--since", "1d", "-o", "csv"), newline=""))
    (doc,) = json.loads(geosched(home, kubeconfig, "report", "cost", "--by", "cluster", "--since", "1d",
                                 "-o", "json"))["rows"]
    assert (row["cluster"], doc["cluster"]) == ("'" + context, context)
    # The run is open, so each report counts it up to its own now: the two agree to well under a second in 2 h.
    assert float(row["gpu_hours"]) == pytest.approx(doc["gpu_hours"], rel=1e-3) and doc["gpu_hours"] > 15.9
    assert float(row["cost_usd"]) == pytest.approx(doc["cost_usd"], rel=1e-3) and doc["cost_usd"] > 0
