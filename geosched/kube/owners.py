"""A job's companions (its PodGroup, headless Service, Workload of the Workload API) owned by the job, so that
deleting the job deletes them: Kubernetes' garbage collector removes objects whose owners are gone
(kubernetes.io/docs/concepts/architecture/garbage-collection/#owners-dependents). Pure.

An owner reference needs the owner's UID, which exists only once the job is on the cluster; `submit` applies the
companions first (the pods refer to them), then the job, then the companions again with this reference. The
reference is not a controller reference and does not block the owner's deletion (both would need more RBAC and
claim what is not ours). Only companions in the job's namespace can be owned (owner references do not cross
namespaces); the user's own extra objects (ConfigMaps...) and the cluster's Kueue objects are left alone.

Through a Karmada control plane the job, its companions and its PropagationPolicy are owned there, by the UID the
Karmada API server gave the job: Karmada's own kube-controller-manager runs the garbage collector (karmada
operator/pkg/controlplane/manifests.go: `--controllers=namespace,garbagecollector,...`), and Karmada strips
ownerReferences from what it propagates (pkg/resourceinterpreter/default/native/prune/prune.go), so a member
cluster never sees the Karmada plane's UID; deleting the job there removes the templates, and Karmada removes
their copies from the member.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from geosched.kube import karmada, keys, provenance


def owner_reference(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """The reference to `job` as the API server returned it; None without a UID."""
    meta = job.get("metadata") or {}
    uid = meta.get("uid")
    if not uid:
        return None
    return {"apiVersion": str(job["apiVersion"]), "kind": str(job["kind"]), "name": str(meta["name"]),
            "uid": str(uid)}


def the_job(manifests: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The job among what render wrote for it: the last manifest, but for the PropagationPolicy a Karmada member's
    job ends with."""
    return next(m for m in reversed(manifests) if not karmada.is_propagation_policy(m))


def companions(manifests: Sequence[Mapping[str, Any]], job: Mapping[str, Any],
               namespace: str) -> list[Mapping[str, Any]]:
    """The manifests geosched rendered for `job` besides the job itself (its label and input digest on them), in
    the job's namespace."""
    meta = job.get("metadata") or {}
    name = str(meta.get("name"))
    out = []
    for m in manifests:
        mm = m.get("metadata") or {}
        if m is job or ((m.get("apiVersion"), m.get("kind"), mm.get("name")) ==
                        (job.get("apiVersion"), job.get("kind"), name)):
            continue
        if (mm.get("labels") or {}).get(keys.JOB_LABEL) != name:
            continue
        if provenance.DIGEST not in (mm.get("annotations") or {}) and not karmada.is_propagation_policy(m):
            continue
        if str(mm.get("namespace") or namespace) != namespace:
            continue
        out.append(m)
    return out


def owned(companion: Mapping[str, Any], reference: Mapping[str, Any]) -> dict[str, Any]:
    """`companion` with `reference` among its owner references (once)."""
    out = copy.deepcopy(dict(companion))
    meta = out.setdefault("metadata", {})
    refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != reference["uid"]]
    meta["ownerReferences"] = [*refs, dict(reference)]
    return out
