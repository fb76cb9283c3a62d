"""Simulation results as rows and CSV. Pure: they return values and text; console printing stays in
`geosched.console.render`, the picture (`simulate --plot`) is `geosched.plots.simulation`, the SimulationReport
document (`-o json|yaml`) is declared in geosched.files.decl.simulation and built by geosched.cli.simulate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from geosched.files import csvtext
from geosched.simulate.metrics import PolicyResult

OUTPUTS = ("table", "wide", "json", "yaml", "csv")


def rows(results: Sequence[PolicyResult]) -> list[dict[str, Any]]:
    return [r.summary() for r in results]


def to_csv(results: Sequence[PolicyResult]) -> str:
    return csvtext.to_csv(rows(results))
