"""A gang's request as the provisioning journal keeps it (the store's prov_gangs.request) is declared once
(geosched.providers.journal.GangRequestRecord; issue 25 item 6): rows main wrote before the declaration read back as
the requests they were made from and are written again byte for byte, the generated schema takes them, and a
damaged row is one line naming the store, the gang's field and the reason (`geosched status GANG`: exit 2, no
traceback). A real store; the CLI in a real process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from geosched.cli.schemas import schema_files
from geosched.core.errors import InputError
from geosched.core.models import Weights
from geosched.policies.spotrisk import Rework
from geosched.providers import journal
from geosched.providers.plan import GangRequest, PricingMode
from geosched.store.db import Store
from tests.inputs.inputs_support import geosched

COMPAT = Path(__file__).resolve().parents[1] / "data" / "compat"
# The requests the rows were made from, by main's journal.create_gang at dc5fe64 (tests/data/compat/README.md):
# every field away from its default, and every field at it.
ROWS = {
    "gang-request-dc5fe64.json": GangRequest(
        "H100", 8, 4, PricingMode.AUTO, ("aws", "gcp"), ("us-east-1", "us-central1"), ("use1-az4",),
        ("p5.48xlarge", "a3-highgpu-8g"), Weights(network=0.0, cost=0.5, carbon=0.25, spot_risk=2.0), Rework(2.0, 0.5)),
    "gang-request-default-dc5fe64.json": GangRequest("A100", 8, 2),
}


def row(name: str) -> str:
    return (COMPAT / name).read_text(encoding="utf-8").removesuffix("\n")  # the column holds no newline


@pytest.mark.parametrize("name", sorted(ROWS))
def test_a_row_main_wrote_reads_back_as_its_request_and_is_written_byte_for_byte(tmp_path: Path, name: str) -> None:
    request = ROWS[name]
    assert journal.read_request(row(name), "state.db", "g1") == request
    with Store(tmp_path) as store:  # as `provision` journals it and `resume` reads it
        journal.create_gang(store, "g1", journal.owner(store), request)
        (stored,) = store.db.execute("SELECT request FROM prov_gangs WHERE gang = 'g1'").fetchone()
        record = journal.gang_record(store, "g1")
    assert stored == row(name)
    assert record is not None and record.request == request


def test_a_row_journalled_before_risk_weighting_resumes_with_the_defaults() -> None:
    old = json.loads(row("gang-request-dc5fe64.json"))
    del old["rework"], old["weights"]["spot_risk"]
    request = journal.read_request(json.dumps(old), "state.db", "g1")
    assert request is not None and request.rework == Rework() and request.weights.spot_risk == 1.0
    assert request.weights.cost == 0.5 and request.weights.network == 0.0


def test_the_generated_schema_takes_the_rows_main_wrote_and_refuses_a_damaged_one() -> None:
    validator = jsonschema.Draft202012Validator(json.loads(schema_files()["GangRequest.schema.json"]))
    for name in ROWS:
        assert not [e.message for e in validator.iter_errors(json.loads(row(name)))], name
    good = json.loads(row("gang-request-dc5fe64.json"))
    for damage in DAMAGED.values():
        assert list(validator.iter_errors(damage[0](good)))


def _without(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda doc: {k: v for k, v in doc.items() if k != key}


def _with(key: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda doc: {**doc, key: value}


DAMAGED: dict[str, tuple[Callable[[dict[str, Any]], Any], str]] = {
    "no nodes": (_without("nodes"), "prov_gangs[g1].request.nodes: required"),
    "nodes as text": (_with("nodes", "4"), "prov_gangs[g1].request.nodes: expected an integer, got a string ('4')"),
    "a market it has not": (_with("pricing", "cheap"),
                            "prov_gangs[g1].request.pricing: expected one of on-demand, spot, auto, got a string"),
    "a negative weight": (_with("weights", {"cost": -1.0}),
                          "prov_gangs[g1].request.weights.cost: must be >= 0, got -1"),
    "a key it has not": (_with("gpus", 8), "prov_gangs[g1].request.gpus: unknown field (known: "),
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_a_damaged_row_is_one_line_exit_2_for_status(tmp_path: Path, damage: str) -> None:
    change, line = DAMAGED[damage]
    home = tmp_path / "home"
    with Store(home) as store:
        journal.create_gang(store, "g1", journal.owner(store), ROWS["gang-request-dc5fe64.json"])
        with store.transaction() as db:
            db.execute("UPDATE prov_gangs SET request = ? WHERE gang = 'g1'",
                       (json.dumps(change(json.loads(row("gang-request-dc5fe64.json")))),))
        path = store.path
    run = geosched("status", "g1", home=home)
    assert run.code == 2 and run.one_line_error and not run.traceback, (run.code, run.stderr)
    assert f"{path}: {line}" in run.stderr


def test_a_row_that_is_not_json_is_one_line() -> None:
    with pytest.raises(InputError, match=r"^state\.db: prov_gangs\[g1\]\.request: not JSON: "):
        journal.read_request('{"gpu": "A1', "state.db", "g1")
