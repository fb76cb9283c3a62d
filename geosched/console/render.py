"""All console output: tables for people, JSON/YAML/CSV for programs. The only module that prints."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from rich.console import ConsoleDimensions
    from rich.text import Text

    from geosched.core.models import Placement, Score, Weights


def printable(text: str) -> str:
    """`text` without control characters (ESC, BEL, ...): a name from a file, a node or a cluster must not move
    the cursor, retitle the terminal or open a hyperlink. Line breaks and tabs stay."""
    return text if text.isprintable() else "".join(c for c in text if c.isprintable() or c in "\n\t")


def safe(text: object) -> str:
    """A name or message from outside, ready to sit inside rich markup: printable and with its brackets escaped,
    so `x[/bold]` or `[link=...]` is shown as written. The one helper every styled line uses."""
    from rich.markup import escape
    return escape(printable(str(text)))


class _Console(Console):
    """Markup is off unless a call asks for it (and then escapes what it interpolates with `safe`), and every
    string printed or put in a table (cells, titles, captions) passes `printable` on its way."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        from geosched.console import redact
        return super().render_str(printable(redact.scrub(text)), **kwargs)

    @property
    def size(self) -> ConsoleDimensions:
        """The terminal's width, or `COLUMNS` when set; piped (not a terminal, no `COLUMNS`) a wide page, where
        rich would squeeze everything to 80 columns: a program reading the table wants whole lines."""
        from rich.console import ConsoleDimensions
        columns = os.environ.get("COLUMNS", "")
        size = super().size
        width = PIPED_WIDTH if not columns.isdigit() and not self.is_terminal else size.width
        return ConsoleDimensions(max(width, _AT_LEAST.get()), size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


# A table being drawn needs at least this width (rich would otherwise squeeze it into the terminal's).
_AT_LEAST: ContextVar[int] = ContextVar("at_least", default=0)
# Piped tables: as wide as their content up to this (a line longer than any screen, shorter than a pager's limit).
PIPED_WIDTH = 4000
# A free-text cell wraps at words; a single token longer than this is the only thing folded mid-word.
LONGEST_UNBROKEN = 40
# ... unless the terminal is too narrow for that: then it folds inside words down to this width.
NARROWEST_PROSE = 20


out = _Console(highlight=False, soft_wrap=False, markup=False)
err = _Console(stderr=True, highlight=False, markup=False)


def error(message: str) -> None:
    # One plain line, no markup: messages quote user input, which must not be read as markup.
    from geosched.console import redact
    from geosched.core.errors import one_line
    sys.stderr.write(f"error: {one_line(redact.scrub(message))}\n")


def warning(message: str) -> None:
    """One plain line on stderr that does not fail the command."""
    from geosched.console import redact
    from geosched.core.errors import one_line
    sys.stderr.write(f"warning: {one_line(redact.scrub(message))}\n")


def data(doc: Any, fmt: str) -> None:
    from geosched.console import redact
    from geosched.files.fields import dump
    sys.stdout.write(redact.scrub(dump(doc, fmt)))


def scrub_warnings() -> None:
    """Python warnings (a library's, such as urllib3's) printed through `redact.scrub` like every other line."""
    from geosched.console import redact
    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: str | None = None) -> None:
        (file or sys.stderr).write(redact.scrub(warnings.formatwarning(message, category, filename, lineno, line)))
    warnings.showwarning = show


def rows_csv(rows: Sequence[dict[str, Any]], header: bool = True) -> None:
    """Rows as CSV (geosched.files.csvtext: the one writer, safe to open in a spreadsheet), the keys of the first
    row as columns; a list value is one comma-separated cell."""
    from geosched.console import redact
    from geosched.files.csvtext import to_csv
    sys.stdout.write(redact.scrub(to_csv(rows, header=header)))


_HEADERS: ContextVar[bool] = ContextVar("headers", default=True)


@contextmanager
def headers(show: bool) -> Iterator[None]:
    """Tables drawn inside show their headers, or not (`--no-headers` of a command that draws several)."""
    token = _HEADERS.set(show)
    try:
        yield
    finally:
        _HEADERS.reset(token)


def headers_shown() -> bool:
    """Whether tables drawn now show headers (not under --no-headers, where stdout is rows only)."""
    return _HEADERS.get()


def prose() -> Console:
    """Where a line of prose beside tables goes: stdout, or stderr under --no-headers, where stdout carries the
    tables' rows alone (for `awk` and `cut`, as kubectl's)."""
    return out if _HEADERS.get() else err


def table(title: str, rows: Sequence[dict[str, Any]], caption: str | None = None, *,
          headers: Sequence[str] | None = None, show_headers: bool | None = None) -> None:
    """Rows as a table: the keys of the first row are the columns, headed by the key humanised (`headers` names
    them otherwise). Numbers and names (cells without a space) are never broken across lines; free text wraps at
    word boundaries; headings wrap at words. When the terminal is too narrow for that, the table is wider than the
    terminal rather than wrong. Without `show_headers` (kubectl's --no-headers) there is no header row, title or
    caption: rows only, for `awk`."""
    from rich import box
    from rich.cells import cell_len
    from rich.table import Table
    from rich.text import Text
    show_headers = _HEADERS.get() if show_headers is None else show_headers
    if not rows:
        if show_headers:
            out.print(f"{title}: nothing to show")
            if caption:
                # The caption carries the notes (capacity not charged, prices missing): an empty table is where
                # they matter most, as "nothing to show" alone reads as a complete zero.
                out.print(Text(caption))
        return
    keys = list(rows[0])
    names = list(headers) if headers is not None else [k.replace("_", " ") for k in keys]
    cells = [[cell(row.get(key)) for key in keys] for row in rows]
    columns = [[c[i] for c in cells] for i in range(len(keys))]
    prose = [any(" " in c for c in column) for column in columns]
    widths = column_widths(columns, names if show_headers else [""] * len(keys), prose, out.width)
    # A title with a word wider than the table (a trace's path over a two-column table) would be split inside that
    # word by rich: it goes on its own line above, wrapped at the terminal's width instead (issue 23 item 8).
    apart = show_headers and max(map(cell_len, title.split()), default=0) > sum(widths) + 2 * (len(widths) - 1)
    if apart:
        out.print(Text(title, overflow="fold"))
    # kubectl's layout: columns two spaces apart, a rule under the header, no vertical lines (they cost three
    # characters a column that the numbers need at 80 columns).
    t = Table(title=title if show_headers and not apart else None, caption=caption if show_headers else None,
              show_header=show_headers, show_lines=False, box=box.SIMPLE_HEAD if show_headers else None,
              show_edge=False, pad_edge=False, padding=(0, 1 if show_headers else 2, 0, 0))
    for key, name, width, free in zip(keys, names, widths, prose, strict=True):
        numeric = any(isinstance(row.get(key), int | float) and not isinstance(row.get(key), bool) for row in rows)
        t.add_column(Text(name, no_wrap=False), justify="right" if numeric else "left", no_wrap=not free,
                     overflow="fold", width=width)
    for row_cells in cells:
        t.add_row(*row_cells)
    token = _AT_LEAST.set(sum(widths) + 2 * len(widths))
    try:
        out.print(t, crop=False)
    finally:
        _AT_LEAST.reset(token)


def column_widths(columns: Sequence[Sequence[str]], names: Sequence[str], prose: Sequence[bool],
                  available: int) -> list[int]:
    """Each column's width: its widest cell or heading when they fit in `available` (two characters go between
    columns). Else free-text columns give way first, down to their longest word (at most LONGEST_UNBROKEN), then
    headings longer than their cells wrap; a number or a name never shrinks, so a table too wide for the terminal
    stays too wide rather than split one."""
    from rich.cells import cell_len
    natural = [max(cell_len(x) for x in (*column, name)) for column, name in zip(columns, names, strict=True)]
    least = [max(min(max((cell_len(w) for c in column for w in c.split()), default=0), LONGEST_UNBROKEN) if free
                 else max(cell_len(c) for c in column), max((cell_len(w) for w in name.split()), default=0))
             for column, name, free in zip(columns, names, prose, strict=True)]
    widths = list(natural)
    excess = sum(widths) + 2 * len(widths) - available
    for give_way in (True, False):  # free text first, then headings
        excess = _give_way(widths, least, [free is give_way for free in prose], excess)
    # Still too wide: free text folds inside its long words (a path in a provider's message) down to
    # NARROWEST_PROSE, so the message is wrapped whole rather than the table running off the terminal (issue 23).
    floor = [min(w, max(NARROWEST_PROSE, max((cell_len(x) for x in name.split()), default=0))) for w, name in
             zip(widths, names, strict=True)]
    _give_way(widths, floor, list(prose), excess)
    return widths


def _give_way(widths: list[int], least: Sequence[int], may: Sequence[bool], excess: int) -> int:
    """Narrow the widest-above-its-least of the columns that `may`, one character at a time, until `excess` is
    gone or none can; the excess left."""
    while excess > 0:
        slack = [(w - m, i) for i, (w, m, ok) in enumerate(zip(widths, least, may, strict=True)) if ok and w > m]
        if not slack:
            break
        _, i = max(slack)
        widths[i] -= 1
        excess -= 1
    return excess


def cell(value: Any) -> str:
    """A value as a table shows it (the tests compare tables with JSON through it)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.1f}"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def score_line(s: Score, w: Weights) -> str:
    """Every term of a score on one line (also the MultiKueue dispatcher's Events)."""
    return (f"score {s.total:.3f} = {w.network:g} x network {s.network:.3f} + {w.cost:g} x cost {s.cost:.3f} + "
            f"{w.carbon:g} x carbon {s.carbon:.3f}; step {s.step_ms:.0f} ms (comm {s.comm_ms:.0f} ms), "
            f"${s.usd_per_hour:,.2f}/h, {s.gco2e_per_hour / 1000:,.2f} kgCO2e/h")


def _hop(score: Score) -> str:
    if score.hop is None:
        return "one node: no network step"
    return (f"step bounded by the ring hop {score.hop[0]} -> {score.hop[1]}: rtt {score.worst_rtt_ms:g} ms, loss "
            f"{score.worst_loss:g}, {score.min_throughput_gbps:g} Gbit/s")


def placement(p: Placement) -> None:
    """The decision: the gang, its nodes, its score and the hop that bounds its step."""
    head = (f"[bold]{safe(p.job.name)}[/]: {p.job.workers} x {p.job.gpus_per_worker} GPUs -> cluster "
            f"[bold]{safe(p.cluster or '(none)')}[/], zone{'s' if len(p.zones) > 1 else ''} "
            f"[bold]{safe(', '.join(p.zones))}[/] ({safe(', '.join(p.regions))}) by {safe(p.policy)}")
    prose().print(head, markup=True)
    table("assignment", [{"node": a.node, "zone": a.zone, "workers": a.workers} for a in p.assignments])
    prose().print(score_line(p.score, p.weights))
    prose().print(_hop(p.score))


def more(count: int, limit: int) -> str | None:
    """The caption of a table cut to `limit` rows of `count`."""
    if not limit or count <= limit:
        return None
    return f"{limit} of {count} shown (--limit 0 shows all; -o json lists all)"

