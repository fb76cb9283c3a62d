"""The object store behind one emulated cluster: API server semantics over kmock's object array.

Single-threaded by design: every method runs on the emulator's event loop thread, so each verb is atomic without
locks (no `await` inside). Objects live in kmock's `ObjectsArray` (each write appends a version to the object's
history there); this module adds what kmock lacks: resourceVersion and uid, optimistic concurrency, defaults,
status subresource rules, selectors, paging, patch formats, server-side apply, pod binding, finalizers, and the
event history that watches replay from.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import json
import re
import secrets
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import kmock

from . import errors
from .catalog import Catalog, ResourceSpec, spec_from_crd
from .errors import ApiError
from .patches import (
    PatchError,
    Path,
    apply_merge,
    delete_path,
    from_fields_v1,
    get_path,
    json_patch,
    leaf_paths,
    merge_patch,
    strategic_merge_patch,
    to_fields_v1,
)
from .selectors import FieldSelector, LabelSelector, SelectorError, valid_label_key, valid_label_value

Obj = dict[str, Any]

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# names.SimpleNameGenerator's alphabet: no vowels (no words), no look-alike digits.
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_POD_MUTABLE_MSG = (
    "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
    "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Event:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    spec: ResourceSpec
    obj: Obj
    prev: Obj | None


def output(spec: ResourceSpec, obj: Mapping[str, Any], version: str | None) -> Obj:
    """A stored object as served under one version (no schema conversion: only apiVersion changes)."""
    out = copy.deepcopy(dict(obj))
    out["apiVersion"] = spec.api_version(version)
    out["kind"] = spec.kind
    return out


class Watcher:
    """One open watch: filters the store's events and queues them for the HTTP stream (None = close it)."""

    def __init__(self, spec: ResourceSpec, version: str, namespace: str | None, labels: LabelSelector,
                 fields: FieldSelector) -> None:
        self.spec = spec
        self.version = version
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.queue: asyncio.Queue[Obj | None] = asyncio.Queue()
        self.dropped = False
        self.bookmarks = False  # the client sent allowWatchBookmarks=true

    def visible(self, obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        if self.namespace is not None and meta(obj).get("namespace") != self.namespace:
            return False
        return self.labels.matches(meta(obj).get("labels")) and self.fields.matches(obj)

    def render(self, type_: str, obj: Mapping[str, Any]) -> Obj:
        return {"type": type_, "object": output(self.spec, obj, self.version)}

    def translate(self, event: Event) -> Obj | None:
        """The event as this watch sees it: an object moving into or out of the selector is ADDED or DELETED,
        as the API server's watch cache reports it."""
        if (event.spec.group, event.spec.plural) != (self.spec.group, self.spec.plural):
            return None
        now_in = self.visible(event.obj)
        if event.type in {"ADDED", "DELETED"}:
            return self.render(event.type, event.obj) if now_in else None
        was_in = self.visible(event.prev)
        if now_in:
            return self.render("MODIFIED" if was_in else "ADDED", event.obj)
        if was_in and event.prev is not None:
            gone = copy.deepcopy(event.prev)
            gone["metadata"]["resourceVersion"] = str(event.rv)
            return self.render("DELETED", gone)
        return None

    def offer(self, event: Event) -> None:
        if not self.dropped and (rendered := self.translate(event)) is not None:
            self.queue.put_nowait(rendered)

    def drop(self) -> None:
        if not self.dropped:
            self.dropped = True
            self.queue.put_nowait(None)


class Store:
    def __init__(self, catalog: Catalog, objects: kmock.ObjectsArray, *, event_window: int = 10_000,
                 on_new_resource: Callable[[ResourceSpec], None] | None = None) -> None:
        self.catalog = catalog
        self.objects = objects
        self.event_window = event_window
        self.on_new_resource = on_new_resource
        self.rv = 0
        self.compacted_rv = 0
        self.events: deque[Event] = deque()
        self.watchers: set[Watcher] = set()

    # ---- reading ---------------------------------------------------------------------------------------------

    def _spec(self, group: str, plural: str) -> ResourceSpec:
        for spec in self.catalog.specs():
            if (spec.group, spec.plural) == (group, plural):
                return spec
        raise KeyError(f"{plural}.{group}")

    def _key(self, spec: ResourceSpec, namespace: str | None, name: str) -> tuple[kmock.resource, str | None, str]:
        return spec.key, namespace if spec.namespaced else None, name

    def current(self, spec: ResourceSpec, namespace: str | None, name: str) -> Obj | None:
        key = self._key(spec, namespace, name)
        if key not in self.objects:
            return None
        stored = self.objects[key]
        return None if stored.deleted else stored.raw

    def items(self, spec: ResourceSpec, namespace: str | None) -> list[Obj]:
        """Live objects ordered as etcd lists them: by namespace, then name."""
        key = spec.key
        found = [
            (ns or "", name, stored.raw)
            for (res, ns, name), stored in self.objects.items()
            if res == key and (namespace is None or ns == namespace) and not stored.deleted
        ]
        return [obj for _ns, _name, obj in sorted(found, key=lambda t: (t[0], t[1]))]

    def get(self, spec: ResourceSpec, version: str, namespace: str | None, name: str) -> Obj:
        obj = self.current(spec, namespace, name)
        if obj is None:
            raise errors.not_found(spec, name)
        return output(spec, obj, version)

    def list_objects(self, spec: ResourceSpec, version: str, namespace: str | None, *,
                     label_selector: str | None = None, field_selector: str | None = None, limit: int | None = None,
                     continue_: str | None = None) -> Obj:
        labels, fields = self.selectors(spec, label_selector, field_selector)
        items = [o for o in self.items(spec, namespace) if labels.matches(meta(o).get("labels")) and fields.matches(o)]
        list_rv = self.rv
        if continue_:
            list_rv, after = self._decode_continue(continue_)
            items = [o for o in items if (meta(o).get("namespace") or "", meta(o)["name"]) > after]
        list_meta: Obj = {"resourceVersion": str(list_rv)}
        if limit and len(items) > limit:
            last = meta(items[limit - 1])
            list_meta["continue"] = self._encode_continue(list_rv, (last.get("namespace") or "", last["name"]))
            list_meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        return {"kind": f"{spec.kind}List", "apiVersion": spec.api_version(version), "metadata": list_meta,
                "items": [output(spec, o, version) for o in items]}

    @staticmethod
    def selectors(spec: ResourceSpec, label_selector: str | None,
                  field_selector: str | None) -> tuple[LabelSelector, FieldSelector]:
        try:
            return LabelSelector.parse(label_selector), FieldSelector.parse(field_selector, spec)
        except SelectorError as e:
            raise errors.bad_request(str(e)) from e

    def _encode_continue(self, rv: int, after: tuple[str, str]) -> str:
        raw = json.dumps({"rv": rv, "after": list(after)}).encode()
        return base64.urlsafe_b64encode(raw).decode()

    def _decode_continue(self, token: str) -> tuple[int, tuple[str, str]]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode()))
            rv, after = int(data["rv"]), (str(data["after"][0]), str(data["after"][1]))
        except (ValueError, KeyError, IndexError, TypeError, binascii.Error) as e:
            raise errors.bad_request(f"continue key is not valid: {e}") from e
        if rv < self.compacted_rv:
            raise errors.status_error(410, "The provided continue parameter is too old to display a consistent "
                                      "list result. You can start a new list without the continue parameter.",
                                      reason="Expired")
        return rv, after

    # ---- writing ---------------------------------------------------------------------------------------------

    def _commit(self, spec: ResourceSpec, type_: str, new: Obj | None, prev: Obj | None) -> Obj:
        self.rv += 1
        if type_ == "DELETED":
            assert prev is not None
            obj = copy.deepcopy(prev)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[self._key(spec, meta(prev).get("namespace"), meta(prev)["name"])].delete()
        else:
            assert new is not None
            obj = new
            obj["metadata"]["resourceVersion"] = str(self.rv)
            key = self._key(spec, meta(obj).get("namespace"), meta(obj)["name"])
            if key in self.objects:
                self.objects[key].history.append(obj)
            else:
                self.objects[key] = obj
        event = Event(self.rv, type_, spec, obj, prev)
        self.events.append(event)
        while len(self.events) > self.event_window:
            self.compacted_rv = self.events.popleft().rv
        for watcher in list(self.watchers):
            watcher.offer(event)
        return obj

    @staticmethod
    def _body(body: Any) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        obj = copy.deepcopy(body)
        if not isinstance(obj.setdefault("metadata", {}), dict):
            raise errors.bad_request("metadata must be an object")
        return obj

    def _scope(self, spec: ResourceSpec, namespace: str | None, obj: Obj, *, must_exist: bool = True) -> None:
        m = obj["metadata"]
        if not spec.namespaced:
            m.pop("namespace", None)
            return
        if namespace is None:
            raise errors.bad_request("a namespace is required for a namespaced resource")
        if m.get("namespace") and m["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                     "the request")
        m["namespace"] = namespace
        ns_spec = self._spec("", "namespaces")
        if must_exist and self.current(ns_spec, None, namespace) is None:
            raise errors.not_found(ns_spec, namespace)

    def _validate(self, spec: ResourceSpec, obj: Obj) -> None:
        m = obj["metadata"]
        name = m.get("name", "")
        pattern, limit, what = ((_DNS_LABEL, 63, "RFC 1123 label") if spec.plural == "namespaces"
                                else (_SUBDOMAIN, 253, "RFC 1123 subdomain"))
        if not isinstance(name, str) or not pattern.fullmatch(name) or len(name) > limit:
            raise errors.invalid(spec, str(name), "metadata.name", name,
                                 f"a lowercase {what} must consist of lower case alphanumeric characters, '-' or "
                                 "'.', and must start and end with an alphanumeric character")
        for key, value in (m.get("labels") or {}).items():
            if not isinstance(key, str) or not valid_label_key(key):
                raise errors.invalid(spec, name, "metadata.labels", key, "name part must consist of alphanumeric "
                                     "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                                     "character")
            if not isinstance(value, str) or not valid_label_value(value):
                raise errors.invalid(spec, name, "metadata.labels", value, "a valid label must be an empty string "
                                     "or consist of alphanumeric characters, '-', '_' or '.', and must start and "
                                     "end with an alphanumeric character")
        for key, value in (m.get("annotations") or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise errors.invalid(spec, name, "metadata.annotations", key, "annotation values must be strings")

    def _generate_name(self, spec: ResourceSpec, namespace: str | None, prefix: str) -> str:
        while True:
            name = prefix + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
            if self.current(spec, namespace, name) is None:
                return name

    def _prepare_create(self, spec: ResourceSpec, obj: Obj, *, keep_status: bool) -> None:
        m = obj["metadata"]
        for server_owned in ("deletionTimestamp", "deletionGracePeriodSeconds", "generation", "selfLink"):
            m.pop(server_owned, None)
        m["uid"] = str(uuid.uuid4())
        m["creationTimestamp"] = now()
        if spec.tracks_generation:
            m["generation"] = 1
        obj["apiVersion"], obj["kind"] = spec.api_version(), spec.kind
        # Status is the controllers' to write: the strategies drop it on create (nodes keep theirs: the kubelet
        # registers a node with its status).
        if spec.has_status and spec.plural != "nodes" and not keep_status:
            obj.pop("status", None)
        if (spec.group, spec.plural) == ("", "pods"):
            obj.setdefault("spec", {}).setdefault("schedulerName", "default-scheduler")
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        elif (spec.group, spec.plural) == ("", "namespaces"):
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj.setdefault("status", {}).setdefault("phase", "Active")
        elif (spec.group, spec.plural) == ("apiextensions.k8s.io", "customresourcedefinitions"):
            names = (obj.get("spec") or {}).get("names", {})
            obj["status"] = {
                "acceptedNames": names,
                "conditions": [{"type": t, "status": "True", "lastTransitionTime": now()}
                               for t in ("NamesAccepted", "Established")],
                "storedVersions": [v["name"] for v in (obj.get("spec") or {}).get("versions", []) if v.get("storage")],
            }

    def create(self, spec: ResourceSpec, version: str, namespace: str | None, body: Any, *,
               keep_status: bool = False, dry_run: bool = False, managed_fields: list[Obj] | None = None) -> Obj:
        obj = self._body(body)
        m = obj["metadata"]
        if m.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        self._scope(spec, namespace, obj)
        ns = m.get("namespace")
        if not m.get("name"):
            if not m.get("generateName"):
                raise errors.invalid(spec, "", "metadata.name", "", "name or generateName is required")
            m["name"] = self._generate_name(spec, ns, str(m["generateName"]))
        self._validate(spec, obj)
        if self.current(spec, ns, m["name"]) is not None:
            raise errors.already_exists(spec, m["name"])
        self._prepare_create(spec, obj, keep_status=keep_status)
        if managed_fields:
            m["managedFields"] = managed_fields
        else:
            m.pop("managedFields", None)
        if dry_run:
            return output(spec, obj, version)
        stored = self._commit(spec, "ADDED", obj, None)
        if (spec.group, spec.plural) == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._serve_crd(stored)
        return output(spec, stored, version)

    def _serve_crd(self, crd: Obj) -> None:
        try:
            new = spec_from_crd(crd)
        except (KeyError, TypeError, ValueError) as e:
            raise errors.bad_request(f"cannot serve CustomResourceDefinition: {e}") from e
        self.catalog.add(new)
        if self.on_new_resource is not None:
            self.on_new_resource(new)

    def _prepare_update(self, spec: ResourceSpec, old: Obj, incoming: Obj, subresource: str | None,
                        managed_fields: list[Obj] | None = None) -> Obj:
        old_meta = old["metadata"]
        name = old_meta["name"]
        if subresource == "status":
            # The status endpoint writes status only; spec and metadata changes are ignored, as in the server.
            new = copy.deepcopy(old)
            if "status" in incoming:
                new["status"] = copy.deepcopy(incoming["status"])
            else:
                new.pop("status", None)
        else:
            new = copy.deepcopy(incoming)
            if not isinstance(new.get("metadata"), dict):
                raise errors.bad_request("metadata must be an object")
            m = new["metadata"]
            if m.get("name") not in (None, name):
                raise errors.invalid(spec, name, "metadata.name", m.get("name"), "field is immutable")
            for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                        "deletionGracePeriodSeconds", "generation", "managedFields"):
                if key in old_meta:
                    m[key] = copy.deepcopy(old_meta[key])
                else:
                    m.pop(key, None)
            new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
            if spec.has_status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            if old_meta.get("deletionTimestamp"):
                added = set(m.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
                if added:
                    raise errors.forbidden_field(spec, name, "metadata.finalizers",
                                                 "no new finalizers can be added if the object is being deleted")
            if (spec.group, spec.plural) == ("", "pods"):
                self._check_pod_update(spec, name, old.get("spec") or {}, new.get("spec") or {})
            self._validate(spec, new)
            if spec.tracks_generation and _desired_state(new) != _desired_state(old):
                m["generation"] = int(old_meta.get("generation", 1)) + 1
        if managed_fields is not None:
            if managed_fields:
                new["metadata"]["managedFields"] = managed_fields
            else:
                new["metadata"].pop("managedFields", None)
        new["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
        return new

    @staticmethod
    def _check_pod_update(spec: ResourceSpec, name: str, old: Obj, new: Obj) -> None:
        def mutable_masked(pod_spec: Obj) -> Obj:
            masked = copy.deepcopy(pod_spec)
            for key in ("containers", "initContainers"):
                for container in masked.get(key) or []:
                    container.pop("image", None)
            for key in ("activeDeadlineSeconds", "tolerations", "schedulingGates", "terminationGracePeriodSeconds"):
                masked.pop(key, None)
            return masked

        if mutable_masked(old) != mutable_masked(new):
            raise errors.forbidden_field(spec, name, "spec", _POD_MUTABLE_MSG)
        old_gates = [g.get("name") for g in old.get("schedulingGates") or []]
        new_gates = [g.get("name") for g in new.get("schedulingGates") or []]
        if not set(new_gates) <= set(old_gates):
            raise errors.forbidden_field(spec, name, "spec.schedulingGates", "only deletion is allowed")

    def _finish_update(self, spec: ResourceSpec, version: str, old: Obj, new: Obj, *, dry_run: bool) -> Obj:
        # A write that changes nothing is not a write: no new resourceVersion, no watch event.
        if new == old:
            return output(spec, old, version)
        if dry_run:
            return output(spec, new, version)
        stored = self._commit(spec, "MODIFIED", new, old)
        if (spec.group, spec.plural) == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._serve_crd(stored)
        m = stored["metadata"]
        if m.get("deletionTimestamp") and not m.get("finalizers"):
            self._commit(spec, "DELETED", None, stored)
        return output(spec, stored, version)

    def _check_rv(self, spec: ResourceSpec, old: Obj, wanted: Any) -> None:
        if wanted and str(wanted) != meta(old)["resourceVersion"]:
            raise errors.conflict(spec.qualified, meta(old)["name"], group=spec.group, kind=spec.plural)

    def replace(self, spec: ResourceSpec, version: str, namespace: str | None, name: str, body: Any, *,
                subresource: str | None = None, dry_run: bool = False) -> tuple[Obj, int]:
        obj = self._body(body)
        m = obj["metadata"]
        if m.get("name") != name:
            raise errors.bad_request(f"the name of the object ({m.get('name', '')}) does not match the name on "
                                     f"the URL ({name})")
        self._scope(spec, namespace, obj, must_exist=False)
        old = self.current(spec, namespace, name)
        if old is None:
            if spec.create_on_update and subresource is None:
                m.pop("resourceVersion", None)
                return self.create(spec, version, namespace, obj, dry_run=dry_run), 201
            raise errors.not_found(spec, name)
        if m.get("resourceVersion"):
            self._check_rv(spec, old, m["resourceVersion"])
        elif not spec.unconditional_update:
            raise errors.invalid(spec, name, "metadata.resourceVersion", 0, "must be specified for an update")
        new = self._prepare_update(spec, old, obj, subresource)
        return self._finish_update(spec, version, old, new, dry_run=dry_run), 200

    def patch(self, spec: ResourceSpec, version: str, namespace: str | None, name: str, content_type: str,
              data: Any, *, subresource: str | None = None, field_manager: str | None = None, force: bool = False,
              dry_run: bool = False) -> tuple[Obj, int]:
        ctype = content_type.split(";")[0].strip().lower()
        if ctype == APPLY:
            return self.apply(spec, version, namespace, name, data, subresource=subresource,
                              field_manager=field_manager, force=force, dry_run=dry_run)
        accepted = [JSON_PATCH, MERGE, *([STRATEGIC] if spec.builtin else []), APPLY]
        if ctype not in accepted:
            raise errors.status_error(415, "the body of the request was in an unknown format - accepted media "
                                      f"types include: {', '.join(accepted)}")
        old = self.current(spec, namespace, name)
        if old is None:
            raise errors.not_found(spec, name)
        base = output(spec, old, version)
        try:
            if ctype == JSON_PATCH:
                patched = json_patch(base, data)
            elif not isinstance(data, dict):
                raise errors.bad_request("the patch must be a JSON object")
            elif ctype == MERGE:
                patched = merge_patch(base, data)
            else:
                patched = strategic_merge_patch(base, data)
        except PatchError as e:
            raise errors.status_error(422, f"the server rejected our request due to an error in our request: {e}",
                                      reason="Invalid") from e
        if not isinstance(patched, dict) or not isinstance(patched.get("metadata"), dict):
            raise errors.bad_request("the patched object must be a JSON object with metadata")
        # A resourceVersion the patch puts in is a precondition, exactly as in a PUT.
        self._check_rv(spec, old, patched["metadata"].get("resourceVersion"))
        new = self._prepare_update(spec, old, patched, subresource)
        return self._finish_update(spec, version, old, new, dry_run=dry_run), 200

    # ---- server-side apply -----------------------------------------------------------------------------------

    @staticmethod
    def _apply_owners(obj: Obj) -> dict[tuple[str, str], tuple[Obj, set[Path]]]:
        owners: dict[tuple[str, str], tuple[Obj, set[Path]]] = {}
        for entry in meta(obj).get("managedFields") or []:
            if entry.get("operation") == "Apply":
                owners[(entry.get("manager", ""), entry.get("subresource", ""))] = (
                    entry, from_fields_v1(entry.get("fieldsV1")))
        return owners

    def apply(self, spec: ResourceSpec, version: str, namespace: str | None, name: str, data: Any, *,
              subresource: str | None = None, field_manager: str | None = None, force: bool = False,
              dry_run: bool = False) -> tuple[Obj, int]:
        if not field_manager:
            raise errors.bad_request("PATCH requests with apply content type must have a fieldManager: "
                                     "fieldManager is required for apply requests")
        if not isinstance(data, dict):
            raise errors.bad_request("the apply configuration must be an object")
        for key in ("apiVersion", "kind"):
            if not data.get(key):
                raise errors.bad_request(f"Object '{'Kind' if key == 'kind' else 'apiVersion'}' is missing in the "
                                         "apply configuration")
        if data["apiVersion"] != spec.api_version(version) or data["kind"] != spec.kind:
            raise errors.bad_request(f"the apply configuration is a {data['apiVersion']}, Kind={data['kind']}, "
                                     f"not a {spec.api_version(version)}, Kind={spec.kind}")
        cfg_meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
        assert isinstance(cfg_meta, dict)
        if cfg_meta.get("name") != name:
            raise errors.bad_request(f"the name of the object ({cfg_meta.get('name', '')}) does not match the "
                                     f"name on the URL ({name})")
        if "managedFields" in cfg_meta:
            raise errors.bad_request("metadata.managedFields must be nil")
        if spec.namespaced and cfg_meta.get("namespace") not in (None, namespace):
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                     "the request")
        config = copy.deepcopy(data)
        if subresource == "status":
            config = {"metadata": copy.deepcopy(cfg_meta), "status": config.get("status") or {}}
        elif spec.has_status:
            config.pop("status", None)
        paths = leaf_paths({"status": config["status"]} if subresource == "status" else config)
        sub = subresource or ""
        wanted_rv = cfg_meta.get("resourceVersion")

        old = self.current(spec, namespace, name)
        if old is None:
            if subresource:
                raise errors.not_found(spec, name)
            if wanted_rv:
                raise errors.conflict(spec.qualified, name, group=spec.group, kind=spec.plural)
            entry = _managed_entry(field_manager, spec.api_version(version), sub, paths)
            created = self.create(spec, version, namespace, config, dry_run=dry_run, managed_fields=[entry])
            return created, 201

        self._check_rv(spec, old, wanted_rv)
        owners = self._apply_owners(old)
        mine = owners.get((field_manager, sub), ({}, set()))[1]
        others = {k: set(p) for k, (_e, p) in owners.items() if k != (field_manager, sub)}
        conflicts = [(mgr, path) for (mgr, _sub), owned in others.items() for path in sorted(paths & owned)
                     if get_path(old, path) != get_path(config, path)]
        if conflicts and not force:
            raise _apply_conflict(spec, name, conflicts)
        for (mgr, osub), owned in others.items():
            owned -= {path for cmgr, path in conflicts if cmgr == mgr}
            others[(mgr, osub)] = owned
        merged = apply_merge(copy.deepcopy(old), config)
        still_owned = set().union(*others.values()) if others else set()
        # Fields this manager applied before and has now dropped are removed unless someone else applies them.
        for path in sorted(mine - paths - still_owned, key=len, reverse=True):
            delete_path(merged, path)
        managed: list[Obj] = []
        for entry in meta(old).get("managedFields") or []:
            if entry.get("operation") != "Apply":
                managed.append(entry)
        # The applier's entry gets a new time whenever its apply changed the object, as on the server
        # (k8s.io/apiserver pkg/util/managedfields/internal/managedfieldsupdater.go: Apply stamps the manager's
        # time unless the apply was a no-op).
        changed = merged != old  # merged still carries old's metadata.managedFields and resourceVersion
        for (mgr, osub), owned in [*others.items(), ((field_manager, sub), paths)]:
            if not owned:
                continue
            previous = owners.get((mgr, osub))
            if previous is not None and previous[1] == owned and not (changed and mgr == field_manager
                                                                       and osub == sub):
                managed.append(previous[0])
            else:
                entry = _managed_entry(mgr, spec.api_version(version), osub, owned)
                if previous is not None and (mgr, osub) != (field_manager, sub):
                    # Fields taken from another manager by force: its set shrinks, its time stays.
                    entry["time"] = previous[0].get("time", entry["time"])
                managed.append(entry)
        merged["metadata"]["resourceVersion"] = meta(old)["resourceVersion"]
        new = self._prepare_update(spec, old, merged, subresource, managed_fields=managed)
        return self._finish_update(spec, version, old, new, dry_run=dry_run), 200

    # ---- deleting --------------------------------------------------------------------------------------------

    def delete(self, spec: ResourceSpec, version: str, namespace: str | None, name: str,
               options: Mapping[str, Any] | None = None, *, dry_run: bool = False) -> tuple[Obj, int]:
        old = self.current(spec, namespace, name)
        if old is None:
            raise errors.not_found(spec, name)
        m = old["metadata"]
        pre = (options or {}).get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != m.get("uid"):
            raise errors.conflict(spec.qualified, name, f"Precondition failed: UID in precondition: {pre['uid']}, "
                                  f"UID in object meta: {m.get('uid')}", group=spec.group, kind=spec.plural)
        if pre.get("resourceVersion") and pre["resourceVersion"] != m["resourceVersion"]:
            raise errors.conflict(spec.qualified, name, "Precondition failed: ResourceVersion in precondition: "
                                  f"{pre['resourceVersion']}, ResourceVersion in object meta: {m['resourceVersion']}",
                                  group=spec.group, kind=spec.plural)
        if dry_run:
            return output(spec, old, version), 200
        if m.get("finalizers"):
            if m.get("deletionTimestamp"):
                return output(spec, old, version), 200
            marked = copy.deepcopy(old)
            marked["metadata"]["deletionTimestamp"] = now()
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            return output(spec, self._commit(spec, "MODIFIED", marked, old), version), 200
        if (spec.group, spec.plural) == ("", "namespaces"):
            # No namespace controller here: the contents go at once, finalizers or not.
            for other in list(self.catalog.specs()):
                if other.namespaced:
                    for obj in self.items(other, name):
                        self._commit(other, "DELETED", None, obj)
        deleted = self._commit(spec, "DELETED", None, old)
        if spec.returns_deleted_object:
            return output(spec, deleted, version), 200
        return errors.success(details={"name": name, "group": spec.group, "kind": spec.plural,
                                       "uid": m.get("uid")}), 200

    def delete_collection(self, spec: ResourceSpec, version: str, namespace: str | None, *,
                          label_selector: str | None = None, field_selector: str | None = None,
                          options: Mapping[str, Any] | None = None, dry_run: bool = False) -> Obj:
        listed = self.list_objects(spec, version, namespace, label_selector=label_selector,
                                   field_selector=field_selector)
        for item in listed["items"]:
            self.delete(spec, version, meta(item).get("namespace"), meta(item)["name"], options, dry_run=dry_run)
        return errors.success()

    # ---- pods/binding ----------------------------------------------------------------------------------------

    def bind(self, namespace: str, name: str, binding: Any, *, dry_run: bool = False) -> Obj:
        """POST pods/{name}/binding, as BindingREST.Create and assignPod do it."""
        pods = self._spec("", "pods")
        if not isinstance(binding, dict):
            raise errors.bad_request("the request body must be a Binding object")
        bmeta = meta(binding)
        if bmeta.get("name") != name:
            raise errors.bad_request("name in URL does not match name in Binding object")
        target = binding.get("target") if isinstance(binding.get("target"), dict) else {}
        assert isinstance(target, dict)
        bindings = self._spec("", "bindings")
        if target.get("kind") not in (None, "", "Node"):
            raise errors.invalid(bindings, name, "target.kind", target.get("kind"), 'supported values: "Node", ""')
        if not target.get("name"):
            raise errors.invalid(bindings, name, "target.name", "", "Required value")
        pod = self.current(pods, namespace, name)
        if pod is None:
            raise errors.not_found(pods, name)
        m, pod_spec = pod["metadata"], pod.get("spec") or {}

        def refuse(why: str) -> ApiError:
            return errors.conflict("pods/binding", name, why, kind="pods/binding")

        if bmeta.get("uid") and bmeta["uid"] != m.get("uid"):
            raise refuse(f"Precondition failed: UID in precondition: {bmeta['uid']}, "
                         f"UID in object meta: {m.get('uid')}")
        if bmeta.get("resourceVersion") and bmeta["resourceVersion"] != m["resourceVersion"]:
            raise refuse(errors.OPTIMISTIC_LOCK)
        if m.get("deletionTimestamp"):
            raise refuse(f"pod {name} is being deleted, cannot be assigned to a host")
        if pod_spec.get("nodeName"):
            raise refuse(f'pod {name} is already assigned to node "{pod_spec["nodeName"]}"')
        if pod_spec.get("schedulingGates"):
            raise refuse(f"pod {name} has non-empty .spec.schedulingGates")
        bound = copy.deepcopy(pod)
        bound.setdefault("spec", {})["nodeName"] = target["name"]
        if bmeta.get("annotations"):
            bound["metadata"].setdefault("annotations", {}).update(bmeta["annotations"])
        conditions = bound.setdefault("status", {}).setdefault("conditions", [])
        scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if scheduled is None:
            conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                               "lastTransitionTime": now()})
        elif scheduled.get("status") != "True":
            scheduled.update({"status": "True", "lastTransitionTime": now()})
            scheduled.pop("reason", None)
            scheduled.pop("message", None)
        if not dry_run:
            self._commit(pods, "MODIFIED", bound, pod)
        return errors.success(201)

    # ---- watching --------------------------------------------------------------------------------------------

    def open_watch(self, spec: ResourceSpec, version: str, namespace: str | None, *, label_selector: str | None,
                   field_selector: str | None, resource_version: str | None) -> tuple[Watcher, list[Obj]]:
        """Register a watch and return what it must send first. Raises 410 Expired for a compacted RV."""
        labels, fields = self.selectors(spec, label_selector, field_selector)
        watcher = Watcher(spec, version, namespace, labels, fields)
        initial: list[Obj] = []
        if resource_version in (None, "", "0"):
            # "Start at most recent": the current state as ADDED events, then changes.
            initial = [watcher.render("ADDED", obj) for obj in self.items(spec, namespace) if watcher.visible(obj)]
        else:
            try:
                since = int(resource_version)
            except ValueError as e:
                raise errors.bad_request(f"invalid resource version: {resource_version!r}") from e
            if since < self.compacted_rv:
                raise errors.status_error(410, f"too old resource version: {since} ({self.compacted_rv + 1})",
                                          reason="Expired")
            for event in self.events:
                if event.rv > since and (rendered := watcher.translate(event)) is not None:
                    initial.append(rendered)
        self.watchers.add(watcher)
        return watcher, initial

    def close_watch(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    def compact(self, upto: int | None = None) -> int:
        """Forget the event history up to `upto` (default: now), as etcd compaction does. Returns the new floor."""
        floor = self.rv if upto is None else min(upto, self.rv)
        while self.events and self.events[0].rv <= floor:
            self.events.popleft()
        self.compacted_rv = max(self.compacted_rv, floor)
        return self.compacted_rv

    def watchers_of(self, plural: str | None = None) -> Iterator[Watcher]:
        for watcher in list(self.watchers):
            if plural is None or watcher.spec.plural == plural:
                yield watcher


def _desired_state(obj: Mapping[str, Any]) -> Obj:
    return {k: v for k, v in obj.items() if k not in {"metadata", "status", "apiVersion", "kind"}}


def _managed_entry(manager: str, api_version: str, subresource: str, paths: set[Path]) -> Obj:
    entry: Obj = {"manager": manager, "operation": "Apply", "apiVersion": api_version, "time": now(),
                  "fieldsType": "FieldsV1", "fieldsV1": to_fields_v1(paths)}
    if subresource:
        entry["subresource"] = subresource
    return entry


def _apply_conflict(spec: ResourceSpec, name: str, conflicts: list[tuple[str, Path]]) -> ApiError:
    fields = [(mgr, "." + ".".join(path)) for mgr, path in conflicts]
    if len(fields) == 1:
        message = f'Apply failed with 1 conflict: conflict with "{fields[0][0]}": {fields[0][1]}'
    else:
        lines = "\n".join(f'- conflict with "{mgr}": {field}' for mgr, field in fields)
        message = f"Apply failed with {len(fields)} conflicts:\n{lines}"
    return ApiError(409, "Conflict", message, details={
        "name": name, "group": spec.group, "kind": spec.plural,
        "causes": [{"reason": "FieldManagerConflict", "message": f'conflict with "{mgr}"', "field": field}
                   for mgr, field in fields],
    })
