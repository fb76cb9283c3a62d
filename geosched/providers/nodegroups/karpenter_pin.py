"""A job's pods pinned to the nodes of its Karpenter NodePools (`karpenter.py`): pure, on a deep copy.

The nodes do not exist yet when the tree is rendered, so the pods cannot name hosts: they require the label
Karpenter gives every node of a pool (karpenter.sh/nodepool In <the gang's pools>, karpenter.sh/docs/concepts/
scheduling/ "Well-Known Labels") and the zones the pools are held to, tolerate the pools' GPU taint, and carry
karpenter.sh/do-not-disrupt (karpenter.sh/docs/concepts/disruption/ "Pod-Level Controls") so Karpenter neither
consolidates nor drift-replaces a node while the gang runs on it.
Karpenter provisions for pending pods whose requirements a NodePool can satisfy: these pods only the gang's pools.

The whole gang in ONE zone, whichever pool Karpenter launches: every pod carries geosched.io/gang=<gang> and
requires pod affinity to that label on topology.kubernetes.io/zone (`gang_affinity`). Two schedulers honour it:
- kube-scheduler, which binds: a pod passes the InterPodAffinity filter only on a node whose zone already runs a
  pod of the gang, except when no pod anywhere matches and the pod matches its own term, the first of the gang
  (kubernetes pkg/scheduler/framework/plugins/interpodaffinity/filtering.go, `satisfyPodAffinity`: "This pod may
  be the first pod in a series that have affinity to themselves"). Pods are bound one at a time and each sees
  those assumed before it, so once one pod is bound the rest can bind only in its zone: the guarantee.
- Karpenter, which launches: for a self-selecting pod with no pod of the group placed yet it takes the domain of
  the NodeClaim it is trying, the highest-weight pool that can launch, and puts the rest of the batch there
  (sigs.k8s.io/karpenter pkg/controllers/provisioning/scheduling/topologygroup.go, `nextDomainAffinity`: "If pod
  is self-selecting and no pod has been scheduled yet ... pick a domain ... the intersection of pod/node
  domains"), so it launches the gang's nodes in one zone rather than nodes kube-scheduler would leave empty.

Every pod set of the job is pinned (GPU-less helpers too: the pool's nodes are the only ones the gang is meant
to run on, and Karpenter would otherwise launch the helper elsewhere or not at all). A compact geosched job is
first built as the indexed Job `submit` would write (kube.compact); a kind whose pods have no template in the
object is refused with the reason.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from geosched.core.errors import InputError
from geosched.kube import affinity, keys
from geosched.kube import tolerations as toleration_rules
from geosched.kube.compact import CompactKind, build
from geosched.kube.jobinput import JobInput
from geosched.kube.kinds.template import at_path
from geosched.providers.lifecycle import GANG_LABEL
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


def gang_affinity(gang: str) -> dict[str, Any]:
    """The required pod-affinity term that holds every pod of `gang` to the zone of the first one bound."""
    return {"labelSelector": {"matchLabels": {GANG_LABEL: gang}}, "topologyKey": keys.ZONE}


def pinned(job: JobInput, pools: Sequence[KarpenterPool]) -> list[dict[str, Any]]:
    """The job's objects, its pods pinned to the nodes of `pools` (one gang's, one per zone) and held to one
    zone; in apply order (companions before the job)."""
    assert pools and len({p.gang for p in pools}) == 1, "the pools of one gang"
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
        _pin_template(at_path(obj, path), pools)
    extras = [copy.deepcopy(dict(e)) for e in job.extras]
    return [*companions, *extras, obj]


# Labels Karpenter knows values of for any pool without the pool naming them (karpenter.sh/docs/concepts/scheduling/,
# "Well-Known Labels"; the AWS provider's karpenter.k8s.aws/instance-* labels, which the NodePool CRD lists).
_WELL_KNOWN = frozenset({keys.REGION, keys.AWS_ZONE_ID, keys.OS, keys.ARCH, keys.HOSTNAME, CAPACITY_TYPE,
                         NODEPOOL_LABEL})
_WELL_KNOWN_PREFIX = "karpenter.k8s.aws/"


def unlaunchable(manifests: list[dict[str, Any]], job: JobInput, pools: Sequence[KarpenterPool]) -> list[str]:
    """Why Karpenter would launch nothing for some pods of the pinned job, one line each: a node selector or a
    required node affinity on a label the pools' nodes carry with another value, or on a label Karpenter knows no
    value of for a pool ("incompatible requirements, label ... does not have known values"). Every required
    term is checked; a pod set is reported only when no pool can launch for it (terms are ORed), with the reasons
    of the first pool (the one Karpenter tries first)."""
    out: list[str] = []
    for lines in zip(*(_unlaunchable_on(manifests[-1], job, p) for p in pools), strict=True):
        if all(lines):
            out += lines[0]
    return out


def _unlaunchable_on(obj: dict[str, Any], job: JobInput, pool: KarpenterPool) -> list[list[str]]:
    """Per pod set of the pinned `obj`: why Karpenter would launch no node of `pool` for it (empty: it would)."""
    fixed = {**node_labels(pool), NODEPOOL_LABEL: pool.name,
             **{r["key"]: r["values"][0] for r in nodepool(pool)["spec"]["template"]["spec"]["requirements"]}}
    paths = [p.path for p in job.pod_sets] if job.original is not None else [("spec", "template")]
    out: list[list[str]] = []
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
        out.append([f"{where}: {p}; Karpenter will launch no node of pool {pool.name} for these pods"
                    for p in problems])
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


def _pin_template(template: dict[str, Any], pools: Sequence[KarpenterPool]) -> None:
    meta = template.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), DO_NOT_DISRUPT: "true"}
    meta["labels"] = {**(meta.get("labels") or {}), GANG_LABEL: pools[0].gang}
    spec = template.setdefault("spec", {})
    affinity.require_in(spec, [(NODEPOOL_LABEL, tuple(p.name for p in pools)),
                               (keys.ZONE, tuple(p.zone_name for p in pools))])
    required = (spec.setdefault("affinity", {}).setdefault("podAffinity", {})
                .setdefault("requiredDuringSchedulingIgnoredDuringExecution", []))
    term = gang_affinity(pools[0].gang)
    if term not in required:  # a render of a rendered job is a fixed point
        required.append(term)
    toleration_rules.add_to(spec, (TOLERATION,))
