# Provider configurations cannot be chosen per for_each key, so each AWS region is spelled out with its own
# aliased provider and module block.
provider "aws" {
  alias  = "us_east_1"
  region = "us-east-1"
}

provider "aws" {
  alias  = "us_west_2"
  region = "us-west-2"
}

# One google provider serves every GCP region: the modules pass project and region on each resource.
provider "google" {
  project = var.gcp_project
}

module "aws_us_east_1" {
  source    = "../../modules/aws-gpu-region"
  providers = { aws = aws.us_east_1 }

  region                  = "us-east-1"
  availability_zone_ids   = ["use1-az1", "use1-az2", "use1-az4", "use1-az6"]
  vpc_cidr                = "10.40.0.0/16"
  admin_cidr_blocks       = var.admin_cidr_blocks
  public_key              = var.ssh_public_key
  create_placement_groups = true
  owner                   = var.owner
  create_iam_policy       = true
}

module "aws_us_west_2" {
  source    = "../../modules/aws-gpu-region"
  providers = { aws = aws.us_west_2 }

  region                  = "us-west-2"
  availability_zone_ids   = ["usw2-az1", "usw2-az2", "usw2-az3"]
  vpc_cidr                = "10.41.0.0/16"
  admin_cidr_blocks       = var.admin_cidr_blocks
  public_key              = var.ssh_public_key
  create_placement_groups = true
  owner                   = var.owner
  create_iam_policy       = true
}

# The first GCP region creates the project-wide network, node service account and geosched role; the
# second reuses them, so GCP nodes in both regions share one network.
module "gcp_us_central1" {
  source = "../../modules/gcp-gpu-region"

  project              = var.gcp_project
  region               = "us-central1"
  zones                = ["us-central1-a", "us-central1-b", "us-central1-c"]
  subnet_cidr          = "10.50.0.0/20"
  admin_cidr_blocks    = var.admin_cidr_blocks
  owner                = var.owner
  create_geosched_role = true
  geosched_member      = var.geosched_member
}

module "gcp_europe_west4" {
  source = "../../modules/gcp-gpu-region"

  project           = var.gcp_project
  region            = "europe-west4"
  zones             = ["europe-west4-a", "europe-west4-b", "europe-west4-c"]
  subnet_cidr       = "10.50.16.0/20"
  admin_cidr_blocks = var.admin_cidr_blocks
  owner             = var.owner
  shared            = module.gcp_us_central1.shared
}
