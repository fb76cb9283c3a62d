"""Cost and carbon of recorded usage (issue 6): a usage ledger, prices of their time, energy and emissions after
Cloud Carbon Footprint, grouping, outputs, and baselines re-placed for comparison. METHODOLOGY.md has the method.

    geosched.report.ledger   intervals (the read side), and open_interval / close_interval re-exported from
                             geosched.store.usage, the write side the providers' journal and `geosched jobs` call
    geosched.report.report   report(store, kind, by, since, until, output, out): one report
    geosched.report.cli      make_app(store_factory): the `geosched report cost|carbon` sub-app

Pure: accounting, aggregate, baseline, energy, prices, window, formats, charts, html, assemble.
I/O: ledger, journal, reads (store reads), report (file write), signal (parses a file's text), cli.
This package's own import stays light (the demo and scripts write the ledger through it): `report` is imported
from `geosched.report.report`, which brings in the policies and, for HTML, matplotlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from geosched.report.records import Interval, Kind, Line, PricedFrom, Source

if TYPE_CHECKING:
    from geosched.report.ledger import close_interval, intervals, open_interval

# The ledger's functions load the store and the providers' journal: imported when first asked for (PEP 562), so
# `geosched -h`, which imports geosched.report.cli and so this package, does not pay for them (issue 25).
_FROM_LEDGER = ("close_interval", "intervals", "open_interval")


def __getattr__(name: str) -> Any:
    if name in _FROM_LEDGER:
        from geosched.report import ledger

        return getattr(ledger, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["Interval", "Kind", "Line", "PricedFrom", "Source", "close_interval", "intervals", "open_interval"]
