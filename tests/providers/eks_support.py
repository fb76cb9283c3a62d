"""An EKS cluster in moto for the node group tests: a VPC with one subnet in each us-east-1 zone the shipped
catalog offers p4d.24xlarge in (use1-az1, use1-az2, use1-az6: the plan's order), and the cluster over them.

Built straight on moto (not through the fault proxy), as an operator's cluster would exist before geosched runs.
Shapes: EC2 CreateVpc / CreateSubnet (AvailabilityZoneId), EKS CreateCluster (resourcesVpcConfig.subnetIds).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import boto3  # type: ignore[import-untyped]

from geosched.providers.plan import GangRequest, PricingMode

REGION = "us-east-1"
# The zone IDs of the plan for A100:8 in us-east-1, in plan order, and the AZ names moto gives them.
ZONES = {"use1-az1": "us-east-1b", "use1-az2": "us-east-1c", "use1-az6": "us-east-1a"}
ROLE = "arn:aws:iam::123456789012:role/eks-cluster"
NODE_ROLE = "arn:aws:iam::123456789012:role/eks-gpu-nodes"


@dataclass(frozen=True)
class EksCluster:
    name: str
    subnets: dict[str, str]  # zone ID -> subnet id
    eks: Any  # boto3 EKS client straight to moto
    ec2: Any

    def groups(self) -> dict[str, dict[str, Any]]:
        """Every node group moto holds in the cluster, by name."""
        names = self.eks.list_nodegroups(clusterName=self.name)["nodegroups"]
        return {n: self.eks.describe_nodegroup(clusterName=self.name, nodegroupName=n)["nodegroup"] for n in names}


def launch_templates(cluster: EksCluster, prefix: str) -> dict[str, dict[str, Any]]:
    """The launch templates moto holds whose name starts with `prefix`, by name: moto's server is the test
    session's, so a test looks for its own gang's (`spec.part_name(owner, gang + "-")`), never for none at all."""
    found = cluster.ec2.describe_launch_templates()["LaunchTemplates"]
    return {t["LaunchTemplateName"]: t for t in found if t["LaunchTemplateName"].startswith(prefix)}


def clients(moto_url: str) -> tuple[Any, Any]:
    kw = {"region_name": REGION, "endpoint_url": moto_url, "aws_access_key_id": "testing",
          "aws_secret_access_key": "testing"}
    return boto3.client("eks", **kw), boto3.client("ec2", **kw)


def make_cluster(moto_url: str, zones: tuple[str, ...] = tuple(ZONES)) -> EksCluster:
    eks, ec2 = clients(moto_url)
    vpc = ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
    subnets = {}
    for i, zone in enumerate(zones):
        subnets[zone] = ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.40.{i}.0/24",
                                          AvailabilityZoneId=zone)["Subnet"]["SubnetId"]
    name = f"ml-{secrets.token_hex(3)}"
    eks.create_cluster(name=name, roleArn=ROLE, resourcesVpcConfig={"subnetIds": list(subnets.values())})
    return EksCluster(name, subnets, eks, ec2)


def one_subnet_cluster(moto_url: str, name: str, zone_id: str, zone_name: str, cidr: str) -> None:
    """The cluster `name` over one subnet `cidr` (in VPC 10.0.0.0/16) in `zone_id`, which moto must name
    `zone_name`: the realkube suites' EKS cluster as AWS knows it, named like the plane's, each suite with a /24 of
    its own (the kwok Nodes standing in for its machines take their addresses from it)."""
    subnet_cluster(moto_url, name, [(zone_id, zone_name, cidr)])


def subnet_cluster(moto_url: str, name: str, subnets: Sequence[tuple[str, str, str]]) -> None:
    """`one_subnet_cluster` over several subnets: (zone ID, the name moto must give it, CIDR) each."""
    eks, ec2 = clients(moto_url)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ids = []
    for zone_id, zone_name, cidr in subnets:
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZoneId=zone_id)["Subnet"]
        assert subnet["AvailabilityZone"] == zone_name
        ids.append(subnet["SubnetId"])
    eks.create_cluster(name=name, roleArn=ROLE, resourcesVpcConfig={"subnetIds": ids})


def request(nodes: int = 2, pricing: PricingMode = PricingMode.ON_DEMAND) -> GangRequest:
    return GangRequest("A100", 8, nodes, pricing, ("aws",), (REGION,))
