"""The ordered plan of zones to try for a gang. Pure: offerings and blocks in, ranked candidates out.

A candidate is one (provider, zone, instance type, pricing) that can hold every node of the gang. The gang
lands in one zone, so the network term of the placement score (`geosched.policies`) is the same for every
candidate (the same-zone link) and drops out of the ranking; what is left is the score's cost and carbon
terms, normalised exactly as there:

    cost   = gang $/h      / (GPUs x median $/GPU-h over the candidates)
    carbon = gang gCO2e/h  / (GPUs x median gCO2e/GPU-h over the candidates)
    score  = w_cost x cost + w_carbon x carbon

gCO2e/h = GPUs x (idle + utilisation x (max - idle)) W / 1000 x PUE x grid gCO2e/kWh, as in the policies.
A spot candidate's $/h is its expected cost per useful hour (`spotrisk.adjusted_usd_per_hour`: the price
weighed by its interruption risk and the rework an interruption costs, `request.weights.spot_risk` 0 turns it off),
the same function the placement cost term uses. Ties go to the cheaper candidate, then by provider and zone
name, so a plan is deterministic.

With a network `Coverage` (the Terraform output), a zone of a covered provider without a subnet there is no
candidate: it goes to `skipped`, saying so.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from geosched.core.models import GpuPower, Offering, Pricing, Region, Weights, region_key
from geosched.policies import spotrisk
from geosched.policies.spotrisk import Rework, SpotRisk

# The placement score's own cost and carbon weights (the same defaults as `place`); the network weight plays no
# part (see above). With the default carbon weight of 0 the ranking is by price.
DEFAULT_WEIGHTS = Weights(network=0.0, cost=Weights().cost, carbon=Weights().carbon)
UTILISATION = 0.9


class PricingMode(StrEnum):
    ON_DEMAND = "on-demand"
    SPOT = "spot"
    # Both markets compete in one ranking; spot usually wins on price and on-demand is the fallback.
    AUTO = "auto"

    def markets(self) -> tuple[Pricing, ...]:
        if self is PricingMode.AUTO:
            return (Pricing.SPOT, Pricing.ON_DEMAND)
        return (Pricing(self.value),)


@dataclass(frozen=True, slots=True)
class GangRequest:
    """`nodes` machines with `gpus_per_node` GPUs of model `gpu` each, all in one zone."""

    gpu: str
    gpus_per_node: int
    nodes: int
    pricing: PricingMode = PricingMode.ON_DEMAND
    providers: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()
    instance_types: tuple[str, ...] = ()
    weights: Weights = DEFAULT_WEIGHTS
    # What an interruption of a spot gang costs (how much it weighs: `weights.spot_risk`, 0 = price alone).
    rework: Rework = field(default_factory=Rework)


@dataclass(frozen=True, slots=True)
class Candidate:
    provider: str
    region: str
    zone: str
    instance_type: str
    gpu: str
    gpus: int
    vcpus: float
    pricing: Pricing
    node_usd_per_hour: float
    usd_per_hour: float
    gco2e_per_hour: float | None
    score: float = 0.0
    # Spot only: the interruption risk and the expected $ per useful hour it makes of `usd_per_hour`.
    risk: SpotRisk | None = None
    adjusted_usd_per_hour: float | None = None

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.zone}/{self.instance_type}/{self.pricing.value}"

    @property
    def cost_usd_per_hour(self) -> float:
        """What the ranking charges: the risk-adjusted $/h for spot, the price for on-demand."""
        return self.usd_per_hour if self.adjusted_usd_per_hour is None else self.adjusted_usd_per_hour


@dataclass(frozen=True, slots=True)
class Block:
    """What an error rules out: every field that is set must match, and the gang must have at least
    `min_nodes` nodes (a zone that refused 16 nodes may still hold 2). `ttl_s` None means for this run only;
    otherwise the block is remembered in the store until it expires."""

    provider: str
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    pricing: Pricing | None = None
    reason: str = ""
    kind: str = ""
    ttl_s: float | None = None
    until: float | None = None
    min_nodes: int = 1

    def covers(self, c: Candidate, nodes: int) -> bool:
        return (nodes >= self.min_nodes and self.provider == c.provider
                and (self.region is None or self.region == c.region)
                and (self.zone is None or self.zone == c.zone)
                and (self.instance_type is None or self.instance_type == c.instance_type)
                and (self.pricing is None or self.pricing == c.pricing))

    @property
    def scope(self) -> str:
        if self.zone is not None:
            return "zone"
        if self.region is not None:
            return "region"
        return "provider"


@dataclass(frozen=True, slots=True)
class Skipped:
    candidate: Candidate
    reason: str


@dataclass(frozen=True)
class Coverage:
    """The zones a network config built, with the subnet (AWS subnet id, GCP subnetwork) each launches into.
    Only `providers` are restricted: an inventory provider (ssh) has no Terraform network."""

    source: str
    subnets: Mapping[tuple[str, str], str]
    providers: frozenset[str]

    def subnet(self, provider: str, zone: str) -> str | None:
        return self.subnets.get((provider, zone))

    def excludes(self, c: Candidate) -> bool:
        return c.provider in self.providers and (c.provider, c.zone) not in self.subnets

    def reason(self) -> str:
        return f"no subnet in the Terraform output ({self.source})"


@dataclass(frozen=True)
class Plan:
    request: GangRequest
    candidates: tuple[Candidate, ...]
    skipped: tuple[Skipped, ...] = field(default=())
    coverage: Coverage | None = None


def gang_carbon(o: Offering, nodes: int, regions: Mapping[str, Region], power: Mapping[str, GpuPower],
                utilisation: float = UTILISATION) -> float | None:
    region = regions.get(region_key(o.provider, o.region))
    watts = power.get(o.gpu)
    if region is None or watts is None:
        return None
    per_gpu = watts.watts(utilisation) / 1000.0 * region.pue * region.grid_gco2e_per_kwh
    return nodes * o.gpus * per_gpu


def matches(request: GangRequest, o: Offering) -> bool:
    return (o.gpu.lower() == request.gpu.lower() and o.gpus == request.gpus_per_node
            and (not request.providers or o.provider in request.providers)
            and (not request.regions or o.region in request.regions)
            and (not request.zones or o.zone in request.zones)
            and (not request.instance_types or o.instance_type in request.instance_types))


def build_plan(request: GangRequest, offerings: Iterable[Offering], regions: Mapping[str, Region],
               power: Mapping[str, GpuPower], blocks: Sequence[Block] = (), coverage: Coverage | None = None,
               risks: Mapping[tuple[str, str, str], SpotRisk] | None = None) -> Plan:
    """Every offering that can hold the gang, best first; blocked ones and ones outside the network's
    coverage go to `skipped` with the reason. `risks`: (provider, instance type, zone) -> the spot offering's
    interruption risk; one not there is resolved by `spotrisk.resolve` (the provider's default, else unknown)."""
    risks = risks or {}
    raw: list[Candidate] = []
    too_small: list[Skipped] = []
    seen: set[tuple[str, str, str, Pricing]] = set()
    for o in offerings:
        if not matches(request, o):
            continue
        for pricing in request.pricing.markets():
            price = o.price(pricing)
            key = (o.provider, o.zone, o.instance_type, pricing)
            if price is None or key in seen:
                continue
            seen.add(key)
            # A finite pool is priced node by node (the gang takes its cheapest free nodes) and holds the gang
            # only with enough free nodes: no attempt is made where it cannot.
            pool = o.free_node_prices if pricing is Pricing.ON_DEMAND else None
            gang_usd = sum(pool[: request.nodes]) if pool is not None else price * request.nodes
            risk = adjusted = None
            if pricing is Pricing.SPOT:
                risk = risks.get((o.provider, o.instance_type, o.zone)) or spotrisk.resolve(o.provider)
                adjusted = spotrisk.adjusted_usd_per_hour(gang_usd, risk, request.nodes, request.rework,
                                                          request.weights.spot_risk)
            candidate = Candidate(
                provider=o.provider, region=o.region, zone=o.zone, instance_type=o.instance_type, gpu=o.gpu,
                gpus=o.gpus, vcpus=o.vcpus, pricing=pricing, node_usd_per_hour=gang_usd / request.nodes,
                usd_per_hour=gang_usd, gco2e_per_hour=gang_carbon(o, request.nodes, regions, power), risk=risk,
                adjusted_usd_per_hour=adjusted)
            if pool is not None and len(pool) < request.nodes:
                too_small.append(Skipped(candidate, f"{len(pool)} free nodes, the gang needs {request.nodes}"))
            else:
                raw.append(candidate)
    # Zones outside the network are not candidates at all: they take no part in the normalisation either.
    outside = [c for c in raw if coverage is not None and coverage.excludes(c)]
    excluded = set(outside)
    ranked = rank([c for c in raw if c not in excluded], request)
    keep: list[Candidate] = []
    skipped: list[Skipped] = []
    for c in ranked:
        block = next((b for b in blocks if b.covers(c, request.nodes)), None)
        if block is None:
            keep.append(c)
        else:
            skipped.append(Skipped(c, describe_block(block)))
    if coverage is not None:
        skipped.extend(Skipped(c, coverage.reason()) for c in rank(outside, request))
    skipped.extend(too_small)
    return Plan(request, tuple(keep), tuple(skipped), coverage)


def rank(candidates: Sequence[Candidate], request: GangRequest) -> list[Candidate]:
    if not candidates:
        return []
    gpus = request.nodes * request.gpus_per_node
    price_ref = _median([c.cost_usd_per_hour / gpus for c in candidates])
    carbons = [c.gco2e_per_hour for c in candidates if c.gco2e_per_hour is not None]
    carbon_ref = _median([x / gpus for x in carbons])
    # An unknown carbon figure counts as the worst known one: carbon is then overestimated, never hidden.
    worst_carbon = max(carbons) if carbons else 0.0
    w = request.weights
    scored = []
    for c in candidates:
        carbon = c.gco2e_per_hour if c.gco2e_per_hour is not None else worst_carbon
        score = w.cost * c.cost_usd_per_hour / (gpus * price_ref) + w.carbon * carbon / (gpus * carbon_ref)
        scored.append(replace(c, score=score))
    scored.sort(key=lambda c: (round(c.score, 12), c.cost_usd_per_hour, c.provider, c.zone, c.instance_type,
                               c.pricing.value))
    return scored


def describe_block(block: Block) -> str:
    where = {"zone": f"zone {block.zone}", "region": f"region {block.region}",
             "provider": f"provider {block.provider}"}[block.scope]
    size = f", gangs of {block.min_nodes}+ nodes" if block.min_nodes > 1 else ""
    head = f"{block.kind or 'blocked'} ({where}{size})"
    return f"{head}: {block.reason}" if block.reason else head


def _median(values: Sequence[float]) -> float:
    positive = [v for v in values if v > 0]
    return statistics.median(positive) if positive else 1.0
