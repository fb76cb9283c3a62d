"""Karmada: a PropagationPolicy (policy.karmada.io/v1alpha1) sending the gang's objects to the one member
cluster geosched chose.

Replicas are duplicated, never divided: Karmada would otherwise split a Job's parallelism across clusters and
break the gang. Cluster-scoped objects (Kueue's Topology, ResourceFlavor and ClusterQueue) need a
ClusterPropagationPolicy and are left out; apply them to the member cluster directly. So are objects in another
namespace than the job's (a PropagationPolicy selects in its own namespace only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from geosched.kube.backends.kueue import GROUP as KUEUE_GROUP
from geosched.kube.backends.kueue import VERSIONS as KUEUE_VERSIONS
from geosched.kube.keys import JOB_LABEL

API_VERSION = "policy.karmada.io/v1alpha1"
CLUSTER_SCOPED = {*((f"{KUEUE_GROUP}/{v}", kind) for v in KUEUE_VERSIONS
                    for kind in ("Topology", "ResourceFlavor", "ClusterQueue")), ("v1", "Namespace")}


def is_propagation_policy(obj: Mapping[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) == (API_VERSION, "PropagationPolicy")


def is_cluster_scoped(obj: dict[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in CLUSTER_SCOPED


def propagation_policy(job: str, namespace: str, cluster: str, objects: Sequence[dict[str, Any]]) -> dict[str, Any]:
    selectors = [{"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"],
                  "namespace": namespace}
                 for o in objects if not is_cluster_scoped(o)
                 and o["metadata"].get("namespace", namespace) == namespace]
    return {
        "apiVersion": API_VERSION,
        "kind": "PropagationPolicy",
        "metadata": {"name": f"geosched-{job}", "namespace": namespace, "labels": {JOB_LABEL: job}},
        "spec": {
            "resourceSelectors": selectors,
            "placement": {
                "clusterAffinity": {"clusterNames": [cluster]},
                "replicaScheduling": {"replicaSchedulingType": "Duplicated"},
            },
        },
    }
