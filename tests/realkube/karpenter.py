"""A test stand-in for Karpenter on the real control plane: the upstream CRDs installed as they ship, and a
NodePool turned into the kwok Nodes Karpenter would launch for it. Test code, not product.

The CRDs: tests/kube/data/crds (aws/karpenter-provider-aws v1.15.2, the header of each file names it), applied
unchanged, so the real kube-apiserver enforces their OpenAPI schema *and* their CEL rules (x-kubernetes-validations).

A node Karpenter launches for a NodePool, as its docs describe it (karpenter.sh/docs/concepts/scheduling/
"Well-Known Labels", karpenter.sh/docs/concepts/nodepools "Taints"): the EC2 instance's labels as EKS
registers any node (tests/kubeapi/real_nodes.py `eks_node`: zone name, zone ID, instance type, region, hostname from
its address, providerID; the GPU operator's GFD labels), plus karpenter.sh/nodepool <the pool>,
karpenter.sh/capacity-type <on-demand|spot>, karpenter.k8s.aws/ec2nodeclass <the class>, the NodePool's
spec.template.metadata.labels, and its spec.template.spec.taints. It has no eks.amazonaws.com/nodegroup label:
it belongs to no managed node group.

Simplification, said: real Karpenter launches only as many nodes as pending pods need (bounded by spec.limits);
this stand-in launches the pool's whole limit at once, nvidia.com/gpu / GPUs per instance, which for a gang pinned
to its own pool is the same set of nodes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from geosched.kube.client import Kube
from tests.kubeapi.real_nodes import eks_node
from tests.realkube.cluster import apply, condition, wait_for
from tests.realkube.nodes import MACHINES, kwok

Obj = dict[str, Any]
CRDS = Path(__file__).resolve().parents[1] / "kube" / "data" / "crds"
FILES = ("karpenter.sh_nodepools.yaml", "karpenter.k8s.aws_ec2nodeclasses.yaml")
NAMES = ("nodepools.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws")
MADE_BY = "realkube.test/karpenter-standin"
PRODUCT = {"p5.48xlarge": "NVIDIA-H100-80GB-HBM3", "p4d.24xlarge": "NVIDIA-A100-SXM4-40GB"}


def install_crds(kube: Kube) -> None:
    for name in FILES:
        apply(kube, yaml.safe_load((CRDS / name).read_text(encoding="utf-8")))
    for name in NAMES:
        wait_for(lambda n=name: condition(kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{n}")
                                          or {}, "Established"), 60, f"CRD {name} Established")
    # Discovery lags the Established condition a moment.
    wait_for(lambda: kube.resource("karpenter.sh/v1", "NodePool") and kube.resource("karpenter.k8s.aws/v1",
                                                                                   "EC2NodeClass"),
             60, "the Karpenter kinds served")


def remove_crds(kube: Kube) -> None:
    for name in NAMES:
        kube.request("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")


def _requirement(pool: Obj, key: str) -> str:
    [values] = [r["values"] for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == key]
    assert len(values) == 1, (key, values)
    return str(values[0])


def launch(pool: Obj, *, region: str, zone_id: str, cidr_base: str = "10.0.32") -> list[Obj]:
    """The Nodes Karpenter would register for `pool` (a NodePool as the server returned it). Pure."""
    zone = _requirement(pool, "topology.kubernetes.io/zone")
    instance = _requirement(pool, "node.kubernetes.io/instance-type")
    capacity = _requirement(pool, "karpenter.sh/capacity-type")
    gpus = MACHINES[instance][4]
    count = int(pool["spec"]["limits"]["nvidia.com/gpu"]) // gpus
    name = pool["metadata"]["name"]
    template = pool["spec"]["template"]
    out = []
    for i in range(count):
        ip = f"{cidr_base}.{10 + i}"
        instance_id = "i-0" + hashlib.sha256(f"{name}/{i}".encode()).hexdigest()[:16]
        node = eks_node(ip, region=region, zone=zone, zone_id=zone_id, instance_type=instance,
                        product=PRODUCT[instance], instance_id=instance_id, nodegroup="-", gpus=gpus)
        labels = node["metadata"]["labels"]
        for key in ("eks.amazonaws.com/capacityType", "eks.amazonaws.com/nodegroup",
                    "eks.amazonaws.com/nodegroup-image"):
            labels.pop(key, None)
        labels.update({"karpenter.sh/nodepool": name, "karpenter.sh/capacity-type": capacity,
                       "karpenter.k8s.aws/ec2nodeclass": template["spec"]["nodeClassRef"]["name"],
                       "karpenter.sh/registered": "true", "karpenter.sh/initialized": "true",
                       **(template.get("metadata") or {}).get("labels", {})})
        node["metadata"]["annotations"] = {MADE_BY: name}
        out.append(kwok(node, template["spec"].get("taints") or []))
    return out
