"""Node constraints written into pod specs. They work on the renderer's own deep copy of the object."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Requirement = tuple[str, tuple[str, ...]]


def require_in(pod_spec: dict[str, Any], requirements: Sequence[Requirement]) -> None:
    """AND `key In values` into every required nodeSelectorTerm.

    Terms are ORed, so narrowing each one keeps the user's alternatives and adds ours to all of them; with no
    term, one new term holds them all. An identical expression already there is not repeated, so rendering an
    already rendered object with the same placement changes nothing.
    """
    if not requirements:
        return
    affinity = pod_spec.setdefault("affinity", {})
    node = affinity.setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    wanted = [{"key": key, "operator": "In", "values": list(values)} for key, values in requirements]
    for term in terms:
        expressions = term.setdefault("matchExpressions", [])
        for expression in wanted:
            if expression not in expressions:
                expressions.append(dict(expression, values=list(expression["values"])))


def select_exactly(selector: dict[str, str], requirements: Sequence[Requirement]) -> str | None:
    """Write one-value requirements into a nodeSelector; the reason it cannot, or None.

    A nodeSelector matches one value per label, so a requirement of several values cannot be expressed, and a
    different value already selected would make the pods unschedulable.
    """
    for key, values in requirements:
        if len(values) != 1:
            return f"a nodeSelector holds one value per label, the placement needs {key} in {', '.join(values)}"
        if selector.get(key, values[0]) != values[0]:
            return f"the nodeSelector already asks for {key}={selector[key]}, the placement needs {values[0]}"
    for key, values in requirements:
        selector[key] = values[0]
    return None
