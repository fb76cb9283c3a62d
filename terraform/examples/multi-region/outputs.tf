output "geosched" {
  description = "Everything geosched needs to launch nodes, per provider and region; read with `terraform output -json | geosched ...` (geosched.providers.terraform). Keys and shapes are a contract: change them together with that reader."
  value = {
    schema_version = 1
    aws = {
      (module.aws_us_east_1.region) = {
        vpc_id                = module.aws_us_east_1.vpc_id
        subnet_ids            = module.aws_us_east_1.subnet_ids
        security_group_id     = module.aws_us_east_1.security_group_id
        key_name              = module.aws_us_east_1.key_name
        placement_group_names = module.aws_us_east_1.placement_group_names
        launch_tags           = module.aws_us_east_1.launch_tags
      }
      (module.aws_us_west_2.region) = {
        vpc_id                = module.aws_us_west_2.vpc_id
        subnet_ids            = module.aws_us_west_2.subnet_ids
        security_group_id     = module.aws_us_west_2.security_group_id
        key_name              = module.aws_us_west_2.key_name
        placement_group_names = module.aws_us_west_2.placement_group_names
        launch_tags           = module.aws_us_west_2.launch_tags
      }
    }
    gcp = {
      (module.gcp_us_central1.region) = {
        project               = module.gcp_us_central1.project
        network               = module.gcp_us_central1.network
        subnetwork            = module.gcp_us_central1.subnetwork
        zones                 = module.gcp_us_central1.zones
        firewall_tag          = module.gcp_us_central1.firewall_tag
        placement_policy      = module.gcp_us_central1.placement_policy
        service_account_email = module.gcp_us_central1.service_account_email
        launch_labels         = module.gcp_us_central1.launch_labels
        public_ips            = module.gcp_us_central1.public_ips
      }
      (module.gcp_europe_west4.region) = {
        project               = module.gcp_europe_west4.project
        network               = module.gcp_europe_west4.network
        subnetwork            = module.gcp_europe_west4.subnetwork
        zones                 = module.gcp_europe_west4.zones
        firewall_tag          = module.gcp_europe_west4.firewall_tag
        placement_policy      = module.gcp_europe_west4.placement_policy
        service_account_email = module.gcp_europe_west4.service_account_email
        launch_labels         = module.gcp_europe_west4.launch_labels
        public_ips            = module.gcp_europe_west4.public_ips
      }
    }
  }
}

output "aws_iam_policy_arns" {
  description = "ARN of geosched's IAM policy per AWS region, to attach to the role or user geosched runs as."
  value = {
    (module.aws_us_east_1.region) = module.aws_us_east_1.iam_policy_arn
    (module.aws_us_west_2.region) = module.aws_us_west_2.iam_policy_arn
  }
}

output "gcp_geosched_role" {
  description = "Custom role holding the permissions geosched needs in the GCP project."
  value       = module.gcp_us_central1.geosched_role
}
