"""`geosched provision --cluster --provider gcp`, `geosched down` and `geosched up --provider gcp` for GKE node
pool gangs, through the CLI as a user runs them, against the GKE REST double (geosched_emulators/gke.py) named by
GEOSCHED_GKE_ENDPOINT, with google-cloud-container unchanged."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from geosched.cli.up import on_the_group
from geosched.core.errors import EXIT_BAD_INPUT, EXIT_NO_FIT
from geosched.kube.config import ClusterConfig
from geosched.kube.tolerations import Toleration
from geosched.providers import journal
from geosched.store.db import Store
from geosched_emulators.gke import GkeDouble, GkeFault
from tests.kubeemu import MultiCluster
from tests.output_support import valid
from tests.providers.gke_support import CLUSTER, LOCATION, MACHINE
from tests.providers.test_nodepools import create
from tests.providers.test_prov_cli import run
from tests.providers.test_up_cli import run as run_root

pytestmark = pytest.mark.integration

# The shipped catalog's a3-highgpu-8g (8 x H100) on-demand $/h per node in us-central1, zones a, b and c
# (geosched/data/gcp_gpu_vms.csv).
A3_USD_PER_HOUR = 43.06615
ZONES = [f"{LOCATION}-{z}" for z in "abc"]


@pytest.fixture
def home(tmp_path: Path, gke: GkeDouble) -> Path:
    return tmp_path / "home"


def test_dry_run_shows_cluster_zone_type_count_market_and_cost(home: Path, gke: GkeDouble) -> None:
    result = run(home, "provision", "--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION, "--gpu",
                 "H100:8", "--nodes", "2", "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    items = valid(json.loads(result.output))["items"]
    assert sorted((i["cluster"], i["zone"], i["subnet"], i["instance_type"], i["nodes"], i["capacity_type"])
                  for i in items) == [(CLUSTER, z, LOCATION, MACHINE, 2, "ON_DEMAND") for z in ZONES]
    for item in items:
        assert item["usd_per_hour"] == pytest.approx(2 * A3_USD_PER_HOUR)
    assert gke.pools() == {}  # a dry run creates nothing


def test_provision_fails_over_then_down_leaves_the_foreign_pool(home: Path, gke: GkeDouble) -> None:
    dry = valid(json.loads(run(home, "provision", "--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION,
                               "--gpu", "H100:8", "--nodes", "2", "--dry-run", "-o", "json").output))["items"]
    first, second = dry[0]["zone"], dry[1]["zone"]
    gke.inject(GkeFault.stockout(), zone=first, method="nodePools.create")
    result = run(home, "provision", "--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION, "--gpu",
                 "H100:8", "--nodes", "2", "--name", "cli-pool", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    [item] = valid(json.loads(result.output))["items"]
    assert (item["state"], item["zone"], item["nodegroup"], item["capacity_type"]) == (
        "ready", second, "cli-pool-2", "ON_DEMAND")
    assert list(gke.pools()) == [f"{LOCATION}/{CLUSTER}/cli-pool-2"]
    one = valid(json.loads(run(home, "status", "cli-pool", "-o", "json").output))
    assert [(g["name"], g["zone"], g["state"]) for g in one["nodegroups"]] == [
        ("cli-pool-1", first, "deleted"), ("cli-pool-2", second, "created")]
    create(gke, "system", {})
    down = run(home, "down", "cli-pool", "--yes", "-o", "json")
    assert down.exit_code == 0, down.output
    [row] = valid(json.loads(down.output))["items"]
    assert (row["state"], row["terminated"], row["errors"]) == ("terminated", 1, [])
    assert list(gke.pools()) == [f"{LOCATION}/{CLUSTER}/system"]


def test_an_unknown_cluster_is_one_line_exit_2(home: Path, gke: GkeDouble) -> None:
    result = run(home, "provision", "--cluster", "nope", "--provider", "gcp", "--region", LOCATION, "--gpu",
                 "H100:8", "--nodes", "2", "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT
    assert str(result.exception) == f"--cluster: no GKE cluster 'nope' in location {LOCATION}"


@pytest.mark.parametrize(("option", "value", "reason"), [
    # Both go into the request path (projects/*/locations/{location}/clusters/{cluster}).
    ("--cluster", "../x", "'../x' is not a GKE cluster name"),
    ("--cluster", "Train", "'Train' is not a GKE cluster name"),
    ("--cluster", "c" * 41, "is not a GKE cluster name"),
    ("--region", "us-central1/../x", "is not a GCP region or zone name"),
    ("--region", "", "takes the cluster's location"),
])
def test_a_malformed_cluster_or_location_is_one_line_before_any_call(home: Path, gke: GkeDouble, option: str,
                                                                      value: str, reason: str) -> None:
    args = {"--cluster": CLUSTER, "--region": LOCATION, option: value}
    result = run(home, "provision", "--cluster", args["--cluster"], "--provider", "gcp", "--region",
                 args["--region"], "--gpu", "H100:8", "--nodes", "2", "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT, result.exception
    assert str(result.exception).startswith(f"{option}: ") and reason in str(result.exception)
    assert gke.calls == []


def test_a_location_is_required_for_a_gke_cluster(home: Path, gke: GkeDouble) -> None:
    result = run(home, "provision", "--cluster", CLUSTER, "--provider", "gcp", "--gpu", "H100:8", "--nodes", "2",
                 "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "the cluster's location" in str(result.exception)


def job(path: Path, workers: int) -> Path:
    path.write_text(f"apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                    f"workers: {workers}\ngpus_per_worker: 8\ngpu: H100\n", encoding="utf-8")
    return path


def test_up_nodes_that_never_join_fail_over_pool_by_pool_and_each_pool_is_deleted(home: Path, tmp_path: Path,
                                                                                  gke: GkeDouble) -> None:
    (tmp_path / "kube").mkdir()
    with MultiCluster(1, names=[CLUSTER], directory=tmp_path / "kube") as kube:
        result = run_root(home, "up", str(job(tmp_path / "train.yaml", 2)), "--cluster", CLUSTER, "--provider", "gcp",
                     "--region", LOCATION, "--kubeconfig", str(kube.kubeconfig), "--name", "never",
                     "--join-timeout", "1", "--yes", "-o", "json")
    assert result.exit_code == EXIT_NO_FIT, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: no zone of cluster {CLUSTER} held 2 x H100:8 (last: 0 of 2 nodes of node pool "
                           "never-3 "), line
    assert line.endswith("Ready after 1 s; 2 not registered; the node pool was deleted)"), line
    assert gke.pools() == {}
    with Store(home) as store:
        assert journal.gang_record(store, "never").state == "failed"  # type: ignore[union-attr]
        assert [(a.zone, a.outcome, a.error_code) for a in journal.attempts(store, "never")] == [
            (f"{LOCATION}-{z}", "rolled-back", "NodesNotReady") for z in "abc"]


def test_up_on_gke_tolerates_the_taint_gke_puts_on_gpu_nodes() -> None:
    # GKE taints GPU nodes nvidia.com/gpu=present:NoSchedule itself (gkespec.GPU_TAINT, with its source).
    base = ClusterConfig(name="gke", context="gke")
    own = Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule")
    assert on_the_group(base, "gcp") == replace(base, pin_hosts=True, tolerations=(own,))


def test_up_with_a_provisioning_class_renders_the_job_in_the_plans_first_zone_and_creates_no_pool(
        home: Path, tmp_path: Path, gke: GkeDouble) -> None:
    plan = valid(json.loads(run(home, "provision", "--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION,
                                "--gpu", "H100:8", "--nodes", "2", "--dry-run", "-o", "json").output))["items"]
    result = run_root(home, "up", str(job(tmp_path / "train.yaml", 2)), "--cluster", CLUSTER, "--provider", "gcp",
                      "--region", LOCATION, "--provisioning-class", "queued-provisioning.gke.io", "--dry-run",
                      "-o", "json")
    assert result.exit_code == 0, result.output
    outcome = valid(json.loads(result.output))
    assert (outcome["kind"], outcome["status"], outcome["zones"]) == ("SubmitOutcome", "dry-run", [plan[0]["zone"]])
    kinds = [m["kind"] for m in outcome["manifests"]]
    assert kinds == ["ResourceFlavor", "ProvisioningRequestConfig", "AdmissionCheck", "ClusterQueue", "LocalQueue",
                     "Job", "Service"]
    pod = outcome["manifests"][5]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"topology.kubernetes.io/zone": plan[0]["zone"],
                                   "cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert any("$" in a and "queued-provisioning.gke.io" in a for a in outcome["assumptions"])
    assert gke.pools() == {}


@pytest.mark.parametrize(("extra", "says"), [
    (("--provider", "aws", "--region", "us-east-1"), "use it with --provider gcp"),
    (("--provider", "gcp", "--region", LOCATION, "--provisioning-class", "queued"), "is not one of"),
])
def test_up_refuses_a_provisioning_class_it_cannot_render_in_one_line(
        home: Path, tmp_path: Path, gke: GkeDouble, extra: tuple[str, ...], says: str) -> None:
    result = run_root(home, "up", str(job(tmp_path / "train.yaml", 2)), "--cluster", CLUSTER,
                      "--provisioning-class", "queued-provisioning.gke.io", *extra, "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert says in str(result.exception) and "\n" not in str(result.exception)
    assert gke.pools() == {}


def test_sweep_leaves_another_stores_pool_unless_asked_then_deletes_it(home: Path, tmp_path: Path,
                                                                         gke: GkeDouble) -> None:
    """A pool another store made (another machine ran `up`): counted, not listed, until --any-owner; an untagged
    pool is never touched."""
    made = run(home, "provision", "--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION, "--gpu",
               "H100:8", "--nodes", "2", "--name", "cli-gone", "--yes", "-o", "json")
    assert made.exit_code == 0, made.output
    create(gke, "system", {})
    other = tmp_path / "other"
    where = ("sweep", "--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION)
    listed = run(other, *where, "-o", "json")
    assert listed.exit_code == 0, listed.output
    assert valid(json.loads(listed.stdout))["items"] == []
    assert "1 tagged instance(s) or group(s) belong to another store's owner" in listed.output
    anyone = valid(json.loads(run(other, *where, "--any-owner", "-o", "json").stdout))["items"]
    assert [(i["kind"], i["id"], i["gang"], i["region"], i["state"]) for i in anyone] == [
        ("node pool", "cli-gone-1", "cli-gone", LOCATION, "active")]
    swept = run(other, *where, "--any-owner", "--yes")
    assert swept.exit_code == 0, swept.output
    assert list(gke.pools()) == [f"{LOCATION}/{CLUSTER}/system"]
