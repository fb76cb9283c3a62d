"""Nodes whose `nvidia.com/gpu` are not whole GPUs (MIG slices, time-sliced or MPS replicas) and GPUs of another
form factor than the catalog's are no capacity for a gang of the catalog's model. The node objects in
data/nodes/ are shaped by NVIDIA's, GKE's and Lambda's documentation (each file's header cites its source), not
by geosched's label code; an audit found each read as whole GPUs of a catalog model before."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.kube.inventory import nodes_from_kube
from tests.fs_support import env, geosched_argv
from tests.kubeapi.real_nodes import eks_us_east_1
from tests.kubeemu import MultiCluster

NODES = Path(__file__).parent / "data" / "nodes"


def _nodes(name: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((NODES / name).read_text())
    return list(doc["items"]) if doc.get("kind") == "NodeList" else [doc]


@pytest.mark.parametrize(("name", "reason"), [
    ("mig-single-p4d.yaml", "MIG slices, not whole GPUs (nvidia.com/gpu.product=A100-SXM4-40GB-MIG-1g.5gb)"),
    ("mig-gke-a2.yaml", "MIG slices, not whole GPUs (cloud.google.com/gke-gpu-partition-size=1g.5gb)"),
    ("timeslice-t4-shared.yaml", "shared GPUs, not whole ones (nvidia.com/gpu.product=Tesla-T4-SHARED, "
                                 "nvidia.com/gpu.replicas=8)"),
    ("timesharing-gke-t4.yaml", "shared GPUs, not whole ones (cloud.google.com/gke-gpu-sharing-strategy=time-sharing)"),
])
def test_sliced_and_shared_gpus_are_left_out_with_the_label_that_says_so(name: str, reason: str) -> None:
    inventory = nodes_from_kube(_nodes(name), [], "c")
    assert inventory.nodes == () and [r.reason for r in inventory.skipped] == [reason]


def test_h100_pcie_and_nvl_are_not_the_catalogs_sxm_h100() -> None:
    inventory = nodes_from_kube(_nodes("h100-pcie-nvl.yaml"), [], "c")
    assert inventory.nodes == ()
    assert [r.reason.split(" (")[0] for r in inventory.skipped] == ["unknown GPU model"] * 2
    assert "NVIDIA-H100-PCIe" in inventory.skipped[0].reason and "NVIDIA-H100-NVL" in inventory.skipped[1].reason


def test_the_mig_strategy_label_alone_does_not_mean_slices() -> None:
    # The GPU operator labels every GPU node with its MIG strategy (`single` by default), MIG on or off; with MIG off
    # the product is the whole GPU's and the node counts whole.
    nodes = eks_us_east_1()
    for node in nodes:
        node["metadata"]["labels"].update({"nvidia.com/mig.strategy": "single", "nvidia.com/mig.capable": "true",
                                           "nvidia.com/mig.config": "all-disabled"})
    inventory = nodes_from_kube(nodes, [], "c")
    assert len(inventory.nodes) == len(nodes) and inventory.skipped == ()
    assert all(n.gpus == 8 for n in inventory.nodes)


# Bottlerocket's NVIDIA variants share or slice GPUs from their own settings and run no GPU feature discovery: only the
# count, above the machine's 8 GPUs, says the nvidia.com/gpu are replicas or slices. Before, the p5 read as 32 H100s
# and the p4d as 56 A100s, so a 4 x 8 gang fitted on one node's quarter of the hardware.
BOTTLEROCKET = {
    "bottlerocket-timeslice-p5.yaml": "32 allocatable nvidia.com/gpu on a p5.48xlarge, which has 8 GPUs",
    "bottlerocket-mig-p4d.yaml": "56 allocatable nvidia.com/gpu on a p4d.24xlarge, which has 8 GPUs",
}


@pytest.mark.parametrize("name", sorted(BOTTLEROCKET))
def test_more_gpus_than_the_machine_has_are_not_whole_gpus(name: str) -> None:
    inventory = nodes_from_kube(_nodes(name), [], "c")
    assert inventory.nodes == ()
    [skipped] = inventory.skipped
    assert skipped.reason.startswith(BOTTLEROCKET[name] + ": shared replicas or MIG slices"), skipped.reason


def test_a_gpu_the_device_plugin_left_out_still_leaves_whole_gpus() -> None:
    # The device plugin withholds a GPU it finds unhealthy (an Xid error): 7 of a p5's 8 are still whole H100s.
    [node] = _nodes("bottlerocket-timeslice-p5.yaml")
    for field in ("allocatable", "capacity"):
        node["status"][field]["nvidia.com/gpu"] = "7"
    [read] = nodes_from_kube([node], [], "c").nodes
    assert (read.gpu, read.gpus, read.gpus_free) == ("H100", 7, 7)


def test_the_clusters_fleet_export_leaves_the_bottlerocket_replicas_out(tmp_path: Path) -> None:
    """The real CLI over HTTP: `snapshot export --from-clusters` (what a GitOps tree renders from) on a cluster
    whose API holds the two Bottlerocket nodes beside a whole p5 node."""
    whole = eks_us_east_1()[0]
    with MultiCluster(1, directory=tmp_path) as clusters:
        api = clusters["cluster-a"]
        for name in sorted(BOTTLEROCKET):
            api.create(_nodes(name)[0])
        api.create(whole)
        run = subprocess.run(geosched_argv("snapshot", "export", tmp_path / "snap", "--from-clusters",
                                           "--kubeconfig", clusters.kubeconfig),
                             capture_output=True, text=True, env=env(tmp_path / "home"), timeout=120)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    fleet = yaml.safe_load((tmp_path / "snap" / "fleet.yaml").read_text())
    assert [(n["name"], n["gpu"], n["gpus"]) for n in fleet["nodes"]] == [(whole["metadata"]["name"], "H100", 8)]
    for name, reason in BOTTLEROCKET.items():
        assert f"cluster-a/{_nodes(name)[0]['metadata']['name']} left out: {reason}" in run.stderr


def _train_p5(name: str, *, gpus: int, group: str) -> dict[str, Any]:
    """A Bottlerocket p5 of node group `group` (no GFD labels), as bottlerocket-timeslice-p5.yaml, with `gpus`."""
    [node] = _nodes("bottlerocket-timeslice-p5.yaml")
    node["metadata"]["name"] = node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    node["metadata"]["labels"]["eks.amazonaws.com/nodegroup"] = group
    node["spec"]["providerID"] = f"aws:///us-east-1a/i-0{hashlib.sha256(name.encode()).hexdigest()[:16]}"
    for field in ("allocatable", "capacity"):
        node["status"][field]["nvidia.com/gpu"] = str(gpus)
    return node


def _submitted_affinity(tmp_path: Path, nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`geosched submit --dry-run` of one 8-GPU H100 worker on a cluster holding `nodes`: the Job's node affinity."""
    job = tmp_path / "job.yaml"
    job.write_text("name: train\nworkers: 1\ngpu: H100\ngpus_per_worker: 8\nimage: nvcr.io/nvidia/pytorch:24.05-py3\n")
    with MultiCluster(1, directory=tmp_path) as clusters:
        for node in nodes:
            clusters["cluster-a"].create(node)
        run = subprocess.run(geosched_argv("submit", job, "--dry-run", "--kubeconfig", clusters.kubeconfig),
                             capture_output=True, text=True, env=env(tmp_path / "home"), timeout=120)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    [obj] = [d for d in yaml.safe_load_all(run.stdout) if d and d.get("kind") == "Job"]
    required = obj["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    return list(required["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"])


def test_a_gang_beside_a_time_sliced_node_of_its_own_type_is_held_to_its_hosts(tmp_path: Path) -> None:
    """Two Bottlerocket p5 node groups in one zone, one whole, one time-sliced x4 (no GFD: the instance type is all
    either carries). Placed on the whole node, the pods were held only to the zone and p5.48xlarge, so the
    kube-scheduler could bind the worker's 8 nvidia.com/gpu on the time-sliced node: 2 physical H100s. Now the
    gang is held to the host it was placed on."""
    expressions = _submitted_affinity(tmp_path, [_train_p5("ip-10-0-16-50.ec2.internal", gpus=8, group="p5-train"),
                                                 _train_p5("ip-10-0-16-51.ec2.internal", gpus=32, group="p5-share")])
    assert {"key": "kubernetes.io/hostname", "operator": "In", "values": ["ip-10-0-16-50.ec2.internal"]} \
        in expressions, expressions


def test_a_shared_node_its_product_label_sets_apart_needs_no_host_pin(tmp_path: Path) -> None:
    # With GFD, the time-sliced node's product ends -SHARED (timeslice-t4-shared.yaml's header) and the product pin
    # keeps the pods off it; the gang is not pinned to hosts the cluster did not ask for.
    whole = _train_p5("ip-10-0-16-50.ec2.internal", gpus=8, group="p5-train")
    shared = _train_p5("ip-10-0-16-51.ec2.internal", gpus=32, group="p5-share")
    whole["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    shared["metadata"]["labels"].update({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
                                         "nvidia.com/gpu.replicas": "4"})
    expressions = _submitted_affinity(tmp_path, [whole, shared])
    assert [e["key"] for e in expressions] == ["topology.kubernetes.io/zone", "topology.kubernetes.io/region",
                                               "nvidia.com/gpu.product"], expressions
    assert expressions[-1]["values"] == ["NVIDIA-H100-80GB-HBM3"]


def _gitops_affinity(tmp_path: Path, nodes: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`snapshot export --from-clusters` of a cluster holding `nodes`, then `gitops render` of one 8-GPU H100 worker
    from that snapshot (the flow of examples/gitops/README.md): the fleet document and the written Job's node
    affinity."""
    repo = tmp_path / "repo"
    (repo / "jobs").mkdir(parents=True)
    (repo / "jobs" / "train.yaml").write_text("name: train\nworkers: 1\ngpu: H100\ngpus_per_worker: 8\n"
                                              "image: nvcr.io/nvidia/pytorch:24.05-py3\n")
    (repo / "clusters.yaml").write_text("apiVersion: geosched.io/v1alpha1\nkind: ClusterConfig\n"
                                        "clusters:\n  cluster-a: {context: cluster-a}\n")
    with MultiCluster(1, directory=tmp_path) as clusters:
        for node in nodes:
            clusters["cluster-a"].create(node)
        argv = geosched_argv("snapshot", "export", repo / "snapshot", "--from-clusters", "--kubeconfig",
                             clusters.kubeconfig, "--clusters", repo / "clusters.yaml")
        export = subprocess.run(argv,
                                capture_output=True, text=True, env=env(tmp_path / "home"), timeout=120)
    assert export.returncode == 0 and "Traceback" not in export.stderr, export.stderr
    run = subprocess.run(geosched_argv("gitops", "render", "--jobs", repo / "jobs", "--snapshot", repo / "snapshot",
                                       "--clusters", repo / "clusters.yaml", "--out", repo),
                         capture_output=True, text=True, env=env(tmp_path / "home"), timeout=120)
    assert run.returncode == 0 and "1 placed, 0 unplaced" in run.stdout, run.stdout + run.stderr
    [obj] = [d for d in yaml.safe_load_all((repo / "clusters" / "cluster-a" / "default" / "train.yaml").read_text())
             if d and d.get("kind") == "Job"]
    required = obj["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    expressions = required["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
    return yaml.safe_load((repo / "snapshot" / "fleet.yaml").read_text()), list(expressions)


def test_a_gitops_render_beside_a_time_sliced_node_of_its_own_type_is_held_to_its_hosts(tmp_path: Path) -> None:
    """The case above through the GitOps path: the snapshot a tree renders from dropped the time-sliced p5, so the
    rendered Job was held only to the zone and p5.48xlarge, which the time-sliced p5 carries too. The snapshot now
    keeps the left-out node's labels, and the render holds the gang to its host as `submit` does."""
    whole = _train_p5("ip-10-0-16-50.ec2.internal", gpus=8, group="p5-train")
    shared = _train_p5("ip-10-0-16-51.ec2.internal", gpus=32, group="p5-share")
    fleet, expressions = _gitops_affinity(tmp_path / "shared", [whole, shared])
    assert [n["name"] for n in fleet["nodes"]] == ["ip-10-0-16-50.ec2.internal"]
    assert [(e["cluster"], e["labels"]["kubernetes.io/hostname"]) for e in fleet["not_whole"]] == [
        ("cluster-a", "ip-10-0-16-51.ec2.internal")]
    assert {"key": "kubernetes.io/hostname", "operator": "In", "values": ["ip-10-0-16-50.ec2.internal"]} \
        in expressions, expressions
    # Without the time-sliced node the snapshot and the pin are as before: zone, region and instance type only.
    fleet, alone = _gitops_affinity(tmp_path / "alone", [whole])
    assert "not_whole" not in fleet
    assert [e["key"] for e in alone] == ["topology.kubernetes.io/zone", "topology.kubernetes.io/region",
                                         "node.kubernetes.io/instance-type"], alone
