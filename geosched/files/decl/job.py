"""Job: geosched's compact job file (a gang: workers x GPUs, limits, pricing, how it talks, when it may run), and
the `weights` block of the config files that rank placements."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BeforeValidator,
    PlainSerializer,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from geosched.core import catalog, gpus
from geosched.core.errors import InputError
from geosched.core.models import CommProfile, Job, Pricing, Schedule, Weights
from geosched.files.decl import pods
from geosched.files.decl.base import Declared, Document, Refused, Strings, Text, integer, number, one_of
from geosched.files.fields import DNS1123_LABEL_RULE, describe, is_dns1123_label, parse_time

# --- durations and times ------------------------------------------------------------------------------

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_DURATION_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MAX_DURATION_S = 366 * 86400.0


def _seconds(raw: Any) -> float:
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        if isinstance(raw, int) and abs(raw) > 10**300:  # float() of it overflows
            raise Refused("must be more than 0 and at most 366 days, got a larger number")
        seconds = float(raw)
    elif isinstance(raw, str) and (m := _DURATION_RE.match(raw)):
        seconds = float(m.group(1)) * _DURATION_UNIT_S[m.group(2)]
    else:
        raise Refused(f"expected a duration such as 90m, 6h or 2d (or seconds), got {describe(raw)}")
    if not 0 < seconds <= MAX_DURATION_S:
        raise Refused(f"must be more than 0 and at most 366 days, got {seconds:g} s")
    return seconds


def duration_text(seconds: float) -> str | float:
    """`6h` for 21600 s: the largest unit that divides it; seconds as a number when none does."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return seconds


Duration = Annotated[
    float,
    BeforeValidator(_seconds),
    PlainSerializer(duration_text),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_DURATION_S},
                {"type": "string", "pattern": _DURATION_RE.pattern},
            ],
            "description": "seconds, or a number with s, m, h or d (at most 366 days)",
        }
    ),
]


def _instant(raw: Any) -> datetime:
    try:
        return parse_time(raw, "", "")
    except InputError as exc:
        raise Refused(exc.reason) from None


Instant = Annotated[
    datetime,
    BeforeValidator(_instant),
    PlainSerializer(lambda t: t.isoformat().replace("+00:00", "Z")),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
"""An ISO 8601 instant with its offset, kept in UTC."""


# --- the job -------------------------------------------------------------------------------------------

_DEFAULT = CommProfile()


class Profile(Declared):
    """How the job talks (ring all-reduce of message_mb per step after compute_ms) and what an interruption costs."""

    message_mb: float = number(0.0, default=_DEFAULT.message_mb)
    compute_ms: float = number(0.0, exclusive_minimum=True, default=_DEFAULT.compute_ms)
    utilisation: float = number(0.0, 1.0, default=_DEFAULT.utilisation)
    latency_sensitive: bool | None = None
    checkpoint_minutes: float | None = number(0.0, default=None)
    restart_minutes: float | None = number(0.0, default=None)

    def profile(self) -> CommProfile:
        return CommProfile(
            message_mb=self.message_mb,
            compute_ms=self.compute_ms,
            utilisation=self.utilisation,
            latency_sensitive=bool(self.latency_sensitive),
            checkpoint_minutes=_DEFAULT.checkpoint_minutes
            if self.checkpoint_minutes is None
            else self.checkpoint_minutes,
            restart_minutes=_DEFAULT.restart_minutes if self.restart_minutes is None else self.restart_minutes,
        )

    @classmethod
    def of(cls, p: CommProfile) -> Profile:
        # Only what is set beyond the three always written: existing documents keep their digest.
        return cls.build(
            message_mb=p.message_mb,
            compute_ms=p.compute_ms,
            utilisation=p.utilisation,
            latency_sensitive=True if p.latency_sensitive else None,
            checkpoint_minutes=None if p.checkpoint_minutes == _DEFAULT.checkpoint_minutes else p.checkpoint_minutes,
            restart_minutes=None if p.restart_minutes == _DEFAULT.restart_minutes else p.restart_minutes,
        )


class ScheduleDecl(Declared):
    """`{runtime: 6h, start_within: 24h}` or `{runtime: 6h, deadline: 2025-03-02T18:00:00Z}` (both may be given: the
    earlier latest start binds). `runtime` is the predicted run, over which carbon is counted."""

    MISSING: ClassVar[dict[str, str]] = {"runtime": "is required (the predicted run time, e.g. 6h)"}

    runtime: Duration
    start_within: Duration | None = None
    deadline: Instant | None = None

    def schedule(self) -> Schedule:
        return Schedule(
            runtime_s=self.runtime,
            start_within_s=self.start_within,
            deadline=None if self.deadline is None else self.deadline.timestamp(),
        )

    @classmethod
    def of(cls, s: Schedule) -> ScheduleDecl:
        deadline = None if s.deadline is None else datetime.fromtimestamp(s.deadline, UTC)
        return cls.build(runtime=s.runtime_s, start_within=s.start_within_s, deadline=deadline)


PricingName = Literal["on-demand", "spot"]


class JobDoc(Document):
    KIND: ClassVar[str] = "Job"
    DESCRIPTION: ClassVar[str] = (
        "A gang to place (`geosched place`, `submit`, `gitops render`): workers x gpus_per_worker, all or nothing. "
        "The Kubernetes-only `pods` and `tolerations` are read by geosched.kube.jobinput."
    )

    name: Text
    namespace: Text = "default"
    workers: int = integer(1)
    gpus_per_worker: int = integer(1)
    image: Text | None = None
    gpu: Text | None = None  # a catalog model, or its GFD or GKE name (resolved to the catalog's)
    max_zones: int | None = integer(1, default=None)
    max_regions: int | None = integer(1, default=None)
    providers: Strings | None = None
    regions: Strings | None = None
    zones: Strings | None = None
    clusters: Strings | None = None
    pricing: Annotated[PricingName, one_of(PricingName)] = "on-demand"
    profile: Profile | None = None
    schedule: ScheduleDecl | None = None

    @field_validator("name", "namespace")
    @classmethod
    def _rfc1123(cls, name: str) -> str:
        # Job names become Kubernetes object names, and the namespace a directory of a GitOps tree: both are
        # checked as the API server (and `gitops render`) checks them, here where every command reads a job.
        if not is_dns1123_label(name):
            raise Refused(DNS1123_LABEL_RULE)
        return name

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, gpu: str | None, info: ValidationInfo) -> str | None:
        known = (info.context or {}).get("gpu_models")
        try:
            return None if gpu is None else gpus.resolve(gpu, known if known is not None else catalog.gpu_models())
        except gpus.GpuNameError as exc:
            raise Refused(str(exc)) from None

    def job(self) -> Job:
        return Job(
            name=self.name,
            namespace=self.namespace,
            image=self.image,
            workers=self.workers,
            gpus_per_worker=self.gpus_per_worker,
            gpu=self.gpu,
            max_zones=self.max_zones,
            max_regions=self.max_regions,
            providers=tuple(self.providers or ()),
            regions=tuple(self.regions or ()),
            zones=tuple(self.zones or ()),
            clusters=tuple(self.clusters or ()),
            pricing=Pricing(self.pricing),
            profile=self.profile.profile() if self.profile is not None else CommProfile(),
            schedule=self.schedule.schedule() if self.schedule is not None else None,
        )

    @classmethod
    def of(cls, job: Job) -> JobDoc:
        """The document of a job, built without validation: its values are written as they are."""
        return cls.build(
            name=job.name,
            namespace=job.namespace,
            workers=job.workers,
            gpus_per_worker=job.gpus_per_worker,
            image=job.image or None,
            gpu=job.gpu or None,
            max_zones=job.max_zones or None,
            max_regions=job.max_regions or None,
            providers=list(job.providers) or None,
            regions=list(job.regions) or None,
            zones=list(job.zones) or None,
            clusters=list(job.clusters) or None,
            pricing=job.pricing.value,
            profile=Profile.of(job.profile),
            schedule=None if job.schedule is None else ScheduleDecl.of(job.schedule),
        )

    @classmethod
    def extra_schema(cls) -> dict[str, Any]:
        return {
            "pods": pods.schema("pod options (geosched.kube.podoptions)"),
            "tolerations": {
                "type": "array",
                "description": "taints the job's pods tolerate (geosched.kube.tolerations)",
            },
        }


# --- what ranks placements: the weights -----------------------------------------------------------------
# (a settings file's `policy:`, the other half, is geosched.policies.declared.PolicyName: the registry is above.)

_WEIGHTS = Weights()


class WeightsDecl(Declared):
    """The `weights` block of a config file (GitOps, scheduler, dispatcher): each term's weight, the zone tolerance
    (a fraction of the best total: 2 would mean "within 200%", issue 23) and the weight of a spot job's
    interruption risk."""

    network: float = number(0.0, default=_WEIGHTS.network)
    cost: float = number(0.0, default=_WEIGHTS.cost)
    carbon: float = number(0.0, default=_WEIGHTS.carbon)
    zone_tolerance: float = number(0.0, 1.0, default=_WEIGHTS.zone_tolerance)
    spot_risk: float = number(0.0, default=_WEIGHTS.spot_risk)

    @model_validator(mode="after")
    def _something_to_rank_by(self) -> Self:
        if self.network == 0 and self.cost == 0 and self.carbon == 0:
            raise Refused(
                "network, cost and carbon are all 0: every candidate would score 0; give at least one a weight > 0"
            )
        return self

    def weights(self) -> Weights:
        return Weights(
            network=self.network,
            cost=self.cost,
            carbon=self.carbon,
            zone_tolerance=self.zone_tolerance,
            spot_risk=self.spot_risk,
        )
