"""Label and field selectors with the API server's syntax and semantics.

Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>1`, `k<1`, comma-joined (AND).
`!=` and `notin` also match objects without the label, as in the API server.
Field selectors: `f=v`, `f==v`, `f!=v`, comma-joined; `\\,` `\\=` `\\\\` escape. An empty value matches an unset
field (`spec.nodeName=` selects unscheduled pods). Only the fields the kind supports are accepted; others are a
400, the way the real API server refuses them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .catalog import ResourceSpec

_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*"
LABEL_KEY = re.compile(rf"(?:{_PREFIX}/)?{_NAME}")
LABEL_VALUE = re.compile(rf"(?:{_NAME})?")


class SelectorError(ValueError):
    pass


def valid_label_key(key: str) -> bool:
    prefix, _, _name = key.rpartition("/")
    return bool(LABEL_KEY.fullmatch(key)) and len(prefix) <= 253


def valid_label_value(value: str) -> bool:
    return bool(LABEL_VALUE.fullmatch(value))


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        match self.op:
            case "=" | "in":
                return present and value in self.values
            case "!=" | "notin":
                return not present or value not in self.values
            case "exists":
                return present
            case "!":
                return not present
            case ">" | "<":
                try:
                    have, want = int(value or ""), int(self.values[0])
                except ValueError:
                    return False
                return have > want if self.op == ">" else have < want
        raise AssertionError(self.op)


def _split_outside_parens(text: str) -> list[str]:
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


_SET_RE = re.compile(r"^\s*(\S+?)\s+(in|notin)\s+\((.*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([^\s=!<>]+)\s*(==|=|!=|>|<)\s*(\S*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([^\s=!<>(),]+)\s*$")


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> LabelSelector:
        if not text or not text.strip():
            return cls()
        reqs: list[Requirement] = []
        for raw in _split_outside_parens(text):
            reqs.append(cls._requirement(raw))
        return cls(tuple(reqs))

    @staticmethod
    def _requirement(raw: str) -> Requirement:
        if m := _SET_RE.match(raw):
            key, op, inner = m.group(1), m.group(2), m.group(3)
            values = tuple(v.strip() for v in inner.split(",")) if inner.strip() else ()
            if not values:
                raise SelectorError(f"unable to parse requirement: {raw!r}: for 'in', 'notin' operators, "
                                    "values set can't be empty")
        elif m := _CMP_RE.match(raw):
            key, op, value = m.group(1), m.group(2), m.group(3)
            op = "=" if op == "==" else op
            values = (value,)
            if op in {">", "<"} and not re.fullmatch(r"-?\d+", value):
                raise SelectorError(f"unable to parse requirement: {raw!r}: for 'Gt', 'Lt' operators, "
                                    "the value must be an integer")
        elif m := _EXISTS_RE.match(raw):
            key, op, values = m.group(2), ("!" if m.group(1) else "exists"), ()
        else:
            raise SelectorError(f"unable to parse requirement: {raw.strip()!r}")
        if not valid_label_key(key):
            raise SelectorError(f"unable to parse requirement: invalid label key {key!r}")
        for value in values:
            if not valid_label_value(value):
                raise SelectorError(f"unable to parse requirement: invalid label value: {value!r}")
        return Requirement(key, op, values)

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(req.matches(labels) for req in self.requirements)


# Field names whose value lives elsewhere in the object than the dotted path says.
_FIELD_ALIASES = {"status.podIPs": "status.podIP", "source": "source.component"}


def field_value(obj: Mapping[str, Any], name: str) -> str:
    """The value a field selector compares against: the API server's string form ("" when unset)."""
    current: Any = obj
    for part in _FIELD_ALIASES.get(name, name).split("."):
        if not isinstance(current, Mapping) or part not in current:
            return ""
        current = current[part]
    if isinstance(current, bool):
        return "true" if current else "false"
    if current is None:
        return ""
    return str(current)


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, buf, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            buf.append(text[i:i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    parts.append("".join(buf))
    return parts


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


@dataclass(frozen=True)
class FieldSelector:
    terms: tuple[tuple[str, str, str], ...] = ()  # (field, "=" | "!=", value)

    @classmethod
    def parse(cls, text: str | None, spec: ResourceSpec | None = None) -> FieldSelector:
        if not text or not text.strip():
            return cls()
        terms: list[tuple[str, str, str]] = []
        for raw in _split_unescaped(text, ","):
            m = re.match(r"^((?:[^\\=!]|\\.)*)(!=|==|=)(.*)$", raw.strip())
            if not m:
                raise SelectorError(f"invalid selector: '{text}'; can't understand '{raw}'")
            name, op, value = m.group(1).strip(), m.group(2), _unescape(m.group(3))
            if spec is not None and not spec.supports_field(name):
                raise SelectorError(f'field label not supported: {name}')
            terms.append((name, "!=" if op == "!=" else "=", value))
        return cls(tuple(terms))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        for name, op, value in self.terms:
            have = field_value(obj, name)
            if (have == value) != (op == "="):
                return False
        return True
