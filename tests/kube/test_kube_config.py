"""The per-cluster config file: strict parsing, one-line errors with field paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_support import DATA

from geosched.core.errors import InputError
from geosched.kube.config import Backend, ClusterConfig, load_cluster_config, parse_cluster_config


def test_example_file() -> None:
    clusters = load_cluster_config(DATA / "clusters.yaml")
    assert clusters["eks-east"] == ClusterConfig(
        name="eks-east", context="arn:aws:eks:us-east-1:111122223333:cluster/east", backend=Backend.KUEUE,
        queue="team-a", namespace="ml")
    central = clusters["gke-central"]
    assert (central.context, central.backend, central.karmada, central.pin_hosts) == (
        "gke-central", Backend.VOLCANO, True, True)
    # No tier is assumed to be a zone: Volcano's tier 1 is a leaf switch unless the cluster says otherwise.
    assert (central.volcano_zone_tier, central.volcano_region_tier) == (None, None)


def _error(data: Any) -> InputError:
    with pytest.raises(InputError) as info:
        parse_cluster_config(data, "clusters.yaml")
    return info.value


@pytest.mark.parametrize(("data", "field", "reason"), [
    ({"clusters": {"a": {"backend": "slurm"}}}, "clusters.a.backend", "expected one of"),
    ({"clusters": {"a": {"backend": "kueue"}}}, "clusters.a.queue", "required for backend kueue"),
    ({"clusters": {"a": {"karmada": "yes please"}}}, "clusters.a.karmada", "true or false"),
    ({"clusters": {"a": {"pin_host": True}}}, "clusters.a.pin_host", "unknown field"),
    ({"clusters": {"a": {"volcano_zone_tier": 2, "volcano_region_tier": 2}}}, "clusters.a.volcano_region_tier",
     "above"),
    ({"clusters": {"a": {"namespace": ""}}}, "clusters.a.namespace", "non-empty"),
    ({"clusters": {}}, "clusters", "at least one"),
    ({"clusters": ["a"]}, "clusters", "mapping"),
    ({}, "clusters", "required"),
    ({"clusters": {"a": {}}, "kind": "Fleet"}, "kind", "ClusterConfig"),
    ({"clusters": {"a": None}}, "clusters.a", "expected a mapping"),
    ([], "(document)", "expected a mapping"),
])
def test_errors(data: Any, field: str, reason: str) -> None:
    err = _error(data)
    assert err.field == field
    assert reason in err.reason
    assert "\n" not in str(err)


def test_defaults() -> None:
    (config,) = parse_cluster_config({"clusters": {"on-prem": {}}}, "c.yaml").values()
    assert config == ClusterConfig(name="on-prem", context="on-prem")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_cluster_config(tmp_path / "none.yaml")


def test_yaml_booleans(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"clusters": {"x": {"karmada": True, "pin_hosts": False}}}))
    assert load_cluster_config(path)["x"].karmada is True


def test_every_backend_is_named_in_the_file_as_documented() -> None:
    names = {"kueue": Backend.KUEUE, "coscheduling": Backend.COSCHEDULING, "volcano": Backend.VOLCANO,
             "workload-api": Backend.WORKLOAD_API, "none": Backend.NONE}
    assert set(names.values()) == set(Backend)
    for name, backend in names.items():
        extra = {"queue": "q"} if backend is Backend.KUEUE else {}
        (config,) = parse_cluster_config({"clusters": {"c": {"backend": name, **extra}}}, "c.yaml").values()
        assert config.backend is backend
