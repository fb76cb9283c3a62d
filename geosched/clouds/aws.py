"""AWS: EC2 GPU instances, EKS node groups.

- Zones: the fleet names AWS zones by zone ID (`use1-az1`); the zone *name* (`us-east-1a`) a node carries in
  `topology.kubernetes.io/zone` stands for a different ID in each account, so it is always an input, never derived.
  EKS labels nodes with the ID in `topology.k8s.aws/zone-id` (kubernetes/cloud-provider-aws#855; EKS 1.30+).
- Managed node groups add `eks.amazonaws.com/nodegroup` and `eks.amazonaws.com/capacityType` (ON_DEMAND or SPOT)
  (docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html).
- providerID `aws:///<zone name>/<instance id>` (kubernetes/cloud-provider-aws).
- Prices: `aws_gpu_vms.csv` (data/SOURCES.md); the network model measured one endpoint per region (Skyplane).
- CPU power: Cloud Carbon Footprint's MIN_WATTS_AVG / MAX_WATTS_AVG (packages/aws AwsFootprintEstimationConstants).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from geosched.clouds.spec import CloudSetting, CloudSpec, NodeShape

NAME = "aws"
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"


def node_labels(node: NodeShape) -> Mapping[str, str]:
    return {
        ZONE_ID_LABEL: node.zone,
        NODEGROUP_LABEL: node.pool,
        CAPACITY_TYPE_LABEL: "SPOT" if node.spot else "ON_DEMAND",
    }


def provider_id(zone_label: str, name: str, project: str) -> str:
    """With an instance ID derived from `name`, so the same node always gets the same one."""
    return f"aws:///{zone_label}/i-0{hashlib.sha256(name.encode()).hexdigest()[:16]}"


# Credentials and endpoints are boto3's own (its chain of AWS_* variables, ~/.aws, instance roles): not settings.
SETTINGS = (
    CloudSetting("regions", "GEOSCHED_AWS_REGIONS", "AWS regions geosched looks in (sweep, status, refresh).", "names",
                 shown_default="every region the account has"),
    CloudSetting("ami", "GEOSCHED_AWS_AMI", "AMI to launch.", shown_default="the newest 'Deep Learning*' AMI"),
    CloudSetting("key_name", "GEOSCHED_AWS_KEY_NAME", "EC2 key pair to launch with."),
    CloudSetting("eks_node_role", "GEOSCHED_EKS_NODE_ROLE", "IAM role ARN the nodes of an EKS node group geosched "
                 "creates run as (`provision --cluster`, `--node-role`)."),
)

SPEC = CloudSpec(
    name=NAME,
    title="AWS",
    provider_id_schemes=("aws",),
    zone_id_label=ZONE_ID_LABEL,
    zone_id_label_since="EKS before 1.30",
    # An availability zone name: region, then a letter (us-east-1a, us-gov-west-1b, ap-northeast-1c).
    zone_name_pattern=r"^(?P<region>[a-z]{2}(?:-gov)?-[a-z]+-[0-9]+)[a-z]$",
    node_labels=node_labels,
    spot_labels=((CAPACITY_TYPE_LABEL, "SPOT"),),
    pool_label=NODEGROUP_LABEL,
    provider_id=provider_id,
    kube_service="eks",
    catalog_file="aws_gpu_vms.csv",
    network_endpoint="region",
    ccf_cpu_watts=(0.74, 3.5),
    terraform_module="terraform/modules/aws-gpu-region",
    extra="aws",
    sdk_modules=("boto3", "botocore"),
    extra_purpose="EC2 and EKS provisioning, AWS prices (boto3)",
    settings=SETTINGS,
    sources=(
        "github.com/kubernetes/cloud-provider-aws (providerID, #855 zone-id label)",
        "docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html",
    ),
)
