variable "gcp_project" {
  description = "GCP project ID for both GCP regions."
  type        = string
}

variable "admin_cidr_blocks" {
  description = "IPv4 CIDRs allowed to SSH to the nodes in every region: where geosched runs."
  type        = list(string)

  validation {
    condition     = length(var.admin_cidr_blocks) > 0
    error_message = "Give at least one admin CIDR: geosched reaches its nodes over SSH."
  }
}

variable "ssh_public_key" {
  description = "OpenSSH public key (ssh-ed25519 or ssh-rsa) geosched logs in with; imported as a key pair in each AWS region. GCP nodes get it through instance metadata at launch."
  type        = string
}

variable "owner" {
  description = "geosched-owner tag (AWS) and label (GCP) value of this deployment; a GCP label value, so lower-case."
  type        = string
  default     = "geosched"

  validation {
    condition     = can(regex("^[a-z0-9_-]{1,63}$", var.owner))
    error_message = "The owner must be 1-63 characters of a-z, 0-9, '_' and '-' (valid as both an EC2 tag and a GCP label value)."
  }
}

variable "geosched_member" {
  description = "IAM member geosched runs as in GCP (serviceAccount:...), granted the custom role and actAs on the node service account; null to grant it yourself."
  type        = string
  default     = null
}
