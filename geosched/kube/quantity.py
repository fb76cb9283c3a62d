"""Kubernetes quantities geosched reads (extended resources such as nvidia.com/gpu)."""

from __future__ import annotations

import re
from typing import Any

_WHOLE = re.compile(r"^[0-9]+$")


def whole_count(value: Any) -> int | None:
    """A Kubernetes quantity that must be a whole number (extended resources are never fractional)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and _WHOLE.match(value.strip()):
        return int(value.strip())
    return None
