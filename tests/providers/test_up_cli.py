"""`geosched up` through the CLI, without the real control plane: the dry run's plan and $/h, the EKS group size
cap, the failover when the nodes never join and the teardown when the cluster cannot be asked (moto's EKS with
real boto3 behind the fault proxy; the cluster is the project's API emulator over HTTP, tests/kubeemu, where no
kubelet ever registers). The whole path
with nodes that join and pods the real scheduler binds: tests/realkube/test_realkube_up_demo.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from geosched.cli.main import app
from geosched.cli.up import on_the_group
from geosched.core.errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_NO_FIT, GeoschedError
from geosched.kube.config import ClusterConfig
from geosched.kube.tolerations import Toleration
from geosched.providers import journal
from geosched.report.ledger import ledger_intervals
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, MotoServer
from tests.kubeemu import MultiCluster
from tests.output_support import valid
from tests.providers.eks_support import NODE_ROLE, EksCluster, make_cluster

pytestmark = pytest.mark.integration

# The shipped catalog's p5.48xlarge (8 x H100) on-demand $/h per node in us-east-1, every zone
# (geosched/data/aws_gpu_vms.csv).
P5_USD_PER_HOUR = 98.32


def run(home: Path, *args: str) -> Result:
    """The real root command (`up` is a top-level verb); errors mapped to exit codes as geosched.cli.main.main does."""
    result = CliRunner().invoke(app, ["--home", str(home), *args])
    if isinstance(result.exception, GeoschedError):
        result.exit_code = result.exception.exit_code
    return result


@pytest.fixture
def home(tmp_path: Path, proxy: Ec2FaultProxy) -> Path:
    return tmp_path / "home"


@pytest.fixture
def cluster(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    return make_cluster(moto.url, ("use1-az2", "use1-az6"))


@pytest.fixture
def kube(tmp_path: Path, cluster: EksCluster) -> Iterator[MultiCluster]:
    (tmp_path / "kube").mkdir()
    with MultiCluster(1, names=[cluster.name], directory=tmp_path / "kube") as mc:
        yield mc


def job(path: Path, workers: int) -> Path:
    path.write_text(f"apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/train:1\n"
                    f"workers: {workers}\ngpus_per_worker: 8\ngpu: H100\n", encoding="utf-8")
    return path


def test_dry_run_shows_the_node_group_plan_and_its_cost(home: Path, tmp_path: Path, cluster: EksCluster) -> None:
    result = run(home, "up", str(job(tmp_path / "train.yaml", 2)), "--cluster", cluster.name, "--region",
                 "us-east-1", "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    items = valid(json.loads(result.output))["items"]
    assert {(i["zone"], i["instance_type"], i["nodes"], i["capacity_type"], i["subnet"]) for i in items} == {
        (z, "p5.48xlarge", 2, "ON_DEMAND", cluster.subnets[z]) for z in ("use1-az2", "use1-az6")}
    for item in items:
        assert item["usd_per_hour"] == pytest.approx(2 * P5_USD_PER_HOUR)
    assert cluster.groups() == {}


def test_spare_nodes_make_the_group_larger_than_the_gang(home: Path, tmp_path: Path, cluster: EksCluster) -> None:
    result = run(home, "up", str(job(tmp_path / "train.yaml", 2)), "--cluster", cluster.name, "--region",
                 "us-east-1", "--spare-nodes", "1", "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    items = valid(json.loads(result.output))["items"]
    assert {i["nodes"] for i in items} == {3}
    assert [i["usd_per_hour"] for i in items] == pytest.approx([3 * P5_USD_PER_HOUR] * len(items))  # spares paid
    refused = run(home, "up", str(job(tmp_path / "train.yaml", 2)), "--cluster", cluster.name, "--spare-nodes", "1",
                  "--karpenter")
    assert refused.exit_code == EXIT_BAD_INPUT
    assert str(refused.exception).startswith("--spare-nodes: sizes a managed node group geosched creates")


@pytest.mark.parametrize("command", ["up", "provision"])
def test_a_gang_larger_than_one_node_group_is_refused_in_one_line_before_any_call(
        home: Path, tmp_path: Path, cluster: EksCluster, proxy: Ec2FaultProxy, command: str) -> None:
    before = len(proxy.calls)
    args = (["up", str(job(tmp_path / "train.yaml", 451))] if command == "up" else
            ["provision", "--gpu", "H100:8", "--nodes", "451"])
    result = run(home, *args, "--cluster", cluster.name, "--region", "us-east-1", "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert str(result.exception) == ("--nodes: 451 nodes is more than one EKS managed node group holds (450, the "
                                     "default quota 'Nodes per managed node group'); split the job into gangs of "
                                     "at most that many")
    assert len(proxy.calls) == before
    # 450 is one group: planned.
    ok = run(home, *args[:-1], "450" if command == "provision" else str(job(tmp_path / "ok.yaml", 450)),
             "--cluster", cluster.name, "--region", "us-east-1", "--dry-run", "-o", "json")
    assert ok.exit_code == 0, ok.output


def test_nodes_that_never_join_fail_over_zone_by_zone_and_every_group_is_deleted(
        home: Path, tmp_path: Path, cluster: EksCluster, kube: MultiCluster) -> None:
    # No kubelet ever registers in the emulated cluster: each zone's group is ACTIVE in EKS and never joins.
    result = run(home, "up", str(job(tmp_path / "train.yaml", 2)), "--cluster", cluster.name, "--region",
                 "us-east-1", "--kubeconfig", str(kube.kubeconfig), "--node-role", NODE_ROLE, "--name", "never",
                 "--join-timeout", "1", "--yes", "-o", "json")
    assert result.exit_code == EXIT_NO_FIT, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: no zone of cluster {cluster.name} held 2 x H100:8 (last: 0 of 2 nodes of node "
                           "group never-"), line
    assert line.endswith(f"(cluster {cluster.name}) Ready after 1 s; 2 not registered; the node group was deleted)")
    assert "Traceback" not in result.output
    # Nothing in the emulated cluster would advertise the new nodes' GPUs (no GPU node, no device plugin DaemonSet):
    # `up` said so before it bought the first group (kube/nodejoin.py plugin_warning).
    lines = result.output.splitlines()
    [warned] = [i for i, x in enumerate(lines) if x.startswith("warning: no node of cluster")]
    assert warned < lines.index(line) and "no NVIDIA device plugin (or GPU operator) DaemonSet" in lines[warned]
    assert cluster.groups() == {}
    with Store(home) as store:
        assert journal.gang_record(store, "never").state == "failed"  # type: ignore[union-attr]
        tried = [a for a in journal.attempts(store, "never") if a.outcome != "skipped"]
        # Both zones the cluster holds, in plan order, each group made, never joined, failed over as capacity,
        # and deleted.
        assert [(a.zone, a.outcome, a.error_kind, a.error_code) for a in tried] == [
            (z, "rolled-back", "capacity", "NodesNotReady") for z in ("use1-az2", "use1-az6")]
        assert all("2 not registered; the node group was deleted" in (a.message or "") for a in tried)
        # Remembered as a capacity refusal (the next plan skips those zones for gangs this big, for the TTL).
        assert {(b.zone, b.instance_type, b.kind, b.min_nodes) for b in journal.active_blocks(store)} == {
            (z, "p5.48xlarge", "capacity", 2) for z in ("use1-az2", "use1-az6")}
        # Both groups were the job's capacity while they existed: charged to the job, and no longer once deleted.
        charged = sorted((i.job, i.zone, i.end is None) for i in ledger_intervals(store))
        assert charged == [("train", z, False) for z in ("use1-az2", "use1-az2", "use1-az6", "use1-az6")]


def test_a_cluster_that_cannot_be_asked_for_its_nodes_ends_up_in_one_line_and_the_group_is_deleted(
        home: Path, tmp_path: Path, cluster: EksCluster) -> None:
    # A kubeconfig whose server refuses connections: not a zone's fault, so no failover; the group goes.
    dead = tmp_path / "dead.yaml"
    dead.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:9"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: {cluster.name}, context: {{cluster: c, user: u}}}}]
current-context: {cluster.name}
""", encoding="utf-8")
    result = run(home, "up", str(job(tmp_path / "train.yaml", 2)), "--cluster", cluster.name, "--region",
                 "us-east-1", "--kubeconfig", str(dead), "--node-role", NODE_ROLE, "--name", "dark",
                 "--join-timeout", "30", "--yes", "-o", "json")
    assert result.exit_code == EXIT_FAILED, result.output
    message = str(result.exception)
    assert message.startswith(f"cannot reach cluster {cluster.name}: ") and "\n" not in message, message
    assert message.endswith("gang dark's node group was deleted"), message
    assert cluster.groups() == {}
    with Store(home) as store:
        tried = [a for a in journal.attempts(store, "dark") if a.outcome != "skipped"]
        assert [(a.zone, a.outcome) for a in tried] == [("use1-az2", "rolled-back")]
        assert journal.active_blocks(store) == []


def test_ctrl_c_while_the_nodes_are_awaited_deletes_the_group_and_says_so(
        home: Path, tmp_path: Path, cluster: EksCluster, kube: MultiCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    # Ctrl-C is not a crash: the process lives on to keep `up`'s all or nothing. It ended in click's bare "Aborted"
    # before, the group ACTIVE and billed, the attempt `started` and the gang `provisioning` for ever.
    from geosched.cli import up as up_cli

    def interrupted(self: object, new: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(up_cli._Joiner, "__call__", interrupted)
    result = run(home, "up", str(job(tmp_path / "train.yaml", 2)), "--cluster", cluster.name, "--region",
                 "us-east-1", "--kubeconfig", str(kube.kubeconfig), "--node-role", NODE_ROLE, "--name", "intr",
                 "--yes", "-o", "json")
    assert result.exit_code == EXIT_FAILED, result.output
    message = str(result.exception)
    assert message == "interrupted; gang intr's node group was deleted", message
    assert cluster.groups() == {}
    with Store(home) as store:
        assert journal.gang_record(store, "intr").state == "terminated"  # type: ignore[union-attr]
        tried = [a for a in journal.attempts(store, "intr") if a.outcome != "skipped"]
        [attempt] = tried
        assert (attempt.outcome, attempt.message) == (
            "cancelled", f"interrupted while node group intr-{attempt.seq} was made or its nodes awaited")


def test_up_submits_pinned_to_the_placed_hosts_and_tolerating_the_groups_taint() -> None:
    # Found on the real control plane: with only zone and GPU model required, kube-scheduler put two of the gang's
    # pods on the cluster's older p5 nodes in the same zone, and the other six stayed Pending (by all signs on the
    # group's taint: that cluster runs no ExtendedResourceToleration admission plugin to tolerate it).
    base = ClusterConfig(name="eks", context="eks", tolerations=(Toleration("team", "Equal", "ml", "NoSchedule"),))
    own = Toleration("nvidia.com/gpu", "Equal", "true", "NoSchedule")
    assert on_the_group(base) == replace(base, pin_hosts=True, tolerations=(*base.tolerations, own))
    assert on_the_group(on_the_group(base)) == on_the_group(base)
