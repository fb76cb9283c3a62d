"""`CloudSpec`: what one cloud offers, as data the pure core reads. How to launch there stays in
`geosched.providers` (the edge); a spec names no SDK and makes no call.

A spec answers what other modules used to answer with `if provider == "aws"` branches: how a node of the cloud
says where it is (its zone label, its providerID scheme), the labels its managed node groups put on a GPU node,
which shipped CSV prices its machine types, which of them ordinary accounts cannot launch, how the shipped network
model measured it, its documented spot-interruption default, the CPU power coefficients its energy is counted with,
and which Terraform module of geosched's builds its network.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal


# Defined here, at the bottom of the layers, because a cloud's node labels are made from it; the table of parts
# and the name resolver (geosched.core.gpus) build on it.
@dataclass(frozen=True, slots=True)
class GpuPart:
    """The label values of one catalog GPU model; None where no such label value exists."""

    product: str | None
    gke_accelerator: str | None


@dataclass(frozen=True, slots=True)
class NodeShape:
    """What a cloud's own node labels are made from (geosched.core.nodelabels adds the well-known ones)."""

    zone: str  # the fleet's zone (AWS: the zone ID)
    pool: str  # the node group / node pool
    instance_type: str
    gpu: GpuPart
    spot: bool = False


def no_labels(_: NodeShape) -> Mapping[str, str]:
    return {}


@dataclass(frozen=True, slots=True)
class CloudSetting:
    """One setting of a cloud, declared by its module: `<cloud>.<name>` in the config file, its environment variable,
    its help. geosched.settings.names lists it with the others, geosched.settings.model checks it
    (`check`: a non-empty text, comma-separated names, or yes/no) and docs/settings.md shows it."""

    name: str
    env: str
    help: str
    check: Literal["text", "names", "flag"] = "text"
    default: bool | None = None  # a flag's default; the others default to unset
    shown_default: str | None = None  # the default as the docs say it, when it depends on the account or machine


@dataclass(frozen=True, slots=True)
class CloudSpec:
    # The provider name fleets, catalogs, stores and `--provider` use.
    name: str
    # Shown to users ("AWS", "GCP").
    title: str
    # The scheme(s) of `spec.providerID` on its nodes (`aws:///...`, `gce://...`): how a node read from a
    # cluster is recognised as this cloud's.
    provider_id_schemes: tuple[str, ...]
    # The node label whose value is the fleet's zone, when it is not `topology.kubernetes.io/zone` (AWS: the
    # zone ID; zone names differ per account). None: the zone label is the zone.
    zone_id_label: str | None = None
    # Which nodes lack that label (said when a node names its zone without it): "EKS before 1.30".
    zone_id_label_since: str | None = None
    # With a zone-ID label: the pattern of the zone *names* users type (AWS: us-east-1a), whose group `region` is
    # the region (geosched.policies.places says which zone IDs such a name may be).
    zone_name_pattern: str | None = None
    # The cloud's own labels on a GPU node its managed node groups launch (beside the well-known ones).
    node_labels: Callable[[NodeShape], Mapping[str, str]] = no_labels
    # (label, value) pairs its managed Kubernetes service puts on a node bought on the spot market (read by
    # geosched.kube.nodeprice to price the node at the spot rate); empty when the cloud sells no spot nodes.
    spot_labels: tuple[tuple[str, str], ...] = ()
    # The label its managed node groups (node pools) put on every node with the group's name, None without such.
    pool_label: str | None = None
    # The providerID its node controller sets: (zone label, node name, project) -> providerID; None when geosched
    # does not describe such nodes itself.
    provider_id: Callable[[str, str, str], str] | None = None
    # The managed Kubernetes service's short name, which names the example clusters (`eks-us-east-1`).
    kube_service: str = "k8s"
    # The shipped CSV (geosched/data) of its GPU offerings, None when geosched ships no prices for it.
    catalog_file: str | None = None
    # Machine-type name prefixes ordinary accounts cannot launch although the price feed lists them.
    not_launchable: tuple[str, ...] = ()
    # How the shipped network model (Skyplane) measured it: one endpoint per region (`aws:<region>`), per zone
    # (`gcp:<zone>`), or not at all.
    network_endpoint: Literal["region", "zone"] | None = None
    # A documented share of spot VMs reclaimed per day, used when neither a placement score nor a price history
    # says more (GCP documents one; AWS gives scores instead).
    spot_daily_preemption: float | None = None
    # Cloud Carbon Footprint's watts per vCPU at 0% and 100% utilisation, None where CCF has none.
    ccf_cpu_watts: tuple[float, float] | None = None
    # geosched's Terraform module for its network (a path in the repository), None when there is none.
    terraform_module: str | None = None
    # The pip extra (pyproject.toml [project.optional-dependencies]) that brings its SDK, the top-level modules that
    # extra provides (a command that needs an absent one ends with one line naming the extra: geosched.core.extras)
    # and what the extra is for, as `geosched check` and the README say it. None/empty: geosched needs no SDK for it.
    extra: str | None = None
    sdk_modules: tuple[str, ...] = ()
    extra_purpose: str = ""
    # Its settings (`<name>.<setting>` in the config file; docs/settings.md), in the order the docs list them.
    settings: tuple[CloudSetting, ...] = ()
    # Sources of the shapes above, for the reader.
    sources: tuple[str, ...] = field(default=())
