"""Taints and tolerations: the one matcher every part of geosched uses (submit's and snapshot export's taint
filter, the in-cluster scheduler, the MultiKueue dispatcher), the strict reader of the `tolerations:` a job file or
a ClusterConfig declares, and what rendering writes on pods. Pure.

Matching is Kubernetes' own (k8s.io/api core/v1 `Toleration.ToleratesTaint`, as the TaintToleration filter calls
it): a toleration with an effect matches only that effect, one without matches every effect; a key must equal the
taint's, and an empty key (operator Exists) tolerates every taint; operator Equal (the default) also needs the
value to equal the taint's, Exists any value. Only NoSchedule and NoExecute keep a pod off a node
(PreferNoSchedule is a preference), so only they block.

The declared form is Kubernetes' own toleration (kubernetes.io/docs/concepts/scheduling-eviction/
taint-and-toleration), checked as the API server's ValidateTolerations checks it, so what geosched accepts the API
server accepts:

```yaml
tolerations:
  - {key: dedicated, operator: Equal, value: gpuGroup, effect: NoSchedule}
  - {key: nvidia.com/gpu, operator: Exists, effect: NoExecute, tolerationSeconds: 3600}
```
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geosched.core.errors import InputError
from geosched.files.fields import describe
from geosched.kube import keys
from geosched.kube.objpath import At

BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
OPERATORS = ("Equal", "Exists")
FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
# A label key (a qualified name with an optional DNS-subdomain prefix) and a label value, as the API server
# validates a toleration's key and value (k8s.io/apimachinery pkg/util/validation: IsQualifiedName,
# IsDNS1123Subdomain, IsValidLabelValue): the name and a value at most 63 characters, the prefix at most 253,
# each length checked apart (a 253-character prefix, '/' and a 63-character name make a legal 317-character key).
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_NAME_RE = re.compile(rf"^{_NAME}\Z")
_PREFIX_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_VALUE_RE = re.compile(rf"^({_NAME})?\Z")
MAX_PREFIX = 253  # IsDNS1123Subdomain: DNS1123SubdomainMaxLength
MAX_NAME = 63  # IsQualifiedName: qualifiedNameMaxLength
# tolerationSeconds is an *int64 in k8s.io/api core/v1 Toleration: a larger number is refused by the API server.
INT64 = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str
    seconds: int | None = None  # tolerationSeconds: how long a NoExecute taint lets a running pod stay

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


# EKS taints no GPU node by itself: managed node groups and the EKS-optimized accelerated AMIs (AL2023 and
# Bottlerocket NVIDIA, docs.aws.amazon.com/eks/latest/userguide/ml-eks-optimized-ami.html) carry no taint; users set
# one on the node group (docs.aws.amazon.com/eks/latest/userguide/node-taints-managed-node-groups.html, whose recipe
# for GPU nodes is dedicated=gpuGroup:NoSchedule; nvidia.com/gpu=true:NoSchedule is the common choice).
# What the ExtendedResourceToleration admission plugin adds to every pod that requests an extended resource such as
# nvidia.com/gpu (kubernetes plugin/pkg/admission/extendedresourcetoleration: key = the resource, operator Exists,
# effect NoSchedule). GKE runs it and taints GPU pools nvidia.com/gpu=present:NoSchedule
# (cloud.google.com/kubernetes-engine/docs/how-to/gpus); EKS enables it on every platform version since 1.19
# (docs.aws.amazon.com/eks/latest/userguide/platform-versions.html; aws/containers-roadmap#739), so an EKS node
# group tainted nvidia.com/gpu=<any>:NoSchedule takes GPU pods too. Not NoExecute, and no other key.
GPU_ADMISSION = Toleration(keys.GPU, "Exists", "", "NoSchedule")


def tolerated(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """Whether a pod with these tolerations may be scheduled on (and stay on) a node with this taint."""
    return taint.effect not in BLOCKING_EFFECTS or any(t.tolerates(taint) for t in tolerations)


def untolerated(tolerations: Sequence[Toleration], taints: Iterable[Taint]) -> Taint | None:
    """The first NoSchedule/NoExecute taint that none of the tolerations tolerates; None when the pod may go."""
    return next((t for t in taints if not tolerated(tolerations, t)), None)


def node_taints(node: Any) -> tuple[Taint, ...]:
    """A Node's (API JSON) spec.taints."""
    return tuple(Taint(str(t.key("key").value or ""), str(t.key("value").value or ""), str(t.key("effect").value or ""))
                 for t in At(node, "node").dig("spec", "taints").items())


def of_pod_spec(spec: At) -> tuple[Toleration, ...]:
    """A pod spec's tolerations as the API server stored them (already valid), read leniently."""
    return tuple(Toleration(str(t.key("key").value or ""), str(t.key("operator").value or "Equal"),
                            str(t.key("value").value or ""), str(t.key("effect").value or ""),
                            _seconds(t.key("tolerationSeconds").value))
                 for t in spec.key("tolerations").items())


def common(lists: Iterable[Sequence[Toleration]]) -> tuple[Toleration, ...]:
    """The tolerations every one of these pods carries: a node counts for a gang only if all its GPU pods may go
    there (a toleration only some carry is not counted, which can leave out a node, never admit a wrong one)."""
    sets = list(lists)
    if not sets:
        return ()
    return tuple(t for t in dict.fromkeys(sets[0]) if all(t in other for other in sets[1:]))


def _seconds(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse(data: Any, source: str, path: str) -> tuple[Toleration, ...]:
    """A declared `tolerations:` list, read strictly: one line naming the entry's field and why on a bad one."""
    if data is None:
        return ()
    if not isinstance(data, list):
        raise InputError(source, path, f"expected a list of tolerations, got {describe(data)}")
    return tuple(_one(item, source, f"{path}[{i}]") for i, item in enumerate(data))


def _one(item: Any, source: str, path: str) -> Toleration:
    if not isinstance(item, Mapping):
        raise InputError(source, path, f"expected a mapping (key, operator, value, effect, tolerationSeconds), got "
                         f"{describe(item)}")
    unknown = sorted(str(k) for k in item if k not in FIELDS)
    if unknown:
        raise InputError(source, f"{path}.{unknown[0]}", f"unknown field (known: {', '.join(FIELDS)})")

    def text(field: str) -> str:
        value = item.get(field)
        if value is None:
            return ""
        if isinstance(value, bool | int | float):  # YAML reads `value: yes` as a boolean; the API wants "yes"
            raise InputError(source, f"{path}.{field}", f"expected a string, got {describe(value)}: "
                             f"{_unquoted_hint(value)}")
        if not isinstance(value, str):
            raise InputError(source, f"{path}.{field}", f"expected a string, got {describe(value)}")
        return value

    key, operator, value, effect = text("key"), text("operator") or "Equal", text("value"), text("effect")
    if operator not in OPERATORS:
        raise InputError(source, f"{path}.operator", f"expected Equal or Exists, got {operator!r}")
    if key:
        problem = _key_problem(key)
        if problem:
            raise InputError(source, f"{path}.key", f"{_shown(key)} is not a label key: {problem}")
    if not key and operator != "Exists":
        raise InputError(source, f"{path}.operator", "must be Exists when key is empty (a toleration of every taint)")
    if operator == "Exists" and value:
        raise InputError(source, f"{path}.value", "must be empty with operator Exists")
    if value and not _VALUE_RE.match(value):
        raise InputError(source, f"{path}.value", f"{value!r} is not a label value (up to 63 letters, digits, '-', "
                         "'_', '.', starting and ending with a letter or digit)")
    if effect and effect not in EFFECTS:
        raise InputError(source, f"{path}.effect", f"expected {', '.join(EFFECTS)} or none (every effect), got "
                         f"{effect!r}")
    seconds = item.get("tolerationSeconds")
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, int):
            raise InputError(source, f"{path}.tolerationSeconds", f"expected a whole number of seconds, got "
                             f"{describe(seconds)}")
        if not INT64[0] <= seconds <= INT64[1]:
            raise InputError(source, f"{path}.tolerationSeconds", f"{describe(seconds)} does not fit the API's "
                             "64-bit integer")
        if effect != "NoExecute":
            raise InputError(source, f"{path}.tolerationSeconds", "only with effect NoExecute (how long a pod "
                             "stays on a node after the taint appears)")
    return Toleration(key, operator, value, effect, seconds)


def _key_problem(key: str) -> str | None:
    """Why `key` is not a qualified name as IsQualifiedName reads it, or None."""
    parts = key.split("/")
    if len(parts) > 2:
        return "at most one '/', between a DNS prefix and the name"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "the prefix before '/' is empty"
        if len(prefix) > MAX_PREFIX:
            return f"the prefix before '/' has {len(prefix)} characters (at most {MAX_PREFIX})"
        if not _PREFIX_RE.match(prefix):
            return "the prefix before '/' is not a DNS subdomain (lower-case letters, digits, '-' and '.')"
    if len(name) > MAX_NAME:
        return f"the name has {len(name)} characters (at most {MAX_NAME})"
    if not _NAME_RE.match(name):
        return ("the name must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit, "
                "optionally after a DNS prefix and '/'")
    return None


def _shown(text: str) -> str:
    """A long key in an error, cut so the line stays readable (its length is in the reason)."""
    return repr(text) if len(text) <= 80 else f"{text[:40]!r}...{text[-20:]!r}"


def _unquoted_hint(value: bool | int | float) -> str:
    """The hint for a scalar YAML did not read as a string. The document holds what YAML made of the text, not
    the text (`yes`, `on` and `True` are all True; `010` is 8, `1.50` is 1.5), so the hint names the spellings
    rather than one that may not be the user's."""
    if isinstance(value, bool):
        return ("YAML reads an unquoted yes, no, on, off, true or false (also Capitalised or UPPER) as a boolean; "
                "put the text in quotes as you wrote it")
    return "YAML read the unquoted text as a number; put it in quotes as you wrote it (the API wants a string)"


def to_manifest(t: Toleration) -> dict[str, Any]:
    """The toleration as a pod spec holds it, fields left out when empty (as kubectl shows them)."""
    out: dict[str, Any] = {"operator": t.operator}
    if t.key:
        out["key"] = t.key
    if t.value:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    if t.seconds is not None:
        out["tolerationSeconds"] = t.seconds
    return out


def add_to(pod_spec: dict[str, Any], tolerations: Sequence[Toleration]) -> None:
    """Append the tolerations a pod spec does not already carry, in place; the spec's own stay first."""
    if not tolerations:
        return
    have = list(pod_spec.get("tolerations") or [])
    own = set(of_pod_spec(At({"tolerations": have}, "pod")))
    have += [to_manifest(t) for t in dict.fromkeys(tolerations) if t not in own]
    pod_spec["tolerations"] = have
