"""KubeEmulator: kmock's KubernetesEmulator taught the API server behaviours the official client relies on.

Kept from kmock: the aiohttp handler protocol, `kmock.Request` records with the DSL (`emulator['get /x'] << ...`
reactions still take precedence over the emulated API), the discovery endpoints and `/version`, Status-shaped
error rendering, and the `objects` array (every stored version of every object, for assertions).
Replaced: request path parsing (kmock's parser fails on `/api/v1/namespaces` and misreads namespace URLs) and the
verb handlers (kmock has no resourceVersion, PUT, selectors, subresources, patch types or apply); those live in
`store.Store`. Added here: watch streams over the store's event history, fault injection and the request log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import rendering
from typing_extensions import override

from . import errors
from .catalog import Catalog, ResourceSpec
from .errors import ApiError
from .faults import FaultRules, RequestLog, RequestRecord
from .store import Obj, Store


@dataclass(frozen=True)
class ApiPath:
    group: str | None = None  # "" for the core group; None when not an API path at all
    version: str | None = None
    namespace: str | None = None
    plural: str | None = None
    name: str | None = None
    subresource: str | None = None


def parse_api_path(path: str) -> ApiPath:
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        group, rest = "", parts[1:]
    elif parts[:1] == ["apis"] and len(parts) >= 2:
        group, rest = parts[1], parts[2:]
    else:
        return ApiPath()
    version, rest = (rest[0], rest[1:]) if rest else (None, [])
    namespace = None
    # namespaces/{ns}/{plural}... is a namespaced URL; namespaces/{name}[/status|/finalize] is a Namespace.
    if len(rest) >= 3 and rest[0] == "namespaces" and not (len(rest) == 3 and rest[2] in {"status", "finalize"}):
        namespace, rest = rest[1], rest[2:]
    return ApiPath(group, version, namespace, rest[0] if rest else None, rest[1] if len(rest) > 1 else None,
                   "/".join(rest[2:]) or None)


def _action(method: str, path: ApiPath, query: Mapping[str, str]) -> kmock.action | None:
    if path.plural is None:
        return None
    if method == "GET" and query.get("watch") in {"true", "1"}:
        return kmock.action.WATCH
    if path.name is None:
        return {"GET": kmock.action.LIST, "POST": kmock.action.CREATE}.get(method)
    return {"GET": kmock.action.FETCH, "PATCH": kmock.action.UPDATE, "PUT": kmock.action.UPDATE,
            "DELETE": kmock.action.DELETE}.get(method)


def _json(obj: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> aiohttp.web.Response:
    return aiohttp.web.json_response(obj, status=status, headers=dict(headers or {}))


def _error(exc: ApiError) -> aiohttp.web.Response:
    return _json(exc.body(), exc.code, exc.headers)


def _line(event: Obj) -> bytes:
    return json.dumps(event).encode() + b"\n"


@attrs.define(kw_only=True)
class KubeEmulator(kmock.KubernetesEmulator):
    cluster_name: str = "cluster"
    token: str | None = None  # when set, requests must carry "Authorization: Bearer <token>"
    event_window: int = 10_000
    catalog: Catalog = attrs.field(factory=Catalog.default)
    faults: FaultRules = attrs.field(factory=FaultRules)
    log: RequestLog = attrs.field(factory=RequestLog)
    store: Store = attrs.field(init=False)
    server_errors: list[BaseException] = attrs.field(factory=list, init=False)
    _stopping: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)

    def __attrs_post_init__(self) -> None:
        # The scaffold's discovery/version/404 routes, but not KubernetesEmulator's verb fallbacks.
        kmock.KubernetesScaffold.__attrs_post_init__(self)
        self.store = Store(self.catalog, self.objects, event_window=self.event_window,
                           on_new_resource=self.declare)
        for spec in self.catalog.specs():
            self.declare(spec)

    def declare(self, spec: ResourceSpec) -> None:
        """Make a resource discoverable (kmock's `resources` registry feeds /api and /apis). Declaring a resource
        again replaces it, as an updated CRD does: versions it no longer lists are no longer served."""
        for version in self.catalog.remove(spec.group, spec.plural):
            self.resources.pop(kmock.resource(spec.group, version, spec.plural), None)
        self.catalog.add(spec)
        for version in spec.versions:
            self.resources[kmock.resource(spec.group, version, spec.plural)] = kmock.ResourceInfo(
                namespaced=spec.namespaced, kind=spec.kind, singular=spec.singular or spec.kind.lower(),
                verbs=set(spec.verbs), shortnames=set(spec.short_names), subresources=set(spec.subresources),
            )

    def shutdown(self) -> None:
        """End every watch and hang so the HTTP server can close at once."""
        self._stopping.set()
        for watcher in self.store.watchers_of():
            watcher.drop()

    # ---- request intake --------------------------------------------------------------------------------------

    def _parse(self, raw: aiohttp.web.BaseRequest, body: bytes) -> rendering.Request:
        text = body.decode("utf-8", errors="replace")
        data: Any = None
        if body:
            try:
                data = json.loads(body)
            except ValueError:
                if "yaml" in raw.headers.get("Content-Type", ""):
                    try:
                        data = yaml.safe_load(text)
                    except yaml.YAMLError:
                        data = None
        path = parse_api_path(raw.path)
        query = dict(raw.query)
        resource = None if path.group is None else kmock.resource(group=path.group, version=path.version,
                                                                  plural=path.plural)
        return rendering.Request(
            id=len(self._requests), raw_request=raw, url=raw.url, method=raw.method, params=query,
            headers=dict(raw.headers), cookies=dict(raw.cookies), body=body, text=text, data=data,
            action=_action(raw.method, path, query), resource=resource, namespace=path.namespace,
            name=path.name, subresource=path.subresource,
        )

    @override
    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        body = await raw_request.read()
        raw_response: aiohttp.web.StreamResponse | None = None
        try:
            request = self._parse(raw_request, body)
            self._requests.append(request)
            try:
                return await self._handle(request)
            except rendering.StreamingError as e:
                raw_response = e.args[0]
                raise e.__cause__ or e from None
        except Exception as e:
            # Kept for assertions: a bug in the emulator must not pass for an API error. kmock's own
            # KubernetesErrors (its 404 for unknown URLs) are answers, not bugs.
            if not isinstance(e, kmock.KubernetesError):
                self.server_errors.append(e)
            if raw_response is None or not raw_response.prepared:
                return await self._render_error(e)
            await self._stream_error(e, raw_response)
            await raw_response.write_eof()
            return raw_response

    @override
    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        raw = request._raw_request
        assert raw is not None
        auth = request.headers.get("Authorization", "")
        record = self.log.add(
            method=str(request.method.value), path=raw.path, query=dict(request.params),
            content_type=request.headers.get("Content-Type", ""),
            token=auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None,
            watch=request.action == kmock.action.WATCH, body=request.data,
        )
        response: aiohttp.web.StreamResponse | None = None
        try:
            response = await self._respond(request, record)
            return response
        finally:
            record.status = response.status if response is not None else 500

    async def _respond(self, request: rendering.Request, record: RequestRecord) -> aiohttp.web.StreamResponse:
        if self.token is not None and record.token != self.token:
            return _error(errors.status_error(401, "Unauthorized"))
        rule = self.faults.take(record.method, record.path, record.watch)
        if rule is not None:
            record.fault = rule
            if rule.hang:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), rule.hang)
            if rule.status is not None:
                return _error(rule.error(record.path))
        if request.resource is not None and request.resource.plural and not self._has_user_reaction(request):
            return await self._serve_k8s(request, record)
        # The generated client asks for "/apis/" and "/api/"; kmock's routes only know them without the slash.
        if record.method == "GET" and record.path in {"/apis/", "/api/"}:
            serve = self._serve_apis if record.path == "/apis/" else self._serve_api
            return _json(await serve(request))
        # Discovery, /version, the 404 catch-all, and whatever the test declared with the kmock DSL.
        return await kmock.RawHandler._handle(self, request)

    def _has_user_reaction(self, request: rendering.Request) -> bool:
        """Whether a reaction declared through the kmock DSL (not one of kmock's -inf fallbacks) wants it."""
        for payload in self._payloads:
            if -math.inf in payload.priorities or payload._disabled.is_set():
                continue
            if request in payload._source:
                return True
        return False

    # ---- the emulated API ------------------------------------------------------------------------------------

    async def _serve_k8s(self, request: rendering.Request, record: RequestRecord) -> aiohttp.web.StreamResponse:
        res = request.resource
        assert res is not None and res.plural is not None and res.version is not None and res.group is not None
        spec = self.catalog.lookup(res.group, res.version, res.plural)
        ns, name, sub = request.namespace, request.name, request.subresource
        if spec is None or (ns is not None and not spec.namespaced):
            return _error(errors.unknown_resource())
        version, q, method = res.version, request.params, str(request.method.value)
        dry_run = q.get("dryRun") == "All"
        store = self.store
        try:
            if spec.plural == "bindings" and spec.group == "":
                if method != "POST" or name is not None or ns is None:
                    return _error(errors.status_error(405, "the server does not allow this method on the requested "
                                                      "resource"))
                data = request.data if isinstance(request.data, dict) else {}
                bname = str((data.get("metadata") or {}).get("name", ""))
                return _json(store.bind(ns, bname, data, dry_run=dry_run), 201)
            if sub is not None and not (sub == "status" and spec.has_status) and not (
                    sub == "binding" and (spec.group, spec.plural) == ("", "pods")):
                return _error(errors.unknown_resource())
            if method == "GET" and record.watch:
                return await self._stream_watch(request, spec, version)
            if method == "GET" and name is None:
                limit = int(q["limit"]) if q.get("limit") else None
                return _json(store.list_objects(spec, version, ns, label_selector=q.get("labelSelector"),
                                        field_selector=q.get("fieldSelector"), limit=limit,
                                        continue_=q.get("continue")))
            if method == "GET" and name is not None:
                return _json(store.get(spec, version, ns, name))
            if spec.namespaced and ns is None and method != "GET":
                return _error(errors.unknown_resource())
            if method == "POST" and sub == "binding" and name is not None and ns is not None:
                return _json(store.bind(ns, name, request.data, dry_run=dry_run), 201)
            if method == "POST" and name is None:
                return _json(store.create(spec, version, ns, request.data, dry_run=dry_run), 201)
            if method == "PUT" and name is not None:
                obj, code = store.replace(spec, version, ns, name, request.data, subresource=sub, dry_run=dry_run)
                return _json(obj, code)
            if method == "PATCH" and name is not None:
                obj, code = store.patch(spec, version, ns, name, request.headers.get("Content-Type", ""),
                                        request.data, subresource=sub, field_manager=q.get("fieldManager"),
                                        force=q.get("force") == "true", dry_run=dry_run)
                return _json(obj, code)
            if method == "DELETE" and name is not None:
                options = request.data if isinstance(request.data, dict) else None
                obj, code = store.delete(spec, version, ns, name, options, dry_run=dry_run)
                return _json(obj, code)
            if method == "DELETE":
                options = request.data if isinstance(request.data, dict) else None
                return _json(store.delete_collection(spec, version, ns, label_selector=q.get("labelSelector"),
                                                     field_selector=q.get("fieldSelector"), options=options,
                                                     dry_run=dry_run))
            return _error(errors.status_error(405, "the server does not allow this method on the requested resource"))
        except ApiError as e:
            return _error(e)
        except ValueError as e:  # e.g. a non-integer ?limit=
            return _error(errors.bad_request(str(e)))

    async def _stream_watch(self, request: rendering.Request, spec: ResourceSpec,
                           version: str) -> aiohttp.web.StreamResponse:
        q = request.params
        raw = request._raw_request
        assert raw is not None
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else None
        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        try:
            watcher, initial = self.store.open_watch(
                spec, version, request.namespace, label_selector=q.get("labelSelector"),
                field_selector=q.get("fieldSelector"), resource_version=q.get("resourceVersion"))
        except ApiError as e:
            if e.code != 410:
                return _error(e)
            # Too old a resourceVersion is not an HTTP error: the API server opens the stream, sends one ERROR
            # event with the 410 Status and closes it.
            await response.prepare(raw)
            await response.write(_line({"type": "ERROR", "object": e.body()}))
            await response.write_eof()
            return response
        watcher.bookmarks = q.get("allowWatchBookmarks") == "true"
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        try:
            # Send the headers now: a client blocks until it has them, even when nothing has happened yet.
            await response.prepare(raw)
            for replayed in initial:
                await response.write(_line(replayed))
            while True:
                remaining = None if deadline is None else max(0.0, deadline - loop.time())
                try:
                    event = await asyncio.wait_for(watcher.queue.get(), remaining)
                except TimeoutError:
                    break
                if event is None:
                    break
                await response.write(_line(event))
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away; nothing left to tell it
        finally:
            self.store.close_watch(watcher)
        return response

    def bookmark(self) -> int:
        """Send a BOOKMARK at the current resourceVersion to every watch that allowed bookmarks."""
        sent = 0
        for watcher in self.store.watchers_of():
            if watcher.bookmarks and not watcher.dropped:
                watcher.queue.put_nowait({"type": "BOOKMARK", "object": {
                    "kind": watcher.spec.kind, "apiVersion": watcher.spec.api_version(watcher.version),
                    "metadata": {"resourceVersion": str(self.store.rv)}}})
                sent += 1
        return sent

    def drop_watches(self, plural: str | None = None) -> int:
        dropped = 0
        for watcher in self.store.watchers_of(plural):
            if not watcher.dropped:
                watcher.drop()
                dropped += 1
        return dropped

    # ---- discovery (kmock's, but with the storage version as the preferred one) -------------------------------

    def _group_versions(self) -> dict[str, tuple[list[str], str]]:
        groups: dict[str, tuple[list[str], str]] = {}
        for spec in self.catalog.specs():
            if not spec.group:
                continue
            versions, _preferred = groups.get(spec.group, ([], spec.storage))
            versions.extend(v for v in spec.versions if v not in versions)
            groups[spec.group] = (versions, spec.storage)
        return groups

    @staticmethod
    def _api_group(group: str, versions: list[str], preferred: str) -> Obj:
        return {
            "name": group,
            "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
            "preferredVersion": {"groupVersion": f"{group}/{preferred}", "version": preferred},
        }

    @override
    async def _serve_apis(self, request: rendering.Request) -> rendering.Payload:
        return {"kind": "APIGroupList", "apiVersion": "v1",
                "groups": [self._api_group(g, v, p) for g, (v, p) in sorted(self._group_versions().items())]}

    @override
    async def _serve_group(self, request: rendering.Request) -> rendering.Payload:
        assert request.resource is not None
        found = self._group_versions().get(request.resource.group or "")
        if found is None:
            raise kmock.KubernetesResourceNotFoundError()
        return {"kind": "APIGroup", "apiVersion": "v1", **self._api_group(request.resource.group or "", *found)}

    @override
    async def _render_error(self, exc: Exception) -> aiohttp.web.StreamResponse:
        if isinstance(exc, kmock.KubernetesError):
            return await super()._render_error(exc)
        return _json(errors.status_error(500, f"emulator bug: {exc!r}\n{traceback.format_exc()}").body(), 500)
