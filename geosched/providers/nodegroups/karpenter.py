"""A gang's capacity as a Karpenter NodePool + EC2NodeClass, rendered for the user's GitOps: pure.

Where Karpenter runs in an EKS cluster, geosched does not create a managed node group: it writes the two objects
Karpenter reads, pinned to the zone, instance type and capacity type the plan chose, and the user's GitOps applies
them. Karpenter launches the nodes when the gang's pods (pinned by `karpenter_pin`) are pending. With several zones
(`weighted`), one pair per zone, the pools weighted in plan order: Karpenter's own failover between NodePools moves
to the next zone when one refuses (insufficient capacity); `karpenter_pin` keeps the gang in one zone.

In: one `spec.Target` (the plan's candidate and the cluster subnet of its zone: the zone *name* Karpenter's nodes
carry in topology.kubernetes.io/zone comes from there, as the zone ID -> name mapping differs per account), the
gang, its size, the IAM role the nodes run as. Out: two plain dicts, for `render.to_yaml`.

Every field, from the Karpenter v1 docs (karpenter.sh/docs/concepts/nodepools/, .../nodeclasses/,
.../disruption/ "Pod-Level Controls", .../scheduling/ "Well-Known Labels", karpenter.sh/docs/getting-started/
getting-started-with-karpenter/ for the discovery tag and the node role) and the upstream CRDs they are tested against
(tests/kube/data/crds: sigs.k8s.io/karpenter v1.15 NodePool as aws/karpenter-provider-aws v1.15.2 ships it, and
its EC2NodeClass):
- NodePool karpenter.sh/v1, cluster-scoped. spec.template.spec.requirements [{key, operator In, values}] on the
  well-known labels topology.kubernetes.io/zone, node.kubernetes.io/instance-type and karpenter.sh/capacity-type
  (values `on-demand` | `spot`); spec.template.spec.taints [{key, value, effect}]; spec.template.spec.nodeClassRef
  {group karpenter.k8s.aws, kind EC2NodeClass, name}; spec.template.spec.expireAfter (a duration or `Never`;
  default 720h; in v1 it sits in the template, not in disruption); spec.template.metadata.labels (put on every
  node; the CRD forbids keys of the karpenter.sh domain and kubernetes.io/hostname); spec.limits {resource:
  quantity} (Karpenter launches no node that would take the pool past it); spec.disruption {consolidationPolicy
  WhenEmpty | WhenEmptyOrUnderutilized, consolidateAfter}. Karpenter labels each node karpenter.sh/nodepool=<name>.
- EC2NodeClass karpenter.k8s.aws/v1, cluster-scoped. spec.amiSelectorTerms [{alias: family@version}] (families
  al2023, bottlerocket, ...; with an alias amiFamily may be left out, the alias must be the only term);
  spec.subnetSelectorTerms / spec.securityGroupSelectorTerms [{tags: {...}}] (the getting-started guide tags the
  cluster's subnets and node security group karpenter.sh/discovery=<cluster>); spec.role (the IAM role *name*
  nodes run as, e.g. KarpenterNodeRole-<cluster>; mutually exclusive with instanceProfile); spec.tags (added to
  the EC2 resources Karpenter creates; the CRD forbids the karpenter.sh/nodepool and kubernetes.io/cluster* keys).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from geosched.core.gpus import part
from geosched.core.models import Pricing
from geosched.kube import keys
from geosched.providers.base import GANG_TAG, OWNER_TAG
from geosched.providers.lifecycle import GANG_LABEL
from geosched.providers.nodegroups.backend import pool_name
from geosched.providers.nodegroups.spec import GPU_TAINT, Target

NODEPOOL_API = "karpenter.sh/v1"
NODECLASS_API = "karpenter.k8s.aws/v1"
NODECLASS_GROUP = "karpenter.k8s.aws"
# The label Karpenter puts on every node it launches for a NodePool (karpenter.sh/docs/concepts/scheduling/,
# "Well-Known Labels"): what the gang's pods select.
NODEPOOL_LABEL = "karpenter.sh/nodepool"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
# The tag Karpenter's getting-started guide puts on the cluster's subnets and node security group, valued with the
# cluster name; subnets then come from the zone the NodePool requires.
DISCOVERY_TAG = "karpenter.sh/discovery"
# Pod annotation (karpenter.sh/docs/concepts/disruption/, "Pod-Level Controls"): blocks consolidation of the pod's
# node and its drift (a new `@latest` AMI drifts every node), so a running gang is not replaced under it. It does
# not block expiration: `expireAfter` bounds how long a node may live regardless.
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
# Karpenter's default node lifetime (NodePool spec.template.spec.expireAfter default in the CRD).
DEFAULT_EXPIRE_AFTER = "720h"
# The NodePool CRD's bounds of spec.weight (minimum 1, maximum 100).
MAX_WEIGHT = 100
# The NodePool CRD's pattern for expireAfter.
_DURATION = re.compile(r"^(([0-9]+(s|m|h))+|Never)\Z")
# An IAM role name (IAM API reference, CreateRole RoleName: 1-64 of [\w+=,.@-]); an ARN gives its last segment.
_ROLE_NAME = re.compile(r"^[\w+=,.@-]{1,64}\Z")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/(?:[\w+=,.@-]+/)*([\w+=,.@-]{1,64})\Z")


class Ami(StrEnum):
    """The EKS-optimized image families Karpenter selects by alias; for a GPU instance type each resolves to its
    NVIDIA variant (AL2023 NVIDIA, Bottlerocket's -nvidia) by itself."""

    AL2023 = "al2023"
    BOTTLEROCKET = "bottlerocket"


@dataclass(frozen=True, slots=True)
class KarpenterPool:
    """One gang's NodePool and EC2NodeClass (both named `name`)."""

    name: str
    cluster: str
    gang: str
    owner: str
    zone_name: str
    zone_id: str
    instance_type: str
    gpu: str  # the catalog's model
    capacity_type: str  # on-demand | spot (karpenter.sh/capacity-type values)
    nodes: int
    gpus_per_node: int
    role: str
    ami: Ami = Ami.AL2023
    expire_after: str = DEFAULT_EXPIRE_AFTER
    # NodePool spec.weight (1-100): Karpenter tries pools of a higher weight first (`weighted`).
    weight: int | None = None


def capacity_type(pricing: Pricing) -> str:
    return "spot" if pricing is Pricing.SPOT else "on-demand"


def role_name(text: str) -> str | None:
    """The IAM role name an EC2NodeClass takes, from a role name or a role ARN; None when it is neither."""
    arn = _ROLE_ARN.match(text)
    if arn is not None:
        return arn.group(1)
    return text if _ROLE_NAME.match(text) else None


def expire_problem(text: str) -> str | None:
    if _DURATION.match(text):
        return None
    return f"expected a duration such as 720h or 90m (digits with s, m or h) or Never, got {text[:40]!r}"


def pool(target: Target, *, gang: str, owner: str, seq: int, nodes: int, gpus_per_node: int, role: str,
         ami: Ami = Ami.AL2023, expire_after: str = DEFAULT_EXPIRE_AFTER) -> KarpenterPool:
    """The pool for one zone the plan ranked (`spec.targets`)."""
    c = target.candidate
    return KarpenterPool(name=pool_name(gang, seq), cluster=target.cluster, gang=gang, owner=owner,
                         zone_name=target.zone_name, zone_id=c.zone, instance_type=c.instance_type, gpu=c.gpu,
                         capacity_type=capacity_type(c.pricing), nodes=nodes, gpus_per_node=gpus_per_node,
                         role=role, ami=ami, expire_after=expire_after)


def pools(targets: Sequence[Target], zones: int, *, gang: str, owner: str, nodes: int, gpus_per_node: int,
          role: str, ami: Ami = Ami.AL2023, expire_after: str = DEFAULT_EXPIRE_AFTER) -> tuple[KarpenterPool, ...]:
    """The gang's pools for the first `zones` zones of the plan (`spec.targets`, in plan order), one per zone (the
    zone's first target: two pools in one zone could finish a gang half-launched there with another instance
    type), weighted so that Karpenter tries them in plan order. Karpenter orders NodePools by spec.weight, highest
    first, before scheduling pending pods (sigs.k8s.io/karpenter pkg/controllers/provisioning/provisioner.go,
    `nodepoolutils.OrderByWeight(nodePools)`; pkg/utils/nodepool/nodepool.go `OrderByWeight`), and after an
    insufficient-capacity launch the AWS provider leaves the refused offering (instance type, zone, capacity type)
    out for 3 minutes (aws/karpenter-provider-aws pkg/cache/cache.go `UnavailableOfferingsTTL`), so the next
    pool's zone is the first that can launch. The CRD bounds weight to 1-100, so at most 100 zones."""
    first_in_zone: dict[str, Target] = {}
    for t in targets:
        first_in_zone.setdefault(t.zone_name, t)
    chosen = list(first_in_zone.values())[:min(zones, MAX_WEIGHT)]
    return tuple(replace(pool(t, gang=gang, owner=owner, seq=i + 1, nodes=nodes, gpus_per_node=gpus_per_node,
                              role=role, ami=ami, expire_after=expire_after), weight=MAX_WEIGHT - i)
                 for i, t in enumerate(chosen))


def _labels(p: KarpenterPool) -> dict[str, str]:
    return {GANG_LABEL: p.gang}


def node_labels(p: KarpenterPool) -> dict[str, str]:
    """What the pool puts on its nodes: the gang label, and the GPU product GPU feature discovery will write
    (gpus.PARTS) once the node runs. Karpenter launches a node only for pods whose node selectors its NodePool's
    labels and requirements satisfy ("incompatible requirements, label ... does not have known values" otherwise:
    aws/karpenter-provider-aws#7535), so a job that selects
    nvidia.com/gpu.product, as geosched's own renders do, needs the value here already."""
    product = part(p.gpu).product
    return {**_labels(p), **({keys.GPU_PRODUCT: product} if product is not None else {})}


def nodepool(p: KarpenterPool) -> dict[str, Any]:
    return {
        "apiVersion": NODEPOOL_API,
        "kind": "NodePool",
        "metadata": {"name": p.name, "labels": _labels(p)},
        "spec": {
            "template": {
                # On every node: the same gang label the node group path and provisioned machines carry.
                "metadata": {"labels": node_labels(p)},
                "spec": {
                    "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": p.name},
                    "requirements": [
                        {"key": keys.ZONE, "operator": "In", "values": [p.zone_name]},
                        {"key": keys.INSTANCE_TYPE, "operator": "In", "values": [p.instance_type]},
                        {"key": CAPACITY_TYPE, "operator": "In", "values": [p.capacity_type]},
                    ],
                    # The same taint as the gang's EKS node group (spec.GPU_TAINT), in Kubernetes' effect spelling.
                    "taints": [{"key": GPU_TAINT["key"], "value": GPU_TAINT["value"], "effect": "NoSchedule"}],
                    "expireAfter": p.expire_after,
                },
            },
            # The gang and no more: a pending pod of another job that tolerates the taint cannot grow the pool.
            "limits": {keys.GPU: str(p.nodes * p.gpus_per_node)},
            # Only empty nodes are consolidated: an underutilized node of a running gang is not replaced (a gang
            # that loses one worker stops). consolidateAfter gives a restarting worker time to come back.
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "5m"},
            **({"weight": p.weight} if p.weight is not None else {}),
        },
    }


def ec2nodeclass(p: KarpenterPool) -> dict[str, Any]:
    discovery = [{"tags": {DISCOVERY_TAG: p.cluster}}]
    return {
        "apiVersion": NODECLASS_API,
        "kind": "EC2NodeClass",
        "metadata": {"name": p.name, "labels": _labels(p)},
        "spec": {
            "amiSelectorTerms": [{"alias": f"{p.ami.value}@latest"}],
            "subnetSelectorTerms": discovery,
            "securityGroupSelectorTerms": [{"tags": {DISCOVERY_TAG: p.cluster}}],
            "role": p.role,
            # The same tags a node group's resources carry (spec.tags), so `sweep`-style audits find them.
            "tags": {GANG_TAG: p.gang, OWNER_TAG: p.owner},
        },
    }


def manifests(pools: Sequence[KarpenterPool]) -> list[dict[str, Any]]:
    """In apply order: each class before the pool that refers to it."""
    return [obj for p in pools for obj in (ec2nodeclass(p), nodepool(p))]
