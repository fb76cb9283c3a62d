"""What every reader of untrusted documents shares: the bounds of numbers, `describe` (what a value is, for an error
line), times (`parse_time`, `utc_instant`) and `dump`. The documents themselves are read through their declarations
(geosched.files.decl), which name the file, the field path and the reason in one line."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from geosched.core.errors import InputError

# Integers and numbers read from files stay within these unless a field says otherwise: far above any real
# count, price or duration, far below what overflows a C integer or turns a sum into infinity.
MAX_INTEGER = 2**31 - 1
MAX_NUMBER = 1e12

# A Kubernetes namespace, and every object name geosched renders from a job's name: an RFC 1123 label, as the API
# server checks it (apimachinery validation.IsDNS1123Label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters).
# One check for every reader (place, submit, gitops, the cluster config), so no path accepts a name another
# refuses. \Z, not $: $ also matches before a final line break, and "ml\n" is no label.
_DNS1123_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
DNS1123_LABEL_MAX = 63
DNS1123_LABEL_RULE = ("must be a lowercase RFC 1123 label (a-z, 0-9 and '-', starting and ending with a letter or "
                      "digit, at most 63 characters)")


def is_dns1123_label(value: str) -> bool:
    return len(value) <= DNS1123_LABEL_MAX and _DNS1123_LABEL_RE.match(value) is not None


# An object name of most kinds (a LocalQueue, a Volcano Queue, a scheduler's name): an RFC 1123 subdomain
# (apimachinery IsDNS1123Subdomain, at most 253 characters), cut to `max_length` where the name is also a label's
# value (kueue.x-k8s.io/queue-name: at most 63).
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def dns1123_subdomain_rule(max_length: int = 253) -> str:
    return (f"must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or "
            f"digit, at most {max_length} characters)")


def is_dns1123_subdomain(value: str, max_length: int = 253) -> bool:
    return len(value) <= max_length and _DNS1123_SUBDOMAIN_RE.match(value) is not None


def dump(data: Any, fmt: str) -> str:
    if fmt == "json":
        # Never NaN or Infinity: they are not JSON, and a consumer's parser would reject the whole document.
        return json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"
    import yaml  # on first use: the CLI's declarations import this module, `-h` dumps nothing
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


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


def describe_document(value: Any) -> str:
    """What a whole document is when it is not a mapping: its type and size, never its content. A file passed in
    the wrong place may be a token or a key (a GitHub token, a service-account JWT): its first characters are the
    secret (attack report 2026-12-07, finding 8)."""
    if isinstance(value, str):
        return f"a string of {len(value)} character{'' if len(value) == 1 else 's'}"
    if isinstance(value, bool | int | float):
        return f"a {'boolean' if isinstance(value, bool) else 'number'}"
    return describe(value)


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
