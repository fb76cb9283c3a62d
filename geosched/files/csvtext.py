"""The one CSV writer behind every `-o csv` (the console's lists, `report`, `simulate`): rows as text a program
parses and a spreadsheet opens without running anything in it.

Names in these rows come from outside: a kubeconfig context becomes a cluster name in the usage ledger through
`submit`, a job file names its job, a trace names its jobs. A spreadsheet (Excel, LibreOffice Calc, Google Sheets)
reads a cell that begins with `=`, `+`, `-` or `@` as a formula, so a context named `=HYPERLINK("http://x","y")`
would become a live link (or worse, with DDE) in the cost report; a leading tab or carriage return can be trimmed
into such a cell. OWASP's rule for "CSV Injection" (https://owasp.org/www-community/attacks/CSV_Injection): prefix
such a cell with a single quote, which makes the spreadsheet read it as text; the csv module already quotes a cell
holding the separator or a quote, so no new cell can start mid-value.

Numbers are left as they are: an int or a float, or text that is a plain decimal number (`-1.5`, `-2e-3`), is a
number to a spreadsheet, not a formula. Programs reading the CSV see the prefixed text (`'=HYPERLINK(...)`); the
JSON and YAML outputs carry every name unchanged."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

# OWASP's list: the four characters that start a formula, and the two whitespace characters a spreadsheet may trim.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# A decimal number as a spreadsheet reads one; Python's float() is wider (`1_0`, ` 1`, `nan`, `inf`), so not it.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def cell(value: Any) -> Any:
    """`value` as it goes into a CSV cell: a list is one comma-separated cell, text a spreadsheet would run as a
    formula gets OWASP's leading `'`; numbers, None and other text pass unchanged (the csv module writes them)."""
    if isinstance(value, list):
        value = ",".join(map(str, value))
    if value is None or isinstance(value, int | float):  # bool is an int: `True` starts with nothing dangerous
        return value
    text = str(value)
    if text.startswith(FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def to_csv(rows: Sequence[Mapping[str, Any]], *, header: bool = True) -> str:
    """Rows as CSV text, the keys of the first row as the columns; "" for no rows."""
    if not rows:
        return ""
    buf = io.StringIO()
    fields = list(rows[0])
    plain = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    # Minimal quoting quotes a cell holding the line terminator (`\n`) but not a bare carriage return, which csv
    # readers then refuse ("new-line character seen in unquoted field") and a spreadsheet takes as a row break. A
    # row with a CR in a cell is written with every text cell quoted; every other row is as before.
    quoted = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
    if header:
        plain.writerow({k: cell(k) for k in fields})
    for row in rows:
        cells = {k: cell(v) for k, v in row.items()}
        has_cr = any(isinstance(v, str) and "\r" in v for v in cells.values())
        (quoted if has_cr else plain).writerow(cells)
    return buf.getvalue()
