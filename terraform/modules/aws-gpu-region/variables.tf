variable "name_prefix" {
  description = "Prefix for every resource name (VPC, subnets, security group, key pair, placement groups, IAM policy). Lower-case letters, digits and hyphens."
  type        = string
  default     = "geosched"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,22}[a-z0-9]$", var.name_prefix))
    error_message = "The name_prefix must be 2-24 characters of a-z, 0-9 and '-', starting with a letter and not ending with '-'."
  }
}

variable "region" {
  description = "AWS region this instance of the module builds in, e.g. us-east-1. Must be the region of the aws provider passed in (checked at plan time)."
  type        = string

  validation {
    condition     = can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", var.region))
    error_message = "The region must be an AWS region name such as us-east-1 or ap-southeast-2."
  }
}

variable "availability_zone_ids" {
  description = "Availability-zone IDs (use1-az1, not us-east-1a) to create one subnet in each. Zone IDs name the same physical zone in every account, and they are what geosched's catalog and placement use. Append new zones at the end: each subnet's CIDR is derived from its position in this list."
  type        = list(string)

  validation {
    condition     = length(var.availability_zone_ids) > 0 && length(distinct(var.availability_zone_ids)) == length(var.availability_zone_ids)
    error_message = "Give at least one availability-zone ID, each only once."
  }

  validation {
    condition     = alltrue([for z in var.availability_zone_ids : can(regex("^[a-z]+[0-9]+-az[0-9]+$", z))])
    error_message = "Availability zones must be zone IDs such as use1-az1 (see `aws ec2 describe-availability-zones`), not zone names such as us-east-1a."
  }
}

variable "vpc_cidr" {
  description = "IPv4 CIDR of the VPC, /16 to /24. Give each region a different block so the VPCs can be peered later."
  type        = string
  default     = "10.40.0.0/16"

  validation {
    condition     = try(cidrnetmask(var.vpc_cidr) != "" && cidrsubnet(var.vpc_cidr, 0, 0) == var.vpc_cidr && tonumber(split("/", var.vpc_cidr)[1]) >= 16 && tonumber(split("/", var.vpc_cidr)[1]) <= 24, false)
    error_message = "The vpc_cidr must be a canonical IPv4 CIDR (no host bits set, no IPv6) between /16 and /24, e.g. 10.40.0.0/16."
  }
}

variable "subnet_newbits" {
  description = "Bits added to the VPC prefix for each zone's subnet: 4 turns a /16 into sixteen /20 subnets. Must leave room for every zone in availability_zone_ids."
  type        = number
  default     = 4

  validation {
    condition     = var.subnet_newbits == floor(var.subnet_newbits) && var.subnet_newbits >= 1 && var.subnet_newbits <= 8
    error_message = "The subnet_newbits must be a whole number from 1 to 8."
  }
}

variable "admin_cidr_blocks" {
  description = "IPv4 CIDRs allowed to reach the nodes on SSH (22/tcp): where geosched and its operators run. An empty list opens no SSH port."
  type        = list(string)

  validation {
    condition     = alltrue([for c in var.admin_cidr_blocks : try(cidrnetmask(c) != "" && cidrsubnet(c, 0, 0) == c, false)])
    error_message = "Each admin CIDR must be a canonical IPv4 CIDR such as 203.0.113.0/24 (no host bits set)."
  }
}

variable "peer_cidr_blocks" {
  description = "IPv4 CIDRs allowed ALL traffic to the nodes, for network probes and NCCL between this region and others (other clouds' egress ranges, a VPN). Members of the security group always reach each other; this list is only for traffic from outside the VPC."
  type        = list(string)
  default     = []

  validation {
    condition     = alltrue([for c in var.peer_cidr_blocks : try(cidrnetmask(c) != "" && cidrsubnet(c, 0, 0) == c, false)])
    error_message = "Each peer CIDR must be a canonical IPv4 CIDR such as 198.51.100.0/24 (no host bits set)."
  }

  # Every port is open to these networks: one wider than /8 (0.0.0.0/0 above all) is the internet, not a peer.
  validation {
    condition     = alltrue([for c in var.peer_cidr_blocks : try(tonumber(split("/", c)[1]) >= 8, false)])
    error_message = "A peer CIDR wider than /8 would open every port of the nodes to the internet: list the other regions' egress addresses or the VPN's range instead."
  }
}

variable "public_ips" {
  description = "Give every node a public IPv4 address (the subnets' map_public_ip_on_launch). Turn off when geosched and the other regions reach the nodes privately (from inside the VPC, a bastion, a VPN or peering); the nodes then need a NAT gateway or VPC endpoints for anything they download."
  type        = bool
  default     = true
}

variable "public_key" {
  description = "OpenSSH public key (ssh-ed25519 or ssh-rsa line) imported as the region's EC2 key pair; geosched logs in to the nodes with its private half."
  type        = string

  validation {
    condition     = can(regex("^(ssh-ed25519|ssh-rsa) [A-Za-z0-9+/]+={0,3}( .*)?$", trimspace(var.public_key)))
    error_message = "The public_key must be one OpenSSH public key line starting with ssh-ed25519 or ssh-rsa (EC2 imports no other key types)."
  }
}

variable "create_placement_groups" {
  description = "Create one cluster placement group per availability zone. A cluster placement group cannot span zones, so geosched puts a gang in its zone's group to get the low-latency, full-bisection network NCCL wants."
  type        = bool
  default     = false
}

variable "owner" {
  description = "Value of the geosched-owner tag. geosched must tag the instances and volumes it launches with it, and the IAM policy lets geosched terminate only instances carrying it, so two deployments with different owners cannot terminate each other's nodes."
  type        = string
  default     = "geosched"

  validation {
    condition     = can(regex("^[A-Za-z0-9_.:/=+@-]{1,128}$", var.owner))
    error_message = "The owner must be 1-128 characters of letters, digits and _ . : / = + @ - (a valid EC2 tag value without spaces)."
  }
}

variable "allowed_ami_owners" {
  description = "Owners whose AMIs geosched may launch, as EC2's ec2:Owner condition sees them: amazon (AWS Deep Learning AMIs), aws-marketplace, or 12-digit account IDs for your own images."
  type        = list(string)
  default     = ["amazon"]

  validation {
    condition     = length(var.allowed_ami_owners) > 0 && alltrue([for o in var.allowed_ami_owners : can(regex("^(amazon|aws-marketplace|[0-9]{12})$", o))])
    error_message = "Each AMI owner must be amazon, aws-marketplace or a 12-digit account ID, and the list must not be empty."
  }
}

variable "create_iam_policy" {
  description = "Also create the geosched IAM policy as an aws_iam_policy (named <name_prefix>-<region>) to attach to geosched's role or user. The JSON is output either way."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags added to every resource this module creates."
  type        = map(string)
  default     = {}
}
