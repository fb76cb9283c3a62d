"""Reading untrusted documents field by field, so every error names its file, field path and reason."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from geosched.core.errors import InputError

T = TypeVar("T")
# Integers and numbers read from files stay within these unless a field says otherwise: far above any real
# count, price or duration, far below what overflows a C integer or turns a sum into infinity.
MAX_INTEGER = 2**31 - 1
MAX_NUMBER = 1e12


def dump(data: Any, fmt: str) -> str:
    if fmt == "json":
        # Never NaN or Infinity: they are not JSON, and a consumer's parser would reject the whole document.
        return json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"
    import yaml  # on first use: the CLI's declarations import this module, `-h` dumps nothing
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

    def integer(self, key: str, *, minimum: int | None = None, maximum: int = MAX_INTEGER,
                default: int | None = None) -> int:
        value = self.data.get(key)
        if value is None:
            if default is not None:
                return default
            raise self.error(key, "required")
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {describe(value)}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value}")
        if value > maximum:
            raise self.error(key, f"must be <= {maximum}, got {value if value < 10**30 else 'a larger number'}")
        return value

    def opt_integer(self, key: str, *, minimum: int | None = None) -> int | None:
        return self.integer(key, minimum=minimum) if self.has(key) else None

    def number(self, key: str, *, minimum: float | None = None, maximum: float = MAX_NUMBER,
               default: float | None = None, exclusive_minimum: bool = False) -> float:
        value = self.data.get(key)
        if value is None:
            if default is not None:
                return default
            raise self.error(key, "required")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, f"expected a finite number, got {describe(value)}")
        if isinstance(value, int) and abs(value) > MAX_NUMBER:  # float() of a huge int would overflow
            raise self.error(key, f"must be <= {maximum:g}, got a larger number")
        number = float(value)
        if not math.isfinite(number):
            raise self.error(key, f"expected a finite number, got {describe(value)}")
        if minimum is not None and (number <= minimum if exclusive_minimum else number < minimum):
            raise self.error(key, f"must be {'>' if exclusive_minimum else '>='} {minimum:g}, got {number:g}")
        if number > maximum:
            raise self.error(key, f"must be <= {maximum:g}, got {number:g}")
        if number < -MAX_NUMBER:
            raise self.error(key, f"must be >= {-MAX_NUMBER:g}, got {number:g}")
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
            if not isinstance(k, str):
                raise self.error(key, f"expected string keys, got {describe(k)}")
            if (not isinstance(v, str | int | float) or isinstance(v, bool)
                    or (not isinstance(v, str) and not abs(v) <= MAX_NUMBER)):
                raise InputError(self.source, f"{self.at(key)}.{k}", "expected a string value")
        return {k: str(v) for k, v in value.items()}

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


def describe(value: Any) -> str:
    """What a value is, for error messages (never the whole value: it may be large or secret)."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, int | float):
        # str() refuses ints of over 4,300 digits; such a number is shown by its size.
        return f"a number ({value})" if not isinstance(value, int) or abs(value) < 10**30 else "a very large number"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def parse_time(value: Any, source: str, where: str) -> datetime:
    """An ISO 8601 instant with its offset (YAML may have read it as a datetime already)."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InputError(source, where, f"expected an ISO 8601 time such as 2025-03-01T12:00:00Z, got {value!r}")\
                from None
    else:
        raise InputError(source, where, f"expected an ISO 8601 time, got {type(value).__name__}")
    if parsed.tzinfo is None:
        # A naive time is a different instant on every host: the same inputs would stamp different manifests.
        raise InputError(source, where, "the time needs an offset (e.g. 2025-03-01T12:00:00Z)")
    return utc_instant(parsed, source, where)


# The instants geosched reasons about: carbon history from decades back, deadlines and forecasts a few years
# ahead. Bounded well inside datetime's years 1..9999, so that converting to UTC, taking a timestamp or adding
# a day or a year of time shifting can never overflow (0001-01-01T00:00:00+01:00 is before year 1 in UTC).
FIRST_YEAR, LAST_YEAR = 1900, 9000


def utc_instant(parsed: datetime, source: str, where: str) -> datetime:
    """An aware datetime in UTC, if within FIRST_YEAR..LAST_YEAR; else one line naming the field."""
    try:
        utc = parsed.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not FIRST_YEAR <= utc.year <= LAST_YEAR:
        raise InputError(source, where, f"the time must lie between the years {FIRST_YEAR} and {LAST_YEAR}")
    return utc
