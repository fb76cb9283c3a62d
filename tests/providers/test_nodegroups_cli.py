"""`geosched provision --cluster` and `geosched down` for node group gangs, through the CLI as a user runs them,
against moto's EKS configured only by the standard AWS variables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geosched.core.errors import EXIT_BAD_INPUT
from geosched.providers import journal
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, MotoServer
from geosched_emulators.eks_extras import capacity_issue
from tests.output_support import valid
from tests.providers.eks_support import NODE_ROLE, ZONES, EksCluster, make_cluster
from tests.providers.test_prov_cli import run

pytestmark = pytest.mark.integration

# The shipped catalog's p4d.24xlarge (8 x A100) on-demand price in us-east-1 per node (geosched/data/aws_gpu_vms.csv).
P4D_USD_PER_HOUR = 32.7726


@pytest.fixture
def home(tmp_path: Path, proxy: Ec2FaultProxy) -> Path:
    return tmp_path / "home"


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    return make_cluster(moto.url, ("use1-az2", "use1-az6"))  # no subnet in use1-az1, the plan's first zone


def test_dry_run_shows_cluster_zone_subnet_type_count_market_and_cost(home: Path, cluster: EksCluster) -> None:
    result = run(home, "provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "A100:8",
                 "--nodes", "2", "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    items = valid(json.loads(result.output))["items"]
    assert [(i["cluster"], i["zone"], i["zone_name"], i["subnet"], i["instance_type"], i["nodes"], i["capacity_type"])
            for i in items] == [
        (cluster.name, "use1-az2", ZONES["use1-az2"], cluster.subnets["use1-az2"], "p4d.24xlarge", 2, "ON_DEMAND"),
        (cluster.name, "use1-az6", ZONES["use1-az6"], cluster.subnets["use1-az6"], "p4d.24xlarge", 2, "ON_DEMAND")]
    assert items[0]["usd_per_hour"] == pytest.approx(2 * P4D_USD_PER_HOUR)
    assert cluster.groups() == {}  # a dry run creates nothing


def test_dry_run_table_says_why_a_zone_is_not_tried(home: Path, cluster: EksCluster) -> None:
    result = run(home, "provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "A100:8",
                 "--nodes", "2", "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"skipped use1-az1 p4d.24xlarge: cluster {cluster.name} has no subnet in zone use1-az1" in result.output
    assert "nothing was created" in result.output


def test_provision_then_down_leaves_the_foreign_group(home: Path, cluster: EksCluster, proxy: Ec2FaultProxy) -> None:
    proxy.nodegroups.set(ZONES["use1-az2"], "CREATE_FAILED", [capacity_issue("p4d.24xlarge", ZONES["use1-az2"])])
    result = run(home, "provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "A100:8",
                 "--nodes", "2", "--node-role", NODE_ROLE, "--name", "cli-gang", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    [item] = valid(json.loads(result.output))["items"]
    assert (item["state"], item["zone"], item["nodegroup"], item["capacity_type"]) == (
        "ready", "use1-az6", "cli-gang-3", "ON_DEMAND")
    assert list(cluster.groups()) == ["cli-gang-3"]  # seq 1 was the skipped use1-az1
    status = run(home, "status", "-o", "json")
    [gang] = valid(json.loads(status.output))["items"]
    assert (gang["state"], gang["zone"], gang["nodes_up"], gang["nodes"], gang["open"]) == (
        "ready", "use1-az6", 2, 2, 0)
    assert gang["usd_per_hour"] == pytest.approx(2 * P4D_USD_PER_HOUR)
    one = valid(json.loads(run(home, "status", "cli-gang", "-o", "json").output))
    assert [(g["name"], g["zone"], g["state"], g["nodes"]) for g in one["nodegroups"]] == [
        ("cli-gang-2", "use1-az2", "deleted", 2), ("cli-gang-3", "use1-az6", "created", 2)]
    assert one["instances"] == []
    cluster.eks.create_nodegroup(clusterName=cluster.name, nodegroupName="team-cpu", nodeRole=NODE_ROLE,
                                 subnets=[cluster.subnets["use1-az2"]])
    down = run(home, "down", "cli-gang", "--yes", "-o", "json")
    assert down.exit_code == 0, down.output
    [row] = valid(json.loads(down.output))["items"]
    assert (row["state"], row["terminated"], row["errors"]) == ("terminated", 1, [])
    assert list(cluster.groups()) == ["team-cpu"]
    with Store(home) as store:
        assert [(a.zone, a.outcome) for a in journal.attempts(store, "cli-gang")] == [
            ("use1-az1", "skipped"), ("use1-az2", "rolled-back"), ("use1-az6", "launched")]


def test_an_unknown_cluster_is_one_line_exit_2(home: Path, proxy: Ec2FaultProxy) -> None:
    result = run(home, "provision", "--cluster", "nope", "--region", "us-east-1", "--gpu", "A100:8", "--nodes", "2",
                 "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "no EKS cluster 'nope' in region us-east-1" in str(result.exception)


def test_a_node_role_is_required_and_checked_before_any_call(home: Path, cluster: EksCluster,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEOSCHED_EKS_NODE_ROLE", raising=False)
    missing = run(home, "provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "A100:8",
                  "--nodes", "2", "--yes")
    assert missing.exit_code == EXIT_BAD_INPUT
    assert "--node-role" in str(missing.exception)
    bad = run(home, "provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "A100:8",
              "--nodes", "2", "--yes", "--node-role", "eks-nodes")
    assert bad.exit_code == EXIT_BAD_INPUT
    assert "expected an IAM role ARN" in str(bad.exception)
    # A pasted ARN with its line end: `$` matched before the newline, and the ARN went to CreateNodegroup.
    pasted = run(home, "provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "A100:8",
                 "--nodes", "2", "--yes", "--node-role", NODE_ROLE + "\n")
    assert pasted.exit_code == EXIT_BAD_INPUT
    assert "expected an IAM role ARN" in str(pasted.exception)
    assert cluster.groups() == {}


@pytest.mark.parametrize(("option", "value", "reason"), [
    # Before: '' was a KeyError traceback (exit 1) and '../x' moto's HTML 404 page as the error (exit 1): the name
    # is a path segment of DescribeCluster's request; a malformed region was boto3's InvalidRegionError (exit 1).
    ("--cluster", "", "'' is not an EKS cluster name"),
    ("--cluster", "../x", "'../x' is not an EKS cluster name"),
    ("--cluster", "ml\x1b[31m", "'ml\\x1b[31m' is not an EKS cluster name"),
    ("--cluster", "c" * 101, "is not an EKS cluster name"),
    ("--region", "us-east-1\x1b[31m", "'us-east-1\\x1b[31m' is not an AWS region name"),
])
def test_a_malformed_cluster_or_region_is_one_line_before_any_call(home: Path, cluster: EksCluster, option: str,
                                                                    value: str, reason: str) -> None:
    args = {"--cluster": cluster.name, "--region": "us-east-1", option: value}
    result = run(home, "provision", "--cluster", args["--cluster"], "--region", args["--region"], "--gpu", "A100:8",
                 "--nodes", "2", "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT, result.exception
    assert str(result.exception).startswith(f"{option}: ") and reason in str(result.exception)
    assert "\n" not in str(result.exception)


def test_sweep_lists_then_deletes_a_group_only_a_lost_store_made(home: Path, tmp_path: Path,
                                                                 cluster: EksCluster) -> None:
    """A store restored from before the gang (same owner, no row of it) sweeps the cluster it names: the group is
    listed as data without a change, deleted with --yes; the store whose open row names it never lists it."""
    import sqlite3

    from geosched.store.db import DB_NAME

    restored = tmp_path / "restored"
    with Store(home) as store:
        journal.owner(store)
        restored.mkdir(mode=0o700)
        target = sqlite3.connect(restored / DB_NAME)
        store.db.backup(target)
        target.close()
    (restored / DB_NAME).chmod(0o600)
    made = run(home, "provision", "--cluster", cluster.name, "--region", "us-east-1", "--gpu", "A100:8",
               "--nodes", "2", "--node-role", NODE_ROLE, "--name", "cli-lost", "--yes", "-o", "json")
    assert made.exit_code == 0, made.output
    # The store that made it: the cluster is in its journal, so a plain sweep looks there, and its row names it.
    own = run(home, "sweep", "--provider", "aws", "--regions", "us-east-1", "-o", "json")
    assert own.exit_code == 0, own.output
    assert valid(json.loads(own.stdout))["items"] == []
    where = ("--cluster", cluster.name, "--region", "us-east-1")
    listed = run(restored, "sweep", *where, "-o", "json")
    assert listed.exit_code == 0, listed.output
    with Store(home) as store:
        owner = journal.owner(store)
    assert [(i["kind"], i["cluster"], i["id"], i["gang"], i["owner"], i["state"]) for i in
            valid(json.loads(listed.stdout))["items"]] == [
        ("node group", cluster.name, "cli-lost-2", "cli-lost", owner, "active")]
    assert list(cluster.groups()) == ["cli-lost-2"]
    swept = run(restored, "sweep", *where, "--yes")
    assert swept.exit_code == 0, swept.output
    assert "deleted 1 node group(s) or pool(s)" in swept.output
    assert cluster.groups() == {}
    # The restored store now knows the lost gang, ended: `status` shows it as any gang.
    gangs = valid(json.loads(run(restored, "status", "-o", "json").stdout))["items"]
    assert [(g["gang"], g["state"], g["nodes_up"], g["open"]) for g in gangs] == [("cli-lost", "terminated", 0, 0)]
    unknown = run(restored, "sweep", "--cluster", "no-such", "--region", "us-east-1")
    assert unknown.exit_code == 1 and "no EKS cluster 'no-such' in region us-east-1" in unknown.output
