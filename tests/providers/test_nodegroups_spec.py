"""The pure part of node groups: which zones a cluster can hold, the CreateNodegroup request, whose group is whose,
and what a failed group's health issues mean for failover. Issue shapes: EKS API reference "Issue" (code, message,
resourceIds) and the EKS User Guide's managed node group errors."""

from __future__ import annotations

import pytest

from geosched.core.models import Pricing
from geosched.providers.base import CapacityError, QuotaError, UnsupportedError
from geosched.providers.gang import plan_gang
from geosched.providers.nodegroups import spec
from geosched.providers.plan import PricingMode
from tests.providers.eks_support import NODE_ROLE, REGION, request
from tests.providers.prov_support import aws_provider

CLUSTER = spec.Cluster("ml", REGION, "vpc-1", (
    spec.Subnet("subnet-b", "use1-az2", "us-east-1c"), spec.Subnet("subnet-a", "use1-az6", "us-east-1a"),
    spec.Subnet("subnet-c", "use1-az2", "us-east-1c")))


def test_targets_keep_plan_order_and_say_why_a_zone_is_out() -> None:
    plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, None)
    targets, skipped = spec.targets(plan, CLUSTER)
    assert [(t.candidate.zone, t.subnet.subnet_id) for t in targets] == [("use1-az2", "subnet-b"),
                                                                          ("use1-az6", "subnet-a")]
    assert [(s.candidate.zone, s.reason) for s in skipped] == [
        ("use1-az1", "cluster ml has no subnet in zone use1-az1")]


def test_the_request_pins_the_gang_and_holds_it_at_its_size() -> None:
    plan = plan_gang(request(4, PricingMode.SPOT), {"aws": aws_provider((REGION,))}, None)
    target = spec.targets(plan, CLUSTER)[0][0]
    assert target.candidate.zone == "use1-az6"  # the cheapest spot zone of the shipped catalog (aws_gpu_vms.csv)
    body = spec.create_request(target, gang="g", seq=3, owner="o1", token="g-3", nodes=4, node_role=NODE_ROLE)
    assert body == {
        "clusterName": "ml", "nodegroupName": "g-3", "subnets": ["subnet-a"], "nodeRole": NODE_ROLE,
        "instanceTypes": ["p4d.24xlarge"], "capacityType": "SPOT", "amiType": "AL2023_x86_64_NVIDIA",
        "scalingConfig": {"minSize": 4, "maxSize": 4, "desiredSize": 4}, "labels": {"geosched.io/gang": "g"},
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
        "tags": {"geosched-gang": "g", "geosched-owner": "o1", "geosched-attempt": "g-3"},
        "clientRequestToken": "g-3"}
    assert spec.capacity_type(Pricing.ON_DEMAND) == "ON_DEMAND"


def test_only_groups_tagged_with_this_stores_owner_are_ours() -> None:
    tags = {"geosched-gang": "g", "geosched-owner": "o1"}
    assert spec.ours(tags, "o1") and spec.ours(tags, "o1", "g")
    assert not spec.ours(tags, "o2") and not spec.ours(tags, "o1", "h")
    assert not spec.ours(None, "o1") and not spec.ours({"team": "data"}, "o1")


@pytest.mark.parametrize(("issues", "kind", "code"), [
    ([{"code": "AsgInstanceLaunchFailures", "message": "Could not launch On-Demand Instances. "
       "InsufficientInstanceCapacity - We currently do not have sufficient p4d.24xlarge capacity in the Availability "
       "Zone you requested (us-east-1b). Launching EC2 instance failed.", "resourceIds": ["eks-asg"]}],
     CapacityError, "InsufficientInstanceCapacity"),
    ([{"code": "InsufficientFreeAddresses", "message": "One or more of the subnets associated with your managed node "
       "group does not have enough available IP addresses for new nodes.", "resourceIds": ["subnet-b"]}],
     CapacityError, "InsufficientFreeAddresses"),
    ([{"code": "AsgInstanceLaunchFailures", "message": "Could not launch On-Demand Instances. VcpuLimitExceeded - You "
       "have requested more vCPU capacity than your current vCPU limit of 0 allows.", "resourceIds": ["eks-asg"]}],
     QuotaError, "InstanceLimitExceeded"),
    ([{"code": "Ec2SubnetInvalidConfiguration", "message": "One or more Amazon EC2 Subnets of [subnet-b] for node "
       "group g-1 does not automatically assign public IP addresses to instances launched into it.",
       "resourceIds": ["subnet-b"]}], UnsupportedError, "Ec2SubnetInvalidConfiguration"),
    ([], UnsupportedError, "CREATE_FAILED"),
])
def test_a_failed_groups_issues_become_the_error_class_failover_acts_on(issues: list[dict[str, object]],
                                                                        kind: type, code: str) -> None:
    error = spec.failure("CREATE_FAILED", issues, "g-1")
    assert type(error) is kind and error.code == code
    assert error.message.startswith("node group g-1 CREATE_FAILED: ")


@pytest.mark.parametrize(("instance_type", "nodes", "placed"), [
    ("p4d.24xlarge", 2, True), ("p5.48xlarge", 8, True), ("p5en.48xlarge", 2, True), ("g6e.48xlarge", 4, True),
    ("p5.48xlarge", 1, False),  # one node: nothing to keep close
    ("t3.large", 4, False), ("mac2.metal", 2, False), ("m7i-flex.large", 2, False),  # EC2 User Guide: unsupported
])
def test_a_cluster_placement_group_where_the_type_takes_one_and_the_gang_has_several_nodes(
        instance_type: str, nodes: int, placed: bool) -> None:
    assert spec.cluster_placement(instance_type, nodes) is placed
    assert (spec.parts(instance_type, nodes, "o1", "g-1") is not None) is placed


def test_the_group_names_its_own_template_and_the_template_only_its_placement_group() -> None:
    plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, None)
    target = spec.targets(plan, CLUSTER)[0][0]
    body = spec.create_request(target, gang="g", seq=1, owner="o1", token="g-1", nodes=2, node_role=NODE_ROLE,
                               launch_template=("lt-0abc", 1))
    assert body["launchTemplate"] == {"id": "lt-0abc", "version": "1"}
    assert body["instanceTypes"] == ["p4d.24xlarge"] and body["subnets"] == ["subnet-b"]
    parts = spec.parts("p4d.24xlarge", 2, "o1", "g-1")
    assert parts == spec.Parts("geosched-o1-g-1")
    tags = spec.tags("g", "o1", "g-1")
    assert spec.placement_group_request(parts, tags) == {
        "GroupName": "geosched-o1-g-1", "Strategy": "cluster", "TagSpecifications": [
            {"ResourceType": "placement-group", "Tags": [{"Key": "geosched-gang", "Value": "g"},
                                                         {"Key": "geosched-owner", "Value": "o1"},
                                                         {"Key": "geosched-attempt", "Value": "g-1"}]}]}
    data = spec.launch_template_request(parts, tags)["LaunchTemplateData"]
    # EKS API reference LaunchTemplateSpecification: no SubnetId, IamInstanceProfile, RequestSpotInstances,
    # HibernationOptions or TerminateInstances in a managed node group's template.
    assert data == {"Placement": {"GroupName": "geosched-o1-g-1"},
                    "MetadataOptions": {"HttpTokens": "required", "HttpEndpoint": "enabled"}}


def test_a_group_ahead_of_its_block_waits_at_zero_and_is_scaled_by_two_one_time_actions() -> None:
    """EKS User Guide, capacity-blocks.html: desired 0 until the block is active, scaled to 0 more than 30 minutes
    before its end; a block shorter than that margin (not sold: blocks last whole days) never stops before it
    starts."""
    from datetime import UTC, datetime

    plan = plan_gang(request(2), {"aws": aws_provider((REGION,))}, None)
    target = spec.targets(plan, CLUSTER)[0][0]
    body = spec.create_request(target, gang="g", seq=1, owner="o1", token="g-1", nodes=2, node_role=NODE_ROLE,
                               later=True)
    assert body["scalingConfig"] == {"minSize": 0, "maxSize": 2, "desiredSize": 0}
    start = datetime(2026, 12, 9, 11, 30, tzinfo=UTC).timestamp()
    s = spec.Schedule(start, start + 24 * 3600, 2)
    up, down = spec.schedule_requests("eks-asg", "o1", "g-1", s)
    assert up == {"AutoScalingGroupName": "eks-asg", "ScheduledActionName": "geosched-o1-g-1-start",
                  "StartTime": datetime(2026, 12, 9, 11, 30, tzinfo=UTC), "DesiredCapacity": 2}
    assert down == {"AutoScalingGroupName": "eks-asg", "ScheduledActionName": "geosched-o1-g-1-stop",
                    "StartTime": datetime(2026, 12, 10, 10, 50, tzinfo=UTC), "DesiredCapacity": 0}
    assert spec.Schedule(start, start + 600, 2).stop == start
