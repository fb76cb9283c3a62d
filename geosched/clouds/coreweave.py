"""CoreWeave: a Kubernetes-only GPU cloud (CoreWeave Kubernetes Service, CKS). geosched reads its nodes and
places on them; it launches nothing there (no provider in geosched.providers: CKS node pools are sized by the
user), so this spec and its data rows are all geosched knows of it.

- Regions and zones: regions are named like `US-EAST-04` or `RNO2`, availability zones by the region plus a
  letter (`US-EAST-01A`, `RNO2A`), and nodes carry them in `topology.kubernetes.io/region` and
  `topology.kubernetes.io/zone` (docs.coreweave.com/docs/platform/regions/general-access, "Region labels";
  docs.coreweave.com/docs/platform/topology: "in the US-EAST-05 Region, Availability Zone a is named
  US-EAST-05a"; docs.coreweave.com/platform/regions/all-availability-zones). Zone names are the same for every
  customer, so the zone label is the fleet's zone.
- Instance types: every node of a node pool carries its instance ID in `node.kubernetes.io/instance-type`, e.g.
  `gd-8xh100ib-i128` (8 H100 with InfiniBand, 128 vCPU)
  (docs.coreweave.com/docs/products/cks/concepts/workload-scheduling, "Node type selection labels"); the catalog
  (`coreweave_gpu_vms.csv`) says which GPU that is, so a node without GPU feature discovery is still recognised.
  CoreWeave's own labels (`node.coreweave.cloud/state`, `node.coreweave.cloud/reserved`, `ib.coreweave.cloud/*`,
  `backend.coreweave.cloud/*`) say where a node stands in CoreWeave's lifecycle and fabric, not where it is.
- providerID: `coreweave://<node name>`. CoreWeave's documentation does not state it; it is the shape CKS nodes
  are recorded with in marin-community/marin (lib/iris tests of its CoreWeave platform, a node labelled
  `gd-8xh100ib-i128` in `US-EAST-08A`). Its scheme is how the inventory tells a CoreWeave node from others.
- Network: the shipped network model has no CoreWeave measurement (links inside a region use the documented
  defaults; across regions nothing is assumed); no spot default; CPU power counted with the default coefficients.
"""

from __future__ import annotations

from geosched.clouds.spec import CloudSpec

NAME = "coreweave"


def provider_id(zone_label: str, name: str, project: str) -> str:
    return f"coreweave://{name}"


SPEC = CloudSpec(
    name=NAME,
    title="CoreWeave",
    provider_id_schemes=("coreweave",),
    provider_id=provider_id,
    kube_service="cks",
    catalog_file="coreweave_gpu_vms.csv",
    sources=(
        "https://docs.coreweave.com/docs/platform/regions/general-access",
        "https://docs.coreweave.com/docs/platform/topology",
        "https://docs.coreweave.com/docs/products/cks/concepts/workload-scheduling",
        "https://www.coreweave.com/pricing",
        "github.com/marin-community/marin (providerID coreweave://<node>)",
    ),
)
