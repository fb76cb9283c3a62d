"""The CLI documents itself (issue 14): docs/cli.md, docs/settings.md and README.md's command list are what
`python -m geosched.cli.clidoc` writes now, and every command's --help works at 80 columns."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from geosched.cli import clidoc
from geosched.cli.main import app
from tests.test_cli import ROOT

COMMANDS = [path for path, _, _ in clidoc.commands()]


def test_the_generated_docs_are_current() -> None:
    for path, text in clidoc.outputs(ROOT).items():
        assert path.read_text(encoding="utf-8") == text, f"{path.name} is stale: run scripts/docs"


def test_the_reference_lists_every_command_its_usage_and_its_options() -> None:
    text = clidoc.cli_md()
    for path in COMMANDS:
        assert f"\n## {path}\n" in text
    assert "\ngeosched place [OPTIONS] {JOB}\n" in text
    assert "| `--cost-weight` | `0.1` | `GEOSCHED_COST_WEIGHT` |" in text
    assert "--network" not in text.split("## geosched provision")[1].split("\n## ")[0]  # the deprecated alias is hidden


@pytest.mark.parametrize("path", COMMANDS)
def test_every_help_fits_80_columns(path: str) -> None:
    result = CliRunner().invoke(app, [*path.split()[1:], "--help"], env={"COLUMNS": "80", "TERM": "dumb"},
                                terminal_width=80)
    assert result.exit_code == 0, result.output
    assert result.exception is None and "Traceback" not in result.output
    assert "Usage:" in result.output
    too_wide = [line for line in result.output.splitlines() if len(line) > 80]
    assert not too_wide, too_wide


def test_the_weight_ranges_are_documented() -> None:
    # Issue 23 item 5: the ranges are enforced (tests/test_cli_flags.py); the reference must say them too. Before,
    # nothing said that network, cost and carbon may not all be 0.
    rows = {line.split("|")[1].strip(" `"): line for line in clidoc.cli_md().splitlines() if line.startswith("| `--")}
    assert "0 to 1" in rows["--zone-tolerance"]
    assert "not all 0" in rows["--network-weight"] and "not all 0" in rows["--cost-weight"]
