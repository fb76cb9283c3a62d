output "region" {
  description = "AWS region the resources are in (var.region, confirmed against the provider)."
  value       = var.region
}

output "vpc_id" {
  description = "ID of the VPC (vpc-...)."
  value       = aws_vpc.this.id
}

output "subnet_ids" {
  description = "Subnet ID per availability-zone ID, e.g. { use1-az1 = \"subnet-...\" }: where geosched launches a node in that zone."
  value       = { for z, s in aws_subnet.this : z => s.id }
}

output "security_group_id" {
  description = "ID of the security group every geosched node must be in (sg-...): SSH from admins, all traffic between members."
  value       = aws_security_group.nodes.id
}

output "placement_group_names" {
  description = "Cluster placement group name per availability-zone ID; empty when create_placement_groups is false. A group cannot span zones, hence one per zone rather than one per region."
  value       = { for z, pg in aws_placement_group.cluster : z => pg.name }
}

output "key_name" {
  description = "Name of the EC2 key pair imported from var.public_key, to pass as KeyName at launch."
  value       = aws_key_pair.this.key_name
}

output "launch_tags" {
  description = "Tags geosched must put on the instances and volumes it launches (TagSpecifications): the IAM policy refuses launches without them and terminations of instances without them."
  value       = local.launch_tags
}

output "iam_policy_json" {
  description = "Least-privilege IAM policy (JSON) for geosched itself in this region: Describe calls, tagged RunInstances into this VPC only, tagging at launch, terminating owner-tagged instances, public AMI parameters."
  value       = data.aws_iam_policy_document.geosched.json
}

output "iam_policy_arn" {
  description = "ARN of the aws_iam_policy holding iam_policy_json, or null when create_iam_policy is false."
  value       = one(aws_iam_policy.geosched[*].arn)
}
