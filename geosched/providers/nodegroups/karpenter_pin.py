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

from geosched.errors import InputError
from geosched.kube import affinity, keys
from geosched.kube import tolerations as toleration_rules
from geosched.kube.compact import CompactKind, build
from geosched.kube.jobinput import JobInput, PathKey
from geosched.providers.nodegroups.karpenter import DO_NOT_DISRUPT, NODEPOOL_LABEL, KarpenterPool
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
        _pin_template(_resolve(obj, path), pool)
    extras = [copy.deepcopy(dict(e)) for e in job.extras]
    return [*companions, *extras, obj]


def _pin_template(template: dict[str, Any], pool: KarpenterPool) -> None:
    meta = template.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), DO_NOT_DISRUPT: "true"}
    spec = template.setdefault("spec", {})
    affinity.require_in(spec, [(NODEPOOL_LABEL, (pool.name,)), (keys.ZONE, (pool.zone_name,))])
    toleration_rules.add_to(spec, (TOLERATION,))


def _resolve(obj: dict[str, Any], path: tuple[PathKey, ...]) -> dict[str, Any]:
    here: Any = obj
    for step in path:
        here = here[step]
    assert isinstance(here, dict)
    return here
