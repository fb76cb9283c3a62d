"""The one place geosched talks HTTP to Kubernetes: the official client's `ApiClient`, JSON in and JSON out.

Why not the generated typed methods: their pydantic models reject answers they do not declare (a Binding is
answered with a Status, an apply that creates a custom resource with 201), and parsing thousands of nodes and
pods into models costs more than the placement itself. `ApiClient.param_serialize` + `call_api` is the path the
official DynamicClient takes, with the kubeconfig's auth and TLS; the JSON stays JSON, which is also what
`geosched.kube.inventory` reads.

Errors stay the client's `ApiException` (status, reason, body), so callers see what they would see with the
typed methods. `describe` turns any error into one line without headers or request bodies (no tokens in logs).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar, cast

import kubernetes
import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from geosched.core.errors import InputError
from geosched.core.retry import RetryPolicy, retry
from geosched.kube import credplugin, kubeconfig

T = TypeVar("T")
Json = dict[str, Any]
APPLY_PATCH = "application/apply-patch+yaml"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
FIELD_MANAGER = "geosched"
# client-go's default page size for informers' initial lists.
PAGE = 500
# 429 and the 5xx an API server (or a proxy in front of it) answers when it is busy or restarting.
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
# Each open watch holds a connection; the scheduler keeps five open besides its requests.
POOL_SIZE = 16

credplugin.bound()  # the client runs exec plugins unbounded in time and output: geosched's runner bounds both
credplugin.capture()  # the client logs a failed exec plugin's cause on the root logger: kept for connect_config


# --- kubeconfig -----------------------------------------------------------------------------------

def kubeconfig_files(explicit: Path | None = None) -> str:
    """The kubeconfig's files as the user named them (for messages): see `geosched.kube.kubeconfig.files`."""
    return kubeconfig.files(explicit)


def list_contexts(kubeconfig_path: Path | None = None) -> tuple[list[str], str | None]:
    """Context names in file order, and the current context."""
    config = kubeconfig.read(kubeconfig_path)
    return config.contexts, config.current


def connect(context: str | None, kubeconfig_path: Path | None = None, *, in_cluster: bool = False) -> ApiClient:
    """An ApiClient for one context (or the pod's service account when `in_cluster`).

    The client is handed the kubeconfig geosched read and checked (`geosched.kube.kubeconfig`), never a path:
    it would read the file again with an unbounded parser. No file behind it: refreshed credentials are never
    written back into the user's kubeconfig.
    """
    configuration = _configuration()
    if in_cluster:
        try:
            kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except kubernetes.config.ConfigException as exc:  # not in a pod, or no service account token mounted
            raise InputError("--in-cluster", "", f"no in-cluster credentials: {_first_line(exc)}") from None
        return ApiClient(configuration)
    config = kubeconfig.read(kubeconfig_path)
    kubeconfig.server_of(config, context)
    return connect_config(config.config, config.source, context=context)


def connect_config(config: Mapping[str, Any], source: str, *, context: str | None = None) -> ApiClient:
    """An ApiClient for a context (else the current one) of a kubeconfig held in memory, already checked
    (`geosched.kube.kubeconfig.check`): a file's, or a MultiKueueCluster's Secret. A context whose exec credential
    plugin cannot run or fails is refused with the plugin's cause (`geosched.kube.credplugin`)."""
    credplugin.check(config, context, source)
    # The files it names are read here, through the gate, not by the client (geosched.kube.kubeconfig).
    inlined = kubeconfig.inline_files(config, context, source)
    credplugin.reset()
    try:
        client = kubernetes.config.new_client_from_config_dict(  # type: ignore[no-untyped-call]
            config_dict=inlined, context=context, persist_config=False, client_configuration=_configuration())
    except (kubernetes.config.ConfigException, KeyError, TypeError, ValueError, AttributeError, OSError) as exc:
        # The client's messages quote whole entries: the edge scrubs registered credentials, and the line is
        # cut before the first quoted mapping as well.
        where = f"context {context}" if context else "kubeconfig"
        raise kubeconfig.KubeconfigError(source, where, _first_line(exc).split("{", 1)[0].rstrip(" /:")
                                         or type(exc).__name__) from None
    failed = credplugin.failure_error(config, context, source)
    if failed is not None:
        client.close()
        raise failed
    return cast(ApiClient, client)


def _configuration() -> kubernetes.client.Configuration:
    # type.__call__, as new_client_from_config does: older clients' Configuration() copies a process-wide default,
    # which could carry another cluster's credentials.
    configuration: kubernetes.client.Configuration = type.__call__(kubernetes.client.Configuration)
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, POOL_SIZE)
    return configuration


# --- errors ---------------------------------------------------------------------------------------

def status_of(exc: BaseException) -> int | None:
    return int(exc.status) if isinstance(exc, ApiException) and exc.status is not None else None


def is_transient(exc: BaseException) -> bool:
    """Worth the same request again: throttling, a busy or restarting server, a dropped connection."""
    if isinstance(exc, ApiException):
        return status_of(exc) in TRANSIENT_STATUS
    return isinstance(exc, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError)


def api_message(exc: ApiException) -> str:
    """The Status message the server sent, or the HTTP reason."""
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        body = None
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])
    return str(exc.reason or "")


def describe(exc: BaseException) -> str:
    """One line for people and logs. Never the request, never headers: they carry the bearer token."""
    if isinstance(exc, (credplugin.CredentialPluginError, InputError)):  # one line already, no class name
        return str(exc)
    if isinstance(exc, ApiException):
        return f"{exc.status} {api_message(exc)}".strip()
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        pool = exc.pool
        where = f" {pool.host}:{pool.port}" if pool is not None and pool.host else ""
        return f"cannot connect to{where}: {_connection_cause(exc.reason)}"
    return f"{type(exc).__name__}: {_first_line(exc)}"


def retry_after(exc: BaseException | None) -> float | None:
    """The server's Retry-After (seconds), if it sent one."""
    headers = getattr(exc, "headers", None) if isinstance(exc, ApiException) else None
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


# An API server answers in milliseconds: start lower and cap shorter than a cloud's launch API (geosched/core/retry.py).
KUBE_RETRY = RetryPolicy(attempts=6, initial_s=0.2, max_s=10.0, max_retry_after_s=60.0)


def with_retries(fn: Callable[[], T], policy: RetryPolicy = KUBE_RETRY,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `fn` again while it fails transiently (`is_transient`), waiting at least the server's Retry-After;
    the last error is raised."""
    return retry(fn, policy, is_transient, retry_after=retry_after, sleep=sleep)


def _connection_cause(exc: BaseException) -> str:
    """urllib3's reason without the connection's repr it starts with (`HTTPSConnection(host=..., port=...): `),
    which only repeats the address: `Failed to establish a new connection: [Errno 111] Connection refused`."""
    line = _first_line(exc)
    head, sep, rest = line.partition("): ")
    return rest if sep and head.startswith(("HTTPSConnection(", "HTTPConnection(")) else line


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# --- paths ----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind lives in the API: `/api/v1` or `/apis/<group>/<version>`, its plural and its scope."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def prefix(self) -> str:
        return api_prefix(self.api_version)

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        parts = [self.prefix]
        if self.namespaced and namespace is not None:
            parts += ["namespaces", namespace]
        parts.append(self.plural)
        if name is not None:
            parts.append(name)
        if subresource is not None:
            parts.append(subresource)
        return "/".join(parts)


def api_prefix(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


PODS = Resource("v1", "Pod", "pods", True)
NODES = Resource("v1", "Node", "nodes", False)
EVENTS = Resource("v1", "Event", "events", True)
LEASES = Resource("coordination.k8s.io/v1", "Lease", "leases", True)


# --- one cluster ----------------------------------------------------------------------------------

class Kube:
    """One cluster (one kubeconfig context). Thread-safe as the ApiClient is: one connection pool, any thread."""

    def __init__(self, api: ApiClient, name: str, *, timeout_s: float = 30.0) -> None:
        self.api = api
        self.name = name
        self.timeout_s = timeout_s
        self._resources: dict[tuple[str, str], Resource] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(cls, context: str | None, kubeconfig: Path | None = None, *, name: str | None = None,
             in_cluster: bool = False, timeout_s: float = 30.0) -> Kube:
        return cls(connect(context, kubeconfig, in_cluster=in_cluster), name or context or "in-cluster",
                   timeout_s=timeout_s)

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ---- plain requests ----

    def _send(self, method: str, path: str, query: Mapping[str, Any] | None, body: Any, content_type: str | None,
              timeout: float | tuple[float, float] | None, accept: str = "application/json") -> Any:
        headers = {"Accept": accept, "Content-Type": content_type or "application/json"}
        params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        request = self.api.param_serialize(
            method, path, query_params=params, header_params=headers, body=body, auth_settings=["BearerToken"])
        response = self.api.call_api(*request, _request_timeout=timeout if timeout is not None else self.timeout_s)
        return response

    def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None, body: Any = None,
                content_type: str | None = None, timeout: float | None = None) -> Any:
        """The decoded JSON answer; any non-2xx is raised as the client's ApiException."""
        response = self._send(method, path, query, body, content_type, timeout)
        data = response.read()
        if not 200 <= response.status <= 299:
            raise ApiException(http_resp=response)
        return json.loads(data) if data else None

    def read_text(self, path: str, *, query: Mapping[str, Any] | None = None, timeout: float | None = None) -> str:
        """A text answer (a pod's log: pods/log serves text/plain); any non-2xx as the client's ApiException."""
        response = self._send("GET", path, query, None, None, timeout, accept="text/plain, */*")
        data = response.read()
        if not 200 <= response.status <= 299:
            raise ApiException(http_resp=response)
        return bytes(data or b"").decode("utf-8", errors="replace")

    def get(self, path: str, **query: Any) -> Json | None:
        """The object, or None when it does not exist."""
        try:
            found = self.request("GET", path, query=query)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return cast(Json, found)

    def list_all(self, path: str, *, label_selector: str | None = None,
                 field_selector: str | None = None, page: int = PAGE) -> tuple[list[Json], str]:
        """Every item, page by page, and the list's resourceVersion (to watch from)."""
        items: list[Json] = []
        token: str | None = None
        while True:
            answer = self.request("GET", path, query={"labelSelector": label_selector,
                                                      "fieldSelector": field_selector, "limit": page,
                                                      "continue": token})
            items.extend(answer.get("items") or [])
            meta = answer.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                return items, str(meta.get("resourceVersion") or "")

    def watch(self, path: str, *, resource_version: str, label_selector: str | None = None,
              field_selector: str | None = None, timeout_s: int = 300,
              on_open: Callable[[Any], None] | None = None) -> Iterator[Json]:
        """Watch events as dicts ({"type", "object"}), including ERROR and BOOKMARK, until the server ends the
        stream (after `timeout_s`, or when it drops it). `on_open(response)` gets the live response so another
        thread can shut it down."""
        query = {"watch": "true", "resourceVersion": resource_version, "labelSelector": label_selector,
                 "fieldSelector": field_selector, "timeoutSeconds": timeout_s, "allowWatchBookmarks": "true"}
        response = self._send("GET", path, query, None, None, (10.0, timeout_s + 30.0))
        if response.status != 200:
            response.read()
            raise ApiException(http_resp=response)
        raw = response.response
        if on_open is not None:
            on_open(raw)
        try:
            yield from _lines(raw)
        finally:
            raw.release_conn()

    # ---- discovery ----

    def resource(self, api_version: str, kind: str) -> Resource | None:
        """The served resource of a kind (from the group version's discovery document), None if not served.
        Only what is served is remembered: a CRD installed meanwhile (Kueue, a PodGroup) is seen at the next ask."""
        key = (api_version, kind)
        with self._lock:
            if key in self._resources:
                return self._resources[key]
        doc = self.get(api_prefix(api_version))
        found: Resource | None = None
        for item in (doc or {}).get("resources") or []:
            name = str(item.get("name", ""))
            if item.get("kind") == kind and "/" not in name:
                found = Resource(api_version, kind, name, bool(item.get("namespaced")))
                break
        if found is not None:
            with self._lock:
                self._resources[key] = found
        return found


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _lines(raw: Any) -> Iterator[Json]:
    pending = b""
    for chunk in raw.stream(amt=None, decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield json.loads(line)
    if pending.strip():
        yield json.loads(pending)
