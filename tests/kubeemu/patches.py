"""Patch formats (JSON merge, strategic merge, JSON patch) and the field bookkeeping of server-side apply."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import jsonpatch

Path = tuple[str, ...]

# Strategic merge patch merges these lists item by item on the key, wherever the field sits. The real
# patchMergeKey is per Go struct field; naming by field name is close enough for pods, nodes and jobs.
MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "volumeMounts": "mountPath", "ports": "containerPort", "conditions": "type",
    "ownerReferences": "uid", "imagePullSecrets": "name", "hostAliases": "ip", "podIPs": "ip",
    "topologySpreadConstraints": "topologyKey", "resourceClaims": "name", "schedulingGates": "name",
    "addresses": "type",
}
# Primitive lists with patchStrategy=merge: the patch's items are added to the existing ones.
PRIMITIVE_MERGE = frozenset({"finalizers"})


class PatchError(ValueError):
    pass


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Merge patch plus list merging by key, `$patch: delete|replace` and `$deleteFromPrimitiveList/<field>`."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [x for x in result.get(field) or [] if x not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_keyed_list(result[key], value, MERGE_KEYS[key])
        elif isinstance(value, list) and key in PRIMITIVE_MERGE and isinstance(result.get(key), list):
            result[key] = list(result[key]) + [x for x in value if x not in result[key]]
        elif isinstance(value, Mapping):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_keyed_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    if any(isinstance(item, Mapping) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, Mapping) and "$patch" in i)]
    result = [copy.deepcopy(i) for i in current]
    for item in patch:
        if not isinstance(item, Mapping) or merge_key not in item:
            result.append(copy.deepcopy(item))
            continue
        index = next((n for n, old in enumerate(result)
                      if isinstance(old, Mapping) and old.get(merge_key) == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 through the `jsonpatch` package (a kmock dependency)."""
    if not isinstance(operations, list):
        raise PatchError("json patch must be a list of operations")
    try:
        return jsonpatch.apply_patch(target, operations, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, IndexError, TypeError) as e:
        raise PatchError(str(e)) from e


# ---- server-side apply ---------------------------------------------------------------------------------------

# Identity and server-owned fields are never owned by an applier.
_UNOWNED_META = frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                           "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink"})


def leaf_paths(config: Mapping[str, Any]) -> set[Path]:
    """The fields an apply configuration sets. Lists are atomic (owned whole), as for `x-kubernetes-list-type:
    atomic`; the real API server merges associative lists (containers by name) item by item."""
    out: set[Path] = set()

    def walk(node: Any, path: Path) -> None:
        if isinstance(node, Mapping) and node:
            for key, value in node.items():
                if not path and key in {"apiVersion", "kind"}:
                    continue
                if path == ("metadata",) and key in _UNOWNED_META:
                    continue
                walk(value, (*path, str(key)))
        elif path and path != ("metadata",):
            out.add(path)

    walk(config, ())
    return out


def to_fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """Paths in the managedFields FieldsV1 shape: {"f:spec": {"f:replicas": {}}}."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return root


def from_fields_v1(fields: Mapping[str, Any] | None) -> set[Path]:
    out: set[Path] = set()

    def walk(node: Mapping[str, Any], path: Path) -> None:
        children = {k: v for k, v in node.items() if k.startswith("f:")}
        if not children and path:
            out.add(path)
        for key, value in children.items():
            walk(value if isinstance(value, Mapping) else {}, (*path, key[2:]))

    walk(fields or {}, ())
    return out


def get_path(obj: Any, path: Path) -> tuple[bool, Any]:
    for part in path:
        if not isinstance(obj, Mapping) or part not in obj:
            return False, None
        obj = obj[part]
    return True, obj


def delete_path(obj: dict[str, Any], path: Path) -> None:
    """Remove a field and then any map left empty by the removal (but never a top-level key's container)."""
    parents: list[tuple[dict[str, Any], str]] = []
    node: Any = obj
    for part in path[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        parents.append((node, part))
        node = node[part]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for parent, key in reversed(parents[1:]):
        if parent.get(key) == {}:
            del parent[key]


def apply_merge(target: Any, config: Any) -> Any:
    """Maps merge, everything else (lists included) replaces; null in the configuration removes the field."""
    if not isinstance(config, Mapping):
        return copy.deepcopy(config)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in config.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge(result.get(key), value)
    return result
