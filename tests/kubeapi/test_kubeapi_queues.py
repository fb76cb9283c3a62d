"""submit --check-queues: on a Kueue cluster, the LocalQueue, ClusterQueue, ResourceFlavors and Topology the gang
needs are read from the cluster first; what is missing is said, and nothing is applied.

The Kueue objects are shaped as in Kueue's topology-aware scheduling docs
(kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling: a Topology with node-label levels, a ResourceFlavor
with `topologyName`, a ClusterQueue whose resource group covers the GPUs with that flavor, a LocalQueue pointing at
it) and are checked against Kueue's CRD schemas before they go to the emulated cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from geosched.kube import keys
from geosched.kube.cli import app
from geosched.kube.config import Backend, ClusterConfig
from geosched.kube.submit import SubmitOptions, SubmitRefused, submit
from tests.kube.kube_support import validate_manifest
from tests.kubeapi.test_kubeapi_submit import FAST, fleet, job_file, writes  # noqa: F401  (fleet: a fixture)
from tests.kubeemu import MultiCluster

pytestmark = pytest.mark.integration
KUEUE = "kueue.x-k8s.io/v1beta1"
CHECK = SubmitOptions(retry=FAST.retry, check_queues=True)
CLUSTERS = {"west": ClusterConfig(name="west", context="cluster-b", backend=Backend.KUEUE, queue="team-a",
                                  namespace="default"),
            "east": ClusterConfig(name="east", context="cluster-a")}


def topology(levels: list[str]) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]}}


def flavor(topology_name: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": {keys.GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3"}}
    if topology_name is not None:
        spec["topologyName"] = topology_name
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"}, "spec": spec}


def cluster_queue(covered: list[str]) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "gpus"},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": covered,
                "flavors": [{"name": "h100", "resources": [{"name": r, "nominalQuota": 64} for r in covered]}]}]}}


LOCAL_QUEUE = {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "team-a", "namespace": "default"},
               "spec": {"clusterQueue": "gpus"}}


def install(clusters: MultiCluster, *objects: dict[str, Any]) -> None:
    for obj in objects:
        validate_manifest(obj)
        clusters["cluster-b"].create(obj)


def test_nothing_installed_is_said_and_nothing_applied(fleet: MultiCluster, tmp_path: Path) -> None:  # noqa: F811
    with pytest.raises(SubmitRefused) as refused:
        submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=CLUSTERS, options=CHECK)
    assert str(refused.value) == ("cluster west cannot admit 'train' through Kueue: LocalQueue default/team-a not "
                                  "found")
    assert writes(fleet) == {"cluster-a": 0, "cluster-b": 0, "cluster-c": 0}


def test_what_the_queue_lacks_is_listed(fleet: MultiCluster, tmp_path: Path) -> None:  # noqa: F811
    # A ClusterQueue without the GPUs, a flavor naming no Topology: Kueue would keep the job inadmissible.
    install(fleet, flavor(None), cluster_queue(["cpu"]), LOCAL_QUEUE)
    with pytest.raises(SubmitRefused) as refused:
        submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=CLUSTERS, options=CHECK)
    assert str(refused.value).split(": ", 1)[1].split("; ") == [
        "ClusterQueue gpus does not cover nvidia.com/gpu, which the pods request",
        "no ResourceFlavor of ClusterQueue gpus names a Topology (spec.topologyName), which topology-aware "
        f"scheduling needs for the required level {keys.ZONE}"]
    assert fleet["cluster-b"].get("batch/v1/jobs", "train", "default") is None


def test_a_topology_without_the_required_level_is_said(fleet: MultiCluster, tmp_path: Path) -> None:  # noqa: F811
    install(fleet, topology([keys.REGION, keys.HOSTNAME]), flavor("default"), cluster_queue([keys.GPU]), LOCAL_QUEUE)
    with pytest.raises(SubmitRefused, match=f"Topology default has no level {keys.ZONE} "
                                            f"\\(levels: {keys.REGION}, {keys.HOSTNAME}\\)"):
        submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=CLUSTERS, options=CHECK)


def test_a_complete_queue_admits_and_the_job_is_applied(fleet: MultiCluster, tmp_path: Path) -> None:  # noqa: F811
    install(fleet, topology([keys.REGION, keys.ZONE, keys.HOSTNAME]), flavor("default"),
            cluster_queue([keys.GPU]), LOCAL_QUEUE)
    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=CLUSTERS, options=CHECK)
    assert (outcome.status, outcome.cluster) == ("applied", "west")
    job = fleet["cluster-b"].get("batch/v1/jobs", "train", "default")
    assert job is not None and job["metadata"]["labels"][keys.KUEUE_QUEUE] == "team-a"
    template = job["spec"]["template"]["metadata"]["annotations"]
    assert template[keys.KUEUE_REQUIRED_TOPOLOGY] == keys.ZONE


def test_without_the_flag_nothing_is_read(fleet: MultiCluster, tmp_path: Path) -> None:  # noqa: F811
    submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=CLUSTERS, options=FAST)
    assert fleet["cluster-b"].count("GET", "/apis/kueue.x-k8s.io/v1beta1/namespaces/default/localqueues/team-a") == 0


def test_the_cli_says_what_is_missing_in_one_line(fleet: MultiCluster, tmp_path: Path) -> None:  # noqa: F811
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text("clusters:\n  west: {context: cluster-b, backend: kueue, queue: team-a, namespace: default}\n"
                        "  east: {context: cluster-a}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["submit", str(job_file(tmp_path)), "--clusters", str(clusters),
                                      "--kubeconfig", str(fleet.kubeconfig), "--check-queues"])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines() == [
        "error: cluster west cannot admit 'train' through Kueue: LocalQueue default/team-a not found"]
    assert writes(fleet)["cluster-b"] == 0
