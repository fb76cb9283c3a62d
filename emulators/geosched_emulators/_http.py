"""Plumbing shared by the emulators: a loopback HTTP server in a background
thread, runtime fault rules, and the call log."""

from __future__ import annotations

import http.server
import itertools
import json
import socket
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, Literal, Self, TypeVar
from urllib.parse import parse_qs, urlsplit

# The emulators must never be reachable from anywhere but this machine.
LOOPBACK = "127.0.0.1"

Times = int | Literal["always"]

F = TypeVar("F")


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: bytes


@dataclass
class HttpResponse:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = field(default_factory=list)


App = Callable[[HttpRequest], HttpResponse]


class _Handler(http.server.BaseHTTPRequestHandler):
    # HTTP/1.1 so that the SDKs' pooled keep-alive connections behave as they
    # do against the real endpoints (and so every response needs a length).
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle on, the body
    # waits ~40 ms for the client's delayed ACK on every call.
    disable_nagle_algorithm = True
    server: _AppServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _dispatch(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        request = HttpRequest(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        try:
            response = self.server.app(request)
        except Exception as exc:  # a bug in a double must surface as a 500, not hang the client
            response = HttpResponse(500, f"emulator bug: {exc!r}".encode(), [("Content-Type", "text/plain")])
        self.send_response(response.status)
        sent = {k.lower() for k, _ in response.headers}
        for key, value in response.headers:
            if key.lower() not in ("content-length", "connection", "transfer-encoding", "server", "date"):
                self.send_header(key, value)
        if "content-type" not in sent:
            self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch


# A client that goes away mid-request (a killed process, a client timeout) shows up as one of these while
# the handler reads the request or writes the answer. Real endpoints shrug that off, and so do we.
CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class _AppServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    app: App

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
        """socketserver prints a traceback to stderr for every failed request; not for a client that left
        (the kill campaign does that on purpose, hundreds of times), but still for anything else."""
        if isinstance(sys.exc_info()[1], CLIENT_GONE):
            return
        super().handle_error(request, client_address)


class BackgroundHttpServer:
    """Serves `app` on 127.0.0.1 on an ephemeral port from a daemon thread."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._server: _AppServer | None = None
        self._thread: threading.Thread | None = None
        # Stalled handlers wait on this so that stop() does not have to sit out
        # a long injected stall.
        self.stopping = threading.Event()

    def start(self) -> None:
        if self._server is not None:
            return
        self.stopping.clear()
        server = _AppServer((LOOPBACK, 0), _Handler)
        server.app = self._app
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self.stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("server is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def sleep(self, seconds: float) -> None:
        self.stopping.wait(seconds)


@dataclass
class FaultRule(Generic[F]):
    """One injected fault. `remaining` is None for faults that fire on every
    matching call; `hits` counts how often it fired."""

    id: int
    fault: F
    zone: str | None
    method: str | None
    remaining: int | None
    hits: int = 0

    def matches(self, zone: str | None, method: str) -> bool:
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.zone is not None and self.zone != zone:
            return False
        return self.method is None or self.method == method


class FaultRules(Generic[F]):
    """Thread-safe ordered set of fault rules; the oldest matching rule wins."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule[F]] = []
        self._ids = itertools.count(1)

    def add(self, fault: F, *, zone: str | None, method: str | None, times: Times) -> FaultRule[F]:
        if times != "always" and (not isinstance(times, int) or times < 1):
            raise ValueError(f"times must be a positive int or 'always', not {times!r}")
        rule = FaultRule(
            id=next(self._ids),
            fault=fault,
            zone=zone,
            method=method,
            remaining=None if times == "always" else times,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def take(self, zone: str | None, method: str, accept: Callable[[F], bool]) -> F | None:
        with self._lock:
            for rule in self._rules:
                if rule.matches(zone, method) and accept(rule.fault):
                    rule.hits += 1
                    if rule.remaining is not None:
                        rule.remaining -= 1
                    return rule.fault
        return None

    def remove(self, rule_id: int) -> None:
        with self._lock:
            self._rules = [r for r in self._rules if r.id != rule_id]

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def __iter__(self) -> Iterator[FaultRule[F]]:
        with self._lock:
            return iter(list(self._rules))


@dataclass(frozen=True)
class CallRecord:
    """One API call as the emulator saw it.

    `status` is the HTTP status returned. `error_code` is the provider error
    code the caller will see (e.g. ``ZONE_RESOURCE_POOL_EXHAUSTED`` inside a
    200 operation, or ``InsufficientInstanceCapacity``); None on success.
    `injected` is True when a fault rule produced or delayed the response."""

    method: str
    zone: str | None
    status: int
    error_code: str | None = None
    injected: bool = False
    at: float = field(default_factory=time.time)


class CallLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[CallRecord] = []

    def append(self, record: CallRecord) -> None:
        with self._lock:
            self._records.append(record)

    def snapshot(self) -> list[CallRecord]:
        with self._lock:
            return list(self._records)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def count(
        self,
        method: str | None = None,
        zone: str | None = None,
        status: int | None = None,
        error_code: str | None = None,
    ) -> int:
        return sum(
            1
            for r in self.snapshot()
            if (method is None or r.method == method)
            and (zone is None or r.zone == zone)
            and (status is None or r.status == status)
            and (error_code is None or r.error_code == error_code)
        )


ADMIN_PREFIX = "/_emulator"


def json_response(status: int, body: Any) -> HttpResponse:
    return HttpResponse(status, json.dumps(body).encode(), [("Content-Type", "application/json; charset=UTF-8")])


class Emulator(ABC, Generic[F]):
    """What every emulator here shares: served on loopback from a background thread, fault rules of its own
    fault type, and a log of the calls it saw. Subclasses implement `_app` and their own `inject`."""

    def __init__(self) -> None:
        self.faults: FaultRules[F] = FaultRules()
        self.log = CallLog()
        self._server = BackgroundHttpServer(self._app)

    @abstractmethod
    def _app(self, req: HttpRequest) -> HttpResponse:
        """Answer one request (runs on the server's threads); hand `ADMIN_PREFIX/...` paths to `_admin`."""

    @abstractmethod
    def _fault(self, doc: Mapping[str, Any]) -> F:
        """A fault of this emulator's kind from its `to_dict()` form."""

    def _admin_route(self, route: tuple[str, str], data: dict[str, Any]) -> HttpResponse | None:
        """This emulator's own control routes (quota, capacity, ...); None: no such route."""
        return None

    def _admin(self, req: HttpRequest) -> HttpResponse:
        """The control API for a process that cannot reach this object (a geosched subprocess under test):

            POST   /_emulator/faults  {"fault": <Fault.to_dict()>, "zone", "method" (GCE) | "action" (EC2), "times"}
            DELETE /_emulator/faults
            GET    /_emulator/calls ; DELETE /_emulator/calls
        plus the routes of `_admin_route`."""
        try:
            data: dict[str, Any] = json.loads(req.body) if req.body else {}
        except ValueError:
            return json_response(400, {"error": "body must be JSON"})
        route = (req.method, req.path[len(ADMIN_PREFIX):])
        try:
            if route == ("POST", "/faults"):
                rule = self.faults.add(self._fault(data["fault"]), zone=data.get("zone"),
                                       method=data.get("method", data.get("action")), times=data.get("times", 1))
                return json_response(200, {"id": rule.id})
            if route == ("DELETE", "/faults"):
                self.clear_faults()
                return json_response(200, {})
            if route == ("GET", "/calls"):
                return json_response(200, {"calls": [asdict(c) for c in self.calls]})
            if route == ("DELETE", "/calls"):
                self.log.clear()
                return json_response(200, {})
            own = self._admin_route(route, data)
        except (KeyError, TypeError, ValueError) as exc:
            return json_response(400, {"error": repr(exc)})
        return own if own is not None else json_response(404, {"error": f"no admin route {route}"})

    def start(self) -> Self:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: boto3's ``endpoint_url``, or ClientOptions(api_endpoint=...)."""
        return self._server.url

    @property
    def endpoint(self) -> str:
        return self.url

    def clear_faults(self) -> None:
        self.faults.clear()

    @property
    def calls(self) -> list[CallRecord]:
        return self.log.snapshot()

    def call_count(self, method: str | None = None, zone: str | None = None, status: int | None = None,
                   error_code: str | None = None) -> int:
        """Calls seen of `method` (an EC2 Action or a GCE method id), optionally in `zone`, answered `status`
        or carrying `error_code`."""
        return self.log.count(method, zone, status, error_code)
