"""Checks of the output contract shared by the command tests: a document against its kind's JSON Schema."""

from __future__ import annotations

import json
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from geosched.files.decl.base import OutputDocument
from geosched.files.decl.schemas import WRITTEN

SCHEMAS = Path(__file__).parent.parent / "docs" / "schemas"


FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _rfc3339(value: object) -> bool:
    """RFC 3339: a date, a time and an offset (Z or +hh:mm); a naive time is a different instant on every host."""
    if not isinstance(value, str) or "T" not in value.upper():
        return False
    return datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None


@cache
def _validator(kind: str) -> jsonschema.Draft202012Validator:
    path = SCHEMAS / f"{kind}.schema.json"
    assert path.exists(), f"no schema for kind {kind!r} in {SCHEMAS}"
    schema = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=FORMATS)


def valid(doc: Any) -> dict[str, Any]:
    """`doc` (a parsed -o json/yaml output) after validating it against docs/schemas/<its kind>.schema.json and,
    for a document kind (not a list), reading it back through its declaration: the declaration reads it, strictly,
    and writes it again key for key (issue 25 item 6: the schema, the reader and the writer are one model)."""
    assert isinstance(doc, dict) and isinstance(doc.get("kind"), str), f"not a geosched output document: {doc!r:.200}"
    errors = sorted(_validator(doc["kind"]).iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{doc['kind']}: {'/'.join(map(str, e.absolute_path))}: {e.message}"
                                 for e in errors[:10])
    declared = _declarations().get(doc["kind"])
    if declared is not None:
        body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
        again = declared.read_back(body, doc["kind"]).dump()
        assert _shape(again) == _shape(body), f"{doc['kind']} does not round-trip through its declaration"
    return doc


@cache
def _declarations() -> dict[str, type[OutputDocument]]:
    return {d.KIND: d for d in WRITTEN}


def _shape(value: Any) -> Any:
    """`value` with its mappings' key order kept (== on dicts ignores it) and numbers as numbers (strict reading
    turns an integer in a number field into a float; JSON writes both the same way)."""
    if isinstance(value, dict):
        return [(k, _shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value
