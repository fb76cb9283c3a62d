"""A time-shared H100 node in *another* zone must not loosen the gang's GPU pin (review finding of stop 36, rev36b):
the pin fell back to GPU feature discovery's product label, which H100-MEGA nodes in the gang's own zone carry too,
and hosts were not required (the shared node is outside the zones), so the pods could be bound to H100-MEGA nodes.
Labels as GKE sets them (cloud.google.com/gke-accelerator, gke-gpu-sharing-strategy: GKE's GPU time-sharing docs)."""
from __future__ import annotations

from geosched.core.models import Job, Placement
from geosched.kube.cluster_inventory import ClusterReading, build_fleet
from geosched.kube.render import constraints_for
from geosched.policies import PlacementContext, place
from tests.handmade import network
from tests.kubeemu.cluster import node_manifest

P = "NVIDIA-H100-80GB-HBM3"


def test_a_shared_node_elsewhere_does_not_loosen_the_pin() -> None:
    nodes = [node_manifest(f"hi{i}", region="us-central1", zone="us-central1-a", instance_type="a3-highgpu-8g",
                           gpu_product=P, gpus=8, labels={"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"})
             for i in range(2)]
    nodes += [node_manifest(f"mega{i}", region="us-central1", zone="us-central1-a", instance_type="a3-megagpu-8g",
                            gpu_product=P, gpus=8, labels={"cloud.google.com/gke-accelerator": "nvidia-h100-mega-80gb"})
              for i in range(2)]
    shared = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
              "cloud.google.com/gke-gpu-sharing-strategy": "time-sharing"}
    nodes.append(node_manifest("shared", region="us-central1", zone="us-central1-b", instance_type="a3-highgpu-8g",
                               gpu_product=P, gpus=8, labels=shared))
    for n in nodes:
        zone = n["metadata"]["labels"]["topology.kubernetes.io/zone"]
        n["spec"]["providerID"] = f"gce://proj/{zone}/{n['metadata']['name']}"
    view = build_fleet([ClusterReading("c", tuple(nodes), ())])
    job = Job("g", workers=2, gpus_per_worker=8, gpu="H100")
    result = place(job, PlacementContext(view.fleet, network(view.fleet)))
    assert isinstance(result, Placement), result
    by_name = {n.name: n for n in view.fleet.nodes}
    without = constraints_for(result, by_name)
    with_ = constraints_for(result, by_name, view.not_whole["c"])
    assert with_.gpu == without.gpu or with_.hosts_required
    # What the pin admits in the gang's zone: the H100 nodes, never the H100-MEGA ones.
    assert with_.gpu is not None
    megas = [n["metadata"]["labels"] for n in nodes if n["metadata"]["name"].startswith("mega")]
    assert with_.hosts_required or not any(m.get(with_.gpu.key) in with_.gpu.values for m in megas), with_.gpu
