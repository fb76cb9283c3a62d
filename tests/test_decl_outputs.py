"""Every document geosched prints is written by its declaration (issue 25 item 6): what a command prints validates
against docs/schemas/<kind>.schema.json AND reads back through the same declaration and writes again byte for byte.
The schema a user validates against is generated from the very model that wrote the document.

Here each kind a command can write without a server; ProvisionResult and GangStatus (a launch on the moto EC2
double), SubmitOutcome (a real API server) and a real ProbeRun (sshd on the network testbed) go through the same
check, `tests.output_support.valid`, in the tests listed in ELSEWHERE."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from geosched.cli.main import app
from geosched.console.output import document
from geosched.files.decl.base import OutputDocument
from geosched.files.decl.schemas import WRITTEN
from geosched.files.fields import dump
from geosched.store.db import Store
from tests.output_support import valid
from tests.report.report_support import T0, H, price, used

ROOT = Path(__file__).parent
JOBS = ROOT.parent / "examples" / "jobs"
DECLARED = {d.KIND: d for d in WRITTEN}

# Kinds whose command needs a server double or a testbed: the test that runs it and calls `valid` on its output.
ELSEWHERE = {
    "ProvisionResult": ("tests/providers/test_prov_cli.py", '"provision"'),
    "GangStatus": ("tests/providers/test_prov_cli.py", "\"status\", \"gang-cli00001\", \"-o\", \"json\""),
    "SubmitOutcome": ("tests/kubeapi/test_kubeapi_cli.py", '"submit"'),
    "ProbeRun": ("tests/probes/test_probe_testbed.py", '"run"'),
}


def run(home: Path, *args: str | Path, code: int = 0) -> str:
    result = CliRunner().invoke(app, ["--home", str(home), *map(str, args)])
    assert result.exit_code == code, (args, result.output, result.exception)
    return result.stdout


def read_back(text: str, fmt: str) -> tuple[dict[str, Any], OutputDocument]:
    """The printed document, checked against its schema and read back strictly by its declaration."""
    doc = valid(json.loads(text) if fmt == "json" else yaml.safe_load(text))
    declared = DECLARED[doc["kind"]]
    return doc, declared.read_back({k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}, "stdout")


def seeded(home: Path) -> None:
    """Two jobs on two clouds over two days (tests/report/test_report_outputs.py's store, smaller)."""
    with Store(home) as store:
        price(store, "aws", "p4d.24xlarge", "us-east-1", "use1-az1", 32.0, T0 - 24 * H)
        used(store, "a1", T0 + 22 * H, T0 + 26 * H, job="alpha", cluster="eks-a")
        used(store, "b1", T0 + 24 * H, T0 + 27 * H, job="beta", cluster="gke-b", provider="gcp",
             region="us-central1", zone="us-central1-a", instance_type="a2-highgpu-8g")


def big_job(tmp: Path) -> Path:
    big = tmp / "big.yaml"
    big.write_text((JOBS / "train-8.yaml").read_text().replace("workers: 1", "workers: 100000"), encoding="utf-8")
    return big


def trace_with_an_unplaceable_job(tmp: Path) -> Path:
    # tests/data/traces/plain.csv's columns; the second job asks for more GPUs than the default fleet has.
    trace = tmp / "trace.csv"
    trace.write_text("submit_time,gpus,duration,model\n0,8,3600,\n60,99999,600,\n", encoding="utf-8")
    return trace


WINDOW = ("--since", "2024-01-01", "--until", "2024-01-03")
COMMANDS: dict[str, tuple[Any, ...]] = {
    "Placement": (lambda tmp: ("place", JOBS / "train-64.yaml"), 0),
    "NoFit": (lambda tmp: ("place", big_job(tmp)), 3),
    "SimulationReport": (lambda tmp: ("simulate", "--trace", trace_with_an_unplaceable_job(tmp)), 0),
    "CostReport": (lambda tmp: ("report", "cost", "--by", "job", *WINDOW), 0),
    "CarbonReport": (lambda tmp: ("report", "carbon", "--by", "provider", "--embodied", *WINDOW), 0),
    "Settings": (lambda tmp: ("config", "show"), 0),
    "ProvisionPlan": (lambda tmp: ("provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws",
                                   "--regions", "us-east-1", "--admin-cidr", "203.0.113.0/24", "--dry-run"), 0),
}


def test_every_kind_geosched_prints_is_read_back_by_a_test() -> None:
    assert set(COMMANDS) | set(ELSEWHERE) == set(DECLARED)
    for kind, (path, command) in ELSEWHERE.items():
        text = (ROOT.parent / path).read_text(encoding="utf-8")
        assert command in text and "valid(" in text, (kind, path)


@pytest.mark.parametrize("kind", sorted(COMMANDS))
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_a_printed_document_validates_and_round_trips_through_its_declaration(kind: str, fmt: str,
                                                                              tmp_path: Path) -> None:
    home = tmp_path / "home"
    seeded(home)
    args, code = COMMANDS[kind]
    text = run(home, *args(tmp_path), "-o", fmt, code=code)
    doc, declared = read_back(text, fmt)
    assert doc["kind"] == kind
    # Written again by the declaration it was read by: the same text, key for key, number for number.
    assert dump(document(declared.KIND, declared.dump()), fmt) == text
    if kind in ("CostReport", "CarbonReport"):
        assert len(doc["rows"]) == 2  # rows from the store, not an empty report
    if kind == "CarbonReport":
        assert all("embodied_gco2e" in r for r in doc["rows"])
    if kind == "ProvisionPlan":
        assert doc["plan"] and doc["network"]  # the security group the launch would make sure exists
    if kind == "SimulationReport":
        assert doc["unplaced"]  # the unplaceable job, by policy


def test_a_document_that_does_not_round_trip_is_caught(tmp_path: Path) -> None:
    """The check can fail: a key the schema allows in any order, moved, or a key not declared."""
    doc = json.loads(run(tmp_path, "place", JOBS / "train-8.yaml", "-o", "json"))
    moved = {"apiVersion": doc["apiVersion"], "kind": doc["kind"], "policy": doc["policy"],
             **{k: v for k, v in doc.items() if k != "policy"}}
    with pytest.raises(AssertionError, match="does not round-trip"):
        valid(moved)
    from geosched.core.errors import InputError
    with pytest.raises(InputError, match="unknown field"):
        DECLARED["Placement"].read_back({**doc, "extra": 1}, "stdout")
