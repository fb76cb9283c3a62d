"""The report window: `--since` / `--until` as an ISO date or date-time, or an age like 7d, 12h, 30m, 2w.

Naive times are UTC (the store keeps Unix seconds and the report groups days in UTC). Pure: `now` is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from geosched.core.errors import InputError
from geosched.files.fields import FIRST_YEAR, utc_instant

_AGE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


@dataclass(frozen=True, slots=True)
class Window:
    """[since, until) in Unix seconds; `since` None means from the first record."""

    since: float | None
    until: float


def parse_when(text: str, now: float, option: str = "--since") -> float:
    """Unix seconds for an ISO date/date-time (naive = UTC) or a relative age before `now`."""
    age = _AGE_RE.match(text)
    if age:
        seconds = now - float(age.group(1)) * _UNIT_S[age.group(2)]
        # An age of 99999999999d reaches before year 1: bounded as every instant geosched reads.
        try:
            instant = datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, ValueError, OSError):  # before year 1: no datetime holds it
            raise InputError(option, "", f"the age {text!r} reaches before the year {FIRST_YEAR}") from None
        utc_instant(instant, option, "")
        return seconds
    raw = text.strip()
    try:
        # Python 3.11 reads most ISO 8601 forms, including a trailing Z.
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise InputError(option, "", f"expected an ISO date or date-time (2024-05-01, 2024-05-01T12:00Z) or an age "
                                     f"like 7d, 12h, 30m, 2w; got {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return utc_instant(when, option, "").timestamp()


def window(since: str | float | None, until: str | float | None, now: float) -> Window:
    """The window from text (as `parse_when`) or Unix seconds; `until` defaults to `now`."""
    start = parse_when(since, now, "--since") if isinstance(since, str) else since
    end = parse_when(until, now, "--until") if isinstance(until, str) else (now if until is None else until)
    if start is not None and start >= end:
        raise InputError("--since", "", f"must be before --until ({iso(start)} is not before {iso(end)})")
    return Window(start, end)


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def day(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).date().isoformat()
