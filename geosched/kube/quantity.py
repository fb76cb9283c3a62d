"""Kubernetes quantities geosched reads (extended resources such as nvidia.com/gpu; cpu, memory). Pure."""

from __future__ import annotations

import math
import re
from decimal import Decimal
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


# A Kubernetes quantity as the API server accepts it (k8s.io/apimachinery pkg/api/resource/quantity.go, the grammar
# in its doc comment): a signed decimal number, then a binary SI suffix (Ki..Ei), a decimal SI one (n, u, m, k, M,
# G, T, P, E) or a decimal exponent (e3, E-2). Read here rather than with the kubernetes package's parse_quantity:
# the job readers (pure, part of the core install) count requests with it, and that package is an extra.
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]{1,3})?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# Longer than any quantity a manifest holds; a longer string is not read (Decimal of a million digits is slow).
_MAX_LENGTH = 64


def parse_quantity(value: Any) -> Decimal:
    """The exact value of a quantity (`"100m"` is 0.1, `"1Gi"` 1073741824, `4` 4); ValueError when it is none."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a quantity: {value!r}")
        return Decimal(repr(value))
    if not isinstance(value, str) or len(value) > _MAX_LENGTH:
        raise ValueError(f"not a quantity: {str(value)[:_MAX_LENGTH]!r}")
    m = _QUANTITY.match(value.strip())
    if m is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = Decimal(m.group(1)), m.group(2) or ""
    if suffix in _BINARY:
        return number * Decimal(1024 ** _BINARY[suffix])
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return number.scaleb(int(suffix[1:]))
    return number.scaleb(_DECIMAL[suffix])
