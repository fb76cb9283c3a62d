"""ProvisionPlan, ProvisionResult and GangStatus: what `geosched provision` (its plan, `--dry-run`, and what it
launched) and `geosched status GANG` print: geosched.providers.cli builds them from the plan, the result and the
journal's records and prints what they dump; a key marked optional below is left out, not written as null."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from geosched.files.decl.base import Declared, OutputDocument, Time


def _optional(description: str) -> Any:
    return Field(default=None, description=description, exclude_if=lambda value: value is None)


class SpotRisk(Declared):
    source: str
    detail: str
    known: bool
    hazard_per_node_hour: float
    observed_at: Time | None
    age_s: float | None


class Offer(Declared):
    """A zone and instance type the plan ranks (`provision` tries them in this order)."""

    provider: str
    region: str
    zone: str
    instance_type: str
    gpu: str
    gpus_per_node: int
    pricing: str
    usd_per_hour: float
    gco2e_per_hour: float | None
    score: float
    adjusted_usd_per_hour: float | None = _optional(
        "spot only: the expected $ per useful hour the ranking charges (geosched/policies/README.md, Spot risk)")
    risk: SpotRisk | None = _optional("spot only: the interruption risk, its source and when it was observed")


class CoveredOffer(Offer):
    """An offer of a plan made with a Terraform network."""

    subnet: str | None = Field(description="the subnet the zone launches into (null: none covers it)")


class Skipped(Offer):
    reason: str


class OnDemandNetwork(Declared):
    """Without a Terraform network: what the first launch per cloud makes sure exists (created when missing)."""

    provider: str
    regions: list[str] | None = _optional("AWS: the regions given a security group")
    security_group: str | None = _optional("AWS: the security group's name")
    firewall_rules: list[str] | None = _optional("GCP: the firewall rules' names")
    network_tag: str | None = _optional("GCP: the network tag the rules apply to")
    admin_cidrs: list[str]


class ProvisionPlanDoc(OutputDocument):
    KIND: ClassVar[str] = "ProvisionPlan"
    DESCRIPTION: ClassVar[str] = "The ordered plan of `geosched provision --dry-run` (or when nothing fits)."

    plan: list[CoveredOffer | Offer]  # the first with a Terraform network
    skipped: list[Skipped]
    network: list[OnDemandNetwork] | None = _optional("without a Terraform network: what the launches make sure exists")


class Attempt(Declared):
    """One launch attempt: what was tried and why it failed (the columns of geosched.console.lists.ATTEMPTS)."""

    seq: int
    provider: str
    zone: str
    instance_type: str
    market: str
    outcome: str
    error: str | None
    code: str | None
    api_calls: int
    retries: int
    seconds: float
    why: str


class LaunchedNode(Declared):
    name: str
    zone: str
    provider_id: str
    addresses: list[str]


class ProvisionResultDoc(OutputDocument):
    KIND: ClassVar[str] = "ProvisionResult"
    DESCRIPTION: ClassVar[str] = "What `geosched provision` launched, and every attempt with why it failed."

    gang: str
    state: str
    message: str
    api_calls: int
    elapsed_s: float
    chosen: Offer | None
    nodes: list[LaunchedNode]
    attempts: list[Attempt]


class Instance(Declared):
    name: str
    provider: str
    zone: str
    provider_id: str | None
    state: str
    note: str | None


class NodeGroup(Declared):
    name: str
    cluster: str
    zone: str
    subnet: str
    instance_type: str
    capacity_type: str
    nodes: int
    state: str
    note: str | None


class CapacityBlock(Declared):
    reservation: str | None
    offering: str | None
    zone: str
    instance_type: str
    nodes: int
    state: str
    start: str | None
    end: str | None
    upfront_usd: float | None
    note: str


class GangStatusDoc(OutputDocument):
    KIND: ClassVar[str] = "GangStatus"
    DESCRIPTION: ClassVar[str] = "One gang in the store (`geosched status GANG`): its attempts and machines."

    gang: str
    state: str
    message: str | None
    attempts: list[Attempt]
    instances: list[Instance]
    nodegroups: list[NodeGroup] | None = _optional(
        "EKS managed node groups of a node group gang (provision --cluster), oldest first; absent for a machine gang")
    capacity_blocks: list[CapacityBlock] | None = _optional(
        "EC2 Capacity Blocks bought for the gang (state buying: the purchase's answer never came; bought), oldest "
        "first; EC2 cannot cancel one: it stays, paid, until its end; absent when none")
