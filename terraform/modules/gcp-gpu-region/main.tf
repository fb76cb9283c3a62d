locals {
  # Network, node service account and custom role are project-wide: only the instance without
  # var.shared creates them, every other region reuses them.
  primary = var.shared == null

  network               = local.primary ? one(google_compute_network.this[*].self_link) : var.shared.network
  service_account_email = local.primary ? one(google_service_account.nodes[*].email) : var.shared.service_account_email

  # geosched lists and deletes only VMs carrying this label.
  launch_labels = { "geosched-owner" = var.owner }

  # Custom role IDs allow no hyphens.
  role_id = "${replace(var.name_prefix, "-", "_")}_scheduler"

  # What geosched does in the project: read the catalog (machine and accelerator types, zones, regional
  # quotas), create VMs with a boot disk, a subnetwork, an external address, tags, labels, metadata
  # (SSH keys), the node service account and the compact placement policy, wait on the operation, list
  # and delete them. Nothing here can touch networks, firewalls or IAM.
  geosched_permissions = [
    "compute.acceleratorTypes.get",
    "compute.acceleratorTypes.list",
    "compute.disks.create",
    "compute.images.useReadOnly",
    "compute.instances.create",
    "compute.instances.delete",
    "compute.instances.get",
    "compute.instances.list",
    "compute.instances.setLabels",
    "compute.instances.setMetadata",
    "compute.instances.setServiceAccount",
    "compute.instances.setTags",
    "compute.machineTypes.get",
    "compute.machineTypes.list",
    "compute.projects.get",
    "compute.regions.get",
    "compute.resourcePolicies.use",
    "compute.subnetworks.use",
    "compute.subnetworks.useExternalIp",
    "compute.zoneOperations.get",
    "compute.zones.get",
    "compute.zones.list",
  ]

  # The nodes only ship their logs and metrics; they call no other Google API.
  node_roles = ["roles/logging.logWriter", "roles/monitoring.metricWriter"]
}

resource "google_compute_network" "this" {
  count = local.primary ? 1 : 0

  project                 = var.project
  name                    = var.name_prefix
  auto_create_subnetworks = false
}

resource "google_compute_subnetwork" "this" {
  project                  = var.project
  region                   = var.region
  name                     = "${var.name_prefix}-${var.region}"
  network                  = local.network
  ip_cidr_range            = var.subnet_cidr
  private_ip_google_access = true

  lifecycle {
    # Terraform 1.5 validation cannot compare two variables, so the cross-checks live here.
    precondition {
      condition     = alltrue([for z in var.zones : startswith(z, "${var.region}-")])
      error_message = "Every zone must be in ${var.region}; got ${join(", ", var.zones)}."
    }
    precondition {
      condition     = local.primary || !var.create_geosched_role
      error_message = "create_geosched_role only works where shared is null: the role is project-wide and belongs with the other shared resources."
    }
  }
}

resource "google_compute_firewall" "ssh" {
  # No sources would mean 0.0.0.0/0 to GCP, so an empty list must mean no rule at all.
  count = length(var.admin_cidr_blocks) > 0 ? 1 : 0

  project       = var.project
  name          = "${var.name_prefix}-${var.region}-ssh"
  network       = local.network
  direction     = "INGRESS"
  source_ranges = var.admin_cidr_blocks
  target_tags   = [var.network_tag]

  allow {
    protocol = "tcp"
    ports    = ["22"]
  }
}

resource "google_compute_firewall" "internal" {
  project     = var.project
  name        = "${var.name_prefix}-${var.region}-internal"
  network     = local.network
  direction   = "INGRESS"
  source_tags = [var.network_tag]
  target_tags = [var.network_tag]

  allow {
    protocol = "all"
  }
}

resource "google_compute_firewall" "peers" {
  count = length(var.peer_cidr_blocks) > 0 ? 1 : 0

  project       = var.project
  name          = "${var.name_prefix}-${var.region}-peers"
  network       = local.network
  direction     = "INGRESS"
  source_ranges = var.peer_cidr_blocks
  target_tags   = [var.network_tag]

  allow {
    protocol = "all"
  }
}

resource "google_compute_resource_policy" "compact" {
  count = var.create_placement_policy ? 1 : 0

  project = var.project
  region  = var.region
  name    = "${var.name_prefix}-${var.region}-compact"

  group_placement_policy {
    collocation = "COLLOCATED"
  }
}

resource "google_service_account" "nodes" {
  count = local.primary ? 1 : 0

  project      = var.project
  account_id   = "${var.name_prefix}-nodes"
  display_name = "geosched GPU nodes"
  description  = "Identity of the GPU VMs geosched launches: writes logs and metrics, nothing else."
}

resource "google_project_iam_member" "nodes" {
  for_each = local.primary ? toset(local.node_roles) : toset([])

  project = var.project
  role    = each.value
  member  = "serviceAccount:${one(google_service_account.nodes[*].email)}"
}

resource "google_project_iam_custom_role" "geosched" {
  count = local.primary && var.create_geosched_role ? 1 : 0

  project     = var.project
  role_id     = local.role_id
  title       = "geosched scheduler"
  description = "Launch, label and delete geosched's GPU VMs; read machine types, accelerators, zones and quotas."
  permissions = local.geosched_permissions
}

resource "google_project_iam_member" "geosched" {
  count = local.primary && var.create_geosched_role && var.geosched_member != null ? 1 : 0

  project = var.project
  role    = google_project_iam_custom_role.geosched[0].name
  member  = var.geosched_member
}

# Launching a VM that runs as a service account needs actAs on that account; granting it on the node
# account alone, not project-wide, keeps geosched from launching VMs as any other identity.
resource "google_service_account_iam_member" "geosched_act_as" {
  count = local.primary && var.create_geosched_role && var.geosched_member != null ? 1 : 0

  service_account_id = google_service_account.nodes[0].name
  role               = "roles/iam.serviceAccountUser"
  member             = var.geosched_member
}
