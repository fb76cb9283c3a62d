"""The provider contract: what every provider answers, the values it answers with, and the error taxonomy.

A provider (AWS, GCP, an SSH inventory) implements `Provider`. It maps its SDK's exceptions onto the
`ProviderError` classes below inside its own module; nothing outside a provider module ever sees an SDK
type, so failover (`failover.py`) decides on error classes alone.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Protocol, runtime_checkable

from geosched.core.errors import GeoschedError
from geosched.core.models import Offering, Pricing, Region
from geosched.files.inventory import Inventory
from geosched.providers.config import ADMIN_CIDRS_HOWTO

# Tags (AWS) / labels (GCP) / lease fields (SSH) that tie a machine to the store. Lower case with dashes so
# the same keys are valid GCP label keys.
GANG_TAG = "geosched-gang"
OWNER_TAG = "geosched-owner"
ATTEMPT_TAG = "geosched-attempt"
INDEX_TAG = "geosched-index"
NAME_TAG = "Name"

# Providers that lease machines an inventory declares: the inventory, not the provider, says where each one is.
INVENTORY_PROVIDERS = frozenset({"ssh"})


@runtime_checkable
class DeclaresInventory(Protocol):
    """A provider whose machines an inventory declares (where each is, its price, how to reach it): ssh."""

    def declared_inventory(self) -> Inventory | None:
        """The inventory in use, or None when none is configured."""
        ...


@runtime_checkable
class ReportsHostKeys(Protocol):
    """A cloud that reports a machine's SSH host keys out of band, over its authenticated API: EC2 in the console
    output cloud-init writes, Compute Engine as guest attributes. Keys so read may be pinned without trusting
    the network on first use."""

    def host_keys(self, instance: Instance, budget: Budget) -> tuple[str, ...]:
        """Public host key lines ("ssh-ed25519 AAAA..."); empty when the machine has not published them yet."""
        ...


def admin_sources(admin_cidrs: Sequence[str]) -> Sequence[str]:
    """The sources of the on-demand SSH rule, checked before any call: never none (a GCE rule without sources
    admits 0.0.0.0/0, and an AWS group would lose its SSH rule)."""
    if not admin_cidrs:
        raise UnsupportedError(f"no admin CIDR for the on-demand SSH rule: {ADMIN_CIDRS_HOWTO}", code="NoAdminCidr",
                               region_wide=True)
    return admin_cidrs


# Names end up in GCP instance names and label values: [a-z][-a-z0-9]*, at most 63 characters.
GANG_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


class InstanceState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    # Stopped but still there (GCE TERMINATED, EC2 stopped): it still holds disks and must be deleted.
    STOPPED = "stopped"
    # Gone or on its way out without further action from us (EC2 shutting-down/terminated, GCE deleted).
    GONE = "gone"

    @property
    def exists(self) -> bool:
        return self is not InstanceState.GONE


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """One launch attempt: `count` nodes of one instance type in one zone, all tagged with the same gang and
    attempt. `token` is the idempotency key (EC2 ClientToken, GCP label) and `names` the node names."""

    gang: str
    token: str
    owner: str
    region: str
    zone: str
    instance_type: str
    gpu: str
    gpus: int
    vcpus: float
    pricing: Pricing
    names: tuple[str, ...]
    ssh_public_key: str | None = None
    ssh_user: str = "geosched"

    @property
    def count(self) -> int:
        return len(self.names)


@dataclass(frozen=True, slots=True)
class Instance:
    """A machine as a provider reports it. `provider_id` is what the provider calls it (EC2 instance id, GCE
    numeric id, inventory node name); `name` is the node name geosched gave it."""

    provider: str
    provider_id: str
    name: str
    region: str
    zone: str
    instance_type: str
    state: InstanceState
    gang: str | None = None
    token: str | None = None
    owner: str | None = None
    index: int | None = None
    addresses: tuple[str, ...] = ()
    pricing: Pricing | None = None
    # When the provider says the machine started (Unix seconds): billing starts there, not when we looked.
    launched_at: float | None = None
    # When the provider says it stopped or was terminated (a spot reclaim, a person in the console): billing ends
    # there, not when a refresh noticed.
    ended_at: float | None = None


@dataclass(frozen=True, slots=True)
class PriceObservation:
    """One price seen at one time; reports price usage at the price of its time."""

    provider: str
    instance_type: str
    region: str
    zone: str
    pricing: Pricing
    usd_per_hour: float
    observed_at: float
    source: str


@dataclass(frozen=True, slots=True)
class SpotSignal:
    """One spot interruption signal seen at one time (geosched.policies.spotrisk turns it into a hazard):
    `signal` 'score' (a Spot placement score 1-10 for `target` instances) or 'volatility' (the coefficient of
    variation of the spot price over a window, with its number of `changes`)."""

    provider: str
    instance_type: str
    region: str
    zone: str
    signal: str
    value: float
    observed_at: float
    source: str
    target: int | None = None
    changes: int | None = None


@runtime_checkable
class ReportsSpotSignals(Protocol):
    """A provider with interruption signal APIs (AWS: GetSpotPlacementScores, DescribeSpotPriceHistory); each
    read on its own, so an account denied one keeps the other."""

    def placement_scores(self, region: str, instance_types: Sequence[str], budget: Budget) -> tuple[SpotSignal, ...]:
        ...

    def price_volatility(self, region: str, instance_types: Sequence[str], budget: Budget) -> tuple[SpotSignal, ...]:
        ...


@dataclass(frozen=True, slots=True)
class CheckItem:
    """One line of `geosched check`: what was looked at and what is missing. Never a secret."""

    provider: str
    item: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class QuotaCheck:
    """Outcome of a quota pre-check that did not fail: `known` is False when the quota could not be read."""

    known: bool
    detail: str


class Budget:
    """Time and call accounting for one unit of work (a zone attempt, a rollback, a reconcile).

    Every SDK call takes its timeout from here, so no single call outlives the zone's deadline, and counts
    itself, so the attempt log can say how many API calls a gang cost."""

    def __init__(self, seconds: float, call_timeout_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock  # injectable: tests run retries against a fake clock (tests/clock.py)
        self.started = clock()
        self.deadline = self.started + seconds
        self.call_timeout_s = call_timeout_s
        self._calls = 0
        self._lock = threading.Lock()

    def remaining(self) -> float:
        return self.deadline - self.clock()

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0

    def timeout(self) -> float:
        """Per-call timeout: the call timeout, cut to what is left of the budget (never below 50 ms, so an
        expiring budget still gets a clean timeout error instead of a zero-timeout oddity)."""
        return max(0.05, min(self.call_timeout_s, self.remaining()))

    def tick(self, calls: int = 1) -> None:
        with self._lock:
            self._calls += calls

    @property
    def calls(self) -> int:
        return self._calls


# --- error taxonomy ---------------------------------------------------------------------------------

_SECRET_PATTERNS = (
    (re.compile(r"(Encoded authorization failure message:)\s*\S+"), r"\1 [redacted]"),
    (re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{12,}\b"), "[access-key]"),
    (re.compile(r"\barn:aws:(iam|sts)::\d{12}:\S+"), "arn:aws:[redacted]"),
    (re.compile(r"\bya29\.[\w.-]+"), "[token]"),
    (re.compile(r"(?i)(signature|token|secret|password)=\S+"), r"\1=[redacted]"),
)
MAX_MESSAGE = 300


def redact(text: str, limit: int = MAX_MESSAGE) -> str:
    """Provider messages can carry identities and encoded policy details: keep the gist, drop those, and
    keep it to one bounded line (`limit` characters)."""
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ProviderError(GeoschedError):
    """A provider call failed. `kind` names the class for logs and the store; `code` is the provider's own
    error code (for people, never for decisions); `launched` lists instances that exist despite the failure
    (a partial gang), so the caller can roll them back."""

    kind: ClassVar[str] = "provider"

    def __init__(self, message: str, *, code: str | None = None, launched: Sequence[Instance] = ()) -> None:
        self.message = redact(message)
        self.code = code
        self.launched = tuple(launched)
        super().__init__(f"{code}: {self.message}" if code else self.message)

    def with_launched(self, launched: Sequence[Instance]) -> ProviderError:
        self.launched = tuple(launched)
        return self

    def with_context(self, context: str) -> ProviderError:
        """The same error (class, code, flags) with what was being done in front of its message."""
        self.message = redact(f"{context}: {self.message}")
        self.args = (f"{self.code}: {self.message}" if self.code else self.message,)
        return self


class CapacityError(ProviderError):
    """The zone has no capacity for this instance type now: block the zone (for a TTL) and move on."""

    kind = "capacity"


class QuotaError(ProviderError):
    """An account limit: block the region, or every region of the provider for a global limit."""

    kind = "quota"

    def __init__(self, message: str, *, code: str | None = None, launched: Sequence[Instance] = (),
                 all_regions: bool = False) -> None:
        super().__init__(message, code=code, launched=launched)
        self.all_regions = all_regions


class UnsupportedError(ProviderError):
    """The offering cannot be launched here (type not offered, region not enabled): block the zone, or the
    region when `region_wide`."""

    kind = "unsupported"

    def __init__(self, message: str, *, code: str | None = None, launched: Sequence[Instance] = (),
                 region_wide: bool = False) -> None:
        super().__init__(message, code=code, launched=launched)
        self.region_wide = region_wide


class RateError(ProviderError):
    """Throttled: retry in place with backoff."""

    kind = "rate"


class TransientError(ProviderError):
    """A 5xx or a dropped connection: retry in place with backoff."""

    kind = "transient"


class AuthError(ProviderError):
    """Credentials missing or refused: block the whole provider."""

    kind = "auth"


class StallError(ProviderError):
    """The zone ran out of time (a call hung, or an operation never finished): move on. The outcome of a
    mutating call that stalled is unknown, so reconciliation looks for what it may have created."""

    kind = "stall"


ERROR_KINDS: dict[str, type[ProviderError]] = {
    cls.kind: cls for cls in (CapacityError, QuotaError, UnsupportedError, RateError, TransientError, AuthError,
                              StallError)
}


# --- the protocol -----------------------------------------------------------------------------------

@runtime_checkable
class Provider(Protocol):
    """What a provider offers (regions, zones, offerings, quota) and how to launch there (launch, describe,
    terminate). Methods that talk to an API take a `Budget` and raise only `ProviderError` subclasses."""

    @property
    def name(self) -> str: ...

    def regions(self, budget: Budget) -> tuple[str, ...]:
        """Regions this account can use."""
        ...

    def zones(self, region: str, budget: Budget) -> tuple[str, ...]:
        """Zones of a region, named as the catalog names them (AWS zone IDs, GCP zone names)."""
        ...

    def region_info(self, region: str) -> Region | None:
        """Grid carbon and PUE of a region, if known (offline)."""
        ...

    def offerings(self, zone: str, budget: Budget) -> tuple[Offering, ...]:
        """GPU instance types offered in a zone, with prices where the provider knows them."""
        ...

    def prices(self, region: str, instance_types: Sequence[str], budget: Budget) -> tuple[PriceObservation, ...]:
        """Price observations for a region, each with the time it was valid from."""
        ...

    def check_quota(self, spec: LaunchSpec, budget: Budget) -> QuotaCheck:
        """Raise QuotaError if the launch certainly exceeds a limit; otherwise say what is known."""
        ...

    def launch(self, spec: LaunchSpec, budget: Budget) -> tuple[Instance, ...]:
        """Create the spec's nodes in its zone. Idempotent for the same `spec.token`. On failure, raise a
        ProviderError whose `launched` lists what exists anyway."""
        ...

    def describe(self, gang: str | None, regions: Iterable[str], budget: Budget) -> tuple[Instance, ...]:
        """Instances tagged with this gang (every geosched-tagged instance when `gang` is None) in `regions`
        (all known regions when empty), including ones already gone."""
        ...

    def terminate(self, instances: Sequence[Instance], budget: Budget) -> None:
        """Terminate these instances; ones already gone are not an error."""
        ...

    def check(self) -> tuple[CheckItem, ...]:
        """Are credentials and settings in place? Never returns secret values."""
        ...


def launch_names(gang: str, seq: int, count: int) -> tuple[str, ...]:
    """Node names of one attempt: unique per gang and attempt, valid GCE instance names."""
    return tuple(f"{gang}-{seq}-{i}" for i in range(count))


def attempt_token(gang: str, seq: int) -> str:
    return f"{gang}-{seq}"
