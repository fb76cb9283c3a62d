"""Checks on command-line options beyond what their types check, shared by every command."""

from __future__ import annotations

import math

import typer

from geosched.errors import InputError


def finite(param: typer.CallbackParam, value: float | None) -> float | None:
    """A float option's callback: click reads `inf`, `nan` and `1e400` as floats, and one infinite weight makes
    every score NaN (and the JSON output invalid)."""
    if value is not None and not math.isfinite(value):
        flag = max(param.opts, key=len) if param.opts else str(param.name)
        raise InputError(flag, "", f"expected a finite number, got {value}")
    return value
