"""In-memory HTTP double of the Compute Engine v1 REST API.

Written from the public REST reference so that the unmodified
``google-cloud-compute`` client (REST transport) can talk to it. Only the
slice geosched needs is here: instances, zone operations, firewalls, global
operations, zones, regions, machine types and accelerator types, plus runtime
fault injection.

Usage::

    with GceDouble() as gce:
        client = compute_v1.InstancesClient(**gce.client_kwargs())
        gce.route_extended_operations(client)   # see README: needed for .result()
        gce.inject(GceFault.zone_resource_pool_exhausted(), zone="us-central1-a")
"""

from __future__ import annotations

import copy
import json
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any, Literal, Protocol, cast
from urllib.parse import unquote

from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials, Credentials

from ._http import (
    ADMIN_PREFIX,
    CallRecord,
    Emulator,
    FaultRule,
    HttpRequest,
    HttpResponse,
    Times,
    json_response,
)
from .billing import BillingCatalog

JSON = dict[str, Any]

# selfLinks point at the real API host, as GCE's do: callers parse names out
# of them, they never follow them.
SELF_LINK_BASE = "https://www.googleapis.com/compute/v1"


# Only these create operations, so only these can fail asynchronously.
MUTATING_METHODS = frozenset(
    {"instances.insert", "instances.delete", "firewalls.insert", "firewalls.update", "firewalls.delete"}
)

_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


# --------------------------------------------------------------------------
# Catalog
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class ZoneSpec:
    name: str
    status: str = "UP"

    @property
    def region(self) -> str:
        return self.name.rsplit("-", 1)[0]


@dataclass(frozen=True)
class AcceleratorTypeSpec:
    name: str
    description: str
    max_cards_per_instance: int
    # Regional quota metric that usage of this GPU counts against; spot/
    # preemptible use counts against PREEMPTIBLE_<metric> instead.
    quota_metric: str


@dataclass(frozen=True)
class MachineTypeSpec:
    name: str
    guest_cpus: int
    memory_mb: int
    accelerator_type: str | None = None
    accelerator_count: int = 0
    # None means offered in every zone of the catalog.
    zones: tuple[str, ...] | None = None
    description: str = ""


DEFAULT_ZONES: tuple[ZoneSpec, ...] = tuple(
    ZoneSpec(z)
    for z in (
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
        "us-east4-a",
        "us-east4-b",
        "europe-west4-a",
        "europe-west4-b",
    )
)

DEFAULT_ACCELERATOR_TYPES: tuple[AcceleratorTypeSpec, ...] = (
    AcceleratorTypeSpec("nvidia-tesla-a100", "NVIDIA A100 40GB", 16, "NVIDIA_A100_GPUS"),
    AcceleratorTypeSpec("nvidia-h100-80gb", "NVIDIA H100 80GB", 8, "NVIDIA_H100_GPUS"),
    AcceleratorTypeSpec("nvidia-l4", "NVIDIA L4", 8, "NVIDIA_L4_GPUS"),
)

# Zone availability here is deliberately uneven so tests can exercise "not
# offered in this zone"; it is illustrative, not a copy of real availability.
DEFAULT_MACHINE_TYPES: tuple[MachineTypeSpec, ...] = (
    MachineTypeSpec("e2-standard-4", 4, 16384, description="4 vCPUs, 16 GB RAM"),
    MachineTypeSpec("n1-standard-8", 8, 30720, description="8 vCPUs, 30 GB RAM"),
    MachineTypeSpec(
        "a2-highgpu-1g",
        12,
        87040,
        "nvidia-tesla-a100",
        1,
        ("us-central1-a", "us-central1-b", "us-central1-c", "europe-west4-a", "europe-west4-b"),
        "Accelerator Optimized: 1 NVIDIA Tesla A100 GPU, 12 vCPUs, 85GB RAM",
    ),
    MachineTypeSpec(
        "a2-highgpu-8g",
        96,
        696320,
        "nvidia-tesla-a100",
        8,
        ("us-central1-a", "us-central1-b", "us-central1-c", "europe-west4-a", "europe-west4-b"),
        "Accelerator Optimized: 8 NVIDIA Tesla A100 GPUs, 96 vCPUs, 680GB RAM",
    ),
    MachineTypeSpec(
        "a3-highgpu-8g",
        208,
        1916928,
        "nvidia-h100-80gb",
        8,
        ("us-central1-a", "us-central1-c", "us-east4-a", "us-east4-b", "europe-west4-b"),
        "Accelerator Optimized: 8 NVIDIA H100 80GB GPUs, 208 vCPUs, 1872GB RAM",
    ),
    MachineTypeSpec(
        "g2-standard-96",
        96,
        393216,
        "nvidia-l4",
        8,
        ("us-central1-a", "us-central1-b", "us-central1-c", "us-east4-a", "europe-west4-a"),
        "Accelerator Optimized: 8 NVIDIA L4 GPUs, 96 vCPUs, 384GB RAM",
    ),
)

# Generous defaults so quota only bites when a test asks for it.
DEFAULT_QUOTA_LIMIT = 100000.0

# Project-wide metrics; all others are regional.
GLOBAL_METRICS = frozenset({"GPUS_ALL_REGIONS", "CPUS_ALL_REGIONS"})


# --------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------

FaultKind = Literal["operation_error", "http_error", "stall"]


@dataclass(frozen=True)
class GceFault:
    """A fault to inject. Build with the classmethods.

    Messages may use ``{project}``, ``{zone}``, ``{region}``, ``{machine_type}``
    and ``{instance}``; they are filled from the faulted request.

    - ``operation_error``: the call itself succeeds (200 + an Operation) and
      the operation finishes DONE with ``error.errors[0].code == code`` and
      ``httpErrorStatusCode``/``httpErrorMessage`` set, as GCE does for
      capacity and quota failures. Only applies to mutating methods
      (instances.insert / instances.delete).
    - ``http_error``: the call fails synchronously with ``http_status`` and a
      Google JSON error body whose ``errors[0].reason`` is ``code``.
    - ``stall``: the call is held ``seconds`` and then served normally (a
      stall rule and an error rule can both fire on the same call).
    """

    kind: FaultKind
    code: str = ""
    message: str = ""
    http_status: int = 0
    domain: str = "global"
    seconds: float = 0.0
    error_details: tuple[JSON, ...] = ()

    @classmethod
    def zone_resource_pool_exhausted(cls, *, with_details: bool = False) -> GceFault:
        if with_details:
            return cls(
                "operation_error",
                "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
                "The zone 'projects/{project}/zones/{zone}' does not have enough resources "
                "available to fulfill the request.  '(resource type:compute)'.",
                503,
            )
        return cls(
            "operation_error",
            "ZONE_RESOURCE_POOL_EXHAUSTED",
            "The zone 'projects/{project}/zones/{zone}' does not have enough resources "
            "available to fulfill the request. Try a different zone, or try again later.",
            503,
            error_details=(
                {
                    "help": {
                        "links": [
                            {
                                "description": "Troubleshooting documentation",
                                "url": "https://cloud.google.com/compute/docs/resource-error",
                            }
                        ]
                    }
                },
                {
                    "localizedMessage": {
                        "locale": "en-US",
                        "message": "A {machine_type} VM instance is currently unavailable in the "
                        "{zone} zone. Alternatively, you can try your request again with a different "
                        "VM hardware configuration or at a later time. For more information, see the "
                        "troubleshooting documentation.",
                    }
                },
                {
                    "errorInfo": {
                        "domain": "compute.googleapis.com",
                        "reason": "resource_availability",
                        "metadatas": {
                            "attachment": "",
                            "vmType": "{machine_type}",
                            "zone": "{zone}",
                            "zonesAvailable": "",
                        },
                    }
                },
            ),
        )

    @classmethod
    def quota_exceeded(cls, metric: str = "GPUS_ALL_REGIONS", limit: float = 0.0) -> GceFault:
        where = "globally" if metric in GLOBAL_METRICS else "in region {region}"
        return cls(
            "operation_error",
            "QUOTA_EXCEEDED",
            f"Quota '{metric}' exceeded.  Limit: {float(limit)} {where}.",
            403,
            error_details=(
                {
                    "quotaInfo": {
                        "metricName": f"compute.googleapis.com/{metric.lower()}",
                        "limitName": f"{metric.replace('_', '-')}-per-project"
                        + ("" if metric in GLOBAL_METRICS else "-region"),
                        "limit": float(limit),
                        "dimensions": {"global": "global"} if metric in GLOBAL_METRICS else {"region": "{region}"},
                    }
                },
            ),
        )

    @classmethod
    def unsupported_operation(cls, message: str | None = None) -> GceFault:
        return cls(
            "operation_error",
            "UNSUPPORTED_OPERATION",
            message
            or "The resource 'projects/{project}/zones/{zone}/machineTypes/{machine_type}' "
            "does not support the requested operation in zone {zone}.",
            400,
        )

    @classmethod
    def resource_operation_rate_exceeded(cls) -> GceFault:
        return cls(
            "operation_error",
            "RESOURCE_OPERATION_RATE_EXCEEDED",
            "Operation rate exceeded for resource 'projects/{project}/zones/{zone}/instances/{instance}'. "
            "Too frequent operations from the source resource.",
            403,
        )

    @classmethod
    def operation_error(cls, code: str, message: str, http_status: int = 400) -> GceFault:
        return cls("operation_error", code, message, http_status)

    @classmethod
    def http_error(cls, http_status: int, reason: str, message: str, domain: str = "global") -> GceFault:
        return cls("http_error", reason, message, http_status, domain)

    @classmethod
    def rate_limited(cls) -> GceFault:
        """HTTP 429: per-minute API request quota exhausted."""
        return cls.http_error(
            429,
            "rateLimitExceeded",
            "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service "
            "'compute.googleapis.com' for consumer 'project_number:{project}'.",
            "usageLimits",
        )

    @classmethod
    def unavailable(cls) -> GceFault:
        """HTTP 503 backend error."""
        return cls.http_error(503, "backendError", "The service is currently unavailable.")

    @classmethod
    def internal_error(cls) -> GceFault:
        return cls.http_error(500, "backendError", "Internal error. Please try again or contact Google Support.")

    @classmethod
    def permission_denied(cls, permission: str = "compute.instances.create") -> GceFault:
        return cls.http_error(
            403,
            "forbidden",
            f"Required '{permission}' permission for 'projects/{{project}}/zones/{{zone}}/instances/{{instance}}'",
        )

    @classmethod
    def stall(cls, seconds: float) -> GceFault:
        return cls("stall", seconds=seconds)

    def to_dict(self) -> JSON:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GceFault:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if "error_details" in known:
            known["error_details"] = tuple(known["error_details"])
        return cls(**known)


class _SafeFormat(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _fill(value: Any, ctx: _SafeFormat) -> Any:
    if isinstance(value, str):
        return value.format_map(ctx)
    if isinstance(value, dict):
        return {k: _fill(v, ctx) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_fill(v, ctx) for v in value]
    return value


# --------------------------------------------------------------------------
# Errors and list filtering
# --------------------------------------------------------------------------


class ApiError(Exception):
    """A synchronous GCE error response."""

    def __init__(self, status: int, reason: str, message: str, domain: str = "global") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.domain = domain

    def body(self) -> JSON:
        return {
            "error": {
                "code": self.status,
                "message": self.message,
                "errors": [{"message": self.message, "domain": self.domain, "reason": self.reason}],
            }
        }


def _not_found(path: str) -> ApiError:
    return ApiError(404, "notFound", f"The resource '{path}' was not found")


def _invalid(field_name: str, value: str, why: str) -> ApiError:
    return ApiError(400, "invalid", f"Invalid value for field '{field_name}': '{value}'. {why}")


_TOKEN_RE = re.compile(
    r"""\s*(?:
        (?P<lp>\() | (?P<rp>\)) |
        (?P<op>!=|=|:|\beq\b|\bne\b) |
        (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*') |
        (?P<word>[^\s()=!:"']+)
    )""",
    re.VERBOSE,
)


class _FilterParser:
    """The subset of GCE list-filter syntax that geosched is likely to send:
    ``labels.team = ml``, ``status != TERMINATED``, ``labels.x:*`` (has key),
    ``name eq 'regex.*'``, implicit/explicit AND, OR, NOT and parentheses."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN_RE.match(text, pos)
            if not m or m.end() == pos:
                raise self._error()
            kind = cast(str, m.lastgroup)
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0

    def _error(self) -> ApiError:
        return _invalid("filter", self.text, "Invalid list filter expression.")

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _next(self) -> tuple[str, str]:
        tok = self._peek()
        if tok is None:
            raise self._error()
        self.i += 1
        return tok

    def parse(self) -> Callable[[JSON], bool]:
        if not self.tokens:
            return lambda _: True
        pred = self._or()
        if self._peek() is not None:
            raise self._error()
        return pred

    def _or(self) -> Callable[[JSON], bool]:
        parts = [self._and()]
        while self._peek() == ("word", "OR"):
            self.i += 1
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else (lambda r: any(p(r) for p in parts))

    def _and(self) -> Callable[[JSON], bool]:
        parts = [self._unary()]
        while (tok := self._peek()) is not None and tok[0] != "rp" and tok != ("word", "OR"):
            if tok == ("word", "AND"):
                self.i += 1
            parts.append(self._unary())
        return parts[0] if len(parts) == 1 else (lambda r: all(p(r) for p in parts))

    def _unary(self) -> Callable[[JSON], bool]:
        if self._peek() == ("word", "NOT"):
            self.i += 1
            inner = self._unary()
            return lambda r: not inner(r)
        tok = self._peek()
        if tok is not None and tok[0] == "lp":
            self.i += 1
            inner = self._or()
            if self._next()[0] != "rp":
                raise self._error()
            return inner
        return self._comparison()

    def _comparison(self) -> Callable[[JSON], bool]:
        kind, path = self._next()
        if kind != "word":
            raise self._error()
        okind, op = self._next()
        if okind != "op":
            raise self._error()
        vkind, raw = self._next()
        if vkind == "str":
            value = raw[1:-1].replace('\\"', '"').replace("\\'", "'")
        elif vkind == "word":
            value = raw
        else:
            raise self._error()
        keys = path.split(".")

        def pred(resource: JSON) -> bool:
            found, actual = _lookup(resource, keys)
            if op == ":" and value == "*":
                return found
            if not found:
                return op in ("!=", "ne")
            text = _as_filter_text(actual, value)
            if op == "=":
                return text == value
            if op == "!=":
                return text != value
            if op == ":":
                return value in text
            if op == "eq":
                return re.fullmatch(value, text) is not None
            return re.fullmatch(value, text) is None

        return pred


def _lookup(resource: Any, keys: Sequence[str]) -> tuple[bool, Any]:
    cur = resource
    for key in keys:
        if not isinstance(cur, dict) or key not in cur:
            return False, None
        cur = cur[key]
    return True, cur


def _as_filter_text(actual: Any, wanted: str) -> str:
    if isinstance(actual, bool):
        return "true" if actual else "false"
    text = str(actual)
    # Let `zone = us-central1-a` match the zone URL the resource holds.
    if "/" in text and "/" not in wanted:
        return text.rsplit("/", 1)[-1]
    return text


def compile_filter(text: str) -> Callable[[JSON], bool]:
    return _FilterParser(text).parse()


# --------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------


@dataclass
class _Operation:
    body: JSON
    project: str
    zone: str  # "" for a global operation
    done_at: float
    error: JSON | None = None
    on_done: Callable[[bool], None] | None = None


@dataclass(frozen=True)
class Capacity:
    count: int
    error: GceFault


def _now_rfc3339() -> str:
    return datetime.now(UTC).astimezone().isoformat(timespec="milliseconds")


def _new_id() -> str:
    # GCE ids are uint64 serialized as decimal strings.
    return str(random.randrange(10**18, 2**63))


def _http_reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.upper()
    except ValueError:
        return "ERROR"


def _last(url_or_name: str) -> str:
    return url_or_name.rstrip("/").rsplit("/", 1)[-1]


class _HasTransport(Protocol):
    @property
    def transport(self) -> Any: ...


class GceDouble(Emulator[GceFault]):
    """Compute Engine v1 REST double on 127.0.0.1:<ephemeral port>.

    All state is in memory and reset on construction. Thread-safe.
    """

    def __init__(
        self,
        *,
        zones: Iterable[ZoneSpec] = DEFAULT_ZONES,
        machine_types: Iterable[MachineTypeSpec] = DEFAULT_MACHINE_TYPES,
        accelerator_types: Iterable[AcceleratorTypeSpec] = DEFAULT_ACCELERATOR_TYPES,
        operation_delay_s: float = 0.0,
        wait_timeout_s: float = 120.0,
    ) -> None:
        self.zones: dict[str, ZoneSpec] = {z.name: z for z in zones}
        self.machine_types: dict[str, MachineTypeSpec] = {m.name: m for m in machine_types}
        self.accelerator_types: dict[str, AcceleratorTypeSpec] = {a.name: a for a in accelerator_types}
        self.operation_delay_s = operation_delay_s
        # zoneOperations.wait returns a not-yet-DONE operation after this long,
        # as GCE does after ~2 minutes.
        self.wait_timeout_s = wait_timeout_s
        super().__init__()
        self._lock = threading.RLock()
        self._instances: dict[tuple[str, str, str], JSON] = {}
        self._firewalls: dict[tuple[str, str], JSON] = {}
        self._operations: dict[tuple[str, str, str], _Operation] = {}
        self._quota_limits: dict[tuple[str | None, str], float] = {}
        self._capacity: dict[tuple[str, str], Capacity] = {}
        self._ids: dict[str, str] = {}
        self._ip_counter = 2
        self.billing = BillingCatalog()
        self._guest_host_keys: dict[tuple[str, str, str], tuple[str, ...]] = {}

    # -- client wiring ---------------------------------------------------

    def client_options(self) -> ClientOptions:
        return ClientOptions(api_endpoint=self.endpoint)

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for any compute_v1 ``*Client(...)`` constructor."""
        creds: Credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
        return {"credentials": creds, "client_options": self.client_options(), "transport": "rest"}

    def route_extended_operations(self, client: _HasTransport) -> None:
        """Make ``client.insert(...).result()`` poll this double.

        google-cloud-compute builds the ZoneOperationsClient that
        ExtendedOperation polls with only the credentials, not the
        client_options, so without this it polls compute.googleapis.com.
        This pre-seeds that (private) per-transport cache; production code
        that calls ZoneOperationsClient.wait itself does not need it.
        """
        from google.cloud import compute_v1

        cache: dict[str, Any] = client.transport._extended_operations_services
        kwargs = self.client_kwargs()
        cache["zone_operations"] = compute_v1.ZoneOperationsClient(**kwargs)
        cache["region_operations"] = compute_v1.RegionOperationsClient(**kwargs)
        cache["global_operations"] = compute_v1.GlobalOperationsClient(**kwargs)

    # -- test-facing control ---------------------------------------------

    def inject(
        self,
        fault: GceFault,
        *,
        zone: str | None = None,
        method: str | None = None,
        times: Times = 1,
    ) -> FaultRule[GceFault]:
        """Fire `fault` on the next `times` matching calls (or "always").

        `method` is the API method id, e.g. "instances.insert",
        "zoneOperations.wait", "zones.list"; None matches any. `zone` None
        matches any call, including zone-less ones such as aggregatedList."""
        return self.faults.add(fault, zone=zone, method=method, times=times)

    def set_quota(self, metric: str, limit: float, region: str | None = None) -> None:
        """Enforced at insert time; `region` None for GPUS_ALL_REGIONS /
        CPUS_ALL_REGIONS. Exceeding it fails the insert operation with
        QUOTA_EXCEEDED, naming the metric."""
        if (region is None) != (metric in GLOBAL_METRICS):
            raise ValueError(f"{metric} is {'global' if metric in GLOBAL_METRICS else 'regional'}")
        with self._lock:
            self._quota_limits[(region, metric)] = float(limit)

    def set_capacity(self, zone: str, machine_type: str, count: int | None, *, with_details: bool = False) -> None:
        """At most `count` live instances of `machine_type` in `zone`; further
        inserts fail their operation with ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS].
        None removes the limit."""
        with self._lock:
            if count is None:
                self._capacity.pop((zone, machine_type), None)
            else:
                fault = GceFault.zone_resource_pool_exhausted(with_details=with_details)
                self._capacity[(zone, machine_type)] = Capacity(count, fault)

    def instances(self, zone: str | None = None, project: str | None = None) -> list[JSON]:
        with self._lock:
            self._advance_locked()
            return [
                json.loads(json.dumps(body))
                for (p, z, _), body in sorted(self._instances.items())
                if (zone is None or z == zone) and (project is None or p == project)
            ]

    def firewalls(self, project: str | None = None) -> list[JSON]:
        """Firewall rules as stored (the body as sent, plus the fields GCE adds)."""
        with self._lock:
            self._advance_locked()
            return [
                json.loads(json.dumps(body))
                for (p, _), body in sorted(self._firewalls.items())
                if project is None or p == project
            ]

    def set_instance_status(self, project: str, zone: str, name: str, status: str) -> None:
        """E.g. "TERMINATED" to simulate a spot preemption with action STOP."""
        with self._lock:
            self._advance_locked()
            inst = self._instances.get((project, zone, name))
            if inst is None:
                raise KeyError((project, zone, name))
            inst["status"] = status
            if status == "TERMINATED":
                # Compute Engine stamps every stop (Instance.lastStopTimestamp, RFC 3339).
                inst["lastStopTimestamp"] = _now_rfc3339()

    def set_guest_host_keys(self, project: str, zone: str, name: str, keys: tuple[str, ...]) -> None:
        """The host keys the instance's guest agent publishes (getGuestAttributes, query path hostkeys/)."""
        with self._lock:
            self._guest_host_keys[(project, zone, name)] = tuple(keys)

    def remove_instance(self, project: str, zone: str, name: str) -> None:
        """Simulates an out-of-band deletion (spot preemption with action DELETE)."""
        with self._lock:
            self._instances.pop((project, zone, name), None)

    def reset(self) -> None:
        with self._lock:
            self._instances.clear()
            self._firewalls.clear()
            self._operations.clear()
            self._quota_limits.clear()
            self._capacity.clear()
        self.billing.reset()
        self.faults.clear()
        self.log.clear()

    # -- links -------------------------------------------------------------

    @staticmethod
    def _link(project: str, *parts: str) -> str:
        return "/".join([SELF_LINK_BASE, "projects", project, *parts])

    def _stable_id(self, key: str) -> str:
        with self._lock:
            if key not in self._ids:
                self._ids[key] = _new_id()
            return self._ids[key]

    # -- resource renderers ----------------------------------------------

    def _zone_json(self, project: str, zone: ZoneSpec) -> JSON:
        return {
            "kind": "compute#zone",
            "id": self._stable_id(f"zone/{zone.name}"),
            "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
            "name": zone.name,
            "description": zone.name,
            "status": zone.status,
            "region": self._link(project, "regions", zone.region),
            "selfLink": self._link(project, "zones", zone.name),
            "availableCpuPlatforms": [
                "Intel Sapphire Rapids",
                "Intel Ice Lake",
                "Intel Cascade Lake",
                "AMD Milan",
            ],
            "supportsPzs": False,
        }

    def _region_names(self) -> list[str]:
        return sorted({z.region for z in self.zones.values()})

    def _region_json(self, project: str, region: str) -> JSON:
        zones = [z for z in self.zones.values() if z.region == region]
        return {
            "kind": "compute#region",
            "id": self._stable_id(f"region/{region}"),
            "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
            "name": region,
            "description": region,
            "status": "UP",
            "zones": [self._link(project, "zones", z.name) for z in zones],
            "quotas": [
                {"metric": metric, "limit": limit, "usage": usage}
                for metric, (limit, usage) in sorted(self._regional_quotas(project, region).items())
            ],
            "selfLink": self._link(project, "regions", region),
            "supportsPzs": False,
        }

    def _project_json(self, project: str) -> JSON:
        """projects.get: the project-wide quotas (GPUS_ALL_REGIONS, CPUS_ALL_REGIONS) with their usage,
        in the `quotas: [{metric, limit, usage}]` shape GCE uses for regions too."""
        usage = self._current_usage(project, None)
        metrics = set(GLOBAL_METRICS) | {m for (r, m) in self._quota_limits if r is None}
        return {
            "kind": "compute#project",
            "id": self._stable_id(f"project/{project}"),
            "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
            "name": project,
            "quotas": [
                {
                    "metric": m,
                    "limit": self._quota_limits.get((None, m), DEFAULT_QUOTA_LIMIT),
                    "usage": usage.get(m, 0.0),
                }
                for m in sorted(metrics)
            ],
            "selfLink": self._link(project),
            "defaultNetworkTier": "PREMIUM",
        }

    def _machine_types_in(self, zone: str) -> list[MachineTypeSpec]:
        return [m for m in self.machine_types.values() if m.zones is None or zone in m.zones]

    def _machine_type_json(self, project: str, zone: str, mt: MachineTypeSpec) -> JSON:
        body: JSON = {
            "kind": "compute#machineType",
            "id": self._stable_id(f"machineType/{mt.name}"),
            "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
            "name": mt.name,
            "description": mt.description or f"{mt.guest_cpus} vCPUs, {mt.memory_mb // 1024} GB RAM",
            "guestCpus": mt.guest_cpus,
            "memoryMb": mt.memory_mb,
            "imageSpaceGb": 0,
            "maximumPersistentDisks": 128,
            "maximumPersistentDisksSizeGb": "263168",
            # machineType.zone is the bare zone name in GCE, unlike most resources.
            "zone": zone,
            "selfLink": self._link(project, "zones", zone, "machineTypes", mt.name),
            "isSharedCpu": False,
        }
        if mt.accelerator_type:
            body["accelerators"] = [
                {"guestAcceleratorType": mt.accelerator_type, "guestAcceleratorCount": mt.accelerator_count}
            ]
        return body

    def _accelerator_types_in(self, zone: str) -> list[AcceleratorTypeSpec]:
        names = {m.accelerator_type for m in self._machine_types_in(zone) if m.accelerator_type}
        return [a for a in self.accelerator_types.values() if a.name in names]

    def _accelerator_type_json(self, project: str, zone: str, at: AcceleratorTypeSpec) -> JSON:
        return {
            "kind": "compute#acceleratorType",
            "id": self._stable_id(f"acceleratorType/{at.name}"),
            "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
            "name": at.name,
            "description": at.description,
            "zone": self._link(project, "zones", zone),
            "selfLink": self._link(project, "zones", zone, "acceleratorTypes", at.name),
            "maximumCardsPerInstance": at.max_cards_per_instance,
        }

    # -- quota / capacity accounting --------------------------------------

    def _usage_of(self, inst: JSON) -> dict[str, float]:
        mt = self.machine_types.get(_last(inst.get("machineType", "")))
        if mt is None:
            return {}
        sched = inst.get("scheduling", {})
        spot = sched.get("provisioningModel") == "SPOT" or bool(sched.get("preemptible"))
        prefix = "PREEMPTIBLE_" if spot else ""
        usage: dict[str, float] = {
            f"{prefix}CPUS": float(mt.guest_cpus),
            "CPUS_ALL_REGIONS": float(mt.guest_cpus),
            "INSTANCES": 1.0,
        }
        for acc in inst.get("guestAccelerators", []):
            spec = self.accelerator_types.get(_last(acc.get("acceleratorType", "")))
            count = float(acc.get("acceleratorCount", 0))
            if spec is not None:
                key = f"{prefix}{spec.quota_metric}"
                usage[key] = usage.get(key, 0.0) + count
            usage["GPUS_ALL_REGIONS"] = usage.get("GPUS_ALL_REGIONS", 0.0) + count
        return usage

    def _live(self, inst: JSON) -> bool:
        # Stopped VMs release CPU/GPU quota and zonal capacity.
        return inst.get("status") not in ("TERMINATED", "STOPPING", "SUSPENDED")

    def _current_usage(self, project: str, region: str | None) -> dict[str, float]:
        totals: dict[str, float] = {}
        for (p, z, _), inst in self._instances.items():
            if p != project or not self._live(inst):
                continue
            if region is not None and self.zones[z].region != region:
                continue
            for metric, value in self._usage_of(inst).items():
                totals[metric] = totals.get(metric, 0.0) + value
        return totals

    def _regional_quotas(self, project: str, region: str) -> dict[str, tuple[float, float]]:
        usage = self._current_usage(project, region)
        metrics = {"CPUS", "PREEMPTIBLE_CPUS", "INSTANCES"}
        for at in self.accelerator_types.values():
            metrics |= {at.quota_metric, f"PREEMPTIBLE_{at.quota_metric}"}
        metrics |= {m for (r, m) in self._quota_limits if r == region}
        return {m: (self._quota_limits.get((region, m), DEFAULT_QUOTA_LIMIT), usage.get(m, 0.0)) for m in metrics}

    def _quota_violation(self, project: str, region: str, inst: JSON) -> GceFault | None:
        wanted = self._usage_of(inst)
        regional = self._current_usage(project, region)
        everywhere = self._current_usage(project, None)
        for metric, amount in sorted(wanted.items()):
            scope = None if metric in GLOBAL_METRICS else region
            limit = self._quota_limits.get((scope, metric))
            if limit is None:
                continue
            used = (everywhere if scope is None else regional).get(metric, 0.0)
            if used + amount > limit:
                return GceFault.quota_exceeded(metric, limit)
        return None

    def _capacity_violation(self, project: str, zone: str, mt_name: str) -> GceFault | None:
        cap = self._capacity.get((zone, mt_name))
        if cap is None:
            return None
        used = sum(
            1
            for (p, z, _), inst in self._instances.items()
            if z == zone and _last(inst.get("machineType", "")) == mt_name and self._live(inst)
        )
        return cap.error if used >= cap.count else None

    # -- operations ---------------------------------------------------------

    def _new_operation(
        self,
        project: str,
        zone: str,
        op_type: str,
        target: JSON,
        error: JSON | None,
        on_done: Callable[[bool], None] | None,
    ) -> _Operation:
        now_ms = int(time.time() * 1000)
        rand = random.getrandbits
        name = f"operation-{now_ms}-{rand(52):013x}-{rand(32):08x}-{rand(32):08x}"
        ts = _now_rfc3339()
        # A global operation (zone "") has no `zone` field and lives under global/operations.
        scope = ("zones", zone) if zone else ("global",)
        body: JSON = {
            "kind": "compute#operation",
            "id": _new_id(),
            "name": name,
            "operationType": op_type,
            "targetLink": target["selfLink"],
            "targetId": target["id"],
            "status": "RUNNING",
            "user": "emulator@geosched.test",
            "progress": 0,
            "insertTime": ts,
            "startTime": ts,
            "selfLink": self._link(project, *scope, "operations", name),
        }
        if zone:
            body["zone"] = self._link(project, "zones", zone)
        op = _Operation(body, project, zone, time.monotonic() + self.operation_delay_s, error, on_done)
        self._operations[(project, zone, name)] = op
        self._advance_locked()
        return op

    def _advance_locked(self) -> None:
        now = time.monotonic()
        for op in self._operations.values():
            if op.body["status"] == "DONE" or op.done_at > now:
                continue
            op.body["status"] = "DONE"
            op.body["progress"] = 100
            op.body["endTime"] = _now_rfc3339()
            if op.error is not None:
                op.body["error"] = {"errors": [op.error["error"]]}
                op.body["httpErrorStatusCode"] = op.error["status"]
                op.body["httpErrorMessage"] = _http_reason(op.error["status"])
            if op.on_done is not None:
                op.on_done(op.error is None)

    # -- HTTP -------------------------------------------------------------

    _ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
        (verb, re.compile("^/compute/v1/projects/(?P<project>[^/]+)" + pattern + "$"), method)
        for verb, pattern, method in (
            ("GET", r"", "projects.get"),
            ("POST", r"/zones/(?P<zone>[^/]+)/instances", "instances.insert"),
            ("GET", r"/zones/(?P<zone>[^/]+)/instances", "instances.list"),
            ("GET", r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)", "instances.get"),
            ("GET", r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)/getGuestAttributes",
             "instances.getGuestAttributes"),
            ("DELETE", r"/zones/(?P<zone>[^/]+)/instances/(?P<name>[^/]+)", "instances.delete"),
            ("GET", r"/aggregated/instances", "instances.aggregatedList"),
            ("GET", r"/zones/(?P<zone>[^/]+)/operations/(?P<name>[^/]+)", "zoneOperations.get"),
            ("POST", r"/zones/(?P<zone>[^/]+)/operations/(?P<name>[^/]+)/wait", "zoneOperations.wait"),
            ("GET", r"/zones/(?P<zone>[^/]+)/operations", "zoneOperations.list"),
            ("POST", r"/global/firewalls", "firewalls.insert"),
            ("GET", r"/global/firewalls", "firewalls.list"),
            ("GET", r"/global/firewalls/(?P<name>[^/]+)", "firewalls.get"),
            ("PUT", r"/global/firewalls/(?P<name>[^/]+)", "firewalls.update"),
            ("DELETE", r"/global/firewalls/(?P<name>[^/]+)", "firewalls.delete"),
            ("GET", r"/global/operations/(?P<name>[^/]+)", "globalOperations.get"),
            ("POST", r"/global/operations/(?P<name>[^/]+)/wait", "globalOperations.wait"),
            ("GET", r"/zones", "zones.list"),
            ("GET", r"/zones/(?P<zone>[^/]+)", "zones.get"),
            ("GET", r"/regions", "regions.list"),
            ("GET", r"/regions/(?P<region>[^/]+)", "regions.get"),
            ("GET", r"/zones/(?P<zone>[^/]+)/machineTypes", "machineTypes.list"),
            ("GET", r"/zones/(?P<zone>[^/]+)/machineTypes/(?P<name>[^/]+)", "machineTypes.get"),
            ("GET", r"/aggregated/machineTypes", "machineTypes.aggregatedList"),
            ("GET", r"/zones/(?P<zone>[^/]+)/acceleratorTypes", "acceleratorTypes.list"),
            ("GET", r"/zones/(?P<zone>[^/]+)/acceleratorTypes/(?P<name>[^/]+)", "acceleratorTypes.get"),
            ("GET", r"/aggregated/acceleratorTypes", "acceleratorTypes.aggregatedList"),
        )
    )

    def _app(self, req: HttpRequest) -> HttpResponse:
        if req.path.startswith(ADMIN_PREFIX + "/"):
            return self._admin(req)
        billed = self.billing.answer(req)  # the Cloud Billing Catalog's Compute Engine SKUs, same host
        if billed is not None:
            self.log.append(CallRecord("services.skus.list", None, billed.status, None))
            return billed
        for verb, pattern, method in self._ROUTES:
            m = pattern.match(req.path)
            if m and verb == req.method:
                params = {k: unquote(v) for k, v in m.groupdict().items()}
                return self._call(method, params, req)
        self.log.append(CallRecord(f"{req.method} {req.path}", None, 404, "notFound"))
        return json_response(404, _not_found(req.path).body())

    def _call(self, method: str, params: dict[str, str], req: HttpRequest) -> HttpResponse:
        zone = params.get("zone")
        ctx = _SafeFormat(
            project=params["project"],
            zone=zone or "",
            region=self.zones[zone].region if zone in self.zones else params.get("region", ""),
            instance=params.get("name", ""),
            machine_type="",
        )
        body: JSON = {}
        if req.body:
            try:
                body = json.loads(req.body)
            except ValueError:
                err = ApiError(400, "parseError", "Parse Error")
                self.log.append(CallRecord(method, zone, 400, err.reason))
                return json_response(400, err.body())
        if method == "instances.insert":
            ctx["instance"] = str(body.get("name", ""))
            ctx["machine_type"] = _last(str(body.get("machineType", "")))
        elif method == "instances.delete":
            with self._lock:
                inst = self._instances.get((params["project"], zone or "", params.get("name", "")))
                if inst is not None:
                    ctx["machine_type"] = _last(inst.get("machineType", ""))

        injected = False
        stall = self.faults.take(zone, method, lambda f: f.kind == "stall")
        if stall is not None:
            injected = True
            self._server.sleep(stall.seconds)
        fault = self.faults.take(
            zone,
            method,
            lambda f: f.kind == "http_error" or (f.kind == "operation_error" and method in MUTATING_METHODS),
        )
        if fault is not None and fault.kind == "http_error":
            err = ApiError(fault.http_status, fault.code, fault.message.format_map(ctx), fault.domain)
            self.log.append(CallRecord(method, zone, err.status, err.reason, True))
            return json_response(err.status, err.body())
        op_fault = None
        if fault is not None:
            injected = True
            op_fault = self._render_op_error(fault, ctx)

        try:
            status, result = self._handle(method, params, req, body, op_fault)
        except ApiError as err:
            self.log.append(CallRecord(method, zone, err.status, err.reason, injected))
            return json_response(err.status, err.body())
        error_code = None
        if result.get("kind") == "compute#operation":
            failure = self._pending_error(params["project"], result)
            error_code = failure["error"]["code"] if failure else None
        self.log.append(CallRecord(method, zone, status, error_code, injected))
        return json_response(status, result)

    def _pending_error(self, project: str, op_body: JSON) -> JSON | None:
        with self._lock:
            op = self._operations.get((project, _last(op_body.get("zone", "")), op_body["name"]))
            return op.error if op else None

    @staticmethod
    def _render_op_error(fault: GceFault, ctx: _SafeFormat) -> JSON:
        error: JSON = {"code": fault.code, "message": fault.message.format_map(ctx)}
        if fault.error_details:
            error["errorDetails"] = _fill(list(fault.error_details), ctx)
        return {"status": fault.http_status, "error": error}

    def _handle(
        self, method: str, p: dict[str, str], req: HttpRequest, body: JSON, op_fault: JSON | None
    ) -> tuple[int, JSON]:
        project = p["project"]
        if method == "zoneOperations.wait":
            return 200, self._wait(project, p["zone"], p["name"])
        if method == "globalOperations.wait":
            return 200, self._wait(project, "", p["name"])
        with self._lock:
            status, result = self._dispatch_locked(method, p, req.query, body, op_fault)
            # Serialised after the lock is dropped, so hand out a snapshot.
            return status, copy.deepcopy(result)

    def _dispatch_locked(
        self, method: str, p: dict[str, str], q: Mapping[str, list[str]], body: JSON, op_fault: JSON | None
    ) -> tuple[int, JSON]:
        project = p["project"]
        flt = compile_filter(q.get("filter", [""])[0])
        self._advance_locked()
        zone = p.get("zone", "")
        if "zone" in p and zone not in self.zones:
            raise _not_found(f"projects/{project}/zones/{zone}")
        if method == "projects.get":
            return 200, self._project_json(project)
        if method == "instances.insert":
            return 200, self._insert(project, zone, body, op_fault)
        if method == "instances.delete":
            return 200, self._delete(project, zone, p["name"], op_fault)
        if method == "instances.get":
            inst = self._instances.get((project, zone, p["name"]))
            if inst is None:
                raise _not_found(f"projects/{project}/zones/{zone}/instances/{p['name']}")
            return 200, inst
        if method == "instances.getGuestAttributes":
            # As the guest agent publishes them (namespace hostkeys, one key per type); 404 before it has.
            keys = self._guest_host_keys.get((project, zone, p["name"]))
            if keys is None or (project, zone, p["name"]) not in self._instances:
                raise _not_found(f"projects/{project}/zones/{zone}/instances/{p['name']}/guestAttributes")
            items = [{"namespace": "hostkeys", "key": k.split()[0], "value": k.split()[1]} for k in keys]
            return 200, {"kind": "compute#guestAttributes", "queryPath": "hostkeys/",
                         "queryValue": {"items": items}}
        if method == "instances.list":
            items = [i for (pp, z, _), i in sorted(self._instances.items()) if pp == project and z == zone]
            return 200, self._page("compute#instanceList", project, f"zones/{zone}/instances", items, flt, q)
        if method == "instances.aggregatedList":
            return 200, self._aggregated(
                "compute#instanceAggregatedList",
                project,
                "instances",
                {
                    z: [i for (pp, zz, _), i in sorted(self._instances.items()) if pp == project and zz == z]
                    for z in sorted(self.zones)
                },
                flt,
            )
        if method.startswith("firewalls."):
            return 200, self._firewall_call(method, project, p.get("name", ""), body, flt, q, op_fault)
        if method == "globalOperations.get":
            gop = self._operations.get((project, "", p["name"]))
            if gop is None:
                raise _not_found(f"projects/{project}/global/operations/{p['name']}")
            return 200, gop.body
        if method == "zoneOperations.get":
            op = self._operations.get((project, zone, p["name"]))
            if op is None:
                raise _not_found(f"projects/{project}/zones/{zone}/operations/{p['name']}")
            return 200, op.body
        if method == "zoneOperations.list":
            ops = [o.body for (pp, z, _), o in self._operations.items() if pp == project and z == zone]
            return 200, self._page("compute#operationList", project, f"zones/{zone}/operations", ops, flt, q)
        if method == "zones.list":
            items = [self._zone_json(project, z) for _, z in sorted(self.zones.items())]
            return 200, self._page("compute#zoneList", project, "zones", items, flt, q)
        if method == "zones.get":
            return 200, self._zone_json(project, self.zones[zone])
        if method == "regions.list":
            items = [self._region_json(project, r) for r in self._region_names()]
            return 200, self._page("compute#regionList", project, "regions", items, flt, q)
        if method == "regions.get":
            if p["region"] not in self._region_names():
                raise _not_found(f"projects/{project}/regions/{p['region']}")
            return 200, self._region_json(project, p["region"])
        if method == "machineTypes.list":
            items = [self._machine_type_json(project, zone, m) for m in self._machine_types_in(zone)]
            return 200, self._page("compute#machineTypeList", project, f"zones/{zone}/machineTypes", items, flt, q)
        if method == "machineTypes.get":
            mt = next((m for m in self._machine_types_in(zone) if m.name == p["name"]), None)
            if mt is None:
                raise _not_found(f"projects/{project}/zones/{zone}/machineTypes/{p['name']}")
            return 200, self._machine_type_json(project, zone, mt)
        if method == "machineTypes.aggregatedList":
            return 200, self._aggregated(
                "compute#machineTypeAggregatedList",
                project,
                "machineTypes",
                {
                    z: [self._machine_type_json(project, z, m) for m in self._machine_types_in(z)]
                    for z in sorted(self.zones)
                },
                flt,
            )
        if method == "acceleratorTypes.list":
            items = [self._accelerator_type_json(project, zone, a) for a in self._accelerator_types_in(zone)]
            return 200, self._page(
                "compute#acceleratorTypeList", project, f"zones/{zone}/acceleratorTypes", items, flt, q
            )
        if method == "acceleratorTypes.get":
            at = next((a for a in self._accelerator_types_in(zone) if a.name == p["name"]), None)
            if at is None:
                raise _not_found(f"projects/{project}/zones/{zone}/acceleratorTypes/{p['name']}")
            return 200, self._accelerator_type_json(project, zone, at)
        if method == "acceleratorTypes.aggregatedList":
            return 200, self._aggregated(
                "compute#acceleratorTypeAggregatedList",
                project,
                "acceleratorTypes",
                {
                    z: [self._accelerator_type_json(project, z, a) for a in self._accelerator_types_in(z)]
                    for z in sorted(self.zones)
                },
                flt,
            )
        raise ApiError(501, "notImplemented", f"{method} is not implemented by the emulator")

    def _page(
        self,
        kind: str,
        project: str,
        collection: str,
        items: list[JSON],
        flt: Callable[[JSON], bool],
        q: Mapping[str, list[str]],
    ) -> JSON:
        items = [i for i in items if flt(i)]
        try:
            max_results = int(q.get("maxResults", ["500"])[0])
            start = int(q.get("pageToken", ["0"])[0] or 0)
        except ValueError as exc:
            raise _invalid("pageToken", str(q.get("pageToken")), "Invalid page token.") from exc
        max_results = max(1, min(max_results, 500))
        page = items[start : start + max_results]
        out: JSON = {
            "kind": kind,
            "id": f"projects/{project}/{collection}",
            "selfLink": self._link(project, *collection.split("/")),
        }
        # GCE omits `items` entirely for an empty page.
        if page:
            out["items"] = page
        if start + max_results < len(items):
            out["nextPageToken"] = str(start + max_results)
        return out

    def _aggregated(
        self,
        kind: str,
        project: str,
        field_name: str,
        by_zone: dict[str, list[JSON]],
        flt: Callable[[JSON], bool],
    ) -> JSON:
        scoped: JSON = {}
        for zone, items in by_zone.items():
            kept = [i for i in items if flt(i)]
            scope = f"zones/{zone}"
            if kept:
                scoped[scope] = {field_name: kept}
            else:
                scoped[scope] = {
                    "warning": {
                        "code": "NO_RESULTS_ON_PAGE",
                        "message": f"There are no results for scope '{scope}' on this page.",
                        "data": [{"key": "scope", "value": scope}],
                    }
                }
        return {
            "kind": kind,
            "id": f"projects/{project}/aggregated/{field_name}",
            "items": scoped,
            "selfLink": self._link(project, "aggregated", field_name),
        }

    def _insert(self, project: str, zone: str, body: JSON, op_fault: JSON | None) -> JSON:
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise ApiError(400, "required", "Required field 'resource.name' not specified")
        if not _NAME_RE.match(name):
            raise _invalid(
                "resource.name",
                name,
                "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'",
            )
        if (project, zone, name) in self._instances:
            raise ApiError(
                409,
                "alreadyExists",
                f"The resource 'projects/{project}/zones/{zone}/instances/{name}' already exists",
            )
        mt_ref = body.get("machineType")
        if not isinstance(mt_ref, str) or not mt_ref:
            raise ApiError(400, "required", "Required field 'resource.machineType' not specified")
        mt_name = _last(mt_ref)
        mt = next((m for m in self._machine_types_in(zone) if m.name == mt_name), None)
        if mt is None:
            raise _invalid(
                "resource.machineType",
                mt_ref,
                f"Machine type with name '{mt_name}' does not exist in zone '{zone}'.",
            )

        inst: JSON = json.loads(json.dumps(body))
        inst_id = _new_id()
        self_link = self._link(project, "zones", zone, "instances", name)
        accelerators = inst.get("guestAccelerators") or []
        if accelerators:
            for acc in accelerators:
                acc_name = _last(str(acc.get("acceleratorType", "")))
                if acc_name not in {a.name for a in self._accelerator_types_in(zone)}:
                    raise _invalid(
                        "resource.guestAccelerators[0].acceleratorType",
                        str(acc.get("acceleratorType", "")),
                        f"Accelerator type '{acc_name}' does not exist in zone '{zone}'.",
                    )
                acc["acceleratorType"] = self._link(project, "zones", zone, "acceleratorTypes", acc_name)
        elif mt.accelerator_type:
            # GPU-bundled machine families report their GPUs on the instance.
            inst["guestAccelerators"] = [
                {
                    "acceleratorType": self._link(project, "zones", zone, "acceleratorTypes", mt.accelerator_type),
                    "acceleratorCount": mt.accelerator_count,
                }
            ]
        sched = inst.setdefault("scheduling", {})
        if inst.get("guestAccelerators"):
            if sched.get("onHostMaintenance") == "MIGRATE":
                raise _invalid(
                    "resource.scheduling.onHostMaintenance",
                    "MIGRATE",
                    "Instances with guest accelerators do not support live migration.",
                )
            sched.setdefault("onHostMaintenance", "TERMINATE")
        spot = sched.get("provisioningModel") == "SPOT" or bool(sched.get("preemptible"))
        sched.setdefault("provisioningModel", "SPOT" if spot else "STANDARD")
        sched.setdefault("preemptible", bool(sched.get("preemptible", False)))
        sched.setdefault("automaticRestart", not spot)
        for i, nic in enumerate(inst.get("networkInterfaces") or []):
            nic.setdefault("name", f"nic{i}")
            nic.setdefault("network", self._link(project, "global", "networks", "default"))
            self._ip_counter += 1
            nic.setdefault("networkIP", f"10.128.{self._ip_counter // 250}.{self._ip_counter % 250 + 2}")
        inst.update(
            {
                "kind": "compute#instance",
                "id": inst_id,
                "creationTimestamp": _now_rfc3339(),
                "selfLink": self_link,
                "zone": self._link(project, "zones", zone),
                "machineType": self._link(project, "zones", zone, "machineTypes", mt_name),
                "status": "PROVISIONING",
                "cpuPlatform": "Unknown CPU Platform",
                "labelFingerprint": f"{random.getrandbits(64):016x}",
                "fingerprint": f"{random.getrandbits(64):016x}",
                "startRestricted": False,
                "deletionProtection": bool(inst.get("deletionProtection", False)),
            }
        )
        inst.setdefault("labels", {})

        error = op_fault
        if error is None:
            ctx = _SafeFormat(
                project=project,
                zone=zone,
                region=self.zones[zone].region,
                instance=name,
                machine_type=mt_name,
            )
            natural = self._quota_violation(project, self.zones[zone].region, inst) or self._capacity_violation(
                project, zone, mt_name
            )
            if natural is not None:
                error = self._render_op_error(natural, ctx)

        key = (project, zone, name)
        self._instances[key] = inst

        def finish(ok: bool) -> None:
            if not ok:
                # A failed insert leaves no instance behind.
                if self._instances.get(key) is inst:
                    del self._instances[key]
                return
            if inst.get("status") == "PROVISIONING":
                inst["status"] = "RUNNING"
                inst["cpuPlatform"] = "Intel Cascade Lake"
                inst["lastStartTimestamp"] = _now_rfc3339()

        return dict(self._new_operation(project, zone, "insert", inst, error, finish).body)

    def _delete(self, project: str, zone: str, name: str, op_fault: JSON | None) -> JSON:
        key = (project, zone, name)
        inst = self._instances.get(key)
        if inst is None:
            raise _not_found(f"projects/{project}/zones/{zone}/instances/{name}")
        if op_fault is None:
            inst["status"] = "STOPPING"

        def finish(ok: bool) -> None:
            if ok and self._instances.get(key) is inst:
                del self._instances[key]

        return dict(self._new_operation(project, zone, "delete", inst, op_fault, finish).body)

    def _firewall_call(
        self,
        method: str,
        project: str,
        name: str,
        body: JSON,
        flt: Callable[[JSON], bool],
        q: Mapping[str, list[str]],
        op_fault: JSON | None,
    ) -> JSON:
        """firewalls.insert|get|list|update|delete. Rules are stored as sent (not checked beyond name,
        duplicates and allowed/denied), with the fields GCE fills in."""
        key = (project, name)
        if method == "firewalls.list":
            items = [r for (pp, _), r in sorted(self._firewalls.items()) if pp == project]
            return self._page("compute#firewallList", project, "global/firewalls", items, flt, q)
        if method == "firewalls.insert":
            name = str(body.get("name", ""))
            if not _NAME_RE.match(name):
                raise _invalid(
                    "resource.name", name, "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)'"
                )
            key = (project, name)
            if key in self._firewalls:
                raise ApiError(
                    409, "alreadyExists", f"The resource 'projects/{project}/global/firewalls/{name}' already exists"
                )
            rule = self._firewall_json(project, body, _new_id(), _now_rfc3339())
            self._firewalls[key] = rule

            def finish(ok: bool) -> None:
                if not ok and self._firewalls.get(key) is rule:
                    del self._firewalls[key]

            return dict(self._new_operation(project, "", "insert", rule, op_fault, finish).body)
        old = self._firewalls.get(key)
        if old is None:
            raise _not_found(f"projects/{project}/global/firewalls/{name}")
        if method == "firewalls.get":
            return old
        if method == "firewalls.update":
            if body.get("name", name) != name:
                raise _invalid("resource.name", str(body.get("name")), "Cannot change the name of a firewall rule.")
            if body.get("network") and _last(str(body["network"])) != _last(str(old.get("network", ""))):
                raise _invalid("resource.network", str(body["network"]), "Cannot change the network of a firewall.")
            new = self._firewall_json(project, {**body, "name": name, "network": old["network"]}, old["id"],
                                      old["creationTimestamp"])

            def replace_rule(ok: bool) -> None:
                if ok and self._firewalls.get(key) is old:
                    self._firewalls[key] = new

            return dict(self._new_operation(project, "", "update", old, op_fault, replace_rule).body)

        def remove(ok: bool) -> None:
            if ok and self._firewalls.get(key) is old:
                del self._firewalls[key]

        return dict(self._new_operation(project, "", "delete", old, op_fault, remove).body)

    def _firewall_json(self, project: str, body: JSON, rule_id: str, created: str) -> JSON:
        if bool(body.get("allowed")) == bool(body.get("denied")):
            raise _invalid("resource", "", "Exactly one of 'allowed' or 'denied' must be specified.")
        rule: JSON = json.loads(json.dumps(body))
        rule.setdefault("network", self._link(project, "global", "networks", "default"))
        if not str(rule["network"]).startswith(SELF_LINK_BASE):
            rule["network"] = self._link(project, "global", "networks", _last(str(rule["network"])))
        rule.setdefault("direction", "INGRESS")
        rule.setdefault("priority", 1000)
        rule.setdefault("disabled", False)
        rule.update(
            {
                "kind": "compute#firewall",
                "id": rule_id,
                "creationTimestamp": created,
                "selfLink": self._link(project, "global", "firewalls", str(rule["name"])),
            }
        )
        return rule

    def _wait(self, project: str, zone: str, name: str) -> JSON:
        """zoneOperations.wait, or globalOperations.wait when `zone` is ""."""
        deadline = time.monotonic() + self.wait_timeout_s
        where = f"zones/{zone}" if zone else "global"
        while True:
            with self._lock:
                if zone and zone not in self.zones:
                    raise _not_found(f"projects/{project}/zones/{zone}")
                self._advance_locked()
                op = self._operations.get((project, zone, name))
                if op is None:
                    raise _not_found(f"projects/{project}/{where}/operations/{name}")
                if op.body["status"] == "DONE" or time.monotonic() >= deadline:
                    return dict(op.body)
                pause = min(op.done_at, deadline) - time.monotonic()
            self._server.sleep(max(0.0, min(pause, 0.5)) + 0.001)
            if self._server.stopping.is_set():
                with self._lock:
                    return dict(op.body)

    # -- admin HTTP API -----------------------------------------------------

    def _fault(self, doc: Mapping[str, Any]) -> GceFault:
        return GceFault.from_dict(doc)

    def _admin_route(self, route: tuple[str, str], data: JSON) -> HttpResponse | None:
        """POST /_emulator/quota {"metric", "limit", "region"};
        POST /_emulator/capacity {"zone", "machineType", "count", "withDetails"}."""
        if route == ("POST", "/quota"):
            self.set_quota(data["metric"], float(data["limit"]), data.get("region"))
            return json_response(200, {})
        if route == ("POST", "/capacity"):
            self.set_capacity(data["zone"], data["machineType"], data.get("count"),
                              with_details=bool(data.get("withDetails")))
            return json_response(200, {})
        return None


def with_zones(*names: str) -> tuple[ZoneSpec, ...]:
    """Convenience for a custom catalog: ``GceDouble(zones=with_zones("us-west1-a"))``."""
    return tuple(ZoneSpec(n) for n in names)


def only_in(spec: MachineTypeSpec, *zones: str) -> MachineTypeSpec:
    """A copy of `spec` offered only in `zones`."""
    return replace(spec, zones=tuple(zones))


__all__ = [
    "DEFAULT_ACCELERATOR_TYPES",
    "DEFAULT_MACHINE_TYPES",
    "DEFAULT_ZONES",
    "AcceleratorTypeSpec",
    "ApiError",
    "GceDouble",
    "GceFault",
    "MachineTypeSpec",
    "ZoneSpec",
    "compile_filter",
    "only_in",
    "with_zones",
]
