"""Multi-cluster inventory: every context of the kubeconfig read live into one Fleet."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.core import catalog
from geosched.core.errors import InputError
from geosched.core.models import Node, NodeState
from geosched.kube import cluster_inventory, keys
from geosched.kube.config import ClusterConfig
from tests.kubeapi.kubeapi_support import A100, H100, REGIONS
from tests.kubeemu import MultiCluster, node_manifest

pytestmark = pytest.mark.integration


def seed(clusters: MultiCluster) -> None:
    for name, region in REGIONS.items():
        for zone in "ab":
            clusters[name].add_node(f"{name}-{zone}0", region=region, zone=f"{region}-{zone}", gpus=8,
                                    gpu_product=H100, instance_type="a3-highgpu-8g")


def test_every_context_is_a_cluster_with_labels_and_free_gpus(clusters: MultiCluster) -> None:
    seed(clusters)
    b = clusters["cluster-b"]
    b.add_pod("running", node_name="cluster-b-a0", phase="Running", gpus=3)
    b.add_pod("bound-not-started", node_name="cluster-b-a0", gpus=1)
    b.add_pod("finished", node_name="cluster-b-a0", phase="Succeeded", gpus=4)
    b.add_pod("pending", scheduler_name="geosched", gpus=8)  # not on a node: holds nothing
    b.add_node("down", region="europe-west4", zone="europe-west4-a", gpus=8, gpu_product=H100, ready=False)
    b.add_node("cordoned", region="europe-west4", zone="europe-west4-a", gpus=8, gpu_product=A100,
               unschedulable=True)
    b.add_node("cpu-only", region="europe-west4", zone="europe-west4-a")
    b.add_node("nowhere", region="", zone="", gpus=8, gpu_product=H100)

    view = cluster_inventory.load()  # KUBECONFIG names the three clusters

    assert view.clusters == ("cluster-a", "cluster-b", "cluster-c") and view.unreachable == ()
    nodes = view.fleet.by_name
    assert {n.cluster for n in nodes.values()} == set(REGIONS)
    node = nodes["cluster-b-a0"]
    assert (node.region, node.zone, node.instance_type, node.gpu, node.gpus) == (
        "europe-west4", "europe-west4-a", "a3-highgpu-8g", "H100", 8)
    assert node.labels[keys.GPU_PRODUCT] == H100
    assert node.gpus_free == 8 - 3 - 1  # allocatable minus requests of bound, unfinished pods
    assert nodes["cluster-b-b0"].gpus_free == 8
    # NotReady and cordoned nodes keep their identity but offer nothing; policies pass them over.
    assert (nodes["down"].state, nodes["down"].gpus_free) == (NodeState.NOT_READY, 0)
    assert (nodes["cordoned"].state, nodes["cordoned"].gpu) == (NodeState.NOT_READY, "A100-80GB")
    skipped = {r.subject: r.reason for r in view.skipped}
    assert "no allocatable nvidia.com/gpu" in skipped["cluster-b/cpu-only"]
    assert "missing" in skipped["cluster-b/nowhere"]
    # Zones and regions around the nodes; the emulator's provider is not in the catalog, so its regions are
    # declared with the namesake region's grid and the default PUE, and said so.
    assert view.fleet.zones["europe-west4-a"].region_key == "kubeemu:europe-west4"
    region = view.fleet.regions["kubeemu:europe-west4"]
    assert region.grid_gco2e_per_kwh == catalog.regions()["gcp:europe-west4"].grid_gco2e_per_kwh
    assert region.pue == cluster_inventory.DEFAULT_PUE
    assert any("kubeemu:europe-west4" in a for a in view.assumptions)
    # Unpriced nodes get the catalog's median $/GPU-h of their GPU, so cost neither excludes nor favours them.
    per_gpu, _ = cluster_inventory.median_gpu_prices("H100")
    assert node.price_ondemand == pytest.approx(per_gpu * 8)


def test_contexts_and_cluster_config_choose_the_clusters(clusters: MultiCluster) -> None:
    seed(clusters)
    only = cluster_inventory.load(clusters.kubeconfig, contexts=["cluster-c"])
    assert only.clusters == ("cluster-c",) and {n.cluster for n in only.fleet.nodes} == {"cluster-c"}

    config = {"east": ClusterConfig(name="east", context="cluster-a"),
              "west": ClusterConfig(name="west", context="cluster-b")}
    named = cluster_inventory.load(clusters.kubeconfig, clusters=config)
    assert named.clusters == ("east", "west")
    assert {n.cluster for n in named.fleet.nodes} == {"east", "west"}
    assert cluster_inventory.load(clusters.kubeconfig, ["west"], config).clusters == ("west",)

    with pytest.raises(InputError, match="unknown context or cluster nope"):
        cluster_inventory.load(clusters.kubeconfig, contexts=["nope"])
    with pytest.raises(InputError, match=r"clusters\.x\.context: context .missing. is not in the kubeconfig"):
        cluster_inventory.load(clusters.kubeconfig, clusters={"x": ClusterConfig(name="x", context="missing")})
    with pytest.raises(InputError, match=r"cannot read the kubeconfig: no such file \(pass --kubeconfig or set"):
        cluster_inventory.load(Path("/nonexistent/kubeconfig"))


def test_an_unreachable_cluster_is_reported_not_fatal(clusters: MultiCluster) -> None:
    seed(clusters)
    clusters["cluster-c"].stop()
    clusters["cluster-b"].inject(500, method="GET", path=r"/nodes$")  # no Retry-After: surfaces at once

    view = cluster_inventory.load(clusters.kubeconfig)

    assert view.clusters == ("cluster-a",)
    assert {n.cluster for n in view.fleet.nodes} == {"cluster-a"}
    reasons = {u.cluster: u.reason for u in view.unreachable}
    assert set(reasons) == {"cluster-b", "cluster-c"}
    assert reasons["cluster-b"].startswith("500")
    assert "cannot connect to 127.0.0.1:" in reasons["cluster-c"] and "kubeemu-" not in reasons["cluster-c"]  # no token


def test_a_launched_node_keeps_one_identity(clusters: MultiCluster) -> None:
    # EKS registers the instance as a node named after its private DNS name, with the instance in providerID.
    node = node_manifest("ip-10-0-1-1.ec2.internal", region="us-east-1", zone="us-east-1a", gpus=8,
                         gpu_product="NVIDIA-A100-SXM4-40GB", instance_type="p4d.24xlarge",
                         labels={keys.AWS_ZONE_ID: "use1-az1"})
    node["spec"]["providerID"] = "aws:///us-east-1a/i-0abc"
    clusters["cluster-b"].create(node)
    clusters["cluster-b"].add_pod("busy", node_name="ip-10-0-1-1.ec2.internal", phase="Running", gpus=2)
    launched = Node(name="trainer-1", provider="aws", region="us-east-1", zone="use1-az1",
                    instance_type="p4d.24xlarge", gpu="A100", gpus=8, gpus_free=8, price_ondemand=32.77,
                    provider_id="i-0abc", labels={"geosched.io/launched-by": "aws"})

    view = cluster_inventory.load(clusters.kubeconfig, launched=[launched])

    matching = [n for n in view.fleet.nodes if n.provider_id in ("i-0abc", "aws:///us-east-1a/i-0abc")]
    assert len(matching) == 1
    (one,) = matching
    assert (one.name, one.cluster, one.gpus_free, one.price_ondemand) == ("trainer-1", "cluster-b", 6, 32.77)
    assert one.labels[keys.HOSTNAME] == "ip-10-0-1-1.ec2.internal"  # manifests still name the kube node
    assert view.fleet.regions["aws:us-east-1"] == catalog.regions()["aws:us-east-1"]  # a known region as it is


def test_the_same_node_name_in_two_clusters_stays_two_nodes(clusters: MultiCluster) -> None:
    for name in ("cluster-a", "cluster-b"):
        clusters[name].add_node("gpu-0", region=REGIONS[name], zone=f"{REGIONS[name]}-a", gpus=8, gpu_product=H100)
    view = cluster_inventory.load(clusters.kubeconfig)
    assert sorted(view.fleet.by_name) == ["cluster-a/gpu-0", "cluster-b/gpu-0"]
    assert all(n.labels[keys.HOSTNAME] == "gpu-0" for n in view.fleet.nodes)
