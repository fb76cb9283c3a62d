"""What a gang's EKS managed node group is, decided without any call: pure.

In: the gang plan (`plan.Plan`, the same ranking the machine path uses) and what the cluster is (its region and
the subnet it has in each zone). Out: the zones to try in order (a plan candidate of the cluster's region in a
zone where the cluster has a subnet), the CreateNodegroup request for one of them, whether a node group found in
the cluster is geosched's, and what a failed group's health issues mean in the provider error taxonomy.

AWS shapes relied on (EKS API reference, "CreateNodegroup", "Nodegroup", "Taint", "Issue"):
- CreateNodegroup: clusterName, nodegroupName (1-63 letters, digits, '-', '_'), subnets, nodeRole, instanceTypes,
  capacityType ON_DEMAND | SPOT | CAPACITY_BLOCK, scalingConfig {minSize, maxSize, desiredSize}, amiType, labels
  {key: value}, taints [{key, value, effect NO_SCHEDULE | NO_EXECUTE | PREFER_NO_SCHEDULE}], tags {key: value},
  clientRequestToken (idempotency).
- Nodegroup.status: CREATING | ACTIVE | UPDATING | DELETING | CREATE_FAILED | DELETE_FAILED | DEGRADED;
  Nodegroup.health.issues [{code, message, resourceIds}], codes such as AsgInstanceLaunchFailures (whose
  message carries EC2's own error, "Could not launch On-Demand Instances. InsufficientInstanceCapacity - ..."),
  InstanceLimitExceeded, InsufficientFreeAddresses, Ec2SubnetInvalidConfiguration, NodeCreationFailure.
- CreateNodegroup launchTemplate {id, version}; the template must not set IamInstanceProfile, SubnetId,
  RequestSpotInstances, HibernationOptions or TerminateInstances (EKS API reference LaunchTemplateSpecification;
  EKS User Guide "Customize managed nodes with launch templates",
  docs.aws.amazon.com/eks/latest/userguide/launch-templates.html): the one geosched writes sets only
  Placement.GroupName and MetadataOptions, so the instance type, AMI type, subnet and market stay the group's.
- EC2 CreatePlacementGroup (GroupName, Strategy cluster, TagSpecifications ResourceType placement-group) and
  CreateLaunchTemplate (LaunchTemplateName 3-128 of letters, digits and ( ) . - / _, LaunchTemplateData,
  TagSpecifications ResourceType launch-template), EC2 API reference.

Capacity Blocks for ML (EC2 User Guide, "Capacity Blocks for ML", docs.aws.amazon.com/AWSEC2/latest/UserGuide/
ec2-capacity-blocks.html; EKS User Guide "Create a managed node group with Capacity Blocks for ML",
docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html): a reservation of N instances of one type in one
zone for a fixed time, paid up front, never cancelled. EC2 DescribeCapacityBlockOfferings (InstanceType,
InstanceCount, CapacityDurationHours, StartDateRange, EndDateRange) lists what may be bought, PurchaseCapacityBlock
(CapacityBlockOfferingId, InstancePlatform, TagSpecifications ResourceType capacity-reservation) buys one, and the
managed node group then runs on it: created with capacityType CAPACITY_BLOCK and a launch template whose data holds
InstanceMarketOptions.MarketType "capacity-block", CapacityReservationSpecification.CapacityReservationTarget.
CapacityReservationId and the InstanceType (so the group names no instanceTypes of its own), in a subnet of the
block's zone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geosched.clouds import aws as aws_cloud
from geosched.kube import keys
from geosched.providers.base import CapacityError, ProviderError, QuotaError, UnsupportedError
from geosched.providers.lifecycle import GANG_LABEL
from geosched.providers.nodegroups import backend
from geosched.providers.nodegroups.backend import pool_name
from geosched.providers.plan import Candidate, Plan, Skipped

PROVIDER = aws_cloud.NAME
# The NVIDIA-ready EKS-optimized Amazon Linux 2023 image (EKS API reference, Nodegroup.amiType AL2023_x86_64_NVIDIA):
# the node has the driver and the device plugin's prerequisites, as a GPU node group needs.
AMI_TYPE = "AL2023_x86_64_NVIDIA"
# Keeps pods that do not ask for GPUs off the gang's nodes. Pods that request GPUs tolerate it where the
# ExtendedResourceToleration admission plugin runs (kube.tolerations.GPU_ADMISSION: nvidia.com/gpu Exists
# NoSchedule); `geosched up` writes the toleration on the gang's pods itself (up.on_the_group), for clusters without it.
GPU_TAINT = {"key": keys.GPU, "value": "true", "effect": "NO_SCHEDULE"}
ACTIVE = "ACTIVE"
CREATING = "CREATING"
CREATE_FAILED = "CREATE_FAILED"
DELETING = "DELETING"
# Issue codes, and codes EC2 puts into an AsgInstanceLaunchFailures message, that mean "this zone has no room now".
CAPACITY_ISSUES = frozenset({"InsufficientFreeAddresses"})
CAPACITY_MARKERS = ("InsufficientInstanceCapacity", "InsufficientCapacity", "SpotMaxPriceTooLow",
                    "capacity-not-available", "UnfulfillableCapacity")
QUOTA_ISSUES = frozenset({"InstanceLimitExceeded"})
QUOTA_MARKERS = ("VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded")
# Amazon EKS service quotas, "Nodes per managed node group": 450 by default in each supported Region, adjustable
# (docs.aws.amazon.com/eks/latest/userguide/service-quotas.html). A gang is one group held at its size
# (min = max = desired), so a larger gang cannot be one group: refused before any call, dry runs included.
MAX_GROUP_NODES = 450


@dataclass(frozen=True, slots=True)
class Subnet:
    subnet_id: str
    zone_id: str
    zone_name: str


@dataclass(frozen=True, slots=True)
class Cluster:
    """An EKS cluster as node groups need it: its region and the subnets of its resourcesVpcConfig by zone ID
    (the catalog names AWS zones by zone ID; the first subnet of a zone, in the cluster's order, is used)."""

    name: str
    region: str
    vpc_id: str
    subnets: tuple[Subnet, ...]

    def subnet_for(self, zone_id: str) -> Subnet | None:
        return next((s for s in self.subnets if s.zone_id == zone_id), None)


@dataclass(frozen=True, slots=True)
class Target:
    """One zone to try: the plan's candidate and the cluster subnet there; `block` the Capacity Block the group
    is to run on (bought for it in this zone), or None."""

    candidate: Candidate
    cluster: str
    subnet: Subnet
    block: CapacityBlock | None = None

    @property
    def capacity_type(self) -> str:
        return CAPACITY_BLOCK if self.block is not None else capacity_type(self.candidate.pricing)

    @property
    def where(self) -> str:
        """Where in the cluster the group goes (backend.Target): its subnet."""
        return self.subnet.subnet_id

    @property
    def zone_name(self) -> str:
        return self.subnet.zone_name


capacity_type = backend.capacity_type

CAPACITY_BLOCK = "CAPACITY_BLOCK"
# EC2 User Guide, "Capacity Blocks for ML" (supported sizes and durations): 1, 2, 4, 8, 16, 32 or 64 instances; 1 to
# 14 days in 1-day increments, or 7-day increments up to 182 days; bought up to 8 weeks ahead.
BLOCK_COUNTS = (1, 2, 4, 8, 16, 32, 64)
BLOCK_MAX_HOURS = 182 * 24
# How far ahead the offerings are read (the same guide: bought up to 8 weeks ahead): a zone whose blocks all start
# later than `CapacityBlock.start_within_h` is refused naming its earliest start.
BLOCK_AHEAD_H = 8 * 7 * 24


# A block bought or found that has not started yet (EC2 sells most from 11:30 UTC on a later day): the EKS User
# Guide, "Create self-managed nodes with Capacity Blocks for ML" (docs.aws.amazon.com/eks/latest/userguide/
# capacity-blocks.html) says to create the nodes' Auto Scaling group at desired 0 before the reservation is
# active, and to schedule scaling to zero more than 30 minutes before the block's end so the nodes drain
# gracefully. The same for a managed node group, which is such a group (DescribeNodegroup
# resources.autoScalingGroups); its own page ("Create a managed node group with Capacity Blocks for ML",
# capacity-blocks-mng.html) asks for desired 0 while the group is updated. The scale-in is put this long before the
# end: 30 minutes plus 10 of slack for the drain to begin.
STOP_BEFORE_END_S = 40 * 60


@dataclass(frozen=True, slots=True)
class CapacityBlock:
    """What to buy: a Capacity Block for `hours`, starting within `start_within_h` of now (the offering the zone has
    that starts soonest). A block that starts later than now gets its group at 0 nodes and scheduled scaling at its
    start (`Schedule`). Buying is allowed only with the user's explicit consent (`up --capacity-block H
    --buy-capacity-block`): it costs its whole fee up front."""

    hours: int
    start_within_h: float = 1.0


@dataclass(frozen=True, slots=True)
class Schedule:
    """A group on a Capacity Block that starts after the group is created: 0 nodes until `start`, `nodes` from
    then, 0 again at `stop` (`STOP_BEFORE_END_S` before the block's `end`). Times are epoch seconds."""

    start: float
    end: float
    nodes: int

    @property
    def stop(self) -> float:
        return max(self.start, self.end - STOP_BEFORE_END_S)


def action_names(owner: str, group: str) -> tuple[str, str]:
    """The two scheduled actions of a group on a later block, named from the store's owner and the group (as its
    template), so `release` finds them by name once the group is gone: scale-up at the start, scale-in before
    the end."""
    base = part_name(owner, group)
    return f"{base}-start", f"{base}-stop"


def schedule_requests(asg: str, owner: str, group: str, s: Schedule) -> list[dict[str, Any]]:
    """boto3 `autoscaling.put_scheduled_update_group_action` for both actions on the group's Auto Scaling group
    (EC2 Auto Scaling API reference, PutScheduledUpdateGroupAction: AutoScalingGroupName, ScheduledActionName,
    StartTime, DesiredCapacity; one-time actions, no Recurrence). Only the desired capacity: the group's bounds
    (min 0, max the gang) are the node group's own `scalingConfig`, which EKS keeps on the Auto Scaling group,
    and the desired capacity is what EKS lets others set there (cluster-autoscaler sets it the same way)."""
    from datetime import UTC, datetime

    up, down = action_names(owner, group)
    return [
        {"AutoScalingGroupName": asg, "ScheduledActionName": up, "StartTime": datetime.fromtimestamp(s.start, UTC),
         "DesiredCapacity": s.nodes},
        {"AutoScalingGroupName": asg, "ScheduledActionName": down, "StartTime": datetime.fromtimestamp(s.stop, UTC),
         "DesiredCapacity": 0},
    ]


@dataclass(frozen=True, slots=True)
class BlockOffering:
    offering_id: str
    zone_name: str
    instance_type: str
    count: int
    hours: int
    start: float  # epoch seconds
    end: float
    upfront_usd: float


@dataclass(frozen=True, slots=True)
class Quote:
    """A dry run's look at a zone's Capacity Blocks: the offering `create` would buy there (`buys`), or the zone's
    earliest one that starts too late for the window (`buys` False), or none (`offer` None); `later`: it starts
    more than an hour from now, so the group would wait at 0 nodes until then."""

    target: Target
    offer: BlockOffering | None
    buys: bool
    later: bool

    def line(self) -> str:
        """One line for the dry run: the zone, the block's start, its fee and what it costs per hour."""
        where = f"{self.target.candidate.zone} ({self.target.zone_name})"
        o = self.offer
        if o is None:
            return f"{where}: no Capacity Block of this type and size offered in the next 8 weeks"
        from datetime import UTC, datetime

        start = f"{datetime.fromtimestamp(o.start, UTC):%Y-%m-%d %H:%M} UTC"
        per_hour = o.upfront_usd / o.hours if o.hours else 0.0
        cost = (f"${o.upfront_usd:,.2f} up front for {o.hours} h: ${per_hour:,.2f}/h for the {o.count} nodes, "
                f"${per_hour / max(o.count, 1):,.2f} per node-hour")
        if not self.buys:
            return f"{where}: the earliest block starts at {start}, later than --capacity-block-starts-within ({cost})"
        wait = "; the node group waits at 0 nodes until then" if self.later else ""
        return f"{where}: would buy {o.offering_id}, starting at {start} ({cost}){wait}"


def block_problem(hours: int, nodes: int) -> str | None:
    """Why EC2 sells no Capacity Block of `nodes` instances for `hours`, or None."""
    if nodes not in BLOCK_COUNTS:
        return (f"a Capacity Block holds {', '.join(map(str, BLOCK_COUNTS[:-1]))} or {BLOCK_COUNTS[-1]} instances, "
                f"not {nodes}")
    if hours % 24 or not 24 <= hours <= BLOCK_MAX_HOURS or (hours > 14 * 24 and hours % (7 * 24)):
        return (f"a Capacity Block lasts 1 to 14 days in whole days, or up to 182 days in whole weeks: {hours} h is "
                "not one of those")
    return None


def offerings_request(instance_type: str, nodes: int, block: CapacityBlock, now: float) -> dict[str, Any]:
    """boto3 `ec2.describe_capacity_block_offerings`: blocks of the gang's type and size for `block.hours` that start
    between now and 8 weeks from now (the end range bounds the start: end = start + duration); `choose_offering`
    keeps those that start within `block.start_within_h`, the others name when the zone's blocks start."""
    from datetime import UTC, datetime

    return {"InstanceType": instance_type, "InstanceCount": nodes, "CapacityDurationHours": block.hours,
            "StartDateRange": datetime.fromtimestamp(now, UTC),
            "EndDateRange": datetime.fromtimestamp(now + (BLOCK_AHEAD_H + block.hours) * 3600.0, UTC)}


def choose_offering(offerings: Iterable[BlockOffering], zone_name: str, instance_type: str,
                    nodes: int, latest_start: float = math.inf) -> BlockOffering | None:
    """The offering of `zone_name` (the block is in that zone, as the group's subnet must be) for exactly the gang
    that starts by `latest_start`: the one that starts first, then the cheapest."""
    fits = [o for o in offerings if o.zone_name == zone_name and o.instance_type == instance_type
            and o.count == nodes and o.start <= latest_start]
    return min(fits, key=lambda o: (o.start, o.upfront_usd, o.offering_id), default=None)


def block_template_request(p: Parts, reservation_id: str, instance_type: str,
                           tag_map: Mapping[str, str]) -> dict[str, Any]:
    """boto3 `ec2.create_launch_template` for a group on a Capacity Block (the EKS User Guide's capacity-blocks-mng
    procedure): the market and the reservation, the instance type, IMDSv2 required; no placement group (a block's
    instances are placed together in an EC2 UltraCluster already, EC2 User Guide "Capacity Blocks for ML")."""
    return {
        "LaunchTemplateName": p.name,
        "LaunchTemplateData": {
            "InstanceType": instance_type,
            "InstanceMarketOptions": {"MarketType": "capacity-block"},
            "CapacityReservationSpecification": {"CapacityReservationTarget": {
                "CapacityReservationId": reservation_id}},
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
        },
        "TagSpecifications": tag_specs("launch-template", tag_map),
    }


def targets(plan: Plan, cluster: Cluster) -> tuple[tuple[Target, ...], tuple[Skipped, ...]]:
    """The plan's candidates the cluster can hold, in plan order, and the others with the reason: another
    provider or region (a node group lives in its cluster's region), or a zone without a cluster subnet."""

    def fit(c: Candidate) -> Target | str:
        subnet = cluster.subnet_for(c.zone)
        if subnet is None:
            return f"cluster {cluster.name} has no subnet in zone {c.zone}"
        return Target(c, cluster.name, subnet)

    return backend.split(plan, PROVIDER, cluster.name, cluster.region, fit)


# Cluster placement groups (EC2 User Guide, "Placement strategies", cluster placement group rules and limitations,
# docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html#placement-groups-limitations-cluster):
# supported by current generation instances except burstable performance ones (T2, T3, T3a, T4g), Mac instances
# and M7i-flex. Every GPU family of the catalog (g4dn, g5, g6, g6e, p3, p4d, p5, p5e, p5en) is supported.
NO_CLUSTER_PLACEMENT = ("t2.", "t3.", "t3a.", "t4g.", "mac", "m7i-flex.")


def cluster_placement(instance_type: str, nodes: int) -> bool:
    """Whether the gang's group goes into a cluster placement group of its own: a gang of more than one node (a
    group of one is placed anyway) of an instance type that a cluster placement group takes. The same answer
    at create and at delete (`parts`), so a delete knows what the create made without a call."""
    return nodes > 1 and not instance_type.startswith(NO_CLUSTER_PLACEMENT)


@dataclass(frozen=True, slots=True)
class Parts:
    """What a group is created with besides itself: its cluster placement group and the launch template that
    puts the group's instances in it, both named `name`; a group on a Capacity Block has the template alone
    (`placement` False). Deleted once the group is gone."""

    name: str
    placement: bool = True


def part_name(owner: str, group: str) -> str:
    """The placement group's and launch template's name: EC2 names them per account and region (not per
    cluster, as node groups), so the store's owner id is part of it; known before any call, as the group's name,
    so a crash between journal and answer still leaves the name `down` deletes. Owner ids are 'o' + hex, group
    names gang-seq: letters, digits and '-', which both name rules accept."""
    return f"geosched-{owner}-{group}"


def parts(instance_type: str, nodes: int, owner: str, group: str, capacity: str = "") -> Parts | None:
    """The parts of group `group` of capacity type `capacity` (None: a plain group, created without a launch
    template). The journal keeps the capacity type, so a delete knows the parts as the create did."""
    if capacity == CAPACITY_BLOCK:
        return Parts(part_name(owner, group), placement=False)
    return Parts(part_name(owner, group)) if cluster_placement(instance_type, nodes) else None


def tag_specs(resource: str, tag_map: Mapping[str, str]) -> list[dict[str, Any]]:
    """EC2 TagSpecifications for one resource type (placement-group, launch-template)."""
    return [{"ResourceType": resource, "Tags": [{"Key": k, "Value": v} for k, v in tag_map.items()]}]


def placement_group_request(p: Parts, tag_map: Mapping[str, str]) -> dict[str, Any]:
    """boto3 `ec2.create_placement_group`: a cluster group (one zone, low-latency full-bisection network)."""
    return {"GroupName": p.name, "Strategy": "cluster", "TagSpecifications": tag_specs("placement-group", tag_map)}


def launch_template_request(p: Parts, tag_map: Mapping[str, str]) -> dict[str, Any]:
    """boto3 `ec2.create_launch_template`: only what a managed node group allows a template to set (see the
    module's docstring): the placement group, and IMDSv2 required as the machine path asks (aws.run_params)."""
    return {
        "LaunchTemplateName": p.name,
        "LaunchTemplateData": {
            "Placement": {"GroupName": p.name},
            "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"},
        },
        "TagSpecifications": tag_specs("launch-template", tag_map),
    }


def size_problem(nodes: int) -> str | None:
    """Why a gang of `nodes` cannot be one managed node group, or None."""
    if nodes > MAX_GROUP_NODES:
        return (f"{nodes} nodes is more than one EKS managed node group holds ({MAX_GROUP_NODES}, the default "
                "quota 'Nodes per managed node group'); split the job into gangs of at most that many")
    return None


def group_name(gang: str, seq: int) -> str:
    return pool_name(gang, seq)


tags = backend.ownership


def labels(gang: str) -> dict[str, str]:
    """The label geosched pins the gang with (the same key its provisioned machines carry as fleet nodes); EKS
    adds the zone, region, instance type and eks.amazonaws.com/nodegroup|capacityType labels itself."""
    return {GANG_LABEL: gang}


def create_request(target: Target, *, gang: str, seq: int, owner: str, token: str, nodes: int,
                   node_role: str, launch_template: tuple[str, int] | None = None,
                   later: bool = False) -> dict[str, Any]:
    """The keyword arguments of boto3 `eks.create_nodegroup` for this attempt; `launch_template` (id, version)
    the group's own template (`Parts`), when it has one; `later`: its Capacity Block has not started, so the group
    is made at 0 nodes (min 0, desired 0, max the gang) until its scheduled scale-up (`Schedule`)."""
    request: dict[str, Any] = {
        "clusterName": target.cluster,
        "nodegroupName": group_name(gang, seq),
        "subnets": [target.subnet.subnet_id],
        "nodeRole": node_role,
        "capacityType": target.capacity_type,
        "amiType": AMI_TYPE,
        # The gang is all-or-nothing: no autoscaling below or above it.
        "scalingConfig": ({"minSize": 0, "maxSize": nodes, "desiredSize": 0} if later
                          else {"minSize": nodes, "maxSize": nodes, "desiredSize": nodes}),
        "labels": labels(gang),
        "taints": [dict(GPU_TAINT)],
        "tags": tags(gang, owner, token),
        "clientRequestToken": token,
    }
    if target.block is None:  # a Capacity Block's template names the instance type (EKS refuses it in both)
        request["instanceTypes"] = [target.candidate.instance_type]
    if launch_template is not None:
        request["launchTemplate"] = {"id": launch_template[0], "version": str(launch_template[1])}
    return request


ours = backend.ours  # a node group geosched made for this store (and gang): only those are ever deleted


def failure(status: str, issues: Sequence[Mapping[str, Any]], name: str) -> ProviderError:
    """What a CREATE_FAILED group's health issues mean for failover: capacity (next zone), quota (next region),
    anything else an unsupported configuration of this zone."""
    text = "; ".join(f"{i.get('code', '?')}: {i.get('message', '')}" for i in issues) or "no health issue given"
    codes = {str(i.get("code", "")) for i in issues}
    message = f"node group {name} {status}: {text}"
    if codes & CAPACITY_ISSUES or any(m in text for m in CAPACITY_MARKERS):
        return CapacityError(message, code=_first(codes, CAPACITY_ISSUES) or "InsufficientInstanceCapacity")
    if codes & QUOTA_ISSUES or any(m in text for m in QUOTA_MARKERS):
        return QuotaError(message, code=_first(codes, QUOTA_ISSUES) or "InstanceLimitExceeded")
    return UnsupportedError(message, code=sorted(codes)[0] if codes else status)


def _first(codes: set[str], wanted: frozenset[str]) -> str | None:
    found = sorted(codes & wanted)
    return found[0] if found else None
