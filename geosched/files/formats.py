"""What every output document shares: the formats a command prints in and the envelope (apiVersion, kind). Alone in
a module: every command's `--output` option names `Output`, so `geosched -h` imports it, and it must not bring the
document parsers of geosched.files.documents with it (issue 25: -h under 0.3 s)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

API_VERSION = "geosched.io/v1alpha1"


class Output(StrEnum):
    """The formats a command prints in (`geosched.console.output` holds the contract; the report package renders
    csv, md and html itself)."""

    TABLE = "table"
    WIDE = "wide"
    JSON = "json"
    YAML = "yaml"
    CSV = "csv"
    MD = "md"
    HTML = "html"

    @property
    def tabular(self) -> bool:
        return self in (Output.TABLE, Output.WIDE)


def document(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` as an output document of `kind`: apiVersion and kind first."""
    return {"apiVersion": API_VERSION, "kind": kind, **body}
