"""The cloud under a node-group gang, as `launch.py` sees it: one small interface, one module per cloud.

`launch.py` journals, creates, waits, fails over, rolls back and tears down without knowing which cloud it talks
to; a backend answers in these terms:

- `Pool`: a node group (EKS) or node pool (GKE) as the cloud describes it, its status mapped onto five neutral
  states, the ownership tags geosched wrote (`GANG_TAG`, `OWNER_TAG`, `ATTEMPT_TAG`), and for a failed one what
  the failure means in the provider error taxonomy (`base.ProviderError` classes, which failover reads);
- `Target`: one zone of the plan the cluster can hold, and where in the cluster the pool goes (`where`: the EKS
  subnet, or the GKE cluster's location, which addresses the pool in every later call);
- `Backend`: read the cluster, choose its targets, create / describe / delete / list pools, and release what a
  create made beside its pool once the pool is gone. Errors leave as
  `ProviderError`; `InUse` and `RefusedRequest` say what launch treats specially.

Backends: `eks.Eks` (boto3, EKS managed node groups) and `gke.Gke` (google-cloud-container, GKE node pools).
`launch.open_backend` imports the one a provider names (there, not here: the backends import this module), so
nothing here loads a cloud SDK.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from geosched.core.models import Pricing
from geosched.providers.base import ATTEMPT_TAG, GANG_TAG, OWNER_TAG, Budget, CapacityError, ProviderError, redact
from geosched.providers.plan import Candidate, Plan, Skipped

# The neutral states of a pool (each backend maps its cloud's own onto these).
CREATING = "CREATING"
ACTIVE = "ACTIVE"
FAILED = "FAILED"  # the create failed: `Pool.failure` says why
DELETING = "DELETING"
DELETE_FAILED = "DELETE_FAILED"
OTHER = "OTHER"  # updating, degraded, reconciling: not a create in progress, not a failure either


@dataclass(frozen=True, slots=True)
class Pool:
    name: str
    status: str
    tags: Mapping[str, str] = field(default_factory=dict)
    ident: str | None = None  # the node group ARN, the node pool's selfLink
    where: str = ""
    capacity_type: str = ""
    nodes: int = 0
    failure: ProviderError | None = None  # for FAILED and DELETE_FAILED
    note: str | None = None  # what the create made beside the pool that the journal should say (a Capacity Block)
    # A pool made at 0 nodes because its reservation starts later (an EC2 Capacity Block): when its nodes may come
    # up and when the reservation ends (epoch seconds); `Backend.schedule` sets the scaling once it is ACTIVE.
    starts_at: float | None = None
    ends_at: float | None = None
    # The machine type its nodes run (EKS instanceTypes[0], GKE config.machineType; "" when the cloud names none, as
    # for an EKS group on a Capacity Block): what `sweep` releases its parts by when no journal row says it.
    instance_type: str = ""


@dataclass(frozen=True, slots=True)
class Block:
    """A reservation bought for a pool (an EC2 Capacity Block): what the journal records before the purchase
    (`reservation` None: the offering about to be bought) and after its answer. Times are epoch seconds."""

    zone: str
    instance_type: str
    nodes: int
    offering: str | None
    reservation: str | None
    start_at: float | None
    end_at: float | None
    upfront_usd: float | None


# The journal's hook a backend calls before a purchase and after its answer (`Backend.create`'s `record`).
RecordBlock = Callable[[Block], None]


class Target(Protocol):
    @property
    def candidate(self) -> Candidate: ...

    @property
    def cluster(self) -> str: ...

    @property
    def where(self) -> str: ...

    @property
    def zone_name(self) -> str: ...

    @property
    def capacity_type(self) -> str: ...


class Backend(Protocol):
    provider: str  # the catalog's provider name: aws, gcp
    cloud: str  # EKS, GKE: for messages
    kind: str  # "node group", "node pool": for messages
    scope: str  # what `region` is: "region" (EKS), "location" (GKE: a region or a zone)
    region: str

    def cluster(self, name: str, budget: Budget) -> Any | None:
        """The cluster as this backend's `targets` needs it, or None when there is no such cluster."""

    def unusable(self, cluster: Any) -> str | None:
        """Why a cluster that exists cannot take a pool (no subnet, not running), or None."""

    def targets(self, plan: Plan, cluster: Any) -> tuple[Sequence[Target], tuple[Skipped, ...]]:
        """The plan's candidates the cluster can hold, in plan order, and the others with the reason."""

    def size_problem(self, nodes: int) -> str | None:
        """Why a gang of `nodes` cannot be one pool, or None."""

    def create(self, target: Target, *, gang: str, seq: int, owner: str, token: str, nodes: int,
               budget: Budget, record: RecordBlock | None = None) -> Pool:
        """Ask for the pool; `InUse` when one of its name exists, `RefusedRequest` when the request itself is
        refused (every zone would refuse it). Anything bought for it that outlives it (a Capacity Block) is told
        to `record` before the purchase and after its answer."""

    def schedule(self, made: Pool, *, cluster: str, owner: str, nodes: int, budget: Budget) -> str:
        """Pool `made` (ACTIVE at 0 nodes, `made.starts_at` set) grows to `nodes` at its reservation's start and
        goes back to 0 before its end; the line the journal keeps. Only a backend whose `create` sets `starts_at`
        is asked."""

    def describe(self, cluster: str, where: str, name: str, budget: Budget) -> Pool | None:
        """The pool, or None once the cloud no longer knows it."""

    def delete(self, cluster: str, where: str, name: str, budget: Budget) -> bool:
        """Ask for the pool's deletion; False when it was already gone."""

    def names(self, cluster: str, where: str, budget: Budget) -> list[str]:
        """The names of the cluster's pools (every pool, geosched's or not)."""

    def release(self, name: str, *, owner: str, instance_type: str, nodes: int, budget: Budget,
                capacity_type: str = "") -> list[str]:
        """Once pool `name` is gone (or was never made): delete what its create made beside it (EKS: the
        cluster placement group and launch template of `spec.parts`), each only if it exists; what was deleted,
        for messages. A cloud that makes nothing beside its pools (GKE) returns []."""


def pool_name(gang: str, seq: int) -> str:
    """One name per attempt, known before the create call: a crash between journal and answer still leaves the
    name `down` looks for. Gang names are lowercase letters, digits and '-' (lifecycle.check_gang_name), which
    both EKS (1-63 of letters, digits, '-', '_') and GKE (RFC 1035 label, 1-40 here) accept."""
    return f"{gang}-{seq}"


def ownership(gang: str, owner: str, token: str) -> dict[str, str]:
    """The tags (EKS) or resource labels (GKE) a pool carries so that `ours` and `down` can tell it from anyone
    else's. Gang names, owner ids and tokens are lowercase letters, digits and '-', which both clouds accept."""
    return {GANG_TAG: gang, OWNER_TAG: owner, ATTEMPT_TAG: token}


def capacity_type(pricing: Pricing) -> str:
    """`Target.capacity_type`: EKS's capacityType values, which GKE pools report too (`Pool.capacity_type`)."""
    return "SPOT" if pricing is Pricing.SPOT else "ON_DEMAND"


T = TypeVar("T")


def split(plan: Plan, provider: str, cluster: str, region: str,
          fit: Callable[[Candidate], T | str]) -> tuple[tuple[T, ...], tuple[Skipped, ...]]:
    """The plan's candidates a cluster can hold, in plan order, and the others with the reason: another provider
    or region (a pool lives in its cluster's region), or what `fit` says of the zone (a str); else `fit`'s target."""
    keep: list[T] = []
    skipped: list[Skipped] = []
    for c in plan.candidates:
        fitted = (f"not in cluster {cluster}'s region ({provider}/{region})"
                  if c.provider != provider or c.region != region else fit(c))
        if isinstance(fitted, str):
            skipped.append(Skipped(c, fitted))
        else:
            keep.append(fitted)
    return tuple(keep), tuple(skipped)


def ours(tags: Mapping[str, str] | None, owner: str, gang: str | None = None) -> bool:
    """A pool geosched made for this store (and gang): only those are ever deleted."""
    t = tags or {}
    return t.get(OWNER_TAG) == owner and (gang is None or t.get(GANG_TAG) == gang)


class RefusedRequest(ProviderError):
    """The cloud refused the request itself (a role it cannot use, a field it rejects): every zone would refuse
    it alike, and it says nothing about a zone's capacity, so nothing is remembered and the run stops."""

    kind = "request"


class NotJoined(CapacityError):
    """The cloud called the group ACTIVE but its nodes were not all Ready in the cluster by the join deadline
    (`geosched up`): capacity accepted and never delivered, or machines whose bootstrap failed. Failed over as a
    capacity refusal of the zone (the next zone, the offering remembered for the capacity TTL), as the machine
    path treats a node that dies during boot; the message is the join's one line naming what did not come up,
    the code `NodesNotReady`."""

    # The join's line names up to 3 nodes and 3 causes (kube/nodejoin.py NAMED), each a kubelet message: longer
    # than a cloud's error, and cut only past this.
    LIMIT = 1000

    def __init__(self, message: str) -> None:
        super().__init__(message, code="NodesNotReady")
        self.message = redact(message, self.LIMIT)
        self.args = (f"{self.code}: {self.message}",)


class InUse(ProviderError):
    """Create: a pool of that name exists already (a retried create, or someone else's). `planned` is what this
    create knew of the pool beyond the cloud's description (its note, and for a pool on a reservation the
    reservation's start and end): a create retried after the cloud accepted the first try adopts the pool, which
    needs what the create would have returned (`launch._create`)."""

    kind = "unsupported"

    def __init__(self, message: str, *, code: str | None = None, planned: Pool | None = None) -> None:
        super().__init__(message, code=code)
        self.planned = planned
