"""`geosched up --provider gcp` end to end on the real control plane: a GKE node pool made on the GKE REST double
(google-cloud-container unchanged, geosched_emulators/gke.py), its machines joining the real GKE-shaped cluster as
kwok Nodes (tests/realkube/nodegroups.py `NodepoolController`, the test controller standing in for GKE: the labels
and GPU taint GKE sets), geosched waiting for them to be Ready, placing the gang on exactly them, the real
kube-scheduler binding every pod there, and `geosched down` leaving no pool and no node behind.

The double's cluster is named like the plane's (gke-us-central1), regional in us-central1, where the shipped
catalog offers a3-highgpu-8g in zones a, b and c; the plane's cluster already has free H100 nodes in us-central1-a
and -b: only the restriction to the new pool keeps the gang off them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from geosched_emulators.gke import GkeDouble
from tests.realkube.nodegroups import NODEPOOL, NodepoolController
from tests.realkube.plane import GKE, Plane
from tests.realkube.realkube_support import (
    cluster_config,
    compact_job,
    geosched,
    job_pods_selector,
    pods,
    wait_all_running,
    wait_until,
)

pytestmark = pytest.mark.realkube
PROJECT, LOCATION = "ml-platform-prod", "us-central1"


@pytest.fixture(scope="module")
def gke() -> Iterator[GkeDouble]:
    # Operations take a moment (GKE's take minutes): the pool is PROVISIONING first, its operation polled.
    with GkeDouble(operation_delay_s=0.5) as double:
        double.add_cluster(PROJECT, LOCATION, GKE)
        yield double


def env(gke: GkeDouble) -> dict[str, str]:
    return {"GEOSCHED_GKE_ENDPOINT": gke.endpoint, "GEOSCHED_GCP_PROJECT": PROJECT}


def pool_nodes(plane: Plane, pool: str) -> list[str]:
    with plane.kube(GKE) as kube:
        return sorted(n["metadata"]["name"] for n in kube.list_all("/api/v1/nodes",
                                                                     label_selector=f"{NODEPOOL}={pool}")[0])


def test_up_puts_an_8_node_h100_gang_on_its_new_gke_node_pool_and_down_removes_both(
        realkube: Plane, gke: GkeDouble, tmp_path: Path) -> None:
    with realkube.namespace("up-gke", clusters=(GKE,)) as ns, \
            NodepoolController(gke.endpoint, PROJECT, LOCATION, GKE, realkube, GKE) as controller:
        config = cluster_config(tmp_path / "clusters.yaml", {GKE: {"namespace": ns}})
        job = compact_job(tmp_path / "train.yaml", "train", workers=8, gpus=8)
        proc = geosched("up", str(job), "--cluster", GKE, "--provider", "gcp", "--region", LOCATION,
                        "--kubeconfig", str(realkube.kubeconfig), "--clusters", str(config), "--name", "up-gke",
                        "--join-timeout", "180", "--yes", "-o", "json", env=env(gke), home=tmp_path / "home",
                        timeout=600)
        assert proc.returncode == 0, proc.stderr
        outcome = yaml.safe_load(proc.stdout)
        [(key, pool)] = gke.pools().items()
        name = key.rsplit("/", 1)[-1]
        assert name.startswith("up-gke-")
        [zone] = pool["locations"]
        assert (pool["config"]["machineType"], pool["initialNodeCount"], pool["placementPolicy"]) == (
            "a3-highgpu-8g", 8, {"type": "COMPACT"})
        assert (outcome["kind"], outcome["status"], outcome["cluster"], outcome["zones"]) == (
            "SubmitOutcome", "applied", GKE, [zone])
        new = pool_nodes(realkube, name)
        assert len(new) == 8 and new == sorted(controller.made[name])
        with realkube.kube(GKE) as kube:
            node = kube.request("GET", f"/api/v1/nodes/{new[0]}")
            labels = node["metadata"]["labels"]
            assert (labels["cloud.google.com/gke-accelerator"], labels["topology.kubernetes.io/zone"],
                    labels["node.kubernetes.io/instance-type"], labels["geosched.io/gang"]) == (
                "nvidia-h100-80gb", zone, "a3-highgpu-8g", "up-gke")
            assert node["spec"]["providerID"] == f"gce://{PROJECT}/{zone}/{new[0]}"
            assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
            bound = wait_all_running(kube, ns, 8, job_pods_selector("train"), timeout=180)
            # The real kube-scheduler bound one pod to each node of the new pool, none elsewhere (the cluster's own
            # H100 nodes in us-central1-a and -b were free).
            assert sorted(b.node or "" for b in bound) == new
            assert {(b.zone, b.accelerator) for b in bound} == {(zone, "nvidia-h100-80gb")}
            kube.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/train",
                         query={"propagationPolicy": "Background"})
            wait_until(lambda: not pods(kube, ns, job_pods_selector("train")), 120, what="the job's pods gone")
        down = geosched("down", "up-gke", "--yes", "-o", "json", env=env(gke), home=tmp_path / "home")
        assert down.returncode == 0, down.stderr
        [row] = yaml.safe_load(down.stdout)["items"]
        assert (row["state"], row["terminated"]) == ("terminated", 1)
        assert gke.pools() == {}
        wait_until(lambda: not pool_nodes(realkube, name), 60, what=f"the nodes of {name} gone")
    assert controller.errors == []
