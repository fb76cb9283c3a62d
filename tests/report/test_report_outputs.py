"""Grouping by job, cluster, region, provider and day; table, CSV, JSON and Markdown; the window; the CLI."""

from __future__ import annotations

import csv
import io
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import typer
from report_support import T0, H, price, used
from typer.testing import CliRunner

from geosched.console import render
from geosched.console.lists import report_columns
from geosched.core.errors import GeoschedError, InputError
from geosched.report.cli import make_app
from geosched.report.report import report
from geosched.report.window import parse_when
from geosched.store.db import Store

UNTIL = T0 + 48 * H
DAY = 24 * H


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """Three nodes, two jobs, two clusters, two providers, two days; $32/h (aws) and $16/h (gcp) nodes:

    a1  alpha  aws eks-a  day 1 22:00 -> day 2 02:00  4 h x $32 = $128 ($64 on each day)
    a2  alpha  gcp gke-b  day 1 23:00 -> day 2 00:00  1 h x $16 = $16
    b1  beta   gcp gke-b  day 2 00:00 -> day 2 03:00  3 h x $16 = $48
    """
    s = Store(tmp_path / "home")
    price(s, "aws", "p4d.24xlarge", "us-east-1", "use1-az1", 32.0, T0 - DAY)
    price(s, "gcp", "a2-highgpu-8g", "us-central1", "us-central1-a", 16.0, T0 - DAY)
    gcp: dict[str, Any] = {"provider": "gcp", "region": "us-central1", "zone": "us-central1-a",
                           "instance_type": "a2-highgpu-8g"}
    used(s, "a1", T0 + 22 * H, T0 + 26 * H, job="alpha", cluster="eks-a")
    used(s, "a2", T0 + 23 * H, T0 + 24 * H, job="alpha", cluster="gke-b", **gcp)
    used(s, "b1", T0 + 24 * H, T0 + 27 * H, job="beta", cluster="gke-b", **gcp)
    return s


def _costs(store: Store, by: str) -> dict[str, float]:
    doc = json.loads(report(store, "cost", by, T0, UNTIL, "json").text or "")
    return {row[by]: row["cost_usd"] for row in doc["rows"]}


@pytest.mark.parametrize(("by", "expected"), [
    ("job", {"alpha": 128.0 + 16.0, "beta": 48.0}),
    ("cluster", {"eks-a": 128.0, "gke-b": 16.0 + 48.0}),
    ("region", {"aws:us-east-1": 128.0, "gcp:us-central1": 64.0}),
    ("provider", {"aws": 128.0, "gcp": 64.0}),
    ("day", {"2024-01-01": 64.0 + 16.0, "2024-01-02": 64.0 + 48.0}),
])
def test_grouping(store: Store, by: str, expected: dict[str, float]) -> None:
    assert _costs(store, by) == expected


def test_groups_add_up_to_the_total_for_carbon_too(store: Store) -> None:
    for by in ("job", "cluster", "region", "provider", "day"):
        doc = json.loads(report(store, "carbon", by, T0, UNTIL, "json").text or "")
        assert sum(r["gco2e"] for r in doc["rows"]) == pytest.approx(doc["total"]["gco2e"], rel=1e-12)
        assert sum(r["energy_kwh"] for r in doc["rows"]) == pytest.approx(doc["total"]["energy_kwh"], rel=1e-12)


def test_days_are_in_date_order_and_other_groups_largest_first(store: Store) -> None:
    assert list(_costs(store, "day")) == ["2024-01-01", "2024-01-02"]
    assert list(_costs(store, "job")) == ["alpha", "beta"]


def test_csv(store: Store) -> None:
    text = report(store, "cost", "job", T0, UNTIL, "csv").text or ""
    rows = list(csv.DictReader(io.StringIO(text)))
    assert text.splitlines()[0] == "job,intervals,gpu_hours,cost_usd,usd_per_gpu_hour,priced_from,unpriced_gpu_hours"
    # alpha: 8 GPUs x 4 h + 8 GPUs x 1 h = 40 GPU-h for $144, $3.60 per GPU-h
    assert rows[0] == {"job": "alpha", "intervals": "2", "gpu_hours": "40.0", "cost_usd": "144.0",
                       "usd_per_gpu_hour": "3.6", "priced_from": "history", "unpriced_gpu_hours": "0.0"}
    carbon = report(store, "carbon", "region", T0, UNTIL, "csv").text or ""
    assert carbon.splitlines()[0] == "region,intervals,gpu_hours,energy_kwh,gco2e,gco2e_per_kwh,uncounted_kwh"


def test_json(store: Store) -> None:
    doc = json.loads(report(store, "cost", "provider", T0, UNTIL, "json").text or "")
    assert (doc["apiVersion"], doc["kind"]) == ("geosched.io/v1alpha1", "CostReport")
    assert (doc["report"], doc["by"], doc["since"], doc["until"]) == ("cost", "provider", "2024-01-01T00:00:00Z",
                                                                      "2024-01-03T00:00:00Z")
    assert doc["total"]["cost_usd"] == 192.0
    assert doc["priced_from_usd"] == {"history": 192.0}
    assert doc["methodology"].endswith("METHODOLOGY.md")


def test_markdown(store: Store) -> None:
    text = report(store, "cost", "job", T0, UNTIL, "md").text or ""
    assert text.startswith("# geosched cost by job\n")
    assert "| job | intervals | GPU-h | cost $ | $/GPU-h | priced from | unpriced GPU-h |" in text
    assert "| alpha | 2 | 40.00 | 144.00 | 3.60 | history | 0.00 |" in text
    assert "- priced from: history $192.00" in text


def test_table_rows_are_the_documents_rows(store: Store) -> None:
    result = report(store, "carbon", "cluster", T0, UNTIL)
    # Carbon reports put the largest emitter first: gke-b (4 node-hours at 412.72 g/kWh) before eks-a (379.069).
    assert [r["cluster"] for r in result.rows] == ["gke-b", "eks-a"]
    assert result.rows[0]["gco2e"] > result.rows[1]["gco2e"]
    assert [c.key for c in report_columns("carbon", "cluster")] == list(result.rows[0])
    assert result.caption and "kgCO2e" in result.caption


def test_cli_table_is_drawn_from_the_report_columns(store: Store, tmp_path: Path) -> None:
    args = ["report", "carbon", "--by", "cluster", "--since", "2024-01-01", "--until", "2024-01-03"]
    rows = report(store, "carbon", "cluster", T0, UNTIL).rows
    runner = CliRunner()
    table, wide, bare = (runner.invoke(_cli(tmp_path / "home"), [*args, *extra], env={"COLUMNS": "60"}).stdout
                         for extra in ((), ("-o", "wide"), ("--no-headers",)))
    words = " ".join(table.split())
    assert "cluster gpu hours energy kwh kgco2e gco2e per kwh ─" in words  # no `GPU-h`, `kWh`: the keys
    assert "intervals" not in table and "intervals" in wide and "uncounted" in wide
    first = next(line.split() for line in bare.splitlines() if line.startswith("gke-b"))
    assert first == [rows[0]["cluster"], render.cell(rows[0]["gpu_hours"]), render.cell(rows[0]["energy_kwh"]),
                     render.cell(rows[0]["gco2e"] / 1000), render.cell(rows[0]["gco2e_per_kwh"])]
    assert "geosched carbon" not in bare and "─" not in bare


def test_out_writes_the_file_atomically(store: Store, tmp_path: Path) -> None:
    target = tmp_path / "out" / "cost.csv"
    result = report(store, "cost", "job", T0, UNTIL, "csv", target)
    assert result.path == target and target.read_text() == result.text
    assert [p.name for p in target.parent.iterdir()] == ["cost.csv"]
    with pytest.raises(InputError, match="--out"):
        report(store, "cost", "job", T0, UNTIL, "table", target)


def test_usage_selection_does_not_count_a_job_twice(store: Store) -> None:
    # alpha's job interval duplicates its nodes; gamma ran only as a job: 4 of the node's 8 GPUs for 1 h = $16.
    used(store, "alpha", T0 + 22 * H, T0 + 26 * H, kind="job", job="alpha", gpus=8, source="kube")
    used(store, "gamma", T0 + 30 * H, T0 + 31 * H, kind="job", job="gamma", gpus=4, source="kube")
    assert _costs(store, "job") == {"alpha": 144.0, "beta": 48.0, "gamma": 16.0}
    node = json.loads(report(store, "cost", "job", T0, UNTIL, "json", usage="node").text or "")
    job = json.loads(report(store, "cost", "job", T0, UNTIL, "json", usage="job").text or "")
    assert {r["job"]: r["cost_usd"] for r in node["rows"]} == {"alpha": 144.0, "beta": 48.0}
    assert {r["job"]: r["cost_usd"] for r in job["rows"]} == {"alpha": 128.0, "gamma": 16.0}


def test_window_forms() -> None:
    now = T0 + 10 * DAY
    assert parse_when("7d", now) == T0 + 3 * DAY
    assert parse_when("12h", now) == now - 12 * H
    assert parse_when("30m", now) == now - 1800
    assert parse_when("2w", now) == now - 14 * DAY
    assert parse_when("2024-01-01", now) == T0
    assert parse_when("2024-01-01T00:00Z", now) == T0
    assert parse_when("2024-01-01T01:00:00+01:00", now) == T0


def test_relative_since_clips_the_window(store: Store) -> None:
    # Until day 2 03:00, since 2 h before: a1 01:00-02:00 ($32) and b1 01:00-03:00 ($32).
    doc = json.loads(report(store, "cost", "job", "2h", T0 + 27 * H, "json", now=T0 + 27 * H).text or "")
    assert doc["total"]["cost_usd"] == 64.0


@pytest.mark.parametrize("bad", ["yesterday", "7 days", "2024-13-01", "-3d", "7x"])
def test_a_bad_since_is_a_one_line_input_error(store: Store, bad: str) -> None:
    with pytest.raises(InputError) as caught:
        report(store, "cost", "job", since=bad)
    message = str(caught.value)
    assert message.startswith("--since: expected an ISO date") and "\n" not in message and repr(bad) in message


def test_since_after_until_is_refused(store: Store) -> None:
    with pytest.raises(InputError, match="must be before --until"):
        report(store, "cost", "job", since=T0 + DAY, until=T0)


def _cli(home: Path) -> typer.Typer:
    app = typer.Typer()
    app.add_typer(make_app(lambda: Store(home)), name="report")
    return app


def test_cli_writes_csv_to_stdout(store: Store, tmp_path: Path) -> None:
    run = CliRunner().invoke(_cli(tmp_path / "home"), ["report", "cost", "--by", "job", "--since", "2024-01-01",
                                                       "--until", "2024-01-03", "-o", "csv"])
    assert run.exit_code == 0, run.output
    assert run.stdout == report(store, "cost", "job", T0, UNTIL, "csv").text


def test_cli_table_and_file(store: Store, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["report", "carbon", "--by", "day", "--since", "2024-01-01", "--until", "2024-01-03"]
    table = runner.invoke(_cli(tmp_path / "home"), args)
    assert table.exit_code == 0 and "geosched carbon by day" in table.stdout and "2024-01-02" in table.stdout
    target = tmp_path / "c.md"
    written = runner.invoke(_cli(tmp_path / "home"), [*args, "-o", "md", "--out", str(target)])
    assert written.exit_code == 0 and f"wrote {target}" in written.stdout
    assert target.read_text().startswith("# geosched carbon by day")


def test_cli_bad_since_is_one_line_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = _cli(tmp_path / "home")
    # As geosched.cli.main.main does: a GeoschedError becomes one `error:` line and its exit code.
    with pytest.raises(GeoschedError) as caught:
        app(["report", "cost", "--since", "last tuesday"], standalone_mode=False)
    render.error(str(caught.value))
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --since: expected an ISO date")
    assert caught.value.exit_code == 2


def test_cli_reads_an_hourly_carbon_file(store: Store, tmp_path: Path) -> None:
    # Every hour of aws:us-east-1 at 1000 g/kWh: eks-a's emissions are its energy x 1000.
    series = tmp_path / "carbon.csv"
    series.write_text("region,hour,gco2e_per_kwh\n" + "".join(f"aws:us-east-1,{h},1000\n" for h in range(24)))
    run = CliRunner().invoke(_cli(tmp_path / "home"), ["report", "carbon", "--by", "cluster", "--since", "2024-01-01",
                                                       "--until", "2024-01-03", "-o", "json", "--carbon", str(series)])
    assert run.exit_code == 0, run.output
    row = next(r for r in json.loads(run.stdout)["rows"] if r["cluster"] == "eks-a")
    assert row["gco2e"] == pytest.approx(row["energy_kwh"] * 1000, rel=1e-12)


def test_a_report_written_again_keeps_its_mode_and_a_new_one_is_0644(store: Store, tmp_path: Path) -> None:
    # The web server's user reads the report: a rewrite must not turn it private (0600) as a bare mkstemp does.
    shared = tmp_path / "site" / "report.html"
    report(store, "cost", "region", T0, UNTIL, "html", shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644 & ~_umask()
    shared.chmod(0o664)
    report(store, "cost", "job", T0, UNTIL, "html", shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o664 and "job" in shared.read_text()


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
