"""Reading untrusted documents field by field, so every error names its file, field path and reason."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from geosched.errors import InputError

T = TypeVar("T")
# libyaml's loader when present: the same safe subset, an order of magnitude faster on large snapshots.
SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(str(path), "", "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(str(path), "", f"cannot read: {exc}") from None


def parse_yaml(text: str, source: str, *, stream: bool = False) -> Any:
    """One YAML (or JSON) document, or with `stream` the list of all non-empty documents; errors carry the
    line the parser stopped at."""
    try:
        if stream:
            return [d for d in yaml.load_all(text, Loader=SAFE_LOADER) if d is not None]
        return yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(source, where, f"not valid YAML: {problem}") from None


def load_document(path: Path) -> Any:
    return parse_yaml(read_text(path), str(path))


def dump(data: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=False) + "\n"
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


class Fields:
    """A mapping read under a path (`nodes[3].gpus`), rejecting unknown keys like kubectl's strict mode."""

    def __init__(self, data: Any, source: str, path: str, allowed: set[str]) -> None:
        if not isinstance(data, Mapping):
            raise InputError(source, path or "(document)", f"expected a mapping, got {describe(data)}")
        self.data = data
        self.source = source
        self.path = path
        for key in data:
            if not isinstance(key, str) or key not in allowed:
                raise InputError(source, self.at(str(key)), f"unknown field (known: {', '.join(sorted(allowed))})")

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, reason: str) -> InputError:
        return InputError(self.source, self.at(key), reason)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str) -> Any:
        return self.data.get(key)

    def string(self, key: str, default: str | None = None) -> str:
        value = self.data.get(key)
        if value is None:
            if default is not None:
                return default
            raise self.error(key, "required")
        if not isinstance(value, str) or not value.strip():
            raise self.error(key, f"expected a non-empty string, got {describe(value)}")
        return value

    def opt_string(self, key: str) -> str | None:
        return self.string(key) if self.has(key) else None

    def integer(self, key: str, *, minimum: int | None = None, default: int | None = None) -> int:
        value = self.data.get(key)
        if value is None:
            if default is not None:
                return default
            raise self.error(key, "required")
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {describe(value)}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value}")
        return value

    def opt_integer(self, key: str, *, minimum: int | None = None) -> int | None:
        return self.integer(key, minimum=minimum) if self.has(key) else None

    def number(self, key: str, *, minimum: float | None = None, maximum: float | None = None,
               default: float | None = None, exclusive_minimum: bool = False) -> float:
        value = self.data.get(key)
        if value is None:
            if default is not None:
                return default
            raise self.error(key, "required")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.error(key, f"expected a finite number, got {describe(value)}")
        number = float(value)
        if minimum is not None and (number <= minimum if exclusive_minimum else number < minimum):
            raise self.error(key, f"must be {'>' if exclusive_minimum else '>='} {minimum:g}, got {number:g}")
        if maximum is not None and number > maximum:
            raise self.error(key, f"must be <= {maximum:g}, got {number:g}")
        return number

    def opt_number(self, key: str, *, minimum: float | None = None) -> float | None:
        return self.number(key, minimum=minimum) if self.has(key) else None

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key)
        if value is None:
            return ()
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            raise self.error(key, f"expected a list of strings, got {describe(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item:
                raise InputError(self.source, f"{self.at(key)}[{i}]", f"expected a string, got {describe(item)}")
        return tuple(value)

    def mapping(self, key: str) -> dict[str, str]:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(key, f"expected a mapping, got {describe(value)}")
        for k, v in value.items():
            if not isinstance(k, str) or not isinstance(v, str | int | float) or isinstance(v, bool):
                raise InputError(self.source, f"{self.at(key)}.{k}", "expected a string value")
        return {str(k): str(v) for k, v in value.items()}

    def items(self, key: str, *, required: bool = False) -> list[tuple[str, Any]]:
        """A list field as (path, item) pairs."""
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.error(key, "required")
            return []
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {describe(value)}")
        return [(f"{self.at(key)}[{i}]", item) for i, item in enumerate(value)]

    def choice(self, key: str, options: Mapping[str, T], default: str) -> T:
        value = self.data.get(key, default)
        if not isinstance(value, str) or value not in options:
            raise self.error(key, f"expected one of {', '.join(options)}, got {value!r}")
        return options[value]

    def check(self, key: str, ok: bool, reason: str) -> None:
        if not ok:
            raise self.error(key, reason)


def each(fields: Fields, key: str, parse: Callable[[str, Any], T], *, required: bool = False) -> list[T]:
    return [parse(path, item) for path, item in fields.items(key, required=required)]


def describe(value: Any) -> str:
    """What a value is, for error messages (never the whole value: it may be large or secret)."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__
