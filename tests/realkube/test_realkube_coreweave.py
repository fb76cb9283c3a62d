"""A Kubernetes-only cloud on a real control plane (issue 25 item 1): a cluster of CoreWeave-shaped nodes (kwok
runs their kubelets; labels and providerIDs as tests/kube/test_cloud_coreweave.py documents them), `geosched
submit` reads it, places the gang in its zone and kube-scheduler binds the pods there.

Its own small plane (one API server, controller manager, scheduler and kwok; no Kueue): the shared one
(plane.py) is shaped like EKS and GKE only, and a CKS cluster beside them would change what its other tests see.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kube.test_cloud_coreweave import EAST, RNO2
from tests.realkube import binaries
from tests.realkube.cluster import KWOK_NODE, ClusterSpec, ControlPlane
from tests.realkube.procs import session_dir
from tests.realkube.realkube_support import cluster_config, compact_job, geosched, job_pods_selector, wait_all_running

pytestmark = pytest.mark.realkube

CKS = "cks-us"
# gd-8xh100ib-i128: 128 vCPU, 2048 GiB (geosched/data/SOURCES.md), allocatable less the kubelet's reservations in
# the proportions tests/realkube/nodes.py uses.
CAPACITY = {
    "cpu": "128",
    "memory": "2147483648Ki",
    "pods": "110",
    "ephemeral-storage": "98831908Ki",
    "nvidia.com/gpu": "8",
}
ALLOCATABLE = {
    "cpu": "124930m",
    "memory": "2104432640Ki",
    "pods": "110",
    "ephemeral-storage": "47060071478",
    "nvidia.com/gpu": "8",
}


def kwok_cks(node: dict[str, Any]) -> dict[str, Any]:
    node = copy.deepcopy(node)
    node.pop("apiVersion", None)
    node.pop("kind", None)
    node["metadata"]["annotations"] = {KWOK_NODE: "fake"}
    node["status"] = {
        "capacity": dict(CAPACITY),
        "allocatable": dict(ALLOCATABLE),
        "nodeInfo": {"kubeletVersion": "v1.36.3", "architecture": "amd64", "operatingSystem": "linux"},
    }
    return node


@pytest.fixture(scope="module")
def cks() -> Iterator[ControlPlane]:
    try:
        bins = binaries.find()
    except binaries.Missing as exc:
        pytest.skip(f"the real control plane is not built: {str(exc).splitlines()[0]}")
    directory = session_dir()
    plane = ControlPlane(bins, directory, [ClusterSpec(CKS, nodes=[kwok_cks(n) for n in (*RNO2, *EAST)])])
    try:
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(directory, ignore_errors=True)


def test_submit_places_a_gang_on_coreweave_nodes_and_kube_scheduler_binds_it_there(
    cks: ControlPlane, tmp_path: Path
) -> None:
    with cks.kube(CKS) as kube:
        kube.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "train"}})
    config = cluster_config(tmp_path / "clusters.yaml", {CKS: {"namespace": "train"}})
    job = compact_job(tmp_path / "train.yaml", "train", workers=3, gpus=8)
    proc = geosched(
        "submit",
        str(job),
        "--kubeconfig",
        str(cks.kubeconfig),
        "--clusters",
        str(config),
        "-o",
        "json",
        home=tmp_path / "home",
    )
    assert proc.returncode == 0, proc.stderr
    outcome = yaml.safe_load(proc.stdout)
    # Four H100 nodes in RNO2A (the cheaper, cleaner region of the two with a shipped carbon row), two in
    # US-EAST-01A: three workers of 8 GPUs fit only in RNO2A.
    assert (outcome["status"], outcome["cluster"], outcome["zones"]) == ("applied", CKS, ["RNO2A"])
    with cks.kube(CKS) as kube:
        bound = wait_all_running(kube, "train", 3, job_pods_selector("train"))
    assert {b.zone for b in bound} == {"RNO2A"}
    assert {b.scheduler for b in bound} == {"default-scheduler"}
