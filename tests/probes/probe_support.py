"""Shared pieces of the probe tests (a uniquely named module, so no other folder's conftest shadows it):
manifest validation, inventory files for a testbed, and reading the testbed's sshd logs."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kube.kube_support import validate_manifest
from tests.testbed import Testbed

REPO = Path(__file__).resolve().parents[2]


def validate_crd_object(obj: Mapping[str, Any]) -> None:
    """Against its upstream CRD, the same check every rendered manifest gets (tests/kube/kube_support.py)."""
    validate_manifest(obj)
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
