"""The output contract (issue 14): every data command takes -o table|wide|json|yaml and --no-headers, its JSON and
YAML validate against docs/schemas, and tables never split a number or a name, whatever the width."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from geosched.cli.main import app
from geosched.cli.schemas import schema_files
from geosched.console import lists as kinds
from geosched.console import render
from geosched.console.output import KINDS, NOT_DATA
from tests.output_support import SCHEMAS, valid

ROOT = Path(__file__).parent.parent
JOBS = ROOT / "examples" / "jobs"
TRACE = Path(__file__).parent / "data" / "traces" / "plain.csv"


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """Every command under `geosched` (typer's click commands), by its path; a group that runs itself (`catalog`)
    is one as well."""
    group = hasattr(command, "commands")
    if path and (not group or command.invoke_without_command):
        yield " ".join(path), command
    if group:
        for name, sub in command.commands.items():
            yield from commands(sub, (*path, name))


def test_every_command_is_a_data_command_with_the_contract_or_says_why_not() -> None:
    seen = dict(commands(typer.main.get_command(app)))
    assert {"place", "policies", "down", "sweep", "check", "status", "placements", "jobs", "gpus", "catalog",
            "probe show", "report cost", "simulate"} <= set(seen)
    missing = []
    for path, command in seen.items():
        params = {p.name: p for p in command.params}
        if path in NOT_DATA:
            assert "output" not in params, f"{path} is listed as printing no data but takes -o"
            continue
        output, headers = params.get("output"), params.get("no_headers")
        if output is None or headers is None:
            missing.append(path)
            continue
        assert set(output.opts) == {"--output", "-o"}, path
        assert {"table", "wide", "json", "yaml"} <= set(str(output.metavar).strip("[]").split("|")), path
        assert headers.opts == ["--no-headers"], path
    assert not missing, f"data commands without -o/--no-headers (or add them to output.NOT_DATA): {missing}"
    assert set(NOT_DATA) <= set(seen), f"NOT_DATA names commands that do not exist: {set(NOT_DATA) - set(seen)}"


def test_every_commands_help_shows_its_output_formats(tmp_path: Path) -> None:
    for path, _ in commands(typer.main.get_command(app)):
        result = CliRunner().invoke(app, [*path.split(), "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (path, result.output)
        if path not in NOT_DATA:
            assert "--output" in result.output and "[table|wide|json|yaml" in result.output, path
            assert "--no-headers" in result.output, path


def test_the_committed_list_schemas_are_the_ones_the_kinds_write() -> None:
    for name, text in schema_files().items():
        assert (SCHEMAS / name).read_text(encoding="utf-8") == text, \
            f"{name} is stale: run python -m geosched.cli.schemas docs/schemas"


def test_no_schema_is_written_by_hand() -> None:
    """Every file in docs/schemas is generated: the list kinds' from geosched/console/lists.py, the documents' from
    their declarations in geosched/files/decl (issue 25 item 6)."""
    assert {p.name for p in SCHEMAS.iterdir()} == set(schema_files())
    assert {f"{d}.schema.json" for d in kinds.DOCUMENTS} <= set(schema_files())


def run(home: Path, *args: str | Path, code: int = 0, env: dict[str, str] | None = None) -> str:
    result = CliRunner().invoke(app, ["--home", str(home), *map(str, args)], env=env)
    assert result.exit_code == code, (args, result.output, result.exception)
    return result.stdout


def both(home: Path, *args: str | Path, code: int = 0) -> dict[str, Any]:
    """The command's -o json and -o yaml, each valid against its schema and both the same document."""
    as_json = valid(json.loads(run(home, *args, "-o", "json", code=code)))
    as_yaml = valid(yaml.safe_load(run(home, *args, "-o", "yaml", code=code)))
    # A report's "now" moves between the two runs; `config show` shows the -o it was given.
    clock = {"generated_at", "until", "settings"}
    assert {k: v for k, v in as_json.items() if k not in clock} == {k: v for k, v in as_yaml.items() if k not in clock}
    return as_json


@pytest.mark.parametrize(("args", "kind"), [
    (("policies",), "PolicyList"),
    (("gpus",), "GpuModelList"),
    (("catalog", "--gpu", "A100:8"), "GpuOfferingList"),
    (("place", JOBS / "train-64.yaml"), "Placement"),
    (("simulate", "--trace", TRACE), "SimulationReport"),
    (("report", "cost"), "CostReport"),
    (("report", "carbon", "--by", "job"), "CarbonReport"),
    (("status",), "GangList"),
    (("down", "--all", "--yes"), "GangDownList"),
    (("config", "show"), "Settings"),
])
def test_json_and_yaml_validate_against_the_kinds_schema(args: tuple[str, ...], kind: str, tmp_path: Path) -> None:
    assert both(tmp_path, *args)["kind"] == kind


def test_no_fit_is_a_document_too(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text((JOBS / "train-8.yaml").read_text().replace("workers: 1", "workers: 100000"), encoding="utf-8")
    doc = both(tmp_path, "place", big, code=3)
    assert doc["kind"] == "NoFit" and doc["rejected"]


def test_placements_have_rfc3339_times_and_numbers(tmp_path: Path) -> None:
    run(tmp_path, "place", JOBS / "train-8.yaml", "--record")
    doc = both(tmp_path, "placements")
    (item,) = doc["items"]
    assert item["created_at"].endswith("Z") and isinstance(item["usd_per_hour"], float)
    assert isinstance(item["gpus"], int) and item["zones"]


def test_check_without_credentials_lists_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    doc = both(tmp_path, "check", code=1)
    # Issue 23 item 9: `ok` is a boolean (it was the string "no"); the word people read is `status`.
    assert any(i["item"] == "credentials" and i["ok"] is False and i["status"] == "no" for i in doc["items"])
    assert all(isinstance(i["ok"], bool) and i["ok"] == (i["status"] != "no") for i in doc["items"])


def test_wide_adds_columns_and_no_headers_drops_them(tmp_path: Path) -> None:
    table = run(tmp_path, "catalog", "--gpu", "A100:8", "--limit", "3", env={"COLUMNS": "300"})
    wide = run(tmp_path, "catalog", "--gpu", "A100:8", "--limit", "3", "-o", "wide", env={"COLUMNS": "300"})
    assert "memory gib" in wide and "region" in wide and "memory" not in table and "region" not in table
    bare = run(tmp_path, "policies", "--no-headers").splitlines()
    assert bare[0].split()[:2] == ["cheapest", "False"] and "zone-first" in bare[-1]
    assert not any(line.split()[:1] == ["name"] or "─" in line for line in bare)  # no header row, no rule
    csv_bare = run(tmp_path, "gpus", "-o", "csv", "--no-headers").splitlines()
    assert csv_bare[0].startswith("A100,")


def test_an_output_a_command_lacks_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "policies", "-o", "html"])
    assert result.exit_code == 2 and "expected one of table, wide, json, yaml" in re.sub(r"[\s│]+", " ", result.output)


NUMBER = re.compile(r"^-?[\d,]+(\.\d+)?$")


def cells(doc: dict[str, Any], view: str) -> set[str]:
    """Every number and name of a list document in the columns its table (or wide table) shows, as shown."""
    keys = [c.key for c in KINDS[doc["kind"]].columns if view == "wide" or not c.wide]
    out = set()
    for item in doc["items"]:
        for value in (item[k] for k in keys):
            if isinstance(value, float | int) and not isinstance(value, bool):
                out.add(render.cell(value))
            elif isinstance(value, str) and " " not in value:
                out.add(value)
    return out


@pytest.mark.parametrize("columns", ["60", "80", "200", None])
def test_tables_never_split_a_number_or_a_name(columns: str | None, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # None: piped with no COLUMNS, where rich would squeeze everything into 80 columns.
    monkeypatch.delenv("COLUMNS", raising=False)
    env = {"COLUMNS": columns} if columns else None
    for args, view in ((("catalog", "--gpu", "A100:8", "--provider", "aws", "--limit", "0"), "table"),
                       (("catalog", "--gpu", "H100:8", "--limit", "0"), "wide"), (("gpus",), "wide")):
        doc = json.loads(run(tmp_path, *args, "-o", "json"))
        text = run(tmp_path, *args, "-o", view, env=env)
        tokens = {t for line in text.splitlines() for t in re.split(r"[\s│┃]+", line) if t}
        expected = cells(doc, view)
        assert (expected and any(NUMBER.match(c) for c in expected)) or args == ("gpus",)
        split = sorted(expected - tokens)
        assert not split, (columns, args, split[:5])
        if columns is None and args[0] == "catalog":
            assert max(len(line) for line in text.splitlines()) > 80


@pytest.mark.parametrize("columns", ["60", "80"])
def test_free_text_wraps_at_words(columns: str, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    why = ("InsufficientInstanceCapacity: We currently do not have sufficient p4d.24xlarge capacity in the "
           "Availability Zone you requested (us-east-1b)")
    render.table("attempts", [{"seq": 1, "zone": "use1-az2", "usd_per_hour": 1774.75, "why": why}])
    text = capsys.readouterr().out
    words = {w for line in text.splitlines() for w in re.split(r"[\s│┃]+", line)}
    assert set(why.split()) <= words and "1,774.8" in words, text


def test_place_candidates_are_drawn_from_the_documents_keys(tmp_path: Path) -> None:
    doc = json.loads(run(tmp_path, "place", JOBS / "train-64.yaml", "-o", "json"))
    env = {"COLUMNS": "60"}
    explained = run(tmp_path, "place", JOBS / "train-64.yaml", "--explain", "--limit", "0", env=env)
    wide = run(tmp_path, "place", JOBS / "train-64.yaml", "-o", "wide", "--limit", "0", env=env)
    bare = run(tmp_path, "place", JOBS / "train-64.yaml", "-o", "wide", "--no-headers", "--limit", "0", env=env)
    piped = run(tmp_path, "place", JOBS / "train-64.yaml", "--explain")  # headings on one line
    piped_wide = run(tmp_path, "place", JOBS / "train-64.yaml", "-o", "wide")
    heading = next(line.split("  ") for line in piped.splitlines() if line.startswith("zones "))
    assert [h.strip() for h in heading if h.strip()] == [c.heading for c in kinds.CANDIDATES if not c.wide]
    assert "comm ms" in piped_wide and "comm ms" not in piped and "$/h" not in explained + wide
    assert "candidates" not in bare and "─" not in bare and "usd per" not in bare
    # Every candidate's numbers and its bounding hop, whole on one line, at 60 columns.
    tokens = {t for line in wide.splitlines() for t in line.split()}
    for candidate in (doc, *doc["alternatives"]):
        score = candidate["score"]
        hop = score["bounding_hop"]
        assert {render.cell(score[k]) for k in ("total", "step_ms", "comm_ms", "usd_per_hour")} <= tokens
        assert f"{hop['from']}->{hop['to']}" in tokens


@pytest.mark.parametrize("report", ["cost", "carbon"])
def test_the_report_columns_are_the_schemas_row_keys(report: str) -> None:
    schema = json.loads((SCHEMAS / f"{report.capitalize()}Report.schema.json").read_text())
    items = schema["properties"]["rows"]["items"]  # generated (decl); a carbon row: with --embodied or without
    item = schema["$defs"][(items.get("anyOf") or [items])[0]["$ref"].rpartition("/")[2]]
    for by in ("job", "cluster", "region", "provider", "day"):
        columns = kinds.report_columns(report, by, embodied=True)
        assert {c.key: c.schema() for c in columns} == {c.key: item["properties"][c.key] for c in columns}
        assert set(item["properties"]) - {c.key for c in columns} <= {"job", "cluster", "region", "provider", "day"}


def test_place_without_headers_prints_rows_alone_on_stdout(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["--home", str(tmp_path), "place", str(JOBS / "train-8.yaml"), "--no-headers"])
    assert result.exit_code == 0, result.output
    doc = json.loads(run(tmp_path, "place", JOBS / "train-8.yaml", "-o", "json"))
    # The decision's prose (the gang, its score, its inputs) goes to stderr; stdout is the assignment's rows.
    assert [line.split() for line in result.stdout.splitlines()] == [
        [n["node"], n["zone"], str(n["workers"])] for n in doc["nodes"]]
    assert "score" in result.stderr and "inputs:" in result.stderr
