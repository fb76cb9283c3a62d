"""The google-cloud-container edge of node pools: the GKE `backend.Backend`. ClusterManagerClient (REST transport)
get_cluster, create_node_pool, get_node_pool, delete_node_pool, list_node_pools and get_operation. SDK types stay
here; errors leave as the provider taxonomy (`gcp.classify` plus GKE's own meanings below).

Where it talks to: `GEOSCHED_GKE_ENDPOINT` (the settings table; default Google's container.googleapis.com). The
project: `GEOSCHED_GCP_PROJECT`, else application default credentials' project. Credentials: application
default credentials, except for an `http://` endpoint (a local double, as Google's own emulators are reached),
which gets anonymous credentials: a bearer token never travels over plain HTTP.

Polling the long-running operation: create_node_pool answers an Operation; `describe` reads the pool and, while
it is PROVISIONING, that operation (get_operation, at the same endpoint): an operation DONE with an error is the
create's failure even before the pool's own status says ERROR. A delete whose operation ends with an error is
DELETE_FAILED. Every call passes `retry=None` (the retry policy decides) and a timeout from the budget.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from geosched import settings as settings_table
from geosched.clouds import gcp as gcp_cloud
from geosched.providers.base import AuthError, Budget, ProviderError, StallError, TransientError, UnsupportedError
from geosched.providers.nodegroups import backend, gkespec
from geosched.providers.nodegroups.backend import InUse, Pool, RecordBlock, RefusedRequest, Target
from geosched.providers.nodegroups.gkespec import Cluster
from geosched.providers.plan import Plan, Skipped
from geosched.settings import environ

T = TypeVar("T")
# The settings geosched.clouds.gcp declares, read here from the environment (with the config file's values).
PROJECT = settings_table.of_cloud(gcp_cloud.NAME, "project")
GKE_ENDPOINT = settings_table.of_cloud(gcp_cloud.NAME, "gke_endpoint")
# google.rpc.Code numbers an operation's error carries (googleapis google/rpc/code.proto).
RPC_RESOURCE_EXHAUSTED = 8
# The pool statuses and what `launch` makes of them; RECONCILING right after a create is the create still going.
_STATUS = {gkespec.PROVISIONING: backend.CREATING, gkespec.RECONCILING: backend.CREATING,
           gkespec.RUNNING: backend.ACTIVE, gkespec.STOPPING: backend.DELETING,
           gkespec.ERROR: backend.FAILED, gkespec.RUNNING_WITH_ERROR: backend.FAILED}


class Gke:
    """GKE node pools of one project, through one ClusterManagerClient."""

    provider = gkespec.PROVIDER
    cloud = "GKE"
    scope = "location"
    kind = "node pool"

    def __init__(self, region: str, *, project: str | None = None, endpoint: str | None = None,
                 credentials: Any | None = None) -> None:
        env = environ()
        self.region = region
        self.endpoint = endpoint or settings_table.from_environment(GKE_ENDPOINT, env)
        self._project = project or settings_table.from_environment(PROJECT, env)
        self._credentials = credentials
        self._client_obj: Any = None
        self._lock = threading.Lock()
        # Operations this process started, by pool name (create) and pool name (delete): polled by `describe`.
        self._creating: dict[str, str] = {}
        self._deleting: dict[str, str] = {}

    # -- plumbing --------------------------------------------------------------------------------------

    @property
    def _client(self) -> Any:
        with self._lock:
            if self._client_obj is None:
                from google.api_core.client_options import ClientOptions
                from google.cloud import container_v1

                creds = self._creds()
                options = ClientOptions(api_endpoint=self.endpoint) if self.endpoint else None
                self._client_obj = container_v1.ClusterManagerClient(credentials=creds, client_options=options,
                                                                     transport="rest")
            return self._client_obj

    def _creds(self) -> Any:
        if self._credentials is not None:
            return self._credentials
        if self.endpoint and self.endpoint.startswith("http://"):
            from google.auth.credentials import AnonymousCredentials

            self._credentials = AnonymousCredentials()  # type: ignore[no-untyped-call]
            return self._credentials
        import google.auth
        from google.auth import exceptions as gauth_exc

        try:
            creds, project = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        except gauth_exc.DefaultCredentialsError as exc:
            raise AuthError("no application default credentials: run `gcloud auth application-default login` "
                            "or set GOOGLE_APPLICATION_CREDENTIALS", code=type(exc).__name__) from None
        self._credentials = creds
        self._project = self._project or project
        return creds

    @property
    def project(self) -> str:
        if not self._project:
            self._creds()
        if not self._project:
            raise AuthError(f"no GCP project: set {PROJECT.env}", code="NoProject")
        return self._project

    def _path(self, cluster: str, location: str) -> str:
        return f"projects/{self.project}/locations/{location}/clusters/{cluster}"

    # -- backend.Backend -------------------------------------------------------------------------------

    def cluster(self, name: str, budget: Budget) -> Cluster | None:
        """The cluster at this backend's location (`region`: the cluster's location), or None."""
        path = self._path(name, self.region)
        try:
            raw = _call(budget, lambda t: self._client.get_cluster(name=path, retry=None, timeout=t))
        except _Missing:
            return None
        location = str(raw.location or self.region)
        return Cluster(name, self.project, location, gkespec.region_of(location), tuple(raw.locations),
                       raw.Status(raw.status).name)

    def unusable(self, cluster: Cluster) -> str | None:
        if cluster.status not in (gkespec.RUNNING, gkespec.RECONCILING):
            return f"GKE cluster {cluster.name!r} is {cluster.status}, not RUNNING: it cannot take a node pool now"
        return None

    def targets(self, plan: Plan, cluster: Cluster) -> tuple[tuple[gkespec.Target, ...], tuple[Skipped, ...]]:
        return gkespec.targets(plan, cluster)

    def size_problem(self, nodes: int) -> str | None:
        return gkespec.size_problem(nodes)

    def create(self, target: Target, *, gang: str, seq: int, owner: str, token: str, nodes: int,
               budget: Budget, record: RecordBlock | None = None) -> Pool:
        assert isinstance(target, gkespec.Target)  # GKE buys nothing beside the pool: `record` is not called
        request = gkespec.create_request(target, project=self.project, gang=gang, seq=seq, owner=owner, token=token,
                                         nodes=nodes)
        op = _call(budget, lambda t: self._client.create_node_pool(request=request, retry=None, timeout=t),
                   mutating=True)
        name = request["node_pool"]["name"]
        self._creating[name] = _op_path(self.project, target.location, op.name)
        # The operation's targetLink is the pool's selfLink (Operation.targetLink): the journal's `arn`.
        return Pool(name, backend.CREATING, gkespec.resource_labels(gang, owner, token), str(op.target_link) or None,
                    target.location, target.capacity_type, nodes)

    def describe(self, cluster: str, where: str, name: str, budget: Budget) -> Pool | None:
        path = f"{self._path(cluster, where)}/nodePools/{name}"
        try:
            raw = _call(budget, lambda t: self._client.get_node_pool(name=path, retry=None, timeout=t))
        except _Missing:
            return None
        status = raw.Status(raw.status).name
        neutral = _STATUS.get(status, backend.OTHER)
        failure: ProviderError | None = None
        if neutral == backend.CREATING and name in self._creating:
            error = self._operation_error(self._creating[name], budget)
            if error is not None:
                neutral, failure = backend.FAILED, gkespec.failure("create failed", error, name)
        if neutral in (backend.DELETING, backend.FAILED) and name in self._deleting:
            error = self._operation_error(self._deleting[name], budget)
            if error is not None:
                neutral, failure = backend.DELETE_FAILED, gkespec.failure("delete failed", error, name)
        if neutral == backend.FAILED and failure is None:
            failure = gkespec.failure(status, str(raw.status_message or ""), name)
        config = raw.config
        return Pool(name, neutral, {str(k): str(v) for k, v in config.resource_labels.items()},
                    str(raw.self_link or "") or None, where, "SPOT" if config.spot else "ON_DEMAND",
                    int(raw.initial_node_count), failure, instance_type=str(config.machine_type or ""))

    def delete(self, cluster: str, where: str, name: str, budget: Budget) -> bool:
        path = f"{self._path(cluster, where)}/nodePools/{name}"
        try:
            op = _call(budget, lambda t: self._client.delete_node_pool(name=path, retry=None, timeout=t),
                       mutating=True)
        except _Missing:
            return False
        self._deleting[name] = _op_path(self.project, where, op.name)
        return True

    def names(self, cluster: str, where: str, budget: Budget) -> list[str]:
        try:
            raw = _call(budget, lambda t: self._client.list_node_pools(parent=self._path(cluster, where), retry=None,
                                                                        timeout=t))
        except _Missing:
            return []
        return [str(p.name) for p in raw.node_pools]

    def schedule(self, made: Pool, *, cluster: str, owner: str, nodes: int, budget: Budget) -> str:
        """Never asked: GKE's `create` buys no reservation that starts later (`Pool.starts_at` stays None)."""
        raise UnsupportedError(f"GKE node pool {made.name}: no scheduled scaling", code="NoSchedule")

    def release(self, name: str, *, owner: str, instance_type: str, nodes: int, budget: Budget,
                capacity_type: str = "") -> list[str]:
        """Nothing: a node pool's compact placement policy is GKE's own (`placementPolicy` of the pool), made and
        deleted with it."""
        return []

    def _operation_error(self, path: str, budget: Budget) -> str | None:
        """The message of a finished operation's error, or None while it runs or when it succeeded."""
        op = _call(budget, lambda t: self._client.get_operation(name=path, retry=None, timeout=t))
        if op.Status(op.status).name != "DONE" or not op.error.message:
            return None
        return str(op.error.message)


def _op_path(project: str, location: str, op_name: str) -> str:
    """An Operation's `name` is its bare id; get_operation takes projects/*/locations/*/operations/*."""
    if op_name.startswith("projects/"):
        return op_name
    return f"projects/{project}/locations/{location}/operations/{op_name}"


class _Missing(Exception):
    """404: the cluster or pool does not exist (not an error for the callers)."""


def _call(budget: Budget, fn: Callable[[float], T], *, mutating: bool = False) -> T:
    from google.api_core import exceptions as gexc

    from geosched.providers import gcp

    if budget.expired:
        raise StallError("deadline passed before the call", code="Deadline")
    budget.tick()
    try:
        return fn(budget.timeout())
    except gexc.NotFound as exc:
        raise _Missing(str(exc.message)) from None
    except gexc.Conflict as exc:  # 409 ALREADY_EXISTS (over REST the class follows the HTTP status)
        raise InUse(str(exc.message), code="ALREADY_EXISTS") from None
    except gexc.BadRequest as exc:
        if _rpc_status(exc) == "FAILED_PRECONDITION" or isinstance(exc, gexc.FailedPrecondition):
            # "Cluster is running incompatible operation": GKE runs one operation on a cluster at a time; a later
            # try may pass.
            raise TransientError(str(exc.message), code="FAILED_PRECONDITION") from None
        raise RefusedRequest(str(exc.message), code="INVALID_ARGUMENT") from None
    except Exception as exc:
        raise gcp.classify(exc, mutating=mutating, budget=budget) from None


def _rpc_status(exc: Exception) -> str | None:
    """The RPC status name of a REST error body ({"error": {"status": ...}}: cloud.google.com/apis/design/errors)."""
    response = getattr(exc, "response", None)
    try:
        return str(response.json()["error"]["status"]) if response is not None else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
