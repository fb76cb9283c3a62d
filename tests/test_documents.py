"""Job, fleet and network documents: strict parsing, one-line errors, exact round trips."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.errors import InputError
from geosched.core.models import CommProfile, Job, Pricing
from geosched.files.documents import (
    fleet_to_dict,
    job_to_dict,
    load_fleet,
    load_network,
    network_to_dict,
    parse_fleet,
    parse_job,
    parse_network,
)
from geosched.kube.jobinput import load_job

DATA = Path(__file__).parent / "data"
BAD = sorted((DATA / "bad").glob("*.yaml"))


def expected(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: ")
    return first.removeprefix("# expect: ")


def load_bad(path: Path) -> None:
    kind = path.name.split("-")[0]
    if kind == "job":
        load_job(path)
    elif kind == "fleet":
        load_fleet(path)
    else:
        load_network(path, load_fleet(DATA / "good" / "fleet.yaml"))


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_file_gives_one_line_with_file_field_and_reason(path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_bad(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert expected(path) in message


def test_good_files_parse() -> None:
    fleet = load_fleet(DATA / "good" / "fleet.yaml")
    assert len(fleet.nodes) == 6
    assert fleet.regions["onprem:zurich"].grid_gco2e_per_kwh == 30
    aws = fleet.by_name["aws-1"]
    assert (aws.gpu, aws.gpus, aws.price_ondemand) == ("A100", 8, pytest.approx(32.7726, rel=0.2))
    assert fleet.by_name["hpc-a2"].price_ondemand is None
    network = load_network(DATA / "good" / "network.yaml", fleet)
    assert network.zone_link("zrh-hall-b", "zrh-hall-a").throughput_gbps == 40  # type: ignore[union-attr]
    assert network.node_link("hpc-a2", "hpc-a1").samples == 10  # type: ignore[union-attr]
    job = load_job(DATA / "good" / "job.yaml")
    assert job == Job("lab-job", workers=2, gpus_per_worker=8, gpu="A100")


def test_job_round_trip() -> None:
    job = Job(
        "j-1",
        4,
        2,
        gpu="H100",
        max_zones=2,
        max_regions=1,
        providers=("aws",),
        regions=("us-east-1",),
        zones=("use1-az1",),
        clusters=("c",),
        pricing=Pricing.SPOT,
        profile=CommProfile(10, 20, 0.5),
        namespace="ml",
        image="repo/train:1",
    )
    assert parse_job(job_to_dict(job), "x") == job


def test_fleet_and_network_round_trip_through_yaml() -> None:
    fleet, network = default_fleet(), default_network()
    fleet_again = parse_fleet(yaml.safe_load(yaml.safe_dump(fleet_to_dict(fleet))), "f")
    assert fleet_again.nodes == fleet.nodes
    assert fleet_again.regions == fleet.regions
    network_again = parse_network(yaml.safe_load(yaml.safe_dump(network_to_dict(network))), "n", fleet_again)
    assert dict(network_again.zone_links) == dict(network.zone_links)
    assert dict(network_again.node_links) == dict(network.node_links)


def test_lab_fleet_round_trip_keeps_declared_regions() -> None:
    fleet = load_fleet(DATA / "good" / "fleet.yaml")
    again = parse_fleet(fleet_to_dict(fleet), "f")
    assert again.nodes == fleet.nodes and again.regions == fleet.regions


# --- hypothesis: any mutation of a valid document parses or fails with InputError, nothing else ----

VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
GOOD_JOB: dict[str, Any] = yaml.safe_load((DATA / "good" / "job.yaml").read_text()) | {
    "profile": {"message_mb": 10, "compute_ms": 100, "utilisation": 0.5},
    "max_zones": 2,
    "regions": ["r"],
}
GOOD_FLEET: dict[str, Any] = yaml.safe_load((DATA / "good" / "fleet.yaml").read_text())


def mutate(doc: Any, path: list[Any], value: Any, delete: bool) -> Any:
    doc = copy.deepcopy(doc)
    target = doc
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return doc


def paths(doc: Any, prefix: list[Any] | None = None) -> list[list[Any]]:
    prefix = prefix or []
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for key, value in items:
        out.append([*prefix, key])
        out.extend(paths(value, [*prefix, key]))
    return out


def parses_or_fails_cleanly(good: dict[str, Any], parse: Callable[[Any, str], Any], valid: Callable[[Any], bool],
                            data: st.DataObject) -> None:
    """A mutated document either parses into a valid model or fails with one clean InputError."""
    path = data.draw(st.sampled_from(paths(good)))
    doc = mutate(good, path, data.draw(VALUES), data.draw(st.booleans()))
    try:
        parsed = parse(doc, "doc.yaml")
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("doc.yaml: ")
    else:
        assert valid(parsed)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_mutated_jobs_parse_or_fail_cleanly(data: st.DataObject) -> None:
    parses_or_fails_cleanly(GOOD_JOB, parse_job, lambda j: j.workers >= 1 and j.gpus_per_worker >= 1, data)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.data())
def test_mutated_fleets_parse_or_fail_cleanly(data: st.DataObject) -> None:
    parses_or_fails_cleanly(GOOD_FLEET, parse_fleet, lambda f: all(0 <= n.gpus_free <= n.gpus for n in f.nodes),
                            data)


def test_a_config_files_zone_tolerance_outside_0_to_1_and_all_weights_0_are_refused_naming_the_field() -> None:
    # Issue 23 item 5: `zone_tolerance: 2` meant "within 200%"; weights all 0 rank nothing.
    from geosched.core.errors import InputError
    from geosched.files.documents import parse_weights

    with pytest.raises(InputError) as tolerance:
        parse_weights({"zone_tolerance": 2}, "gitops.yaml", "weights")
    assert "weights.zone_tolerance" in str(tolerance.value)
    with pytest.raises(InputError) as zero:
        parse_weights({"network": 0, "cost": 0, "carbon": 0}, "gitops.yaml", "weights")
    assert "weights" in str(zero.value) and "0" in str(zero.value)
    assert parse_weights({"network": 0, "cost": 1}, "gitops.yaml", "weights").cost == 1
