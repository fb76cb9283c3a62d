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

Failover (`provision`): one provisioning pass as Karpenter makes it over a gang's several NodePools (one per zone,
nodegroups/karpenter.py `pools`), with zones that refuse for capacity. From Karpenter's source
(sigs.k8s.io/karpenter 2266468, aws/karpenter-provider-aws 1d92708):
- the pools are tried by spec.weight, highest first, equal weights by name, later in the alphabet first
  (pkg/utils/nodepool/nodepool.go `OrderByWeight`, called in pkg/controllers/provisioning/provisioner.go);
- a pool gets one NodeClaim per node (pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go `ToNodeClaim`:
  generateName `<pool>-`, the pool's template labels, an ownerReference to the NodePool with
  blockOwnerDeletion, the template spec with the requirements);
- a launch EC2 refuses for capacity: CreateFleet's errors all InsufficientInstanceCapacity make an
  InsufficientCapacityError (pkg/providers/instance/instance.go `combineFleetErrors`), the offering is left out for
  3 minutes (pkg/cache/cache.go `UnavailableOfferingsTTL`), and the core's launch controller publishes a Warning
  event, reason InsufficientCapacityError, message "NodeClaim <name> event: <error>" (pkg/controllers/nodeclaim/
  lifecycle/events.go `InsufficientCapacityErrorEvent`) and DELETES the NodeClaim (launch.go `launchNodeClaim`),
  setting no condition; the next pass skips the refused offering, so the next pool launches;
- a launch that succeeds sets status.providerID, capacity, allocatable and the condition Launched=True
  (launch.go: `PopulateNodeClaimDetails`, `SetTrue(v1.ConditionTypeLaunched)`); the node registers.
What is not Karpenter's here: the refusal is decided by the test (`refuse`), and all of a pool's NodeClaims are
refused together (a zone with no capacity at all; a partial refusal is not emulated).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from geosched.kube.client import Kube
from tests.kubeapi.real_nodes import eks_node
from tests.realkube.cluster import apply, condition, wait_for
from tests.realkube.nodes import MACHINES, kwok

Obj = dict[str, Any]
CRDS = Path(__file__).resolve().parents[1] / "kube" / "data" / "crds"
FILES = ("karpenter.sh_nodepools.yaml", "karpenter.k8s.aws_ec2nodeclasses.yaml", "karpenter.sh_nodeclaims.yaml")
NAMES = ("nodepools.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws", "nodeclaims.karpenter.sh")
NODECLAIMS = "/apis/karpenter.sh/v1/nodeclaims"
MERGE_PATCH = "application/merge-patch+json"
# The message EC2 gives CreateFleet for an InsufficientInstanceCapacity error (EC2 User Guide, "Troubleshoot
# instance launch issues", "Insufficient instance capacity"), as Karpenter wraps it (`combineFleetErrors`:
# "with fleet error(s), <code>: <message>").
ICE_MESSAGE = ("with fleet error(s), InsufficientInstanceCapacity: We currently do not have sufficient {type} "
               "capacity in the Availability Zone you requested ({zone}). Our system will be working on "
               "provisioning additional capacity.")
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
                                                                                   "EC2NodeClass")
             and kube.resource("karpenter.sh/v1", "NodeClaim"), 60, "the Karpenter kinds served")


def remove_crds(kube: Kube) -> None:
    for name in NAMES:
        kube.request("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")


def requirement(pool: Obj, key: str) -> str:
    [values] = [r["values"] for r in pool["spec"]["template"]["spec"]["requirements"] if r["key"] == key]
    assert len(values) == 1, (key, values)
    return str(values[0])


def launch(pool: Obj, *, region: str, zone_id: str, cidr_base: str = "10.0.32") -> list[Obj]:
    """The Nodes Karpenter would register for `pool` (a NodePool as the server returned it). Pure."""
    zone = requirement(pool, "topology.kubernetes.io/zone")
    instance = requirement(pool, "node.kubernetes.io/instance-type")
    capacity = requirement(pool, "karpenter.sh/capacity-type")
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


def by_weight(pools: list[Obj]) -> list[Obj]:
    """Karpenter's `OrderByWeight`: a larger spec.weight first (none counts as 0), equal weights by name, the one
    later in the alphabet first."""
    return sorted(pools, key=lambda p: (p["spec"].get("weight", 0), p["metadata"]["name"]), reverse=True)


def nodeclaim(pool: Obj) -> Obj:
    """The NodeClaim Karpenter's provisioner creates for one node of `pool` (`ToNodeClaim`)."""
    template = pool["spec"]["template"]
    spec = {k: v for k, v in template["spec"].items() if k in ("nodeClassRef", "requirements", "taints",
                                                                  "expireAfter")}
    name = pool["metadata"]["name"]
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"generateName": f"{name}-",
                         "labels": {**(template.get("metadata") or {}).get("labels", {}),
                                    "karpenter.sh/nodepool": name},
                         "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": name,
                                              "uid": pool["metadata"]["uid"], "blockOwnerDeletion": True}]},
            "spec": spec}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Provisioned:
    """What one `provision` did: the pool that launched, its NodeClaims and Nodes, and the NodeClaims refused."""

    pool: str | None = None
    claims: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # NodeClaim names, deleted as Karpenter deletes them


def provision(kube: Kube, pools: list[Obj], *, refuse: Collection[str], region: str,
              subnets: dict[str, tuple[str, str]]) -> Provisioned:
    """Karpenter's passes over `pools` (NodePools as the server returned them) until one launches: in weight order,
    every NodeClaim of a pool whose zone is in `refuse` refused for capacity (event, delete, the offering left out),
    then the next pool. None launches when every zone refuses. `subnets`: zone name -> (zone ID, the first three
    octets of the subnet the zone's nodes take addresses from)."""
    done = Provisioned()
    unavailable: set[tuple[str, str, str]] = set()  # the provider's unavailable-offerings cache, for this test
    for pool in by_weight(pools):
        instance, zone, capacity = (requirement(pool, "node.kubernetes.io/instance-type"),
                                    requirement(pool, "topology.kubernetes.io/zone"),
                                    requirement(pool, "karpenter.sh/capacity-type"))
        if (instance, zone, capacity) in unavailable:
            continue
        zone_id, cidr_base = subnets[zone]
        nodes = launch(pool, region=region, zone_id=zone_id, cidr_base=cidr_base)
        claims = [kube.request("POST", NODECLAIMS, body=nodeclaim(pool)) for _ in nodes]
        if zone in refuse:
            for claim in claims:
                name = claim["metadata"]["name"]
                _publish_ice(kube, claim, ICE_MESSAGE.format(type=instance, zone=zone))
                kube.request("DELETE", f"{NODECLAIMS}/{name}")
                done.refused.append(name)
            unavailable.add((instance, zone, capacity))
            continue
        for claim, node in zip(claims, nodes, strict=True):
            kube.request("POST", "/api/v1/nodes", body=node)
            status = {"providerID": node["spec"]["providerID"], "nodeName": node["metadata"]["name"],
                      "capacity": node["status"]["capacity"], "allocatable": node["status"]["allocatable"],
                      "conditions": [{"type": "Launched", "status": "True", "reason": "Launched", "message": "",
                                      "lastTransitionTime": _now()}]}
            kube.request("PATCH", f"{NODECLAIMS}/{claim['metadata']['name']}/status", body={"status": status},
                         content_type=MERGE_PATCH)
            done.claims.append(claim["metadata"]["name"])
            done.nodes.append(node["metadata"]["name"])
        done.pool = pool["metadata"]["name"]
        return done
    return done


def _publish_ice(kube: Kube, claim: Obj, error: str) -> None:
    """The event `InsufficientCapacityErrorEvent` makes, as client-go's recorder writes a cluster-scoped object's
    event: in namespace default, named <object>.<the time in hex nanoseconds>, source karpenter."""
    name = claim["metadata"]["name"]
    now = _now()
    kube.request("POST", "/api/v1/namespaces/default/events", body={
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": "default"},
        "involvedObject": {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": name,
                           "uid": claim["metadata"]["uid"]},
        "type": "Warning", "reason": "InsufficientCapacityError",
        "message": f"NodeClaim {name} event: {error}",
        "source": {"component": "karpenter"}, "firstTimestamp": now, "lastTimestamp": now, "count": 1})
