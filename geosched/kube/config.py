"""Per-cluster settings for handing a placed gang to Kubernetes, read strictly from YAML:

```yaml
apiVersion: geosched.io/v1alpha1   # optional
kind: ClusterConfig                # optional
clusters:
  gke-eu:
    context: gke_proj_europe-west4_eu   # kubeconfig context (default: the cluster's name)
    backend: kueue                      # kueue | coscheduling | volcano | workload-api | none (default none)
    queue: team-a                       # Kueue LocalQueue (required for kueue); Volcano queue (optional)
    karmada: false                      # the cluster is a Karmada member: emit a PropagationPolicy
    karmada_context: karmada-apiserver  # with karmada: the Karmada control plane's context (submit applies there)
    pin_hosts: false                    # pin the gang to the placement's nodes (kubernetes.io/hostname)
    namespace: ml                       # used when the job object names none
    scheduler_name: my-scheduler        # optional: pods' schedulerName, honoured by every backend (default:
                                        # coscheduling scheduler-plugins-scheduler, volcano volcano,
                                        # workload-api, kueue and none: the cluster's default)
    volcano_zone_tier: 1                # optional: the HyperNode tier whose HyperNodes are zones (default: none)
    volcano_region_tier: 2              # optional: the HyperNode tier whose HyperNodes are regions (default: none)
    pods:                               # optional: what compact jobs' workers ask for beyond GPUs
      efa: auto                         #   (geosched/kube/podoptions.py has every key and its default per cloud)
    tolerations:                        # optional: written on every pod geosched renders for this cluster, and
      - key: dedicated                  #   its nodes with these taints count as capacity (Kubernetes' toleration
        operator: Equal                 #   shape: key, operator Equal/Exists, value, effect, tolerationSeconds;
        value: gpuGroup                 #   geosched/kube/tolerations.py)
        effect: NoSchedule
```

Volcano's HyperNode tiers are a cluster's own numbering, counted from the nodes up: tier 1 is the HyperNodes
whose members are nodes, which with switch discovery (UFM, RoCE, hand-written HyperNodes) is a leaf switch, far
smaller than a zone. Only the cluster knows which tier, if any, is a zone: with Volcano's label discovery over
the levels `topology.kubernetes.io/region`, `topology.kubernetes.io/zone`, `kubernetes.io/hostname` (the
volcano-controller ConfigMap's `networkTopologyDiscovery` source `label`), zones are tier 1 and regions tier 2.
By default no tier is assumed: the PodGroup gets no `networkTopology`, and node affinity alone keeps the gang
in its zones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from geosched.core.errors import InputError
from geosched.files.documents import API_VERSION
from geosched.files.fields import Fields
from geosched.files.gate import Kind, load_document
from geosched.kube import podoptions
from geosched.kube.tolerations import Toleration, to_manifest
from geosched.kube.tolerations import parse as parse_tolerations


class Backend(StrEnum):
    KUEUE = "kueue"
    COSCHEDULING = "coscheduling"
    VOLCANO = "volcano"
    # Kubernetes' own Workload and PodGroup (scheduling.k8s.io/v1alpha2, 1.36 with GenericWorkload + GangScheduling).
    WORKLOAD_API = "workload-api"
    NONE = "none"


BACKENDS = {b.value: b for b in Backend}
TOP_FIELDS = {"apiVersion", "kind", "clusters"}
CLUSTER_FIELDS = {"context", "backend", "queue", "karmada", "karmada_context", "pin_hosts", "namespace",
                  "scheduler_name", "volcano_zone_tier", "volcano_region_tier", "pods", "tolerations"}


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    name: str
    context: str
    backend: Backend = Backend.NONE
    queue: str | None = None
    karmada: bool = False
    karmada_context: str | None = None
    pin_hosts: bool = False
    namespace: str | None = None
    scheduler_name: str | None = None
    volcano_zone_tier: int | None = None
    volcano_region_tier: int | None = None
    pods: podoptions.PodOptions = podoptions.DEFAULT
    tolerations: tuple[Toleration, ...] = ()


def parse_cluster_config(data: Any, source: str) -> dict[str, ClusterConfig]:
    f = Fields(data, source, "", TOP_FIELDS)
    if f.has("apiVersion") and f.raw("apiVersion") != API_VERSION:
        raise f.error("apiVersion", f"expected {API_VERSION!r}, got {f.raw('apiVersion')!r}")
    if f.has("kind") and f.raw("kind") != "ClusterConfig":
        raise f.error("kind", f"expected 'ClusterConfig', got {f.raw('kind')!r}")
    clusters = f.raw("clusters")
    if clusters is None:
        raise f.error("clusters", "required")
    if not isinstance(clusters, Mapping):
        raise f.error("clusters", "expected a mapping of cluster name to settings")
    if not clusters:
        raise f.error("clusters", "must name at least one cluster")
    out: dict[str, ClusterConfig] = {}
    for name, item in clusters.items():
        if not isinstance(name, str) or not name:
            raise InputError(source, f"clusters.{name}", "cluster names must be non-empty strings")
        out[name] = _cluster(name, Fields(item, source, f"clusters.{name}", CLUSTER_FIELDS))
    return out


def _cluster(name: str, c: Fields) -> ClusterConfig:
    backend = c.choice("backend", BACKENDS, Backend.NONE.value)
    queue = c.opt_string("queue")
    if backend is Backend.KUEUE and queue is None:
        raise c.error("queue", "required for backend kueue (the LocalQueue the job is submitted to)")
    zone_tier = c.opt_integer("volcano_zone_tier", minimum=1)
    region_tier = c.opt_integer("volcano_region_tier", minimum=1)
    if zone_tier is not None and region_tier is not None:
        c.check("volcano_region_tier", region_tier > zone_tier,
                f"must be above volcano_zone_tier ({zone_tier}): a region holds its zones")
    karmada = _boolean(c, "karmada")
    karmada_context = c.opt_string("karmada_context")
    if karmada_context is not None and not karmada:
        raise c.error("karmada_context", "only with karmada: true")
    return ClusterConfig(
        name=name,
        context=c.string("context", default=name),
        backend=backend,
        queue=queue,
        karmada=karmada,
        karmada_context=karmada_context,
        pin_hosts=_boolean(c, "pin_hosts"),
        namespace=c.opt_string("namespace"),
        scheduler_name=c.opt_string("scheduler_name"),
        volcano_zone_tier=zone_tier,
        volcano_region_tier=region_tier,
        pods=podoptions.parse(c.raw("pods"), c.source, c.at("pods")),
        tolerations=parse_tolerations(c.raw("tolerations"), c.source, c.at("tolerations")),
    )


def apply_context(cluster: ClusterConfig) -> str:
    """Where a job for this cluster is applied: the Karmada control plane for a Karmada member (it serves the
    PropagationPolicy and propagates the job), the cluster itself otherwise."""
    if cluster.karmada:
        if cluster.karmada_context is None:
            raise InputError("clusters", f"{cluster.name}.karmada_context",
                             "required to submit to a Karmada member (the Karmada API server's context)")
        return cluster.karmada_context
    return cluster.context


def _boolean(c: Fields, key: str) -> bool:
    # Fields has no boolean reader; YAML 1.1 turns `yes`/`on` into booleans already, anything else is an error.
    value = c.raw(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise c.error(key, f"expected true or false, got {value!r}")
    return value


def cluster_to_dict(cluster: ClusterConfig) -> dict[str, Any]:
    """The settings that shape rendered manifests, in a stable form (for the inputs digest)."""
    out: dict[str, Any] = {"name": cluster.name, "context": cluster.context, "backend": cluster.backend.value,
           "queue": cluster.queue, "karmada": cluster.karmada, "karmada_context": cluster.karmada_context,
           "pin_hosts": cluster.pin_hosts,
           "namespace": cluster.namespace, "scheduler_name": cluster.scheduler_name,
           "volcano_zone_tier": cluster.volcano_zone_tier, "volcano_region_tier": cluster.volcano_region_tier}
    if cluster.pods != podoptions.DEFAULT:  # absent when default: digests of trees rendered before do not change
        out["pods"] = podoptions.to_dict(cluster.pods)
    if cluster.tolerations:  # likewise
        out["tolerations"] = [to_manifest(t) for t in cluster.tolerations]
    return out


def load_cluster_config(path: Path) -> dict[str, ClusterConfig]:
    return parse_cluster_config(load_document(path, Kind.CLUSTERS), str(path))
