"""The one output contract of every command that prints data.

A command that prints data takes `-o/--output table|wide|json|yaml` (plus csv, md or html where it has them) and
`--no-headers`, and hands its rows to `emit_list` or its document to `emit_document`:

- JSON and YAML are one document with `apiVersion` (the project's, as in job and fleet files) and `kind`: a list
  is `<Kind>List` with `items`; data keys are snake_case, numbers are numbers, times RFC 3339 with offset.
- `table` shows a kind's essential columns, `wide` all of them, both derived from the same rows (headers are the
  humanised keys), so there is one model per kind. `--no-headers` leaves out the header row, title and caption.
- Every kind has a JSON Schema in docs/schemas/<kind>.schema.json; the tests validate each command's output
  against it and walk the command tree for commands without the contract.

Commands that print no data (they write files, act, or run until stopped) are listed in NOT_DATA with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from geosched.files.formats import API_VERSION, Output, document

if TYPE_CHECKING:  # pydantic is not imported by `geosched -h` (tests/test_cli_startup.py)
    from geosched.files.decl.base import OutputDocument

__all__ = ["KINDS", "NOT_DATA", "Column", "ListKind", "NoHeadersOpt", "Output", "OutputOpt", "ReportOutputOpt",
           "TabularOutputOpt", "columns_table", "document", "emit_document", "emit_list", "envelope", "rfc3339",
           "transposed_table"]


BASE = (Output.TABLE, Output.WIDE, Output.JSON, Output.YAML)


class Formats:
    """The parser of one command's `-o`: the formats it offers (`formats`, which the config file's `output`
    setting consults, so a format one command lacks never fails it)."""

    def __init__(self, *extra: Output) -> None:
        self.formats = tuple(o.value for o in (*BASE, *extra))

    def __call__(self, value: str | Output) -> Output:
        if isinstance(value, Output):
            return value
        text = value.lower()
        if text not in self.formats:
            raise typer.BadParameter(f"expected one of {', '.join(self.formats)}, got {value!r}")
        return Output(text)

    def complete(self, incomplete: str) -> list[str]:
        return [n for n in self.formats if n.startswith(incomplete)]


def _option(*extra: Output) -> Any:
    """The `-o/--output` option: table, wide, json, yaml and the `extra` formats a command has."""
    parse = Formats(*extra)
    return typer.Option(
        "--output", "-o", parser=parse, metavar="[" + "|".join(parse.formats) + "]", autocompletion=parse.complete,
        help="table (essential columns), wide (all), json or yaml (apiVersion, kind, snake_case keys)"
        + (f", {', '.join(o.value for o in extra)}" if extra else "") + ".")


# The option types: every data command takes one of these three (by the formats it has).
OutputOpt = Annotated[Output, _option()]
TabularOutputOpt = Annotated[Output, _option(Output.CSV)]
ReportOutputOpt = Annotated[Output, _option(Output.CSV, Output.MD, Output.HTML)]
NoHeadersOpt = Annotated[bool, typer.Option(
    "--no-headers", help="table/wide: rows only, without the header row, title and caption (kubectl's habit).")]


# --- kinds ------------------------------------------------------------------------------------------------

Type = str  # a JSON Schema type name, or "time" (RFC 3339 string) or "strings" (a list of strings)


@dataclass(frozen=True)
class Column:
    """One key of a kind's items: its JSON type, whether it may be null, and whether only `-o wide` shows it."""

    key: str
    type: Type = "string"
    nullable: bool = False
    wide: bool = False
    header: str | None = None  # the table's heading; default: the key humanised
    # The table shows the value times this (hours for seconds, kg for grams; the heading then names the unit);
    # JSON, YAML and CSV keep the key's own unit.
    scale: float = 1.0

    @property
    def heading(self) -> str:
        return self.header or self.key.replace("_", " ")

    def schema(self) -> dict[str, Any]:
        base: dict[str, Any] = ({"type": "string", "format": "date-time"} if self.type == "time"
                                else {"type": "array", "items": {"type": "string"}} if self.type == "strings"
                                else {"type": self.type})
        if self.nullable:
            return {"anyOf": [base, {"type": "null"}]}
        return base


@dataclass(frozen=True)
class ListKind:
    """A kind whose output is a list of flat rows: `<name>List` with `items`, one column per key. Each registers
    itself in KINDS, from which docs/schemas is written (`python -m geosched.console.output docs/schemas`)."""

    name: str
    columns: tuple[Column, ...]
    description: str

    def __post_init__(self) -> None:
        KINDS[self.list_kind] = self

    @property
    def list_kind(self) -> str:
        return f"{self.name}List"

    def schema(self) -> dict[str, Any]:
        item = {"type": "object", "additionalProperties": False,
                "required": [c.key for c in self.columns],
                "properties": {c.key: c.schema() for c in self.columns}}
        return envelope(self.list_kind, self.description,
                        {"items": {"type": "array", "items": item}}, ["items"])


KINDS: dict[str, ListKind] = {}


def envelope(kind: str, description: str, properties: Mapping[str, Any], required: Sequence[str]) -> dict[str, Any]:
    """A JSON Schema of one output document: apiVersion, kind and `properties`."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://geosched.dev/schemas/{kind}.schema.json", "title": kind, "description": description,
            "type": "object", "required": ["apiVersion", "kind", *required],
            "properties": {"apiVersion": {"const": API_VERSION}, "kind": {"const": kind}, **properties}}


def rfc3339(epoch: float | None) -> str | None:
    """Unix seconds as an RFC 3339 UTC time (`Z`), to the second; None stays None."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- emitting ------------------------------------------------------------------------------------------------

def emit_list(kind: ListKind, rows: Sequence[Mapping[str, Any]], output: Output, *, no_headers: bool = False,
              title: str | None = None, caption: str | None = None, limit: int = 0) -> None:
    """Rows of `kind` in the chosen format. `limit` shortens the table only (JSON, YAML and CSV list all)."""
    from geosched.console import render
    keys = [c.key for c in kind.columns]
    items = [{k: row[k] for k in keys} for row in rows]
    if output in (Output.JSON, Output.YAML):
        render.data(document(kind.list_kind, {"items": items}), output.value)
    elif output is Output.CSV:
        render.rows_csv(items, header=not no_headers)
    else:
        cut = items[:limit] if limit else items
        more = f"{len(cut)} of {len(items)} shown (--limit 0 shows all)" if len(cut) < len(items) else None
        with render.headers(not no_headers):
            columns_table(title or kind.description, kind.columns, cut, wide=output is Output.WIDE,
                  caption="; ".join(x for x in (caption, more) if x) or None)


def _shown(column: Column, value: Any) -> Any:
    scaled = column.scale != 1.0 and isinstance(value, int | float) and not isinstance(value, bool)
    return value * column.scale if scaled else value


def columns_table(title: str, columns: Sequence[Column], rows: Sequence[Mapping[str, Any]], *, wide: bool = False,
                  caption: str | None = None) -> None:
    """Rows drawn from their columns: the essential ones (all with `wide`), headed by each column's heading, in
    its table unit. Headers follow `render.headers` (a command's --no-headers)."""
    from geosched.console import render
    shown = [c for c in columns if wide or not c.wide]
    render.table(title, [{c.key: _shown(c, row[c.key]) for c in shown} for row in rows], caption=caption,
                 headers=[c.heading for c in shown])


def transposed_table(title: str, columns: Sequence[Column], rows: Sequence[Mapping[str, Any]], by: str, *,
                     wide: bool = False, caption: str | None = None) -> None:
    """Rows drawn one column per row and one row per column, each row's `by` value heading its column (a few
    policies compared on many metrics fit a terminal this way)."""
    from geosched.console import render
    shown = [c for c in columns if c.key != by and (wide or not c.wide)]
    render.table(title, [{"metric": c.heading, **{str(row[by]): _shown(c, row[c.key]) for row in rows}}
                         for c in shown], caption=caption)


def emit_document(doc: OutputDocument, output: Output, table: Callable[[], None], *,
                  no_headers: bool = False) -> None:
    """One document, as its declaration (geosched.files.decl) serialises it: JSON/YAML with apiVersion and kind,
    else `table()` draws it for people (its tables without headers under --no-headers). Taking the declared model,
    not a dict, is what keeps docs/schemas/<kind>.schema.json the shape of what is printed: both come from it."""
    from geosched.console import render
    if output in (Output.JSON, Output.YAML):
        render.data(document(doc.KIND, doc.dump()), output.value)
    else:
        with render.headers(not no_headers):
            table()


# Commands (by their path under `geosched`) that print no data, so they take no -o: what they do instead.
NOT_DATA: dict[str, str] = {
    "demo": "runs the walkthrough and narrates it",
    "snapshot export": "writes fleet and network files (--format chooses their format)",
    "snapshot import": "loads files into the store",
    "catalog refresh": "writes refreshed offerings into the store and says how many",
    "probe export": "writes NetworkTopology/ConfigMap/snapshot files",
    "gitops render": "writes the GitOps tree",
    "gitops check": "exit status and a unified diff for CI",
    "scheduler run": "runs as a scheduler until stopped",
    "multikueue dispatch": "runs as MultiKueue's dispatcher until stopped",
    "config path": "prints the config file's path",
}
