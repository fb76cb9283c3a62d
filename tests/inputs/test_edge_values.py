"""Edge values of times (issue 19, item 8): the first and last instants datetime can hold, given with an offset
that carries them past year 1 or 9999 in UTC (the audit's OverflowError tracebacks), through `--at`, a GitOps
config's `at:`, and the rows of carbon files. Each is one line naming the field, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.core.errors import InputError
from geosched.gitops.config import parse_config
from tests.inputs.inputs_support import ROOT, in_process

JOB = ROOT / "tests" / "data" / "good" / "job.yaml"
EDGES = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00"]


@pytest.mark.parametrize("at", EDGES)
def test_at_outside_the_years_is_one_line(tmp_path: Path, at: str) -> None:
    run = in_process(["place", JOB, "--at", at], tmp_path)
    assert run.one_line_error and "--at" in run.stderr and "between the years" in run.stderr, run.stderr


@pytest.mark.parametrize("at", EDGES)
def test_a_gitops_config_at_outside_the_years_is_one_line(at: str) -> None:
    with pytest.raises(InputError, match=r"gitops\.yaml: at: the time must lie between the years"):
        parse_config({"at": at}, "gitops.yaml")


@pytest.mark.parametrize("at", EDGES)
def test_a_carbon_row_outside_the_years_is_one_line(tmp_path: Path, at: str) -> None:
    carbon = tmp_path / "carbon.csv"
    carbon.write_text(f"region,datetime,gco2e_per_kwh\naws:us-east-1,{at},380\n")
    run = in_process(["place", JOB, "--carbon-hourly", carbon, "--at", "2025-03-01T12:00:00Z"], tmp_path)
    assert run.one_line_error and "carbon.csv: line 2" in run.stderr and "between the years" in run.stderr, \
        run.stderr


@pytest.mark.parametrize("row", ["2022-01-01 00:00:00", "0001-01-01T00:00:00+01:00"])
def test_an_electricity_maps_row_outside_the_years_is_one_line_and_a_real_one_loads(tmp_path: Path,
                                                                                   row: str) -> None:
    """The Electricity Maps hourly CSV's shape (`Datetime (UTC)`, as downloaded from its data portal)."""
    from geosched.grid.formats import _em_time

    if row.startswith("0001"):
        with pytest.raises(InputError, match="between the years"):
            _em_time(row, "em.csv", "line 2")
    else:
        assert _em_time(row, "em.csv", "line 2") == 1640995200.0


# --- generated workloads and weights (items 7 and 8) ----------------------------------------------

@pytest.mark.parametrize(("flag", "value"), [("--seed", "-1"), ("--load", "nan"), ("--load", "inf"),
                                             ("--jobs", "100000000"), ("--min-gpus", "-4")])
def test_a_generated_workload_flag_out_of_range_is_one_line_naming_it(tmp_path: Path, flag: str,
                                                                      value: str) -> None:
    """`--load nan` never ended, `--jobs 100000000` raised MemoryError, `--seed -1` blamed --min-gpus."""
    run = in_process(["simulate", "--workload", "llm", flag, value], tmp_path)
    assert run.one_line_error and run.stderr.startswith(f"error: {flag}: expected"), run.stderr


def test_a_huge_weight_is_refused_before_it_overflows(tmp_path: Path) -> None:
    """1e308 x a price is infinity: numpy printed a RuntimeWarning and the scores went NaN."""
    run = in_process(["place", JOB, "--network-weight", "1e308"], tmp_path)
    assert run.code == 2 and "--network-weight" in run.stderr and "Warning" not in run.stderr, run.stderr
    assert in_process(["place", JOB, "--network-weight", "1e12", "-o", "json"], tmp_path).code == 0


@pytest.mark.parametrize("since", ["99999999999d", "0001-01-01T00:00:00+01:00"])
def test_report_since_before_any_year_is_one_line(tmp_path: Path, since: str) -> None:
    run = in_process(["report", "cost", "--since", since], tmp_path)
    assert run.one_line_error and run.stderr.startswith("error: --since:"), run.stderr
    assert in_process(["report", "cost", "--since", "7d"], tmp_path).code == 0
