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
import yaml
from typer.testing import CliRunner

from geosched.kube import keys
from geosched.kube.cli import app
from geosched.kube.config import Backend, ClusterConfig
from geosched.kube.submit import SubmitOptions, SubmitRefused, submit
from tests.kube.kube_support import validate_manifest
from tests.kubeapi.multikueue_support import register_kueue_crds
from tests.kubeapi.test_kubeapi_submit import FAST, fleet, job_file, writes  # noqa: F401  (fleet: a fixture)
from tests.kubeemu import EmulatedCluster, MultiCluster

pytestmark = pytest.mark.integration
# v1beta2 is Kueue's storage version since v0.16 and v1beta1 is deprecated (both CRDs in shared/schemas/crds and
# kubernetes-sigs/kueue v0.17.8 config/components/crd/bases: v1beta1 served, deprecated, not stored).
KUEUE = "kueue.x-k8s.io/v1beta2"
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
    assert fleet["cluster-b"].count("GET", "/localqueues/team-a") == 0


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


def test_the_queues_are_read_at_v1beta2(fleet: MultiCluster, tmp_path: Path) -> None:  # noqa: F811
    """Issue 21 item 7: --check-queues read the deprecated v1beta1, which a Kueue that no longer serves it (and a
    Kueue whose conversion webhook is down) cannot answer."""
    only_v1beta2(fleet["cluster-b"])
    install(fleet, topology([keys.REGION, keys.ZONE, keys.HOSTNAME]), flavor("default"),
            cluster_queue([keys.GPU]), LOCAL_QUEUE)
    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=CLUSTERS, options=CHECK)
    assert (outcome.status, outcome.cluster) == ("applied", "west")
    assert fleet["cluster-b"].count("GET", "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues/team-a") == 1
    assert fleet["cluster-b"].count("GET", "/apis/kueue.x-k8s.io/v1beta1/") == 0


def test_a_kueue_before_v1beta2_is_still_read(fleet: MultiCluster, tmp_path: Path) -> None:  # noqa: F811
    register_kueue_crds(fleet["cluster-b"], served=("v1beta1",))  # Kueue before v0.15
    old = [{**o, "apiVersion": "kueue.x-k8s.io/v1beta1"} for o in (
        topology([keys.REGION, keys.ZONE, keys.HOSTNAME]), flavor("default"), cluster_queue([keys.GPU]), LOCAL_QUEUE)]
    for obj in old:
        fleet["cluster-b"].create(obj)
    outcome = submit(job_file(tmp_path), kubeconfig=fleet.kubeconfig, clusters=CLUSTERS, options=CHECK)
    assert outcome.status == "applied"


def only_v1beta2(cluster: EmulatedCluster) -> None:
    register_kueue_crds(cluster, served=("v1beta2",))


def test_kueue_objects_renders_the_queues_that_admit_the_gang(fleet: MultiCluster, tmp_path: Path) -> None:  # noqa: F811
    """Issue 21 item 7: `submit --kueue-objects` renders (and applies first) the cluster's Topology, a ResourceFlavor
    per GPU product, a ClusterQueue holding its nodes' capacity and the LocalQueue the cluster config names, at
    v1beta2; applied, they are what --check-queues asks for."""
    only_v1beta2(fleet["cluster-b"])
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text("clusters:\n  west: {context: cluster-b, backend: kueue, queue: team-a, namespace: default}\n",
                        encoding="utf-8")
    base = ["submit", str(job_file(tmp_path)), "--clusters", str(clusters), "--kubeconfig", str(fleet.kubeconfig)]
    dry = CliRunner().invoke(app, [*base, "--kueue-objects", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    docs = list(yaml.safe_load_all(dry.stdout))
    kueue = [d for d in docs if d["apiVersion"].startswith("kueue.x-k8s.io/")]
    assert [d["kind"] for d in kueue] == ["Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"]
    for d in kueue:
        assert d["apiVersion"] == KUEUE
        validate_manifest(d)
    queue = kueue[2]["spec"]["resourceGroups"][0]
    assert queue["coveredResources"] == [keys.GPU]
    # cluster-b: 6 nodes x 8 H100 (2 in zone a, 4 in zone b).
    assert queue["flavors"] == [{"name": kueue[1]["metadata"]["name"],
                                 "resources": [{"name": keys.GPU, "nominalQuota": 48}]}]
    assert kueue[3]["metadata"] == {"name": "team-a", "namespace": "default"}
    assert kueue[3]["spec"] == {"clusterQueue": kueue[2]["metadata"]["name"]}
    assert writes(fleet)["cluster-b"] == 0
    applied = CliRunner().invoke(app, [*base, "--kueue-objects"])
    assert applied.exit_code == 0, applied.output
    second = CliRunner().invoke(app, ["submit", str(job_file(tmp_path, 2, "second")), "--clusters", str(clusters),
                                      "--kubeconfig", str(fleet.kubeconfig), "--check-queues"])
    assert second.exit_code == 0, second.output
