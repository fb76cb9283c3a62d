"""Manifests select real-labelled nodes: on every path geosched writes manifests (submit, GitOps, the demo's
hand-off, the committed examples), the pods' node constraints, asked of the API server as label selectors,
select the nodes the gang was placed on, on clusters whose nodes are shaped like real EKS and GKE GPU nodes
(tests/kubeapi/real_nodes.py) or carry the labels of the snapshot they were placed from."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched import policies
from geosched.default_fleet import default_fleet, default_network
from geosched.demo.stages import handoff
from geosched.documents import load_fleet, load_job
from geosched.kube import keys
from geosched.kube.config import load_cluster_config
from geosched.kube.submit import SubmitOptions, submit
from geosched.models import Node, Placement
from geosched.policies import PlacementContext
from tests.kubeapi.real_nodes import eks_us_east_1, gke_us_central1, pod_specs, seed, selected
from tests.kubeemu import MultiCluster, node_manifest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gitops"
CLUSTERS = ("eks-us-east-1", "gke-us-central1")


@pytest.fixture
def real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MultiCluster]:
    """An EKS and a GKE cluster, each with GPU nodes as those platforms register them."""
    with MultiCluster(names=CLUSTERS, directory=tmp_path) as mc:
        monkeypatch.setenv("KUBECONFIG", str(mc.kubeconfig))
        seed(mc["eks-us-east-1"], eks_us_east_1())
        seed(mc["gke-us-central1"], gke_us_central1())
        yield mc
        for cluster in mc:
            assert cluster.server_errors == [], cluster.server_errors


def job_file(tmp_path: Path, cluster: str, gpu: str = "H100") -> Path:
    path = tmp_path / f"train-{cluster}.yaml"
    path.write_text(f"apiVersion: geosched.io/v1alpha1\nkind: Job\nname: train\nimage: ghcr.io/example/t:1\n"
                    f"workers: 2\ngpus_per_worker: 8\ngpu: {gpu}\nclusters: [{cluster}]\n", encoding="utf-8")
    return path


def gpu_specs(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    def asks_gpus(spec: Mapping[str, Any]) -> bool:
        return any(keys.GPU in ((c.get("resources") or {}).get("limits") or {}) for c in spec.get("containers", []))

    return [s for s in pod_specs(obj) if asks_gpus(s)]


def assigned(obj: Mapping[str, Any]) -> set[str]:
    text = obj["metadata"]["annotations"]["geosched.io/assignments"]
    return {item.split("=")[0] for item in text.split(",")}


def assert_selects_its_nodes(mc: MultiCluster, cluster: str, obj: Mapping[str, Any],
                             hostnames: Mapping[str, str] | None = None) -> set[str]:
    """Every GPU pod spec of `obj` selects every node the gang was placed on, and only nodes of its zones."""
    placed = {(hostnames or {}).get(n, n) for n in assigned(obj)}
    specs = gpu_specs(obj)
    assert specs, f"no GPU pod spec in {obj['kind']}"
    zones = {mc[cluster].get("v1/nodes", n)["metadata"]["labels"][keys.ZONE] for n in placed}
    with mc.api_client(cluster) as api:
        for spec in specs:
            chosen = selected(api, spec)
            assert placed <= chosen, f"{placed - chosen} placed but not selected by {spec.get('affinity')}"
            assert {mc[cluster].get("v1/nodes", n)["metadata"]["labels"][keys.ZONE] for n in chosen} == zones
    return placed


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_submit_pins_values_the_real_nodes_carry(real: MultiCluster, tmp_path: Path, cluster: str) -> None:
    outcome = submit(job_file(tmp_path, cluster), kubeconfig=real.kubeconfig, options=SubmitOptions())
    assert (outcome.status, outcome.cluster) == ("applied", cluster)
    obj = real[cluster].get("batch/v1/jobs", "train", "default")
    assert obj is not None
    assert_selects_its_nodes(real, cluster, obj)
    [spec] = gpu_specs(obj)
    [term] = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    pinned = {e["key"]: e["values"] for e in term["matchExpressions"]}
    # The zone as the nodes name it (EKS: the zone name, not the zone ID geosched keys the fleet by).
    assert pinned[keys.ZONE] == (["us-east-1a"] if cluster == "eks-us-east-1" else ["us-central1-c"])
    if keys.GPU_PRODUCT in pinned:
        assert pinned[keys.GPU_PRODUCT] == ["NVIDIA-H100-80GB-HBM3"]


def load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]


def node_object(node: Node) -> dict[str, Any]:
    """A fleet node registered as the Node its snapshot describes: its labels and providerID as they are."""
    obj = node_manifest(node.name, region=node.region, zone=node.labels.get(keys.ZONE, node.zone), gpus=node.gpus)
    obj["metadata"]["labels"] = dict(node.labels)
    obj["spec"]["providerID"] = node.provider_id
    return obj


def placed_objects(path: Path) -> list[dict[str, Any]]:
    return [o for o in load_all(path) if "geosched.io/assignments" in (o["metadata"].get("annotations") or {})]


def test_the_committed_gitops_example_selects_the_nodes_of_its_snapshot(tmp_path: Path) -> None:
    # The snapshot's labels are those of real EKS and GKE nodes (tests/kube/test_node_labels.py); here the
    # committed manifests must select the nodes they were placed on, registered with exactly those labels.
    fleet = load_fleet(EXAMPLE / "snapshot" / "fleet.yaml")
    names = sorted(load_cluster_config(EXAMPLE / "clusters.yaml"))
    files = sorted((EXAMPLE / "clusters").glob("*/*/*.yaml"))
    assert len(files) == 4
    with MultiCluster(names=names, directory=tmp_path) as mc:
        seed_all = [(n.cluster, node_object(n)) for n in fleet.nodes if n.cluster in names]
        for cluster, obj in seed_all:
            mc[cluster].create(obj)
        for path in files:
            [obj] = placed_objects(path)
            assert_selects_its_nodes(mc, path.parts[-3], obj)


@pytest.mark.parametrize("example", ["train-8", "train-64", "train-512"])
def test_the_demo_handoff_selects_the_nodes_of_its_cluster(tmp_path: Path, example: str) -> None:
    # The embedded fleet's labels are those of real EKS and GKE nodes (tests/kube/test_node_labels.py).
    fleet = default_fleet()
    job = load_job(ROOT / "examples" / "jobs" / f"{example}.yaml")
    placement = policies.place(job, PlacementContext(fleet, default_network()))
    assert isinstance(placement, Placement) and placement.cluster is not None
    handoff(1, [placement], fleet, tmp_path / "out")
    [obj] = placed_objects(tmp_path / "out" / placement.cluster / job.namespace / f"{job.name}.yaml")
    with MultiCluster(names=[placement.cluster], directory=tmp_path) as mc:
        seed(mc[placement.cluster], [node_object(n) for n in fleet.nodes if n.cluster == placement.cluster])
        assert_selects_its_nodes(mc, placement.cluster, obj)
