data "aws_region" "current" {}

data "aws_partition" "current" {}

data "aws_caller_identity" "current" {}

data "aws_availability_zones" "available" {
  state = "available"
}

locals {
  # The key is fixed (geosched's reader insists on it); the value is what separates deployments.
  owner_tag_key = "geosched-owner"
  launch_tags   = { (local.owner_tag_key) = var.owner }

  # ARNs of resources geosched creates through RunInstances, in this region and account only.
  arn_prefix = "arn:${data.aws_partition.current.partition}:ec2:${var.region}:${data.aws_caller_identity.current.account_id}"
  # AMIs and their snapshots belong to their publisher, so their ARNs carry no account.
  public_arn_prefix = "arn:${data.aws_partition.current.partition}:ec2:${var.region}:"
}

resource "aws_vpc" "this" {
  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true

  tags = merge(var.tags, { Name = "${var.name_prefix}-${var.region}" })

  lifecycle {
    # A provider alias for the wrong region would build everything there while the outputs claim var.region.
    precondition {
      condition     = data.aws_region.current.name == var.region
      error_message = "The aws provider passed to this module is configured for ${data.aws_region.current.name}, but var.region is ${var.region}."
    }
    precondition {
      condition     = alltrue([for z in var.availability_zone_ids : contains(data.aws_availability_zones.available.zone_ids, z)])
      error_message = "Some availability_zone_ids are not available zones of ${var.region}; available: ${join(", ", data.aws_availability_zones.available.zone_ids)}."
    }
    precondition {
      condition     = length(var.availability_zone_ids) <= pow(2, var.subnet_newbits)
      error_message = "subnet_newbits = ${var.subnet_newbits} leaves room for ${pow(2, var.subnet_newbits)} subnets, fewer than the ${length(var.availability_zone_ids)} zones given."
    }
  }
}

resource "aws_subnet" "this" {
  # Keyed by zone ID so adding a zone never renumbers the others' resources.
  for_each = { for i, z in var.availability_zone_ids : z => i }

  vpc_id               = aws_vpc.this.id
  availability_zone_id = each.key
  cidr_block           = cidrsubnet(var.vpc_cidr, var.subnet_newbits, each.value)
  # Public addresses by default: geosched reaches the nodes over SSH from where it runs, and cross-region
  # probes and NCCL leave the VPC without a NAT gateway in the way. Off when geosched runs inside the VPC.
  map_public_ip_on_launch = var.public_ips

  tags = merge(var.tags, { Name = "${var.name_prefix}-${each.key}" })
}

resource "aws_internet_gateway" "this" {
  vpc_id = aws_vpc.this.id
  tags   = merge(var.tags, { Name = "${var.name_prefix}-${var.region}" })
}

resource "aws_route_table" "public" {
  vpc_id = aws_vpc.this.id
  tags   = merge(var.tags, { Name = "${var.name_prefix}-${var.region}-public" })
}

resource "aws_route" "internet" {
  route_table_id         = aws_route_table.public.id
  destination_cidr_block = "0.0.0.0/0"
  gateway_id             = aws_internet_gateway.this.id
}

resource "aws_route_table_association" "this" {
  for_each = aws_subnet.this

  subnet_id      = each.value.id
  route_table_id = aws_route_table.public.id
}

resource "aws_security_group" "nodes" {
  name        = "${var.name_prefix}-nodes"
  description = "geosched GPU nodes: SSH from admins, all traffic between members"
  vpc_id      = aws_vpc.this.id

  tags = merge(var.tags, { Name = "${var.name_prefix}-nodes" })
}

# Rules are separate resources (not inline blocks) so each can change without replacing the group.
resource "aws_vpc_security_group_ingress_rule" "ssh" {
  for_each = toset(var.admin_cidr_blocks)

  security_group_id = aws_security_group.nodes.id
  description       = "SSH from admin network"
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = 22
  to_port           = 22
}

resource "aws_vpc_security_group_ingress_rule" "members" {
  security_group_id            = aws_security_group.nodes.id
  description                  = "All traffic from members: network probes, NCCL, EFA"
  referenced_security_group_id = aws_security_group.nodes.id
  ip_protocol                  = "-1"
}

resource "aws_vpc_security_group_ingress_rule" "peers" {
  for_each = toset(var.peer_cidr_blocks)

  security_group_id = aws_security_group.nodes.id
  description       = "All traffic from peer regions: cross-region probes and NCCL"
  cidr_ipv4         = each.value
  ip_protocol       = "-1"
}

# EFA needs an explicit self-referencing egress rule; the 0.0.0.0/0 rule below does not satisfy it.
resource "aws_vpc_security_group_egress_rule" "members" {
  security_group_id            = aws_security_group.nodes.id
  description                  = "All traffic to members (required by EFA)"
  referenced_security_group_id = aws_security_group.nodes.id
  ip_protocol                  = "-1"
}

# Terraform strips AWS's default allow-all egress from groups it creates, so it is restated here: nodes pull
# images and datasets and probe other regions.
resource "aws_vpc_security_group_egress_rule" "all" {
  security_group_id = aws_security_group.nodes.id
  description       = "All outbound traffic"
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
}

resource "aws_placement_group" "cluster" {
  # One per zone: a cluster placement group cannot span zones, and geosched places each gang in one zone.
  for_each = var.create_placement_groups ? toset(var.availability_zone_ids) : toset([])

  name     = "${var.name_prefix}-${each.key}"
  strategy = "cluster"

  tags = var.tags
}

resource "aws_key_pair" "this" {
  key_name   = "${var.name_prefix}-${var.region}"
  public_key = trimspace(var.public_key)

  tags = var.tags
}

data "aws_iam_policy_document" "geosched" {
  # Describe calls only accept "*" as their resource, so they are confined to the region by condition instead.
  statement {
    sid    = "DescribeInRegion"
    effect = "Allow"
    actions = [
      "ec2:DescribeAvailabilityZones",
      "ec2:DescribeImages",
      "ec2:DescribeInstanceStatus",
      "ec2:DescribeInstanceTypeOfferings",
      "ec2:DescribeInstanceTypes",
      "ec2:DescribeInstances",
      "ec2:DescribeKeyPairs",
      "ec2:DescribePlacementGroups",
      "ec2:DescribeRegions",
      "ec2:DescribeSecurityGroups",
      "ec2:DescribeSpotPriceHistory",
      "ec2:DescribeSubnets",
      "ec2:DescribeVpcs",
    ]
    resources = ["*"]

    condition {
      test     = "StringEquals"
      variable = "aws:RequestedRegion"
      values   = [var.region]
    }
  }

  # RunInstances is authorised once per resource it touches; each statement below covers one group of them.
  statement {
    sid     = "LaunchOnlyOwnerTagged"
    effect  = "Allow"
    actions = ["ec2:RunInstances"]
    resources = [
      "${local.arn_prefix}:instance/*",
      "${local.arn_prefix}:volume/*",
    ]

    condition {
      test     = "StringEquals"
      variable = "aws:RequestTag/${local.owner_tag_key}"
      values   = [var.owner]
    }
  }

  # These exist only as part of a launch that the statement above has already required to be tagged.
  statement {
    sid     = "LaunchCreatesInterfacesAndSpotRequests"
    effect  = "Allow"
    actions = ["ec2:RunInstances"]
    resources = [
      "${local.arn_prefix}:network-interface/*",
      "${local.arn_prefix}:spot-instances-request/*",
    ]
  }

  statement {
    sid     = "LaunchIntoThisNetworkOnly"
    effect  = "Allow"
    actions = ["ec2:RunInstances"]
    resources = concat(
      [for s in aws_subnet.this : s.arn],
      [for pg in aws_placement_group.cluster : pg.arn],
      [aws_security_group.nodes.arn, aws_key_pair.this.arn],
    )
  }

  statement {
    sid       = "LaunchAllowedImages"
    effect    = "Allow"
    actions   = ["ec2:RunInstances"]
    resources = ["${local.public_arn_prefix}:image/*"]

    condition {
      test     = "StringEquals"
      variable = "ec2:Owner"
      values   = var.allowed_ami_owners
    }
  }

  # The root volume is created from the AMI's snapshot, which RunInstances authorises separately; the image
  # statement above already decides which AMIs (and so which snapshots) can be used.
  statement {
    sid       = "LaunchReadsImageSnapshots"
    effect    = "Allow"
    actions   = ["ec2:RunInstances"]
    resources = ["${local.public_arn_prefix}:snapshot/*"]
  }

  statement {
    sid     = "TagOnlyWhileLaunching"
    effect  = "Allow"
    actions = ["ec2:CreateTags"]
    resources = [
      "${local.arn_prefix}:instance/*",
      "${local.arn_prefix}:volume/*",
      "${local.arn_prefix}:network-interface/*",
      "${local.arn_prefix}:spot-instances-request/*",
    ]

    condition {
      test     = "StringEquals"
      variable = "ec2:CreateAction"
      values   = ["RunInstances"]
    }
  }

  statement {
    sid       = "TerminateOnlyOwnerTagged"
    effect    = "Allow"
    actions   = ["ec2:TerminateInstances"]
    resources = ["${local.arn_prefix}:instance/*"]

    condition {
      test     = "StringEquals"
      variable = "ec2:ResourceTag/${local.owner_tag_key}"
      values   = [var.owner]
    }
  }

  statement {
    sid       = "ReadPublicAmiParameters"
    effect    = "Allow"
    actions   = ["ssm:GetParameter"]
    resources = ["arn:${data.aws_partition.current.partition}:ssm:${var.region}::parameter/aws/service/*"]
  }

  # geosched checks the vCPU quota of an instance family before launching a gang that would exceed it.
  statement {
    sid       = "ReadEc2Quotas"
    effect    = "Allow"
    actions   = ["servicequotas:GetServiceQuota"]
    resources = ["arn:${data.aws_partition.current.partition}:servicequotas:${var.region}:${data.aws_caller_identity.current.account_id}:ec2/*"]
  }
}

resource "aws_iam_policy" "geosched" {
  count = var.create_iam_policy ? 1 : 0

  name        = "${var.name_prefix}-${var.region}"
  description = "geosched: launch, tag and terminate its own GPU nodes in ${var.region}"
  policy      = data.aws_iam_policy_document.geosched.json

  tags = var.tags
}
