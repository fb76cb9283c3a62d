"""A job's pods pinned to the nodes of its Karpenter NodePool (`karpenter.py`): pure, on a deep copy.

The nodes do not exist yet when the tree is rendered, so the pods cannot name hosts: they require the label
Karpenter gives every node of the pool (karpenter.sh/nodepool=<pool>, karpenter.sh/docs/concepts/scheduling/
"Well-Known Labels") and the zone the pool is held to, tolerate the pool's GPU taint, and carry
karpenter.sh/do-not-disrupt (karpenter.sh/docs/concepts/disruption/ "Pod-Level Controls") so Karpenter neither
consolidates nor drift-replaces a node while the gang runs on it.
Karpenter provisions for pending pods whose requirements a NodePool can satisfy: these pods only this pool's.

Every pod set of the job is pinned (GPU-less helpers too: the pool's nodes are the only ones the gang is meant
to run on, and Karpenter would otherwise launch the helper elsewhere or not at all). A compact geosched job is
first built as the indexed Job `submit` would write (kube.compact); a kind whose pods have no template in the
object is refused with the reason.
"""

from __future__ import annotations

import copy
from typing import Any

from geosched.core.errors import InputError
from geosched.kube import affinity, keys
from geosched.kube import tolerations as toleration_rules
from geosched.kube.compact import CompactKind, build
from geosched.kube.jobinput import JobInput
from geosched.kube.kinds.template import at_path
from geosched.providers.nodegroups.karpenter import (
    CAPACITY_TYPE,
    DO_NOT_DISRUPT,
    NODEPOOL_LABEL,
    KarpenterPool,
    node_labels,
    nodepool,
)
from geosched.providers.nodegroups.spec import GPU_TAINT

TOLERATION = toleration_rules.Toleration(GPU_TAINT["key"], "Equal", GPU_TAINT["value"], "NoSchedule")


def pinned(job: JobInput, pool: KarpenterPool) -> list[dict[str, Any]]:
    """The job's objects, its pods pinned to `pool`'s nodes; in apply order (companions before the job)."""
    namespace = job.namespace or "default"
    if job.original is None:
        built = build(job.job, namespace, CompactKind.JOB, job.source)
        obj, companions, paths = built.obj, list(built.companions), [p.path for p in built.pod_sets]
    else:
        obj, companions, paths = copy.deepcopy(dict(job.original)), [], [p.path for p in job.pod_sets]
        obj.setdefault("metadata", {}).setdefault("namespace", namespace)
    for path in paths:
        if path is None:
            raise InputError(job.source, "kind", f"{job.kind.label} pods have no template in the object, so they "
                             "cannot be pinned to a Karpenter NodePool here")
        _pin_template(at_path(obj, path), pool)
    extras = [copy.deepcopy(dict(e)) for e in job.extras]
    return [*companions, *extras, obj]


# Labels Karpenter knows values of for any pool without the pool naming them (karpenter.sh/docs/concepts/scheduling/,
# "Well-Known Labels"; the AWS provider's karpenter.k8s.aws/instance-* labels, which the NodePool CRD lists).
_WELL_KNOWN = frozenset({keys.REGION, keys.AWS_ZONE_ID, keys.OS, keys.ARCH, keys.HOSTNAME, CAPACITY_TYPE,
                         NODEPOOL_LABEL})
_WELL_KNOWN_PREFIX = "karpenter.k8s.aws/"


def unlaunchable(manifests: list[dict[str, Any]], job: JobInput, pool: KarpenterPool) -> list[str]:
    """Why Karpenter would launch nothing for some pods of the pinned job, one line each: a node selector or a
    required node affinity on a label the pool's nodes carry with another value, or on a label Karpenter knows no
    value of for this pool ("incompatible requirements, label ... does not have known values"). Every required
    term is checked; a pod set is reported only when none of its terms can match (terms are ORed)."""
    fixed = {**node_labels(pool), NODEPOOL_LABEL: pool.name,
             **{r["key"]: r["values"][0] for r in nodepool(pool)["spec"]["template"]["spec"]["requirements"]}}
    obj = manifests[-1]
    paths = [p.path for p in job.pod_sets] if job.original is not None else [("spec", "template")]
    out: list[str] = []
    for path in paths:
        assert path is not None
        spec = at_path(obj, path).get("spec") or {}
        where = f"{obj['kind']}/{obj['metadata']['name']} {'.'.join(str(p) for p in path)}"
        selector = [_problem(k, "In", [v], fixed) for k, v in (spec.get("nodeSelector") or {}).items()]
        problems = [p for p in selector if p is not None]
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        terms = [[p for e in (t.get("matchExpressions") or [])
                  if (p := _problem(e.get("key", ""), e.get("operator", ""), e.get("values") or [], fixed))]
                 for t in required.get("nodeSelectorTerms") or []]
        if terms and all(terms):
            problems += terms[0]
        out += [f"{where}: {p}; Karpenter will launch no node of pool {pool.name} for these pods" for p in problems]
    return out


def _problem(key: str, operator: str, values: list[str], fixed: dict[str, str]) -> str | None:
    if operator not in ("In", "Exists"):
        return None
    if key in fixed:
        if operator == "In" and fixed[key] not in values:
            return f"{key} In {values}, but the pool's nodes carry {key}={fixed[key]}"
        return None
    if key in _WELL_KNOWN or key.startswith(_WELL_KNOWN_PREFIX):
        return None
    return f"{key} is not a label the pool's nodes are known to carry"


def _pin_template(template: dict[str, Any], pool: KarpenterPool) -> None:
    meta = template.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), DO_NOT_DISRUPT: "true"}
    spec = template.setdefault("spec", {})
    affinity.require_in(spec, [(NODEPOOL_LABEL, (pool.name,)), (keys.ZONE, (pool.zone_name,))])
    toleration_rules.add_to(spec, (TOLERATION,))
