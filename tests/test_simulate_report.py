"""Results as table, CSV and JSON, and the command the CLI calls (the plot: test_simulate_plot.py)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from geosched.cli.simulate import report_doc, run_simulate_command
from geosched.console import render
from geosched.console.lists import SIMULATION_RESULTS
from geosched.core.errors import InputError
from geosched.policies import PlacementContext
from geosched.simulate import PolicyResult, TraceJob, simulate
from geosched.simulate.report import rows, to_csv
from tests.handmade import fleet, network, node

TRACES = Path(__file__).parent / "data" / "traces"
SUMMARY = ["policy", "avg_jct_s", "p95_jct_s", "makespan_s", "avg_queue_s", "gpu_util", "cost_usd", "kgco2e",
           "jobs", "unplaced", "avg_slowdown", "multi_zone_jobs", "flexible_jobs", "deadline_misses",
           "avg_jct_inflexible_s"]


def results() -> list[PolicyResult]:
    f = fleet([node("n1", "za")])
    trace = [TraceJob("a", 0, 8, 100), TraceJob("b", 10, 4, 50), TraceJob("huge", 20, 64, 10, line=3)]
    return simulate(trace, PlacementContext(f, network(f)), ["zone-first", "pack"])


def test_csv_has_one_row_per_policy_with_the_summary_fields() -> None:
    parsed = list(csv.DictReader(io.StringIO(to_csv(results()))))
    assert [r["policy"] for r in parsed] == ["zone-first", "pack"]
    assert list(parsed[0]) == SUMMARY
    assert float(parsed[0]["avg_jct_s"]) == pytest.approx(120.0)
    assert to_csv([]) == ""


def test_json_carries_results_and_unplaced_jobs_with_their_line() -> None:
    built = report_doc(results(), trace="t.csv", format="csv", fleet="f", jobs_read=3, rows_with_errors=0,
                       rows_skipped=0)
    doc = json.loads(json.dumps(built.dump()))
    assert doc["trace"] == "t.csv"
    assert [r["policy"] for r in doc["results"]] == ["zone-first", "pack"]
    assert doc["unplaced"]["pack"] == [{"id": "huge", "line": 3, "reason": doc["unplaced"]["pack"][0]["reason"]}]
    assert doc["results"] == rows(results())


def test_the_table_is_drawn_from_the_declared_columns_in_hours(capsys: pytest.CaptureFixture[str]) -> None:
    assert [c.key for c in SIMULATION_RESULTS] == SUMMARY  # the table's model is the document's keys
    returned = run_simulate_command(TRACES / "plain.csv", ["zone-first", "spread"])
    lines = capsys.readouterr().out.splitlines()
    jct = next(line.split() for line in lines if line.startswith("avg jct h "))
    assert jct[3:] == [render.cell(r.avg_jct_s / 3600) for r in returned]
    assert any(line.split() == ["metric", "zone-first", "spread"] for line in lines)
    run_simulate_command(TRACES / "plain.csv", ["pack"], no_headers=True)
    bare = capsys.readouterr().out.splitlines()
    assert bare[0].split()[:3] == ["avg", "jct", "h"] and not any("metric" in line or "─" in line for line in bare)


def test_command_prints_json_for_the_default_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    returned = run_simulate_command(TRACES / "plain.csv", ["zone-first", "spread"], output="json")
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "csv" and doc["fleet"] == "embedded default" and doc["jobs_read"] == 3
    assert [r["policy"] for r in doc["results"]] == ["zone-first", "spread"] == [r.policy for r in returned]
    assert all(r["jobs"] == 3 for r in doc["results"])


def test_command_table_and_skipped_rows_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    run_simulate_command(TRACES / "philly.json", ["pack"])
    out, err = capsys.readouterr()
    assert "Trace replay" in out and "pack" in out
    assert "2 row(s) skipped" in err and "line 15" in err and "line 35" in err


def test_command_lenient_prints_bad_rows_and_strict_stops(capsys: pytest.CaptureFixture[str]) -> None:
    run_simulate_command(TRACES / "plain_bad.csv", ["pack"], output="csv", strict=False)
    out, err = capsys.readouterr()
    assert out.splitlines()[0].split(",") == SUMMARY
    note, *errors = err.splitlines()
    assert note.startswith("every gang runs on H100")
    assert [line.split(": ")[:3] for line in errors] == [
        ["error", str(TRACES / "plain_bad.csv"), f"line {n}"] for n in (3, 4, 5)]
    with pytest.raises(InputError, match="line 3: gpus: must be >= 1"):
        run_simulate_command(TRACES / "plain_bad.csv", ["pack"])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"policy_names": ["nope"]}, "unknown policy 'nope'"),
    ({"policy_names": ["pack"], "output": "xml"}, "--output"),
    ({"policy_names": ["pack"], "trace_format": "swf"}, "--trace-format"),
])
def test_command_rejects_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        run_simulate_command(TRACES / "plain.csv", **kwargs)  # type: ignore[arg-type]


def test_command_pins_the_gpu_unless_told_any() -> None:
    pinned = run_simulate_command(TRACES / "plain.csv", ["cheapest"], output="csv")
    free = run_simulate_command(TRACES / "plain.csv", ["cheapest"], output="csv", gpu="any")
    assert free[0].cost_usd < pinned[0].cost_usd  # left free, cheapest takes slower, cheaper GPUs


def test_command_rejects_a_gpu_the_fleet_lacks() -> None:
    with pytest.raises(InputError, match="--gpu: no B200 in the fleet"):
        run_simulate_command(TRACES / "plain.csv", ["pack"], gpu="B200")
