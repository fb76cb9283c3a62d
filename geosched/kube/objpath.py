"""Reading a Kubernetes object without a schema of every field: walk only the fields geosched needs,
and name the full field path (`spec.replicatedJobs[0].template.spec...`) in every error.

geosched's own files are declared (geosched.files.decl) and refuse unknown keys, which suits them but not a
Kubernetes object, where any field the API allows may appear; this reader checks types on the path it walks and
ignores the rest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from geosched.core.errors import InputError
from geosched.files.fields import describe, describe_document

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def child_path(path: str, key: str) -> str:
    # Keys such as `nvidia.com/gpu` would read as several path steps; quote them like kubectl's jsonpath.
    if _PLAIN_KEY.match(key):
        return f"{path}.{key}" if path else key
    return f'{path}["{key}"]'


class At:
    """A value found at a field path inside one document of one file."""

    def __init__(self, value: Any, source: str, path: str = "") -> None:
        self.value = value
        self.source = source
        self.path = path

    def error(self, reason: str) -> InputError:
        return InputError(self.source, self.path or "(document)", reason)

    def what(self) -> str:
        """The value's kind for an error; at the top, type and size only (the file may be a token passed by
        mistake, its first characters the secret)."""
        return describe(self.value) if self.path else describe_document(self.value)

    @property
    def present(self) -> bool:
        return self.value is not None

    def key(self, name: str) -> At:
        if self.value is None:
            return At(None, self.source, child_path(self.path, name))
        if not isinstance(self.value, Mapping):
            raise self.error(f"expected a mapping, got {self.what()}")
        return At(self.value.get(name), self.source, child_path(self.path, name))

    def dig(self, *names: str) -> At:
        here = self
        for name in names:
            here = here.key(name)
        return here

    def mapping(self, *, required: bool = False) -> Mapping[str, Any]:
        if self.value is None:
            if required:
                raise self.error("required")
            return {}
        if not isinstance(self.value, Mapping):
            raise self.error(f"expected a mapping, got {self.what()}")
        return self.value

    def entries(self, *, required: bool = False) -> list[tuple[str, At]]:
        """A mapping's values in key order, each with its own path."""
        return [(str(k), At(v, self.source, child_path(self.path, str(k))))
                for k, v in sorted(self.mapping(required=required).items(), key=lambda kv: str(kv[0]))]

    def items(self, *, required: bool = False) -> list[At]:
        if self.value is None:
            if required:
                raise self.error("required")
            return []
        if not isinstance(self.value, list):
            raise self.error(f"expected a list, got {self.what()}")
        return [At(v, self.source, f"{self.path}[{i}]") for i, v in enumerate(self.value)]

    def string(self, default: str | None = None) -> str:
        if self.value is None:
            if default is not None:
                return default
            raise self.error("required")
        if not isinstance(self.value, str) or not self.value:
            raise self.error(f"expected a non-empty string, got {self.what()}")
        return self.value

    def opt_string(self) -> str | None:
        return self.string() if self.present else None

    def integer(self, *, minimum: int | None = None, default: int | None = None) -> int:
        if self.value is None:
            if default is not None:
                return default
            raise self.error("required")
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise self.error(f"expected an integer, got {self.what()}")
        if minimum is not None and self.value < minimum:
            raise self.error(f"must be >= {minimum}, got {self.value}")
        return self.value


