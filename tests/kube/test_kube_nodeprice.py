"""What a live node costs (`geosched.kube.nodeprice`, audit finding 8): the list price of its instance type in its
zone, else in its region (on-demand prices are regional), never a fleet-wide median while the region sells the
type; and a node labelled spot is charged its spot price, whatever a job placed there asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from geosched import clouds
from geosched.clouds import CloudSpec
from geosched.core.models import Node, Pricing
from geosched.kube import keys, nodeprice
from geosched.kube.cluster_inventory import ClusterReading, build_fleet
from geosched.kube.tolerations import Toleration
from tests.kubeapi.real_nodes import eks_node, gke_node

# The node of aws/karpenter-provider-aws PR #1476 (its header cites it): a Karpenter spot g5.xlarge in eu-west-1b,
# from an EKS before 1.30, so without topology.k8s.aws/zone-id.
KARPENTER_G5 = Path(__file__).parent / "data" / "node-karpenter-g5-spot.yaml"
# Its tritonOnly taint, tolerated as the cluster's config would (so the node is counted).
TRITON = Toleration(key="tritonOnly", operator="Equal", value="true", effect="NoExecute")
# The shipped catalog's g5.xlarge in eu-west-1: $1.123/h on demand in each of euw1-az1..az3; spot 0.5084, 0.5136,
# 0.5013 (median 0.5084). Its median A10G $/GPU-hour (what the node was charged before) is $2.036.
G5_ONDEMAND, G5_SPOT_MEDIAN = 1.123, 0.5084


def _karpenter_node(**labels: str | None) -> dict[str, Any]:
    node = yaml.safe_load(KARPENTER_G5.read_text())
    for key, value in labels.items():
        if value is None:
            node["metadata"]["labels"].pop(key, None)
        else:
            node["metadata"]["labels"][key] = value
    return dict(node)


def _fleet(*nodes: dict[str, Any]) -> tuple[list[Node], tuple[str, ...]]:
    view = build_fleet([ClusterReading("c", tuple(nodes), ())], tolerations={"c": (TRITON,)})
    return list(view.fleet.nodes), view.assumptions


def test_an_eks_node_without_a_zone_id_is_priced_at_its_regions_list_price() -> None:
    (node,), notes = _fleet(_karpenter_node(**{"karpenter.sh/capacity-type": "on-demand"}))
    assert (node.zone, node.instance_type) == ("eu-west-1b", "g5.xlarge")
    assert (node.price_ondemand, node.price_spot) == (G5_ONDEMAND, G5_SPOT_MEDIAN)
    assert not any("median" in n for n in notes), notes
    assert any("region's list price" in n and "g5.xlarge in eu-west-1" in n for n in notes), notes


def test_the_karpenter_spot_node_is_charged_its_spot_price_for_every_job() -> None:
    (node,), notes = _fleet(_karpenter_node())  # karpenter.sh/capacity-type: spot, as in the PR
    assert (node.price_ondemand, node.price_spot) == (G5_SPOT_MEDIAN, G5_SPOT_MEDIAN)
    assert any("1 spot node(s)" in n for n in notes), notes


def test_an_eks_managed_spot_node_group_and_a_gke_spot_node_are_charged_spot() -> None:
    eks = eks_node("10.0.1.23", region="us-east-1", zone="us-east-1a", zone_id="use1-az1", instance_type="p5.48xlarge",
                   product="NVIDIA-H100-80GB-HBM3", instance_id="i-0a99d3bb7b27d62ac", nodegroup="gpu-spot")
    eks["metadata"]["labels"]["eks.amazonaws.com/capacityType"] = "SPOT"
    gke = gke_node("gke-ml-spot-1", project="p", region="us-central1", zone="us-central1-a",
                   instance_type="a3-highgpu-8g", accelerator="nvidia-h100-80gb", pool="spot")
    gke["metadata"]["labels"]["cloud.google.com/gke-spot"] = "true"
    nodes, _ = _fleet(eks, gke)
    prices = {n.provider: (n.price_ondemand, n.price_spot) for n in nodes}
    assert prices == {"aws": (30.326, 30.326), "gcp": (20.19947, 20.19947)}  # each zone's spot price


def test_a_clouds_spot_labels_come_from_its_spec_so_a_new_cloud_adds_them_there(monkeypatch: Any) -> None:
    # Issue 25 item 1: a cloud is one module. The spot labels of every cloud geosched knows are read from the
    # specs, so a cloud that joins with its own (AKS: `kubernetes.azure.com/scalesetpriority: spot`,
    # learn.microsoft.com/azure/aks/spot-node-pool) is priced as spot with kube/nodeprice.py untouched.
    aks_spot = {"kubernetes.azure.com/scalesetpriority": "spot"}
    assert nodeprice.market(aks_spot) is Pricing.ON_DEMAND
    for spec in clouds.all_specs():
        for label, value in spec.spot_labels:
            assert nodeprice.market({label: value}) is Pricing.SPOT, (spec.name, label)
            assert nodeprice.market({label: "no"}) is Pricing.ON_DEMAND, (spec.name, label)
    aks = CloudSpec(name="azure", title="Azure", provider_id_schemes=("azure",),
                    spot_labels=(("kubernetes.azure.com/scalesetpriority", "spot"),))
    known = clouds.all_specs()
    monkeypatch.setattr(clouds, "all_specs", lambda: (*known, aks))
    assert nodeprice.market(aks_spot) is Pricing.SPOT
    assert nodeprice.market({"karpenter.sh/capacity-type": "spot"}) is Pricing.SPOT  # Karpenter's, no cloud's


def test_an_on_demand_node_keeps_its_zones_prices() -> None:
    eks = eks_node("10.0.1.23", region="us-east-1", zone="us-east-1a", zone_id="use1-az2", instance_type="p5.48xlarge",
                   product="NVIDIA-H100-80GB-HBM3", instance_id="i-0a99d3bb7b27d62ac", nodegroup="gpu")
    (node,), _ = _fleet(eks)
    assert (node.zone, node.price_ondemand, node.price_spot) == ("use1-az2", 98.32, 27.6948)


def test_a_type_the_region_does_not_sell_still_falls_back_to_the_gpu_median() -> None:
    node = _karpenter_node(**{"karpenter.sh/capacity-type": None, keys.INSTANCE_TYPE: "g5.7xlarge-custom",
                              "beta.kubernetes.io/instance-type": None})
    node["metadata"]["labels"][keys.GPU_PRODUCT] = "NVIDIA-A10G"
    (found,), notes = _fleet(node)
    assert found.price_ondemand is not None and found.price_ondemand != G5_ONDEMAND
    assert any("median" in n for n in notes), notes
