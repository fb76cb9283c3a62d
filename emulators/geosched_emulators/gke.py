"""In-memory HTTP double of the GKE (Kubernetes Engine) v1 REST API: clusters and node pools.

Written from the public REST reference so that the unmodified ``google-cloud-container`` client (REST transport)
can talk to it: cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters (get),
.../projects.locations.clusters.nodePools (create, get, list, delete) and .../projects.locations.operations (get).
Only the slice geosched's node pools need is here, plus runtime fault injection. Shapes:

- paths: ``/v1/projects/{p}/locations/{l}/clusters/{c}[/nodePools[/{np}]]``, ``.../operations/{op}``;
- nodePools.create takes ``{"parent", "nodePool": NodePool}`` and answers an Operation (operationType
  CREATE_NODE_POOL; delete: DELETE_NODE_POOL), status PENDING -> RUNNING -> DONE, ``error`` a google.rpc.Status
  ``{code, message}`` when it failed; the pool is PROVISIONING until its create is DONE, then RUNNING, or ERROR
  with ``statusMessage`` when the create failed (a failed pool stays until deleted, as GKE's do);
- a second create of a pool name the cluster has: 409 ALREADY_EXISTS; a pool create while another operation runs
  on the cluster is served here (GKE would answer 400 FAILED_PRECONDITION "incompatible operation": inject it);
- errors: the Google JSON error body ``{"error": {"code", "message", "status"}}`` (cloud.google.com/apis/design/
  errors#http_mapping).

The REST transport sends enums as integers (``$alt=json;enum-encoding=int``) and int64 as strings: stored pools
hold the enum names, as the API documents them.

Usage::

    with GkeDouble() as gke:
        gke.add_cluster("my-project", "us-central1", "train")
        client = container_v1.ClusterManagerClient(**gke.client_kwargs())
        gke.inject(GkeFault.stockout(), zone="us-central1-a", method="nodePools.create")
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import unquote

from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials, Credentials

from ._http import ADMIN_PREFIX, CallRecord, Emulator, FaultRule, HttpRequest, HttpResponse, Times, json_response

JSON = dict[str, Any]
SELF_LINK_BASE = "https://container.googleapis.com/v1"
# Enum numbers as the v1 protos define them (googleapis google/container/v1/cluster_service.proto).
PLACEMENT_TYPES = {0: "TYPE_UNSPECIFIED", 1: "COMPACT"}
TAINT_EFFECTS = {0: "EFFECT_UNSPECIFIED", 1: "NO_SCHEDULE", 2: "PREFER_NO_SCHEDULE", 3: "NO_EXECUTE"}
DRIVER_VERSIONS = {0: "GPU_DRIVER_VERSION_UNSPECIFIED", 1: "INSTALLATION_DISABLED", 2: "DEFAULT", 3: "LATEST"}
# google.rpc.Code numbers (googleapis google/rpc/code.proto) and the HTTP status each maps to.
RPC = {"INVALID_ARGUMENT": (3, 400), "NOT_FOUND": (5, 404), "ALREADY_EXISTS": (6, 409),
       "PERMISSION_DENIED": (7, 403), "RESOURCE_EXHAUSTED": (8, 429), "FAILED_PRECONDITION": (9, 400),
       "INTERNAL": (13, 500), "UNAVAILABLE": (14, 503)}
_PREFIX = r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
_NAME_RE = re.compile(r"^[a-z](?:[-a-z0-9]{0,38}[a-z0-9])?$")

FaultKind = Literal["http_error", "operation_error", "stall", "hold"]


@dataclass(frozen=True)
class GkeFault:
    """A fault to inject. Build with the classmethods. Messages may use ``{zone}``, ``{machine_type}``, ``{pool}``.

    - ``operation_error``: nodePools.create or .delete answers its Operation, which ends DONE with ``error``
      (google.rpc.Status ``code`` / ``message``); a failed create leaves the pool ERROR with that statusMessage,
      a failed delete leaves the pool as it was.
    - ``http_error``: the call fails synchronously with ``status`` (an RPC status name) and ``message``.
    - ``stall``: the call is held ``seconds`` and then served normally.
    - ``hold``: the operation stays RUNNING (the pool PROVISIONING, or STOPPING) until `release`.
    """

    kind: FaultKind
    status: str = ""
    message: str = ""
    seconds: float = 0.0

    @classmethod
    def stockout(cls) -> GkeFault:
        # What a node pool create in a zone out of the machine type reports (GKE docs, "Troubleshoot node pool
        # creation": the operation fails with Compute Engine's ZONE_RESOURCE_POOL_EXHAUSTED).
        return cls("operation_error", "RESOURCE_EXHAUSTED",
                   "Google Compute Engine: Not all instances running in IGM after 1m0s. Expected 8, running 0, "
                   "transitioning 8. Current errors: [ZONE_RESOURCE_POOL_EXHAUSTED]: Instance '{pool}-abcd' "
                   "creation failed: The zone 'projects/p/zones/{zone}' does not have enough resources available "
                   "to fulfill the request. Try a different zone, or try again later.")

    @classmethod
    def quota(cls, metric: str = "NVIDIA_H100_GPUS") -> GkeFault:
        return cls("operation_error", "RESOURCE_EXHAUSTED",
                   f"Insufficient regional quota to satisfy request: resource \"{metric}\": request requires "
                   "'64.0' and is short '64.0'.")

    @classmethod
    def incompatible_operation(cls) -> GkeFault:
        return cls("http_error", "FAILED_PRECONDITION", "Cluster is running incompatible operation "
                   "operation-1712345678901-abcdef.")

    @classmethod
    def http(cls, status: str, message: str = "injected") -> GkeFault:
        return cls("http_error", status, message)

    @classmethod
    def stall(cls, seconds: float) -> GkeFault:
        return cls("stall", seconds=seconds)

    @classmethod
    def hold(cls) -> GkeFault:
        return cls("hold")

    def to_dict(self) -> JSON:
        return {"kind": self.kind, "status": self.status, "message": self.message, "seconds": self.seconds}


@dataclass
class _Operation:
    name: str
    project: str
    location: str
    kind: str  # CREATE_NODE_POOL, DELETE_NODE_POOL
    target: tuple[str, str, str, str]  # project, location, cluster, pool
    started: float
    error: JSON | None = None
    held: bool = False
    done: bool = False


@dataclass
class Cluster:
    project: str
    location: str
    name: str
    locations: tuple[str, ...]
    status: str = "RUNNING"
    pools: dict[str, JSON] = field(default_factory=dict)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _enum(value: Any, names: Mapping[int, str]) -> Any:
    return names.get(value, value) if isinstance(value, int) else value


class GkeDouble(Emulator[GkeFault]):
    """GKE v1 REST double on 127.0.0.1:<ephemeral port>. Thread-safe; state in memory."""

    def __init__(self, *, operation_delay_s: float = 0.0) -> None:
        super().__init__()
        self.operation_delay_s = operation_delay_s
        self._lock = threading.RLock()
        self._clusters: dict[tuple[str, str, str], Cluster] = {}
        self._operations: dict[str, _Operation] = {}
        self._ids = itertools.count(1)

    # -- client wiring ---------------------------------------------------------------------------------

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``container_v1.ClusterManagerClient(...)``."""
        creds: Credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
        return {"credentials": creds, "client_options": ClientOptions(api_endpoint=self.endpoint),
                "transport": "rest"}

    # -- test-facing control ---------------------------------------------------------------------------

    def add_cluster(self, project: str, location: str, name: str, locations: Iterable[str] = ()) -> Cluster:
        """A RUNNING cluster; `locations` its node zones (default: location's a, b, c for a region)."""
        zones = tuple(locations) or ((location,) if location.count("-") == 2 else
                                     tuple(f"{location}-{z}" for z in "abc"))
        with self._lock:
            cluster = Cluster(project, location, name, zones)
            self._clusters[(project, location, name)] = cluster
            return cluster

    def inject(self, fault: GkeFault, *, zone: str | None = None, method: str | None = None,
               times: Times = 1) -> FaultRule[GkeFault]:
        """Fire `fault` on the next `times` matching calls. `method`: "nodePools.create", "nodePools.get",
        "nodePools.delete", "nodePools.list", "clusters.get", "operations.get"; `zone`: the pool's zone."""
        return self.faults.add(fault, zone=zone, method=method, times=times)

    def release(self) -> None:
        """Let held operations finish."""
        with self._lock:
            for op in self._operations.values():
                op.held = False
                op.started = time.monotonic() - self.operation_delay_s

    def pools(self, project: str | None = None) -> dict[str, JSON]:
        """Every node pool, by ``location/cluster/name``, as stored (enum names; the fields GKE adds)."""
        with self._lock:
            self._advance_locked()
            return {f"{c.location}/{c.name}/{n}": copy.deepcopy(p) for c in self._clusters.values()
                    if project is None or c.project == project for n, p in c.pools.items()}

    def _fault(self, doc: Mapping[str, Any]) -> GkeFault:
        return GkeFault(doc["kind"], doc.get("status", ""), doc.get("message", ""), float(doc.get("seconds", 0.0)))

    # -- serving ---------------------------------------------------------------------------------------

    _ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
        (verb, re.compile(_PREFIX + pattern + "$"), method) for verb, pattern, method in (
            ("GET", r"/clusters/(?P<cluster>[^/]+)", "clusters.get"),
            ("GET", r"/clusters/(?P<cluster>[^/]+)/nodePools", "nodePools.list"),
            ("POST", r"/clusters/(?P<cluster>[^/]+)/nodePools", "nodePools.create"),
            ("GET", r"/clusters/(?P<cluster>[^/]+)/nodePools/(?P<pool>[^/]+)", "nodePools.get"),
            ("DELETE", r"/clusters/(?P<cluster>[^/]+)/nodePools/(?P<pool>[^/]+)", "nodePools.delete"),
            ("GET", r"/operations/(?P<operation>[^/]+)", "operations.get"),
        ))

    def _app(self, req: HttpRequest) -> HttpResponse:
        if req.path.startswith(ADMIN_PREFIX + "/"):
            return self._admin(req)
        for verb, pattern, method in self._ROUTES:
            m = pattern.match(req.path)
            if m and verb == req.method:
                return self._call(method, {k: unquote(v) for k, v in m.groupdict().items()}, req)
        self.log.append(CallRecord(f"{req.method} {req.path}", None, 404, "NOT_FOUND"))
        return _error("NOT_FOUND", f"Not found: {req.path}")

    def _call(self, method: str, params: dict[str, str], req: HttpRequest) -> HttpResponse:
        body: JSON = {}
        if req.body:
            try:
                body = json.loads(req.body)
            except ValueError:
                return _error("INVALID_ARGUMENT", "Invalid JSON payload received.")
        zone = self._zone_of(method, params, body)
        stall = self.faults.take(zone, method, lambda f: f.kind == "stall")
        if stall is not None:
            self._server.sleep(stall.seconds)
        fault = self.faults.take(zone, method, lambda f: f.kind == "http_error")
        ctx = {"zone": zone or "", "pool": params.get("pool") or str((body.get("nodePool") or {}).get("name", "")),
               "machine_type": str(((body.get("nodePool") or {}).get("config") or {}).get("machineType", ""))}
        if fault is not None:
            self.log.append(CallRecord(method, zone, RPC[fault.status][1], fault.status, True))
            return _error(fault.status, fault.message.format_map(ctx))
        with self._lock:
            self._advance_locked()
            status, answer = self._serve_locked(method, params, body, zone, ctx)
        self.log.append(CallRecord(method, zone, status, None if status < 400 else answer["error"]["status"]))
        return json_response(status, answer)

    def _zone_of(self, method: str, params: Mapping[str, str], body: JSON) -> str | None:
        if method == "nodePools.create":
            locations = (body.get("nodePool") or {}).get("locations") or []
            return str(locations[0]) if locations else None
        if method in ("nodePools.get", "nodePools.delete"):
            with self._lock:
                c = self._clusters.get((params["project"], params["location"], params["cluster"]))
                pool = c.pools.get(params["pool"]) if c else None
                return str((pool.get("locations") or [None])[0]) if pool else None
        return None

    def _serve_locked(self, method: str, params: Mapping[str, str], body: JSON, zone: str | None,
                      ctx: Mapping[str, str]) -> tuple[int, JSON]:
        project, location = params["project"], params["location"]
        if method == "operations.get":
            op = self._operations.get(params["operation"])
            if op is None or (op.project, op.location) != (project, location):
                return _missing(f"Operation \"{params['operation']}\" not found.")
            return 200, self._operation_json(op)
        cluster = self._clusters.get((project, location, params["cluster"]))
        if cluster is None:
            return _missing(f"Not found: projects/{project}/locations/{location}/clusters/{params['cluster']}.")
        if method == "clusters.get":
            return 200, self._cluster_json(cluster)
        if method == "nodePools.list":
            return 200, {"nodePools": [copy.deepcopy(p) for _, p in sorted(cluster.pools.items())]}
        if method == "nodePools.create":
            return self._create_locked(cluster, body, zone, ctx)
        pool = cluster.pools.get(params["pool"])
        if pool is None:
            return _missing(f"Not found: projects/{project}/locations/{location}/clusters/{cluster.name}/"
                            f"nodePools/{params['pool']}.")
        if method == "nodePools.get":
            return 200, copy.deepcopy(pool)
        # nodePools.delete
        if pool["status"] == "STOPPING":
            return _error_doc("FAILED_PRECONDITION", f"Cluster is running incompatible operation on node pool "
                              f"{pool['name']}.")
        fault = self.faults.take(zone, "nodePools.delete", lambda f: f.kind in ("operation_error", "hold"))
        op = self._start_locked(cluster, "DELETE_NODE_POOL", pool["name"], fault, ctx)
        if op.error is None:
            pool["status"] = "STOPPING"
        return 200, self._operation_json(op)

    def _create_locked(self, cluster: Cluster, body: JSON, zone: str | None,
                       ctx: Mapping[str, str]) -> tuple[int, JSON]:
        spec = body.get("nodePool")
        if not isinstance(spec, dict):
            return _error_doc("INVALID_ARGUMENT", "Node_pool must be specified.")
        name = str(spec.get("name", ""))
        if not _NAME_RE.match(name):
            return _error_doc("INVALID_ARGUMENT", f"Invalid node pool name \"{name}\": must match RFC 1035, at most "
                              "40 characters.")
        if name in cluster.pools:
            return _error_doc("ALREADY_EXISTS", f"Already exists: projects/{cluster.project}/locations/"
                              f"{cluster.location}/clusters/{cluster.name}/nodePools/{name}.")
        locations = [str(z) for z in spec.get("locations") or []] or list(cluster.locations)
        outside = [z for z in locations if not z.startswith(cluster.location if cluster.location.count("-") == 1
                                                            else cluster.location.rsplit("-", 1)[0])]
        if outside:
            return _error_doc("INVALID_ARGUMENT", f"Node pool locations {outside} are not in the cluster's region.")
        pool = _normalized(spec)
        pool.update({"locations": locations, "status": "PROVISIONING", "version": "1.33.5-gke.1000000",
                     "selfLink": f"{SELF_LINK_BASE}/projects/{cluster.project}/locations/{cluster.location}/"
                                 f"clusters/{cluster.name}/nodePools/{name}",
                     "instanceGroupUrls": [f"https://www.googleapis.com/compute/v1/projects/{cluster.project}/"
                                           f"zones/{z}/instanceGroupManagers/gke-{cluster.name}-{name}-grp"
                                           for z in locations]})
        cluster.pools[name] = pool
        fault = self.faults.take(zone, "nodePools.create", lambda f: f.kind in ("operation_error", "hold"))
        op = self._start_locked(cluster, "CREATE_NODE_POOL", name, fault, ctx)
        return 200, self._operation_json(op)

    def _start_locked(self, cluster: Cluster, kind: str, pool: str, fault: GkeFault | None,
                      ctx: Mapping[str, str]) -> _Operation:
        op = _Operation(f"operation-{int(time.time() * 1000)}-{next(self._ids):08x}", cluster.project,
                        cluster.location, kind, (cluster.project, cluster.location, cluster.name, pool),
                        time.monotonic())
        if fault is not None and fault.kind == "hold":
            op.held = True
        elif fault is not None:
            op.error = {"code": RPC[fault.status][0], "message": fault.message.format_map(dict(ctx))}
        self._operations[op.name] = op
        self._advance_locked()
        return op

    def _advance_locked(self) -> None:
        """Finish the operations whose time has come, and apply them to their pools."""
        now = time.monotonic()
        for op in self._operations.values():
            if op.done or op.held or now - op.started < self.operation_delay_s:
                continue
            op.done = True
            cluster = self._clusters.get((op.target[0], op.target[1], op.target[2]))
            pool = cluster.pools.get(op.target[3]) if cluster else None
            if cluster is None or pool is None:
                continue
            if op.kind == "CREATE_NODE_POOL":
                pool["status"] = "ERROR" if op.error else "RUNNING"
                if op.error:
                    pool["statusMessage"] = op.error["message"]
            elif op.error is None:
                del cluster.pools[op.target[3]]

    def _operation_json(self, op: _Operation) -> JSON:
        status = "DONE" if op.done else ("RUNNING" if op.held or time.monotonic() - op.started > 0 else "PENDING")
        doc: JSON = {"name": op.name, "zone": op.location, "location": op.location, "operationType": op.kind,
                     "status": status,
                     "selfLink": f"{SELF_LINK_BASE}/projects/{op.project}/locations/{op.location}/operations/"
                                 f"{op.name}",
                     "targetLink": f"{SELF_LINK_BASE}/projects/{op.project}/locations/{op.location}/clusters/"
                                   f"{op.target[2]}/nodePools/{op.target[3]}",
                     "startTime": _now()}
        if op.done:
            doc["endTime"] = _now()
            if op.error:
                doc["error"] = dict(op.error)
                doc["statusMessage"] = op.error["message"]
        return doc

    def _cluster_json(self, c: Cluster) -> JSON:
        return {"name": c.name, "location": c.location, "locations": list(c.locations), "status": c.status,
                "zone": c.location, "currentMasterVersion": "1.33.5-gke.1000000",
                "selfLink": f"{SELF_LINK_BASE}/projects/{c.project}/locations/{c.location}/clusters/{c.name}",
                "nodePools": [copy.deepcopy(p) for _, p in sorted(c.pools.items())]}


def _normalized(spec: JSON) -> JSON:
    """The pool as sent, with enum numbers as their names and int64 strings as numbers."""
    pool = copy.deepcopy(spec)
    config = pool.setdefault("config", {})
    for acc in config.get("accelerators") or []:
        acc["acceleratorCount"] = str(acc.get("acceleratorCount", "0"))
        driver = acc.get("gpuDriverInstallationConfig") or {}
        if "gpuDriverVersion" in driver:
            driver["gpuDriverVersion"] = _enum(driver["gpuDriverVersion"], DRIVER_VERSIONS)
    for taint in config.get("taints") or []:
        taint["effect"] = _enum(taint.get("effect", 0), TAINT_EFFECTS)
    placement = pool.get("placementPolicy")
    if isinstance(placement, dict) and "type" in placement:
        placement["type"] = _enum(placement["type"], PLACEMENT_TYPES)
    pool["initialNodeCount"] = int(pool.get("initialNodeCount") or 0)
    return pool


def _error_doc(status: str, message: str) -> tuple[int, JSON]:
    code = RPC[status][1]
    return code, {"error": {"code": code, "message": message, "status": status}}


def _missing(message: str) -> tuple[int, JSON]:
    return _error_doc("NOT_FOUND", message)


def _error(status: str, message: str) -> HttpResponse:
    code, doc = _error_doc(status, message)
    return json_response(code, doc)
