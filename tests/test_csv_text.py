"""The one CSV writer (geosched.files.csvtext): a name a spreadsheet would run as a formula is written as text
(OWASP "CSV Injection", https://owasp.org/www-community/attacks/CSV_Injection), numbers as they are; through the
real `geosched report -o csv` over a real sqlite ledger. The kubeconfig-context route (`submit`, `jobs --record`, then
the report) is tests/kubeemu/test_kubeemu_csv.py."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from geosched.files.csvtext import cell, to_csv
from geosched.store.db import Store
from tests.inputs.inputs_support import in_process
from tests.report.report_support import T0, H, price, used

# The shapes of OWASP's page: a formula (`=`), its `+`, `-` and `@` variants (the DDE payloads it cites), and a
# formula behind a leading tab or carriage return, which a spreadsheet may trim away.
DANGEROUS = ['=HYPERLINK("http://x","y")', "+1+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0",
             "@SUM(1+9)*cmd|' /C calc'!A0", "\t=1+1", "\r=1+1"]


@pytest.mark.parametrize("name", DANGEROUS)
def test_a_formula_is_written_as_text(name: str) -> None:
    text = to_csv([{"cluster": name, "cost_usd": -1.5}])
    (row,) = csv.DictReader(io.StringIO(text))
    assert row == {"cluster": "'" + name, "cost_usd": "-1.5"}


@pytest.mark.parametrize("value", [-1.5, -3, 0.0, 1e-7, -2.5e-12, True, None, "-1.5", "-2e-3", "+7", "-.5", "12"])
def test_numbers_and_plain_values_are_unchanged(value: object) -> None:
    assert cell(value) == value
    plain = io.StringIO()
    csv.writer(plain, lineterminator="\n").writerow([value])
    assert to_csv([{"v": value}], header=False) == plain.getvalue()


@pytest.mark.parametrize("text", ["-1_0", "-inf", "-nan", "-1.5x", "=1", "-", "@"])
def test_text_that_only_looks_numeric_to_python_is_prefixed(text: str) -> None:
    # float() takes `-1_0`, `-inf` and `-nan`; a spreadsheet does not read them as numbers, so they are text here.
    assert cell(text) == "'" + text


def test_a_list_is_one_cell_and_checked_whole() -> None:
    assert cell(["aws", "gcp"]) == "aws,gcp"
    assert cell(["=cmd()", "gcp"]) == "'=cmd(),gcp"
    assert cell(["gcp", "=cmd()"]) == "gcp,=cmd()"  # one cell: only its first character starts a formula


def test_a_carriage_return_in_a_cell_is_quoted_so_readers_keep_the_row_whole() -> None:
    # Minimal quoting alone leaves a CR bare (the line terminator is `\n`), and csv.reader refuses that row.
    text = to_csv([{"name": "a\rb", "gpus": 8}, {"name": "plain", "gpus": 16}])
    assert text == 'name,gpus\n"a\rb",8\nplain,16\n'
    assert list(csv.reader(io.StringIO(text, newline=""))) == [["name", "gpus"], ["a\rb", "8"], ["plain", "16"]]


def test_the_header_is_dropped_on_request_and_no_rows_is_no_text() -> None:
    assert to_csv([{"a": 1}], header=False) == "1\n"
    assert to_csv([]) == ""


def test_report_csv_neutralises_job_and_cluster_names_and_keeps_the_numbers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Store(home) as store:
        price(store, "aws", "p4d.24xlarge", "us-east-1", "use1-az1", 32.0, T0 - 24 * H)
        for i, name in enumerate(DANGEROUS):
            used(store, f"n{i}", T0 + i * H, T0 + (i + 2) * H, job=name, cluster=name)
    window = ["--since", "2024-01-01", "--until", "2024-01-03"]
    for by in ("job", "cluster"):
        run = in_process(["report", "cost", "--by", by, *window, "-o", "csv"], home=home)
        assert run.code == 0, run.stderr
        rows = list(csv.DictReader(io.StringIO(run.stdout)))
        assert sorted(r[by] for r in rows) == sorted("'" + n for n in DANGEROUS)
        doc = json.loads(in_process(["report", "cost", "--by", by, *window, "-o", "json"], home=home).stdout)
        # The JSON carries the names as they are; the CSV's numbers are the JSON's, digit for digit.
        assert sorted(r[by] for r in doc["rows"]) == sorted(DANGEROUS)
        by_name = {r[by]: r for r in doc["rows"]}
        for row in rows:
            assert float(row["cost_usd"]) == by_name[row[by][1:]]["cost_usd"] == 64.0
            assert float(row["gpu_hours"]) == by_name[row[by][1:]]["gpu_hours"]
