output "project" {
  description = "GCP project ID the resources are in."
  value       = var.project
}

output "region" {
  description = "GCP region of the subnetwork and placement policy."
  value       = var.region
}

output "zones" {
  description = "Zones geosched may launch in (var.zones, checked to be in the region)."
  value       = var.zones
}

output "network" {
  description = "Self link of the VPC network (created here, or reused from var.shared)."
  value       = local.network
}

output "subnetwork" {
  description = "Self link of this region's subnetwork: every zone of the region launches into it."
  value       = google_compute_subnetwork.this.self_link
}

output "firewall_tag" {
  description = "Network tag geosched must put on its VMs: the SSH, internal and peer firewall rules target it."
  value       = var.network_tag
}

output "placement_policy" {
  description = "Self link of the compact (COLLOCATED) placement policy, or null when create_placement_policy is false. Attach it to all VMs of one gang, in one zone."
  value       = one(google_compute_resource_policy.compact[*].self_link)
}

output "service_account_email" {
  description = "Email of the node service account (logs and metrics writer only) to run geosched's VMs as."
  value       = local.service_account_email
}

output "launch_labels" {
  description = "Labels geosched must put on the VMs it launches; it lists and deletes only VMs carrying them."
  value       = local.launch_labels
}

output "public_ips" {
  description = "Whether geosched gives the VMs it launches an external address (var.public_ips)."
  value       = var.public_ips
}

output "geosched_permissions" {
  description = "IAM permissions geosched itself needs in the project, whether or not create_geosched_role turned them into a custom role."
  value       = local.geosched_permissions
}

output "geosched_role" {
  description = "Name (projects/PROJECT/roles/ID) of the custom role holding geosched_permissions, or null when this instance did not create it."
  value       = one(google_project_iam_custom_role.geosched[*].name)
}

output "shared" {
  description = "The project-wide resources, to pass as var.shared to this module's instances for other regions."
  value = {
    network               = local.network
    service_account_email = local.service_account_email
  }
}
