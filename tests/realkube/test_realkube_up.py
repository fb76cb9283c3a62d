"""`geosched up` on the real control plane when the new machines never become Ready: an EKS managed node group made on
moto's EKS (real boto3), its machines registering with the real EKS-shaped cluster as kwok Nodes whose kubelet never
gets Ready (tests/realkube/nodegroups.py, the test controller standing in for EKS), geosched giving up at its
deadline with one line and deleting the group; and machines Ready before their device plugin advertises the GPUs,
waited for rather than placed on and deleted. geosched talks to moto through the fault proxy, which answers the
placement group calls moto lacks. The 8-node H100 gang that does join, on EKS and on GKE, is
test_realkube_up_demo.py (the flow of scripts/up-demo).

The moto cluster is named like the real one (eks-us-east-1) and has one subnet, in use1-az6: moto names that zone
us-east-1a, as the plane's EKS account does (plane.py), so the new nodes sit in the same zone as the cluster's two
p5 nodes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched_emulators import Ec2FaultProxy, MotoServer
from tests.providers.eks_support import NODE_ROLE, clients, one_subnet_cluster
from tests.providers.prov_support import aws_env
from tests.realkube.nodegroups import NodegroupController
from tests.realkube.plane import EKS, Plane
from tests.realkube.realkube_support import (
    cluster_config,
    compact_job,
    geosched,
    wait_until,
)
from tests.realkube.updemo import eks_flow

pytestmark = pytest.mark.realkube
ZONE_ID, ZONE = "use1-az6", "us-east-1a"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        # moto's backends are per process: another suite's cluster of the same name would still be there.
        server.reset()
        one_subnet_cluster(server.url, EKS, ZONE_ID, ZONE, "10.0.16.0/24")
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


def up(plane: Plane, front: Ec2FaultProxy, tmp_path: Path, ns: str, gang: str, *extra: str) -> tuple[Any, float]:
    config = cluster_config(tmp_path / "clusters.yaml", {EKS: {"namespace": ns}})
    job = compact_job(tmp_path / "train.yaml", "train", workers=8, gpus=8)
    start = time.monotonic()
    proc = geosched("up", str(job), "--cluster", EKS, "--kubeconfig", str(plane.kubeconfig), "--clusters",
                    str(config), "--region", "us-east-1", "--node-role", NODE_ROLE, "--name", gang, "--yes", *extra,
                    env=aws_env(front.url), home=tmp_path / "home", timeout=600)
    return proc, time.monotonic() - start


def test_nodes_that_never_become_ready_are_one_line_within_the_deadline_and_leave_nothing(
        realkube: Plane, moto: MotoServer, front: Ec2FaultProxy, tmp_path: Path) -> None:
    timeout = 15.0
    with realkube.namespace("up-notready", clusters=(EKS,)) as ns, \
            NodegroupController(moto.url, EKS, realkube, EKS, ready=False) as controller:
        # The same command as a dry run: the process, the plan and the cluster read, without the wait.
        baseline, base_s = up(realkube, front, tmp_path, ns, "up-dry", "--dry-run")
        assert baseline.returncode == 0, baseline.stderr
        proc, took = up(realkube, front, tmp_path, ns, "up-notready", "--join-timeout", f"{timeout:g}")
        # The cluster's one zone failed over as a capacity refusal: no zone left, so no fit (exit 3).
        assert proc.returncode == 3, proc.stderr
        assert "Traceback" not in proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, proc.stderr
        [line] = errors
        assert line.startswith(f"error: no zone of cluster {EKS} held 8 x H100:8 (last: 0 of 8 nodes of node group "
                               "up-notready-"), line
        assert f"(cluster {EKS}) Ready after {timeout:g} s; 8 not Ready (ip-10-0-16-10.ec2.internal, " \
               "ip-10-0-16-11.ec2.internal, ip-10-0-16-12.ec2.internal and 5 more): Ready=False (KubeletNotReady: " \
               "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady " \
               "message:Network plugin returns error: cni plugin not initialized); the node group was deleted)" \
               in line, line
        # Within the deadline: the wait itself, plus what the same command takes without it (measured above),
        # plus the group's deletion (moto answers at once); loose for a loaded 2-core machine.
        assert took < timeout + 3 * base_s + 30, (took, base_s)
        assert groups(moto) == []
        assert front.placement_groups("us-east-1") == {}, "the rollback deletes the group's placement group too"
        with realkube.kube(EKS) as kube:
            wait_until(lambda: not kube.list_all("/api/v1/nodes", label_selector="geosched.io/gang=up-notready")[0],
                       60, what="the never-Ready nodes gone")
        assert controller.made == {}
        status = geosched("status", "up-notready", "-o", "json", env=aws_env(front.url), home=tmp_path / "home")
        assert status.returncode == 0, status.stderr
        doc = yaml.safe_load(status.stdout)
        assert [g["state"] for g in doc["nodegroups"]] == ["deleted"]
    assert controller.errors == []


def test_nodes_ready_before_their_gpus_are_advertised_are_waited_for_not_deleted(
        realkube: Plane, moto: MotoServer, front: Ec2FaultProxy, tmp_path: Path) -> None:
    """The group's machines register Ready with no nvidia.com/gpu and their device plugin advertises the 8 GPUs a few
    seconds later (as on EKS's AL2023 NVIDIA AMI and GKE, minutes later there). Before, `up` placed the gang on the
    first poll that saw them Ready, found no GPU on its own new nodes, and deleted the group it had just made."""
    with realkube.namespace("up-gpulate", clusters=(EKS,)) as ns, \
            NodegroupController(moto.url, EKS, realkube, EKS, gpus_after_s=4.0) as controller:
        flow = eks_flow(realkube, front, ns, tmp_path, lambda line: None, gang="up-gpulate")
        proc = flow.up()
        assert "Traceback" not in proc.stderr
        [group] = groups(moto)
        bound = flow.running(group)
        # Every node of the group got its GPUs late, and the gang runs on exactly those nodes.
        assert sorted(controller.advertised) == flow.nodes == sorted(b.node or "" for b in bound)
        flow.end_job()
        flow.down()
        assert groups(moto) == []
    assert controller.errors == []
