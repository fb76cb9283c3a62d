variable "project" {
  description = "GCP project ID every resource is created in."
  type        = string

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project))
    error_message = "The project must be a GCP project ID: 6-30 characters of a-z, 0-9 and '-', starting with a letter."
  }
}

variable "region" {
  description = "GCP region this instance of the module builds in, e.g. us-central1."
  type        = string

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.region))
    error_message = "The region must be a GCP region name such as us-central1 or europe-west4."
  }
}

variable "zones" {
  description = "Zones of the region geosched may launch in, e.g. [\"us-central1-a\", \"us-central1-b\"]. GCP subnetworks are regional, so these only travel to the outputs; they must belong to var.region (checked at plan time)."
  type        = list(string)

  validation {
    condition     = length(var.zones) > 0 && length(distinct(var.zones)) == length(var.zones)
    error_message = "Give at least one zone, each only once."
  }

  validation {
    condition     = alltrue([for z in var.zones : can(regex("^[a-z]+-[a-z]+[0-9]+-[a-z]$", z))])
    error_message = "Zones must be GCP zone names such as us-central1-a."
  }
}

variable "name_prefix" {
  description = "Prefix for every resource name. Lower-case letters, digits and hyphens; at most 20 characters so that derived names (the node service account ID above all, 30 characters at most) stay within GCP's limits."
  type        = string
  default     = "geosched"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,18}[a-z0-9]$", var.name_prefix))
    error_message = "The name_prefix must be 2-20 characters of a-z, 0-9 and '-', starting with a letter and not ending with '-'."
  }
}

variable "shared" {
  description = "Project-wide resources to reuse from another instance of this module: pass that instance's `shared` output. null (the default) creates them here: the VPC network, the node service account and, with create_geosched_role, geosched's custom role. One network for all regions lets GCP nodes in different regions talk over internal addresses."
  type = object({
    network               = string
    service_account_email = string
  })
  default = null
}

variable "subnet_cidr" {
  description = "IPv4 CIDR of this region's subnetwork, /8 to /29. Regions sharing a network need non-overlapping ranges."
  type        = string
  default     = "10.50.0.0/20"

  validation {
    condition     = try(cidrnetmask(var.subnet_cidr) != "" && cidrsubnet(var.subnet_cidr, 0, 0) == var.subnet_cidr && tonumber(split("/", var.subnet_cidr)[1]) >= 8 && tonumber(split("/", var.subnet_cidr)[1]) <= 29, false)
    error_message = "The subnet_cidr must be a canonical IPv4 CIDR (no host bits set, no IPv6) between /8 and /29, e.g. 10.50.0.0/20."
  }
}

variable "admin_cidr_blocks" {
  description = "IPv4 CIDRs allowed to reach the nodes on SSH (22/tcp): where geosched and its operators run. An empty list creates no SSH rule (an ingress rule without sources would admit the whole internet)."
  type        = list(string)

  validation {
    condition     = alltrue([for c in var.admin_cidr_blocks : try(cidrnetmask(c) != "" && cidrsubnet(c, 0, 0) == c, false)])
    error_message = "Each admin CIDR must be a canonical IPv4 CIDR such as 203.0.113.0/24 (no host bits set)."
  }
}

variable "peer_cidr_blocks" {
  description = "IPv4 CIDRs allowed ALL traffic to the nodes, for network probes and NCCL between this region and other clouds (their egress ranges, a VPN). Nodes carrying the network tag always reach each other; this list is only for traffic from outside the network."
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

variable "network_tag" {
  description = "Network tag geosched puts on its nodes; the firewall rules target it, and all traffic is allowed between instances carrying it."
  type        = string
  default     = "geosched-node"

  validation {
    condition     = can(regex("^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", var.network_tag))
    error_message = "The network_tag must be 1-63 characters of a-z, 0-9 and '-', starting with a letter and not ending with '-'."
  }
}

variable "create_placement_policy" {
  description = "Create a compact placement policy (group placement, COLLOCATED) in the region. VMs attached to one compact policy are placed close together and so in one zone; geosched attaches it to a gang, which it places in a single zone anyway."
  type        = bool
  default     = true
}

variable "public_ips" {
  description = "Whether geosched gives every VM an external IPv4 address (a ONE_TO_ONE_NAT access config). Turn off when geosched and the other regions reach the VMs privately (from inside the VPC, a bastion, a VPN or peering); the VMs then need Cloud NAT or Private Google Access for anything they download. geosched reads it from the output below: the module creates no VM itself."
  type        = bool
  default     = true
}

variable "owner" {
  description = "Value of the geosched-owner label geosched puts on the VMs it launches, so it lists and deletes only its own."
  type        = string
  default     = "geosched"

  validation {
    condition     = can(regex("^[a-z0-9_-]{1,63}$", var.owner))
    error_message = "The owner must be a GCP label value: 1-63 characters of a-z, 0-9, '_' and '-'."
  }
}

variable "create_geosched_role" {
  description = "Create the custom role holding geosched_permissions (only where shared is null: the role is project-wide). Otherwise grant those permissions some other way; the list is output either way."
  type        = bool
  default     = false
}

variable "geosched_member" {
  description = "IAM member geosched runs as, e.g. serviceAccount:geosched@PROJECT.iam.gserviceaccount.com. With create_geosched_role it is granted the custom role on the project and roles/iam.serviceAccountUser on the node service account only (needed to launch VMs as it). null grants nothing."
  type        = string
  default     = null

  validation {
    condition     = var.geosched_member == null || can(regex("^(serviceAccount|user|group|principal|principalSet):.+$", var.geosched_member))
    error_message = "The geosched_member must be an IAM member such as serviceAccount:NAME@PROJECT.iam.gserviceaccount.com."
  }
}
