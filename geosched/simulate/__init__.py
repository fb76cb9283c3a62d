"""Trace replay of placement policies: read a trace, replay it per policy, compare the results.

    read_trace(path) -> TraceRead          traces/: one reader per format, detected from content
    simulate(jobs, ctx, policies, weights) -> list[PolicyResult]   engine.py, pure
    report.rows / document / to_csv       report.py: rows, CSV, JSON (the plot: geosched.plots.simulation)
    run_simulate_command(...)              ../simulate_cli.py: what `geosched simulate` calls (an edge: it
                                           reads files and the store and prints, so it lives outside)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from geosched.simulate.engine import SimOptions, simulate
    from geosched.simulate.metrics import JobRecord, PolicyResult, Unplaced
    from geosched.simulate.traces import (
        FORMATS,
        RowIssue,
        TraceJob,
        TraceRead,
        detect_format,
        parse_trace,
        read_trace,
    )

# Loaded on first use, not with the package: the engine needs numpy, and `geosched -h` names the shipped traces
# (simulate/shipped.py) without replaying anything (tests/test_cli_startup.py).
_HOME = {"SimOptions": "engine", "simulate": "engine", "JobRecord": "metrics", "PolicyResult": "metrics",
         "Unplaced": "metrics", "FORMATS": "traces", "RowIssue": "traces", "TraceJob": "traces",
         "TraceRead": "traces", "detect_format": "traces", "parse_trace": "traces", "read_trace": "traces"}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)

__all__ = [
    "FORMATS",
    "JobRecord",
    "PolicyResult",
    "RowIssue",
    "SimOptions",
    "TraceJob",
    "TraceRead",
    "Unplaced",
    "detect_format",
    "parse_trace",
    "read_trace",
    "simulate",
]
