"""What a node read from a cluster costs per hour: the one pricing resolver of live nodes (`submit`, `snapshot export
--from-clusters`, the in-cluster scheduler, the MultiKueue dispatcher). Pure but for the shipped catalog it reads.

The list price, the first of these that exists:

1. the catalog's offering of (provider, instance type, zone) whose GPU is the node's own;
2. the same instance type in the node's region: both clouds publish on-demand prices per region, the same in every
   zone of it (aws.amazon.com/ec2/pricing/on-demand, cloud.google.com/compute/vm-instance-pricing; geosched's own
   AWS provider records one price per region). Taken when the zone is not one the catalog keys: an EKS node before
   1.30 has no `topology.k8s.aws/zone-id`, so its zone is a per-account name (`eu-west-1b`), or a GKE zone the
   catalog does not list. Spot prices differ per zone: the median of the region's zones, still the same type's
   market, where the fallback below would mix every machine size;
3. the catalog's median $/GPU-hour of the node's GPU model (`cluster_inventory.median_gpu_prices`), said in the
   fleet's assumptions.

The market: a node its platform labels spot (each cloud's `CloudSpec.spot_labels`: GKE Spot and preemptible, EKS
managed node groups; and Karpenter's, which is no cloud's) is billed at the spot rate whatever a job placed on it
asked for, so its on-demand price is its spot price: an on-demand job placed there is charged what the node costs
(its interruption risk is not priced: the job did not ask for spot).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from statistics import median

from geosched import clouds
from geosched.core import catalog
from geosched.core.models import Node, Offering, Pricing

# The (label, value) pair Karpenter puts on a node it bought on the spot market
# (karpenter.sh/docs/reference/instance-types). Karpenter runs on more than one cloud, so its label is read here;
# a cloud's own spot labels are its spec's (geosched.clouds), so a new cloud adds them there, not here.
KARPENTER_SPOT_LABEL = ("karpenter.sh/capacity-type", "spot")


def spot_labels() -> tuple[tuple[str, str], ...]:
    """Every (label, value) pair that marks a node bought on the spot market: each known cloud's, and Karpenter's."""
    return (*(pair for spec in clouds.all_specs() for pair in spec.spot_labels), KARPENTER_SPOT_LABEL)


@dataclass(frozen=True, slots=True)
class ListPrice:
    ondemand: float | None
    spot: float | None
    basis: str  # "zone" | "region"


def market(labels: Mapping[str, str]) -> Pricing:
    """The market a node was bought on, from its platform's labels."""
    return Pricing.SPOT if any(labels.get(k) == v for k, v in spot_labels()) else Pricing.ON_DEMAND


def list_price(provider: str, instance_type: str, region: str, zone: str, gpu: str,
               offers: Mapping[tuple[str, str, str], Offering] | None = None) -> ListPrice | None:
    """Steps 1 and 2 of the module's rules; None when neither prices the node."""
    offer = (offers if offers is not None else catalog.offering_index()).get((provider, instance_type, zone))
    if offer is not None and offer.gpu == gpu:  # another GPU than the catalog's machine type: not its price
        return ListPrice(offer.price_ondemand, offer.price_spot, "zone")
    found = _regional().get((provider, instance_type, region))
    if found is None or found[0] != gpu:
        return None
    return ListPrice(found[1], found[2], "region")


def on_market(node: Node) -> Node:
    """The node as it is billed: a spot node's on-demand price is its spot price (the module's last rule)."""
    if market(node.labels) is Pricing.SPOT and node.price_spot is not None:
        return replace(node, price_ondemand=node.price_spot)
    return node


@cache
def _regional() -> dict[tuple[str, str, str], tuple[str, float | None, float | None]]:
    """(provider, instance type, region) -> (GPU, median on-demand, median spot) over the region's zones."""
    groups: dict[tuple[str, str, str], list[Offering]] = {}
    for o in catalog.offerings():
        groups.setdefault((o.provider, o.instance_type, o.region), []).append(o)
    out: dict[tuple[str, str, str], tuple[str, float | None, float | None]] = {}
    for key, offers in groups.items():
        ondemand = [o.price_ondemand for o in offers if o.price_ondemand is not None]
        spot = [o.price_spot for o in offers if o.price_spot is not None]
        out[key] = (offers[0].gpu, median(ondemand) if ondemand else None, median(spot) if spot else None)
    return out
