"""Node-group failover across clusters (issue 26 item 1): `provision` and `up` with `--cluster` repeated, through
the CLI as a user runs them, against moto's EKS behind the fault proxy and the GKE REST double together. Every
zone of the cluster the plan ranks first refuses (EKS: CREATE_FAILED with EC2's InsufficientInstanceCapacity
health issue, eks_extras.capacity_issue; GKE: the create operation's ZONE_RESOURCE_POOL_EXHAUSTED,
GkeFault.stockout) and the gang lands in the next cluster; what the refused attempts created is deleted, the
journal names every attempt, and `down` deletes only what the gang created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geosched.core.errors import EXIT_BAD_INPUT, EXIT_NO_FIT
from geosched.providers import journal
from geosched.providers.nodegroups import journal as groups_journal
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, MotoServer
from geosched_emulators.eks_extras import capacity_issue
from geosched_emulators.gke import GkeDouble, GkeFault
from tests.kubeemu import MultiCluster
from tests.output_support import valid
from tests.providers.eks_support import NODE_ROLE, ZONES, EksCluster, make_cluster
from tests.providers.gke_support import CLUSTER, LOCATION
from tests.providers.test_nodepools import create as create_pool
from tests.providers.test_up_cli import job
from tests.providers.test_up_cli import run as run_root

pytestmark = pytest.mark.integration

GKE_ZONES = [f"{LOCATION}-{z}" for z in "abc"]


@pytest.fixture
def home(tmp_path: Path, proxy: Ec2FaultProxy, gke: GkeDouble) -> Path:
    return tmp_path / "home"


@pytest.fixture
def eks(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    return make_cluster(moto.url, ("use1-az2", "use1-az6"))


def both(eks: EksCluster) -> list[str]:
    """The two clusters, each with its cloud and location (the options pair in order)."""
    return ["--cluster", eks.name, "--provider", "aws", "--region", "us-east-1",
            "--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION]


def plan(home: Path, *clusters: str) -> list[dict[str, object]]:
    result = run_root(home, "provision", *clusters, "--gpu", "H100:8", "--nodes", "2", "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    return list(valid(json.loads(result.output))["items"])


def refuse_everywhere_in(cluster: str, eks: EksCluster, gke: GkeDouble, proxy: Ec2FaultProxy) -> None:
    """Every zone of `cluster` out of capacity, as long as the test runs."""
    if cluster == CLUSTER:
        gke.inject(GkeFault.stockout(), method="nodePools.create", times="always")
        return
    for zone in eks.subnets:
        proxy.nodegroups.set(ZONES[zone], "CREATE_FAILED", [capacity_issue("p5.48xlarge", ZONES[zone])])


def test_dry_run_ranks_the_zones_of_every_cluster_with_each_clusters_own_order(home: Path, eks: EksCluster,
                                                                              gke: GkeDouble) -> None:
    eks_only = plan(home, "--cluster", eks.name, "--region", "us-east-1")
    gke_only = plan(home, "--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION)
    items = plan(home, *both(eks))
    clusters = [i["cluster"] for i in items]
    # A cluster's zones stay together (it is left only when all refused), each cluster's in its own plan order...
    first = clusters[0]
    second = eks.name if first == CLUSTER else CLUSTER
    assert clusters == [first] * clusters.count(first) + [second] * clusters.count(second)
    assert [i["zone"] for i in items if i["cluster"] == eks.name] == [i["zone"] for i in eks_only]
    assert [i["zone"] for i in items if i["cluster"] == CLUSTER] == [i["zone"] for i in gke_only]
    assert {i["zone"] for i in items} == {"use1-az2", "use1-az6", *GKE_ZONES}
    # ... and the cluster first is the one whose best zone the one plan ranks first: GKE's a3-highgpu-8g costs
    # less than half of EKS's p5.48xlarge (geosched/data/gcp_gpu_vms.csv, aws_gpu_vms.csv) at the same carbon
    # weight, so the cost term decides.
    assert first == CLUSTER
    assert items[0]["usd_per_hour"] < items[-1]["usd_per_hour"]  # type: ignore[operator]
    assert [i["rank"] for i in items] == list(range(1, len(items) + 1))
    assert gke.pools() == {} and eks.groups() == {}
    table = run_root(home, "provision", *both(eks), "--gpu", "H100:8", "--nodes", "2", "--dry-run")
    assert table.exit_code == 0, table.output
    # A candidate another cluster holds is not 'skipped'; one no cluster holds says why in its own cloud's terms.
    assert "not in cluster" not in table.output
    assert f"skipped use1-az1 p5.48xlarge: cluster {eks.name} has no subnet in zone use1-az1" in table.output


def test_every_zone_of_the_first_cluster_refuses_and_the_gang_lands_in_the_second(
        home: Path, eks: EksCluster, gke: GkeDouble, proxy: Ec2FaultProxy) -> None:
    items = plan(home, *both(eks))
    first = str(items[0]["cluster"])
    second = eks.name if first == CLUSTER else CLUSTER
    refuse_everywhere_in(first, eks, gke, proxy)
    result = run_root(home, "provision", *both(eks), "--gpu", "H100:8", "--nodes", "2", "--node-role", NODE_ROLE,
                      "--name", "across", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    [item] = valid(json.loads(result.output))["items"]
    expected = next(i for i in items if i["cluster"] == second)  # the second cluster's best zone
    assert (item["state"], item["cluster"], item["zone"]) == ("ready", second, expected["zone"])
    first_zones = [i["zone"] for i in items if i["cluster"] == first]
    with Store(home) as store:
        attempts = journal.attempts(store, "across")
        rows = groups_journal.groups(store, gang="across")
    tried = [(a.zone, a.outcome) for a in attempts if a.outcome != "skipped"]
    # Every zone of the first cluster was tried and rolled back, in plan order, then the second cluster's first.
    assert tried == [(z, "rolled-back") for z in first_zones] + [(expected["zone"], "launched")]
    assert [(r.cluster, r.zone, r.state) for r in rows] == [(first, z, "deleted") for z in first_zones] + [
        (second, expected["zone"], "created")]
    # Nothing the refused attempts made is left; the gang's one group stands in the second cluster.
    assert gke.pools() == {} if first == CLUSTER else eks.groups() == {}
    landed = list(eks.groups()) if second == eks.name else list(gke.pools())
    assert landed == [item["nodegroup"] if second == eks.name else f"{LOCATION}/{CLUSTER}/{item['nodegroup']}"]
    # `down` deletes the gang's group and nothing else in either cluster.
    create_pool(gke, "system", {})
    eks.eks.create_nodegroup(clusterName=eks.name, nodegroupName="team-cpu", nodeRole=NODE_ROLE,
                             subnets=[eks.subnets["use1-az2"]])
    down = run_root(home, "down", "across", "--yes", "-o", "json")
    assert down.exit_code == 0, down.output
    [row] = valid(json.loads(down.output))["items"]
    assert (row["state"], row["terminated"], row["errors"]) == ("terminated", 1, [])
    assert list(gke.pools()) == [f"{LOCATION}/{CLUSTER}/system"]
    assert list(eks.groups()) == ["team-cpu"]


def test_a_zone_refused_in_one_cluster_is_not_asked_again_in_the_next(home: Path, moto: MotoServer,
                                                                     proxy: Ec2FaultProxy, gke: GkeDouble) -> None:
    # Two EKS clusters of one region: a zone's capacity is the region's, not a cluster's, so the block a capacity
    # refusal leaves (failover.blocks_for) holds in the second cluster too, and its other zone is the one tried.
    one = make_cluster(moto.url, ("use1-az2",))
    two = make_cluster(moto.url, ("use1-az2", "use1-az6"))
    proxy.nodegroups.set(ZONES["use1-az2"], "CREATE_FAILED", [capacity_issue("p5.48xlarge", ZONES["use1-az2"])])
    clusters = ["--cluster", one.name, "--cluster", two.name, "--region", "us-east-1"]
    # The shipped catalog ranks use1-az2 before use1-az6 for p5.48xlarge (equal on-demand prices, the order the
    # plan keeps), so cluster `one` (its best zone ranked as `two`'s: a tie, kept in the order named) goes first.
    assert [(i["cluster"], i["zone"]) for i in plan(home, *clusters)] == [
        (one.name, "use1-az2"), (two.name, "use1-az2"), (two.name, "use1-az6")]
    result = run_root(home, "provision", *clusters, "--gpu", "H100:8", "--nodes", "2", "--node-role", NODE_ROLE,
                      "--name", "shared", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    [item] = valid(json.loads(result.output))["items"]
    assert (item["cluster"], item["zone"]) == (two.name, "use1-az6")
    with Store(home) as store:
        rows = groups_journal.groups(store, gang="shared")
        attempts = {a.id: a for a in journal.attempts(store, "shared")}
    assert [(r.cluster, r.zone, r.state) for r in rows] == [(one.name, "use1-az2", "deleted"),
                                                             (two.name, "use1-az6", "created")]
    # The second cluster's use1-az2 was journalled as skipped for the block, without a call.
    az2 = [a for a in attempts.values() if a.zone == "use1-az2"]
    assert [a.outcome for a in az2] == ["rolled-back", "skipped"]
    assert az2[1].message is not None and az2[1].message.endswith(f"(cluster {two.name})")
    assert one.groups() == {} and list(two.groups()) == [item["nodegroup"]]


def test_every_cluster_refusing_is_one_line_and_leaves_nothing(home: Path, eks: EksCluster, gke: GkeDouble,
                                                                proxy: Ec2FaultProxy) -> None:
    refuse_everywhere_in(CLUSTER, eks, gke, proxy)
    refuse_everywhere_in(eks.name, eks, gke, proxy)
    result = run_root(home, "provision", *both(eks), "--gpu", "H100:8", "--nodes", "2", "--node-role", NODE_ROLE,
                      "--name", "nowhere", "--yes", "-o", "json")
    assert result.exit_code == EXIT_NO_FIT, result.output
    [item] = valid(json.loads(result.output))["items"]
    message = item["message"]
    assert message == (f"every cluster refused the gang: no zone of cluster {CLUSTER} held 2 x H100:8; "
                       f"no zone of cluster {eks.name} held 2 x H100:8")
    assert gke.pools() == {} and eks.groups() == {}
    with Store(home) as store:
        record = journal.gang_record(store, "nowhere")
        assert record is not None and record.state == "failed" and record.message == message
        assert {r.state for r in groups_journal.groups(store, gang="nowhere")} == {"deleted"}


@pytest.mark.parametrize(("args", "reason"), [
    (["--provider", "aws,gcp,aws"], "--provider: give one value for every cluster or one per --cluster (2), got 3"),
    (["--region", "us-east-1,us-central1,us-west-2"],
     "--region: give one value for every cluster or one per --cluster (2), got 3"),
])
def test_options_that_do_not_pair_with_the_clusters_are_one_line_before_any_call(
        home: Path, eks: EksCluster, proxy: Ec2FaultProxy, args: list[str], reason: str) -> None:
    before = len(proxy.calls)
    result = run_root(home, "provision", "--cluster", eks.name, "--cluster", CLUSTER, *args, "--gpu", "H100:8",
                      "--nodes", "2", "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert str(result.exception) == reason
    assert len(proxy.calls) == before


def test_the_same_cluster_twice_is_one_line(home: Path, eks: EksCluster) -> None:
    result = run_root(home, "provision", "--cluster", eks.name, "--cluster", eks.name, "--region", "us-east-1",
                      "--gpu", "H100:8", "--nodes", "2", "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert str(result.exception) == "--cluster: names the same cluster twice"


def test_up_lands_in_the_second_cluster_and_waits_for_its_nodes_there(home: Path, tmp_path: Path, eks: EksCluster,
                                                                     gke: GkeDouble, proxy: Ec2FaultProxy) -> None:
    # GKE (ranked first) out of capacity everywhere: the group is made in the EKS cluster, and `up` waits for its
    # nodes in that cluster's context (the API emulator: no kubelet registers, so each zone's group is deleted
    # again and the next zone tried, until none is left).
    refuse_everywhere_in(CLUSTER, eks, gke, proxy)
    (tmp_path / "kube").mkdir()
    with MultiCluster(2, names=[CLUSTER, eks.name], directory=tmp_path / "kube") as kube:
        result = run_root(home, "up", str(job(tmp_path / "train.yaml", 2)), *both(eks), "--kubeconfig",
                          str(kube.kubeconfig), "--node-role", NODE_ROLE, "--name", "upx", "--join-timeout", "1",
                          "--yes", "-o", "json")
    assert result.exit_code == EXIT_NO_FIT, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("error:")]
    assert line.startswith(f"error: every cluster refused the gang: no zone of cluster {CLUSTER} held 2 x H100:8; "
                           f"no zone of cluster {eks.name} held 2 x H100:8 (last: 0 of 2 nodes of node group upx-")
    assert line.endswith(f"(cluster {eks.name}) Ready after 1 s; 2 not registered; the node group was deleted)")
    assert gke.pools() == {} and eks.groups() == {}
    with Store(home) as store:
        tried = [(a.provider, a.zone, a.error_code) for a in journal.attempts(store, "upx") if a.outcome != "skipped"]
    assert [t for t in tried if t[0] == "aws"] == [("aws", z, "NodesNotReady") for z in ("use1-az2", "use1-az6")]
    assert {t[2] for t in tried if t[0] == "gcp"} == {"ZONE_RESOURCE_POOL_EXHAUSTED"}


def test_up_with_karpenter_takes_one_cluster(home: Path, tmp_path: Path, eks: EksCluster) -> None:
    result = run_root(home, "up", str(job(tmp_path / "train.yaml", 2)), *both(eks), "--karpenter", "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert str(result.exception) == "--cluster: --karpenter takes one cluster (and one --provider, --region)"


def test_one_cluster_that_does_not_exist_is_one_line_before_anything_is_created(home: Path, eks: EksCluster,
                                                                                  gke: GkeDouble) -> None:
    result = run_root(home, "provision", "--cluster", CLUSTER, "--provider", "gcp", "--region", LOCATION,
                      "--cluster", "nope", "--provider", "aws", "--region", "us-east-1", "--gpu", "H100:8",
                      "--nodes", "2", "--node-role", NODE_ROLE, "--yes")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert str(result.exception) == "--cluster: no EKS cluster 'nope' in region us-east-1"
    assert gke.pools() == {} and eks.groups() == {}


def test_up_provisioning_shows_one_cluster_but_applied_fails_over_across_several(home: Path, tmp_path: Path,
                                                                                 eks: EksCluster) -> None:
    # A dry run or --out shows one cluster's objects; several clusters are a failover order, only when applied.
    result = run_root(home, "up", str(job(tmp_path / "train.yaml", 2)), *both(eks), "--provisioning-class",
                      "best-effort-atomic-scale-up.autoscaling.x-k8s.io", "--dry-run")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert str(result.exception) == ("--cluster: --provisioning-class with --out or --dry-run shows one cluster's "
                                     "objects: name one (several fail over only when applied)")
