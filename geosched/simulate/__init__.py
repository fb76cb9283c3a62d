"""Trace replay of placement policies: read a trace, replay it per policy, compare the results.

    read_trace(path) -> TraceRead          traces/: one reader per format, detected from content
    simulate(jobs, ctx, policies, weights) -> list[PolicyResult]   engine.py, pure
    report.rows / document / to_csv       report.py: rows, CSV, JSON (the plot: geosched.plots.simulation)
    run_simulate_command(...)              ../simulate_cli.py: what `geosched simulate` calls (an edge: it
                                           reads files and the store and prints, so it lives outside)
"""

from __future__ import annotations

from geosched.simulate.engine import SimOptions, simulate
from geosched.simulate.metrics import JobRecord, PolicyResult, Unplaced
from geosched.simulate.traces import FORMATS, RowIssue, TraceJob, TraceRead, detect_format, parse_trace, read_trace

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
