"""Shared pieces of the probe tests (a uniquely named module, so no other folder's conftest shadows it):
manifest validation, inventory files for a testbed, and reading the testbed's sshd logs."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.testbed import Testbed

REPO = Path(__file__).resolve().parents[2]


def crd_dir() -> Path:
    env = os.environ.get("GEOSCHED_CRD_DIR")
    for path in ([Path(env)] if env else []) + [REPO.parent / "shared" / "schemas" / "crds"]:
        if path.is_dir():
            return path
    if os.environ.get("CI"):
        pytest.fail("CRD schemas not found (set GEOSCHED_CRD_DIR to shared/schemas/crds)")
    pytest.skip("CRD schemas not found (set GEOSCHED_CRD_DIR to shared/schemas/crds)")
    raise AssertionError("unreachable")


def _strict(schema: Any) -> Any:
    """As the API server reads a structural schema: unknown fields are errors (it would prune them
    silently, which for us is a silent bug); x-kubernetes-* keys are annotations to jsonschema."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out \
                and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(x) for x in schema]
    return schema


@cache
def _crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    group, version = api_version.split("/")
    # Files are named <group>_<plural>.yaml; reading only the group's files keeps this fast.
    for path in sorted(crd_dir().glob(f"{group}_*.yaml")):
        crd = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        spec = crd.get("spec", {})
        if spec.get("group") == group and spec.get("names", {}).get("kind") == kind:
            for v in spec["versions"]:
                if v["name"] == version:
                    return dict(_strict(v["schema"]["openAPIV3Schema"]))
    raise AssertionError(f"no CRD for {api_version} {kind} in {crd_dir()}")


def validate_crd_object(obj: Mapping[str, Any]) -> None:
    schema = _crd_schema(obj["apiVersion"], obj["kind"])
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(copy.deepcopy(dict(obj))), key=lambda e: list(e.path))
    assert not errors, "; ".join(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors[:5])
    check_metadata(obj["metadata"])


def validate_configmap(obj: Mapping[str, Any]) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(copy.deepcopy(dict(obj)), kv.utils.latest_version(), strict=True)
    check_metadata(obj["metadata"])
    for key, value in obj["data"].items():
        assert re.fullmatch(r"[-._a-zA-Z0-9]+", key), key
        assert isinstance(value, str)


def check_metadata(meta: Mapping[str, Any]) -> None:
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", meta["name"])
    for key, value in (meta.get("annotations") or {}).items():
        prefix, _, name = key.rpartition("/")
        assert prefix == "geosched.io", f"annotation {key} outside the project's prefix"
        assert re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", name) and isinstance(value, str)


# --- testbed helpers --------------------------------------------------------------------------------

def write_inventory(tb: Testbed, path: Path, *, gpus: Mapping[str, int] | None = None, pin_keys: bool = True,
                    jumps: Mapping[str, str] | None = None, region_of: Mapping[str, str] | None = None) -> Path:
    """An inventory file for the testbed's hosts, with their advertised host keys pinned."""
    nodes = []
    regions = sorted(set((region_of or {}).values()) | {"lab"})
    for h in tb.hosts.values():
        node: dict[str, Any] = {"name": h.name, "address": h.address, "port": h.port, "user": h.user,
                                "key": str(h.key_path), "zone": h.zone, "region": (region_of or {}).get(h.zone, "lab"),
                                "provider": "onprem"}
        if pin_keys:
            node["host_key"] = h.host_key
        if jumps and h.name in jumps:
            node["proxy_jump"] = jumps[h.name]
        if gpus and h.name in gpus:
            node.update({"gpu": "A100", "gpus": gpus[h.name], "cluster": "lab", "price_ondemand": 16.0})
        nodes.append(node)
    doc = {"regions": [{"provider": "onprem", "name": r, "grid_gco2e_per_kwh": 50, "pue": 1.2} for r in regions],
           "nodes": nodes}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def sshd_log(tb: Testbed, name: str) -> str:
    index = list(tb.hosts).index(name)
    assert tb.workdir is not None
    path = tb.workdir / f"h{index}" / "sshd.log"
    return path.read_text(errors="replace") if path.exists() else ""


def accepted_logins(tb: Testbed, name: str, source: str | None = None) -> int:
    """Successful SSH authentications sshd logged, optionally only those from one source address."""
    pattern = re.compile(r"Accepted publickey for \S+ from (\S+) port")
    return sum(1 for m in pattern.finditer(sshd_log(tb, name)) if source is None or m.group(1) == source)
