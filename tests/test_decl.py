"""The declared documents (issue 25 item 6): one pydantic model per kind parses, writes and gives the JSON Schema
in docs/schemas; the files the project ships validate against it, and a fault is the line geosched.files.fields
wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import Field

from geosched.cli.schemas import DECLARED, RECORDS, WRITTEN, schema_files
from geosched.core.errors import InputError
from geosched.files.decl.base import Declared, Refused, field_path, integer, number, one_line

ROOT = Path(__file__).parent.parent
SCHEMAS = ROOT / "docs" / "schemas"
# The real files of each declared kind: the example GitOps repository's snapshot, the test data, the shipped jobs.
SHIPPED = {
    "GitOpsConfig": [ROOT / "examples" / "gitops" / "gitops.yaml"],
    "Fleet": [
        ROOT / "examples" / "gitops" / "snapshot" / "fleet.yaml",
        ROOT / "tests" / "data" / "good" / "fleet.yaml",
    ],
    # The compact job files among them (the GitOps example's jobs include Kubernetes objects: a JobSet, a Job).
    "Job": [
        path
        for path in (
            *sorted((ROOT / "examples" / "jobs").glob("*.yaml")),
            *sorted((ROOT / "examples" / "gitops" / "jobs").glob("*/*.yaml")),
            *sorted((ROOT / "geosched" / "data" / "jobs").glob("*.yaml")),
            ROOT / "tests" / "data" / "good" / "job.yaml",
        )
        if yaml.safe_load(path.read_text()).get("apiVersion") in (None, "geosched.io/v1alpha1")
    ],
    "NetworkView": [
        ROOT / "examples" / "gitops" / "snapshot" / "network.yaml",
        ROOT / "tests" / "data" / "good" / "network.yaml",
    ],
    "Inventory": [ROOT / "tests" / "data" / "good" / "inventory.yaml"],
    "ClusterConfig": [
        ROOT / "examples" / "gitops" / "clusters.yaml",
        ROOT / "tests" / "kube" / "data" / "clusters.yaml",
    ],
    # The settings the deploy/ manifests mount, as their ConfigMaps hold them.
    "SchedulerConfig": [ROOT / "deploy" / "scheduler" / "configmap.yaml"],
    "DispatcherConfig": [ROOT / "deploy" / "multikueue" / "configmap.yaml"],
    # The example repository's index and one written by main at dc5fe64, before the index was declared (a fresh
    # render of the example's inputs: tests/data/compat/README.md).
    "PlacementIndex": [
        ROOT / "examples" / "gitops" / "placements.yaml",
        ROOT / "tests" / "data" / "compat" / "placements-dc5fe64.yaml",
    ],
}


def load(path: Path) -> Any:
    """The document of a file; of a ConfigMap, the one document its data holds."""
    doc = yaml.safe_load(path.read_text())
    if doc.get("kind") == "ConfigMap":
        (text,) = doc["data"].values()
        return yaml.safe_load(text)
    return doc


@pytest.mark.parametrize("kind", [d.KIND for d in (*DECLARED, *WRITTEN, *RECORDS)])
def test_the_committed_schema_is_the_declarations(kind: str) -> None:
    name = f"{kind}.schema.json"
    assert (SCHEMAS / name).read_text(encoding="utf-8") == schema_files()[name], (
        f"{name} is stale: run python -m geosched.cli.schemas docs/schemas"
    )


@pytest.mark.parametrize("kind", [d.KIND for d in DECLARED])
def test_the_shipped_files_of_a_kind_validate_against_its_schema(kind: str) -> None:
    schema = json.loads(schema_files()[f"{kind}.schema.json"])
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert SHIPPED[kind]
    for path in SHIPPED[kind]:
        doc = load(path)
        errors = [e.message for e in validator.iter_errors(doc)]
        assert not errors, (path, errors)
    # A schema that says nothing would pass that: an unknown key and a wrong type must fail it.
    doc = load(SHIPPED[kind][0])
    assert list(validator.iter_errors({**doc, "surplus": 1}))
    assert list(validator.iter_errors({**doc, "kind": "Other"}))


@pytest.mark.parametrize("kind", [d.KIND for d in DECLARED])
def test_a_written_document_reads_back_as_itself(kind: str) -> None:
    model = next(d for d in DECLARED if kind == d.KIND)
    for path in SHIPPED[kind]:
        doc = model.read(load(path), str(path))
        again = model.read(doc.dump(), "again")
        assert again.dump() == doc.dump()
        assert list(doc.dump())[:2] == ["apiVersion", "kind"]


class Part(Declared):
    count: int = integer(1)
    share: float = number(0.0, 1.0, default=0.0)


class Whole(Declared):
    parts: list[Part] = Field(default_factory=list)


def fault(model: type[Declared], data: Any) -> str:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    error = one_line(info.value, "f.yaml")
    assert isinstance(error, InputError) and "\n" not in str(error)
    return str(error)


@pytest.mark.parametrize(
    ("data", "line"),
    [
        ({"parts": [{"count": 1}, {"count": 0}]}, "f.yaml: parts[1].count: must be >= 1, got 0"),
        ({"parts": [{"count": True}]}, "f.yaml: parts[0].count: expected an integer, got a boolean (True)"),
        ({"parts": [{"count": 1.0}]}, "f.yaml: parts[0].count: expected an integer, got a number (1.0)"),
        ({"parts": [{"count": 10**40}]}, "f.yaml: parts[0].count: must be <= 2147483647, got a larger number"),
        ({"parts": [{"count": 1, "share": 10**40}]}, "f.yaml: parts[0].share: must be <= 1, got a larger number"),
        (
            {"parts": [{"count": 1, "share": float("nan")}]},
            "f.yaml: parts[0].share: expected a finite number, got a number (nan)",
        ),
        (
            {"parts": [{"count": 1, "share": "half"}]},
            "f.yaml: parts[0].share: expected a finite number, got a string ('half')",
        ),
        ({"parts": [{}]}, "f.yaml: parts[0].count: required"),
        ({"parts": [{"count": None}]}, "f.yaml: parts[0].count: required"),
        ({"parts": [{"count": 1, "cuont": 2}]}, "f.yaml: parts[0].cuont: unknown field (known: count, share)"),
        ({"parts": [[]]}, "f.yaml: parts[0]: expected a mapping, got a list"),
        ([], "f.yaml: (document): expected a mapping, got a list"),
    ],
)
def test_pydantics_errors_are_the_projects_one_line(data: Any, line: str) -> None:
    assert fault(Whole, data) == line


def test_a_refusal_names_the_field_below_the_model_that_raised_it() -> None:
    assert field_path("weights", ["zones", 3, "b"]) == "weights.zones[3].b"
    assert Refused("why", "zones", 1, "b").at == ("zones", 1, "b")


def test_a_duration_of_more_digits_than_a_float_holds_is_one_line() -> None:
    """`runtime: 1000...0` (301+ digits) raised OverflowError from float() before the declarations."""
    from geosched.files.decl.job import JobDoc

    doc = {"name": "j", "workers": 1, "gpus_per_worker": 1, "schedule": {"runtime": 10**400}}
    with pytest.raises(InputError, match=r"^j\.yaml: schedule\.runtime: must be more than 0 and at most 366 days"):
        JobDoc.read(doc, "j.yaml")
    doc["schedule"] = {"runtime": "6h", "start_within": 10**13}
    with pytest.raises(
        InputError, match=r"schedule\.start_within: must be more than 0 and at most 366 days, got 1e\+13 s"
    ):
        JobDoc.read(doc, "j.yaml")
    doc["schedule"] = {"start_within": "1h"}
    with pytest.raises(InputError, match=r"schedule\.runtime: is required \(the predicted run time"):
        JobDoc.read(doc, "j.yaml")


def test_a_placement_is_written_as_before_and_valid_against_its_generated_schema() -> None:
    """The printed Placement and NoFit (`place -o json`), whose schemas were hand-written before, are what their
    declarations generate: a key the model lacks, or one it has that the document lacks, fails."""
    from geosched.api import place
    from geosched.core.default_fleet import default_fleet, default_network
    from geosched.core.models import Job, Placement
    from geosched.files.documents import nofit_to_dict, placement_to_dict
    from geosched.files.formats import document

    placed = place(Job("j", workers=2, gpus_per_worker=8), default_fleet(), default_network())
    assert isinstance(placed, Placement)
    nofit = place(Job("huge", workers=5000, gpus_per_worker=8), default_fleet(), default_network())
    for kind, body in (("Placement", placement_to_dict(placed)), ("NoFit", nofit_to_dict(nofit))):  # type: ignore[arg-type]
        schema = json.loads(schema_files()[f"{kind}.schema.json"])
        validator = jsonschema.Draft202012Validator(schema)
        assert not [e.message for e in validator.iter_errors(document(kind, body))]
        assert list(validator.iter_errors(document(kind, {**body, "surplus": 1})))
        assert list(validator.iter_errors(document(kind, {k: v for k, v in body.items() if k != "policy"})))
    assert (
        placement_to_dict(placed)["score"]["bounding_hop"] is None
        or "from" in placement_to_dict(placed)["score"]["bounding_hop"]
    )
