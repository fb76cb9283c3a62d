terraform {
  # Cross-variable checks use lifecycle preconditions rather than 1.9's cross-variable validation,
  # so the module keeps working on 1.5.
  required_version = ">= 1.5"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 5.0"
    }
  }
}
