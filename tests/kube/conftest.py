"""The kube tests' fixtures; the helpers they use live in kube_support."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from kube_support import validate_manifest


@pytest.fixture
def validate() -> Callable[[Mapping[str, Any]], None]:
    return validate_manifest
