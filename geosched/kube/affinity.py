"""Node constraints written into pod specs (on the renderer's own deep copy of the object), and read back out
of manifests and matched against node labels as the scheduler would (`gitops check`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class NodeConstraint:
    """Where in an object a pod's node constraints sit, and what they are: the nodeSelector's labels AND any one
    of the required nodeSelectorTerms (each term a list of matchExpressions)."""

    path: str
    selector: Mapping[str, str]
    terms: tuple[tuple[Mapping[str, Any], ...], ...]


def node_constraints(obj: Any, path: str = "") -> Iterator[NodeConstraint]:
    """Every pod spec (a mapping with `containers`) and TrainJob override (a mapping with `nodeSelector`) in an
    object, with the constraints it puts on nodes."""
    if isinstance(obj, Mapping):
        if "containers" in obj or "nodeSelector" in obj:
            selector = obj.get("nodeSelector") or {}
            required = (((obj.get("affinity") or {}).get("nodeAffinity") or {})
                        .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
            terms = tuple(tuple(t.get("matchExpressions") or ()) for t in required.get("nodeSelectorTerms") or ())
            if selector or terms:
                yield NodeConstraint(path or ".", {str(k): str(v) for k, v in selector.items()}, terms)
        for key, value in obj.items():
            yield from node_constraints(value, f"{path}.{key}" if path else str(key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from node_constraints(value, f"{path}[{i}]")


def expression_matches(labels: Mapping[str, str], expression: Mapping[str, Any]) -> bool:
    """One matchExpression, with the API server's operators (core/v1 NodeSelectorRequirement)."""
    key, op = expression.get("key"), expression.get("operator")
    values = [str(v) for v in expression.get("values") or ()]
    value = labels.get(str(key))
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def admits(labels: Mapping[str, str], constraint: NodeConstraint) -> bool:
    """Whether a node with `labels` may run the pod: every nodeSelector label, and some term (an empty term
    matches no node; no terms at all constrain nothing)."""
    if any(labels.get(k) != v for k, v in constraint.selector.items()):
        return False
    if not constraint.terms:
        return True
    return any(term and all(expression_matches(labels, e) for e in term) for term in constraint.terms)


def why_none(constraint: NodeConstraint, nodes: Sequence[Mapping[str, str]]) -> str:
    """Why no node of `nodes` admits the pod: each requirement that no node meets, with the values the nodes
    carry for its key; else that no node meets all of them together."""
    alone: list[tuple[str, Mapping[str, Any]]] = [
        (k, {"key": k, "operator": "In", "values": [v]}) for k, v in constraint.selector.items()]
    alone += [(str(e.get("key")), e) for term in constraint.terms for e in term]
    reasons = []
    for key, expression in alone:
        if not any(expression_matches(labels, expression) for labels in nodes):
            carried = sorted({labels[key] for labels in nodes if key in labels})
            values = ", ".join(str(v) for v in expression.get("values") or ())
            reasons.append(f"{key} {expression.get('operator')} [{values}] matches no node (they carry "
                           f"{', '.join(carried) if carried else 'no such label'})")
    return "; ".join(reasons) if reasons else "no node meets all its requirements together"
