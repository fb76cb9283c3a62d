"""`geosched up` fails over when a node group's nodes never join: on the real control plane, moto's EKS (real boto3)
holds the cluster over two zones, and the test controller standing in for EKS (tests/realkube/nodegroups.py) makes
the machines of a group in the plan's first zone register as Nodes that never become Ready (the VPC CNI never
starts). geosched must name what did not come up, delete that group (journalled, charged for the time it existed),
create one in the next zone, wait for its nodes, and place the gang there; `down` then leaves nothing.

The moto cluster is named like the plane's (eks-us-east-1), over one subnet in use1-az2 (the plan's first zone for
8 x p5.48xlarge in us-east-1, tests/providers/test_up_cli.py) and one in use1-az6. moto names them us-east-1c and
us-east-1a; the plane's account names use1-az6 us-east-1a too (plane.py), so the group that joins sits in the zone of
the cluster's own two (free) p5 nodes; the failed zone's nodes carry moto's name for use1-az2, which no placement ever
sees (they are never Ready, then deleted).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from geosched.providers import journal
from geosched.report.ledger import ledger_intervals
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, MotoServer
from tests.providers.eks_support import NODE_ROLE, ROLE, clients
from tests.providers.prov_support import aws_env
from tests.realkube.nodegroups import NODEGROUP, NOT_READY, NodegroupController
from tests.realkube.plane import EKS, Plane
from tests.realkube.realkube_support import (
    cluster_config,
    compact_job,
    geosched,
    job_pods_selector,
    wait_all_running,
    wait_until,
)

pytestmark = pytest.mark.realkube
FIRST, NEXT = "use1-az2", "use1-az6"  # the plan's order (cheapest first, ties in the catalog's order)
SUBNETS = {FIRST: ("10.0.17.0/24", "us-east-1c"), NEXT: ("10.0.18.0/24", "us-east-1a")}


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        server.reset()  # moto's backends are per process: another suite's cluster of this name would be there
        eks, ec2 = clients(server.url)
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        ids = []
        for zone_id, (cidr, name) in SUBNETS.items():
            subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZoneId=zone_id)["Subnet"]
            assert subnet["AvailabilityZone"] == name
            ids.append(subnet["SubnetId"])
        eks.create_cluster(name=EKS, roleArn=ROLE, resourcesVpcConfig={"subnetIds": ids})
        yield server


@pytest.fixture(scope="module")
def front(moto: MotoServer) -> Iterator[Ec2FaultProxy]:
    """What geosched talks to: moto behind the fault proxy, which answers the placement group calls moto lacks (a
    multi-node p5 gang's group is made in a cluster placement group of its own: providers/README.md)."""
    with Ec2FaultProxy(moto.url) as proxy:
        yield proxy


def groups(moto: MotoServer) -> list[str]:
    eks, _ = clients(moto.url)
    return list(eks.list_nodegroups(clusterName=EKS)["nodegroups"])


def nodes_of(plane: Plane, selector: str) -> list[str]:
    with plane.kube(EKS) as kube:
        return sorted(n["metadata"]["name"] for n in kube.list_all("/api/v1/nodes", label_selector=selector)[0])


def test_a_group_whose_nodes_never_become_ready_is_deleted_and_the_gang_lands_in_the_next_zone(
        realkube: Plane, moto: MotoServer, front: Ec2FaultProxy, tmp_path: Path) -> None:
    timeout, home = 20.0, tmp_path / "home"
    with realkube.namespace("up-failover", clusters=(EKS,)) as ns, \
            NodegroupController(moto.url, EKS, realkube, EKS, zones={FIRST: NOT_READY}) as controller:
        config = cluster_config(tmp_path / "clusters.yaml", {EKS: {"namespace": ns}})
        job = compact_job(tmp_path / "train.yaml", "train", workers=8, gpus=8)
        proc = geosched("up", str(job), "--cluster", EKS, "--kubeconfig", str(realkube.kubeconfig), "--clusters",
                        str(config), "--region", "us-east-1", "--node-role", NODE_ROLE, "--name", "fo", "--yes",
                        "--join-timeout", f"{timeout:g}", env=aws_env(front.url), home=home, timeout=600)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        # What did not come up is named, on stderr as it happened: the group, its zone, the nodes and their cause.
        [said] = [line for line in proc.stderr.splitlines() if line.startswith("#") and "capacity:" in line]
        assert f" {FIRST}: capacity: 0 of 8 nodes of node group fo-" in said, said
        assert f"Ready after {timeout:g} s; 8 not Ready (ip-10-0-17-10.ec2.internal, ip-10-0-17-11.ec2.internal, " \
               "ip-10-0-17-12.ec2.internal and 5 more): Ready=False (KubeletNotReady: container runtime network " \
               "not ready" in said, said
        assert said.endswith("; the node group was deleted"), said
        with Store(home) as store:
            tried = [a for a in journal.attempts(store, "fo") if a.outcome != "skipped"]
            assert [(a.zone, a.outcome, a.error_kind, a.error_code) for a in tried] == [
                (FIRST, "rolled-back", "capacity", "NodesNotReady"), (NEXT, "launched", None, None)]
            failed, landed = (f"fo-{a.seq}" for a in tried)
            intervals = ledger_intervals(store)
        # Only the next zone's group is left in EKS; the failed one's never-Ready nodes are gone from the cluster.
        assert groups(moto) == [landed]
        wait_until(lambda: not nodes_of(realkube, f"{NODEGROUP}={failed}"), 60, what=f"the nodes of {failed} gone")
        assert failed not in controller.made
        # The ledger charged the failed group for the time it existed (from its intent to its deletion: at least the
        # join deadline it was waited for), to the job; the landed group is charged and still open.
        closed = [i for i in intervals if i.end is not None]
        assert sorted({(i.job, i.zone, i.name.split("#")[0]) for i in closed}) == [("train", FIRST, failed)]
        assert len(closed) == 8 and all(i.end - i.start >= timeout for i in closed if i.end is not None)
        still = [i for i in intervals if i.end is None]
        assert len(still) == 8 and {(i.job, i.zone, i.name.split("#")[0]) for i in still} == {
            ("train", NEXT, landed)}
        # The gang runs on the new group's nodes, one pod each, and on none of the cluster's other p5 nodes.
        new = nodes_of(realkube, f"{NODEGROUP}={landed}")
        assert len(new) == 8
        with realkube.kube(EKS) as kube:
            bound = wait_all_running(kube, ns, 8, job_pods_selector("train"), timeout=180)
            assert sorted(b.node or "" for b in bound) == new
            assert {b.fleet_zone for b in bound} == {NEXT}
            kube.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/train",
                         query={"propagationPolicy": "Background"})
        down = geosched("down", "fo", "--yes", "-o", "json", env=aws_env(front.url), home=home)
        assert down.returncode == 0, down.stderr
        [row] = yaml.safe_load(down.stdout)["items"]
        assert row["state"] == "terminated"
        assert groups(moto) == []
        wait_until(lambda: not nodes_of(realkube, "geosched.io/gang=fo"), 60, what="every node of gang fo gone")
        with Store(home) as store:
            assert all(i.end is not None for i in ledger_intervals(store))
    assert controller.errors == []
