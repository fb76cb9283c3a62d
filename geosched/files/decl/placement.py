"""Placement and NoFit: the decision `geosched place -o json|yaml` prints, the store records and the GitOps tree and
the rendered manifests carry. Written by geosched through these models, never read from a user."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field

from geosched.core.models import NoFit, Placement, Score
from geosched.files.decl.base import Declared, OutputDocument


class Hop(Declared):
    """The ring hop (node a -> node b) that bounds the step, and its link."""

    from_: str = Field(alias="from")
    to: str
    rtt_ms: float
    loss: float
    throughput_gbps: float | None


class ScoreDecl(Declared):
    """Every term of a candidate, normalised and raw (geosched.core.models.Score says what each is)."""

    WRITE_NULLS: ClassVar[bool] = True  # written alone too (`--explain`'s rows, the GitOps index, provenance)

    total: float
    network: float
    cost: float
    carbon: float
    step_ms: float
    comm_ms: float
    usd_per_hour: float
    gco2e_per_hour: float
    worst_rtt_ms: float
    worst_loss: float
    min_throughput_gbps: float | None
    bounding_hop: Hop | None

    @classmethod
    def of(cls, score: Score) -> ScoreDecl:
        tput = score.min_throughput_gbps if score.min_throughput_gbps != float("inf") else None
        hop = None
        if score.hop is not None:
            hop = Hop.build(
                from_=score.hop[0], to=score.hop[1], rtt_ms=score.worst_rtt_ms, loss=score.worst_loss,
                throughput_gbps=tput,
            )  # fmt: skip
        return cls.build(
            total=round(score.total, 6),
            network=round(score.network, 6),
            cost=round(score.cost, 6),
            carbon=round(score.carbon, 6),
            step_ms=round(score.step_ms, 3),
            comm_ms=round(score.comm_ms, 3),
            usd_per_hour=round(score.usd_per_hour, 4),
            gco2e_per_hour=round(score.gco2e_per_hour, 2),
            worst_rtt_ms=round(score.worst_rtt_ms, 3),
            worst_loss=score.worst_loss,
            min_throughput_gbps=tput,
            bounding_hop=hop,
        )


class Assigned(Declared):
    node: str
    zone: str
    workers: int


class TermWeights(Declared):
    network: float
    cost: float
    carbon: float


class Rejected(Declared):
    """A candidate (a zone, a node, a cluster) left out, and why."""

    subject: str
    reason: str


class Alternative(Declared):
    zones: list[str]
    cluster: str | None
    score: ScoreDecl


class StartNow(Declared):
    zones: list[str]
    cluster: str | None
    kgco2e: float | None


class RegionStart(Declared):
    region: str
    now_gco2e_per_kwh: float
    best_start: str
    best_gco2e_per_kwh: float
    saving: float
    source: str


class Start(Declared):
    """A flexible job's start (`schedule:` in the job file; policies/README.md, Time shifting): when it starts, its
    window, the predicted kgCO2e of its run as chosen and when starting now, and each region's predicted grid over
    the run (written by geosched.policies.timeshift.shift_doc)."""

    at: str
    decided_at: str
    latest: str
    deferred_s: float
    runtime_s: float
    kgco2e: float | None
    start_now: StartNow | None
    saving_kgco2e: float | None
    forecast: Literal["forecast", "oracle"]
    regions: list[RegionStart]


    @classmethod
    def of(cls, start: Mapping[str, Any]) -> Start:
        """The block geosched.policies.timeshift.shift_doc writes (plain data: the core imports no pydantic)."""
        now = start["start_now"]
        return cls.build(**{**start, "start_now": None if now is None else StartNow.build(**now),
                            "regions": [RegionStart.build(**r) for r in start["regions"]]})


class PlacementDoc(OutputDocument):
    KIND: ClassVar[str] = "Placement"
    DESCRIPTION: ClassVar[str] = (
        "One placement decision (`geosched place -o json|yaml`); the same shape the store records."
    )

    job: str
    policy: str
    cluster: str | None
    zones: list[str]
    regions: list[str]
    gpus: int
    nodes: list[Assigned]
    score: ScoreDecl
    weights: TermWeights
    rejected: list[Rejected]
    alternatives: list[Alternative]
    # Only a flexible job's placement has one (the CLI adds it: the store records it beside the placement).
    start: Start | None = Field(default=None, exclude_if=lambda start: start is None)

    @classmethod
    def of(cls, p: Placement, start: Mapping[str, Any] | None = None) -> PlacementDoc:
        """The placement; `start`: a flexible job's (geosched.policies.timeshift.shift_doc)."""
        more = {} if start is None else {"start": Start.of(start)}
        return cls.build(
            job=p.job.name,
            policy=p.policy,
            cluster=p.cluster,
            zones=list(p.zones),
            regions=list(p.regions),
            gpus=p.job.gpus,
            nodes=[Assigned.build(node=a.node, zone=a.zone, workers=a.workers) for a in p.assignments],
            score=ScoreDecl.of(p.score),
            weights=TermWeights.build(network=p.weights.network, cost=p.weights.cost, carbon=p.weights.carbon),
            rejected=[Rejected.build(subject=r.subject, reason=r.reason) for r in p.rejected],
            alternatives=[
                Alternative.build(zones=list(c.zones), cluster=c.cluster, score=ScoreDecl.of(c.score))
                for c in p.alternatives
            ],
            **more,  # last: `build` keeps the order given when every field is
        )


class NoFitDoc(OutputDocument):
    KIND: ClassVar[str] = "NoFit"
    DESCRIPTION: ClassVar[str] = "Why a job fits nowhere (`geosched place`, exit 3)."

    job: str
    policy: str
    error: Literal["NoFit"]
    rejected: list[Rejected]
    # Only a gang waiting for a healthy ring (policies/patience.py): not "no fit" but "not yet", to be decided
    # again within `retry_after_s` at the latest.
    waiting: Literal[True] | None = Field(default=None, exclude_if=lambda waiting: waiting is None)
    retry_after_s: float | None = Field(default=None, exclude_if=lambda after: after is None)

    @classmethod
    def of(cls, n: NoFit) -> NoFitDoc:
        rejected = [Rejected.build(subject=r.subject, reason=r.reason) for r in n.reasons]
        if n.retry_after_s is None:
            return cls.build(job=n.job.name, policy=n.policy, error="NoFit", rejected=rejected)
        return cls.build(job=n.job.name, policy=n.policy, error="NoFit", rejected=rejected, waiting=True,
                         retry_after_s=round(n.retry_after_s, 3))
