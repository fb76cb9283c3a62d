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

`namespace` is an RFC 1123 label, `queue` an RFC 1123 subdomain of at most 63 characters (an object's name and,
with Kueue, every job's `kueue.x-k8s.io/queue-name` label value) and `scheduler_name` a subdomain, checked when the
file is read: a display name there rendered manifests the API server refuses.

Volcano's HyperNode tiers are a cluster's own numbering, counted from the nodes up: tier 1 is the HyperNodes
whose members are nodes, which with switch discovery (UFM, RoCE, hand-written HyperNodes) is a leaf switch, far
smaller than a zone. Only the cluster knows which tier, if any, is a zone: with Volcano's label discovery over
the levels `topology.kubernetes.io/region`, `topology.kubernetes.io/zone`, `kubernetes.io/hostname` (the
volcano-controller ConfigMap's `networkTopologyDiscovery` source `label`), zones are tier 1 and regions tier 2.
By default no tier is assumed: the PodGroup gets no `networkTopology`, and node affinity alone keeps the gang
in its zones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import BeforeValidator, Field, WithJsonSchema, field_validator, model_validator

from geosched.core.errors import InputError
from geosched.files.decl import pods as pods_decl
from geosched.files.decl.base import Declared, Refused, SettingsDocument, Text, integer, one_of
from geosched.files.fields import (
    DNS1123_LABEL_MAX,
    DNS1123_LABEL_RULE,
    dns1123_subdomain_rule,
    is_dns1123_label,
    is_dns1123_subdomain,
)
from geosched.files.gate import Kind, load_document
from geosched.kube import podoptions
from geosched.kube.gang_backends import Backend as Backend
from geosched.kube.gang_backends import BackendName as BackendName
from geosched.kube.tolerations import Toleration, to_manifest
from geosched.kube.tolerations import parse as parse_tolerations


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
    source: str = field(default="clusters", compare=False)
    """The cluster config file it was read from: an error about a setting names that file and the setting's
    field, not the kubeconfig the setting was checked against. Not part of `cluster_to_dict` (no digest changes)."""

    def setting_path(self, key: str) -> str:
        """The path of one of its settings in the cluster config file."""
        return f"clusters.{self.name}.{key}"


def _clusters(value: Any) -> Any:
    if not isinstance(value, Mapping):
        raise Refused("expected a mapping of cluster name to settings")
    if not value:
        raise Refused("must name at least one cluster")
    for name in value:
        if not isinstance(name, str) or not name:
            raise Refused("cluster names must be non-empty strings", str(name))
    return value


class ClusterDecl(Declared):
    """One cluster's settings (the module docstring shows each key)."""

    context: Text | None = Field(default=None, description="kubeconfig context (default: the cluster's name)")
    backend: Annotated[BackendName, one_of(BackendName)] = "none"
    queue: Text | None = Field(default=None, description="Kueue LocalQueue (required for kueue); Volcano queue")
    karmada: bool = False
    karmada_context: Text | None = None
    pin_hosts: bool = False
    namespace: Text | None = None
    scheduler_name: Text | None = None
    volcano_zone_tier: int | None = integer(1, default=None)
    volcano_region_tier: int | None = integer(1, default=None)
    # Read by their own modules, which name the entry at fault (geosched/kube/podoptions.py, tolerations.py).
    pods: Annotated[Any, WithJsonSchema(pods_decl.schema("geosched/kube/podoptions.py"))] = None
    tolerations: Annotated[Any, WithJsonSchema({"type": "array", "description": "Kubernetes' toleration shape "
                                                "(geosched/kube/tolerations.py)"})] = None

    @field_validator("queue")
    @classmethod
    def _queue(cls, queue: str | None) -> str | None:
        # The LocalQueue's (Volcano: the Queue's) object name, and with Kueue the value of every job's
        # kueue.x-k8s.io/queue-name label: a display name ("Team A") rendered a tree the API server refuses.
        if queue is not None and not is_dns1123_subdomain(queue, DNS1123_LABEL_MAX):
            raise Refused(dns1123_subdomain_rule(DNS1123_LABEL_MAX))
        return queue

    @field_validator("scheduler_name")
    @classmethod
    def _scheduler_name(cls, name: str | None) -> str | None:
        # A pod's spec.schedulerName, which the API server checks as a subdomain.
        if name is not None and not is_dns1123_subdomain(name):
            raise Refused(dns1123_subdomain_rule())
        return name

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, namespace: str | None) -> str | None:
        # As every job reader checks a job's own namespace (geosched.files.fields): a cluster's default namespace
        # is where its jobs go, and a directory of a GitOps tree.
        if namespace is not None and not is_dns1123_label(namespace):
            raise Refused(DNS1123_LABEL_RULE)
        return namespace

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.backend == Backend.KUEUE.value and self.queue is None:
            raise Refused("required for backend kueue (the LocalQueue the job is submitted to)", "queue")
        zone, region = self.volcano_zone_tier, self.volcano_region_tier
        if zone is not None and region is not None and region <= zone:
            raise Refused(f"must be above volcano_zone_tier ({zone}): a region holds its zones", "volcano_region_tier")
        if self.karmada_context is not None and not self.karmada:
            raise Refused("only with karmada: true", "karmada_context")
        return self

    def cluster(self, name: str, source: str) -> ClusterConfig:
        at = f"clusters.{name}"
        return ClusterConfig(
            name=name, context=self.context or name, backend=Backend(self.backend), queue=self.queue,
            karmada=self.karmada, karmada_context=self.karmada_context, pin_hosts=self.pin_hosts,
            namespace=self.namespace, scheduler_name=self.scheduler_name, volcano_zone_tier=self.volcano_zone_tier,
            volcano_region_tier=self.volcano_region_tier, pods=podoptions.parse(self.pods, source, f"{at}.pods"),
            tolerations=parse_tolerations(self.tolerations, source, f"{at}.tolerations"), source=source)


class ClusterConfigDoc(SettingsDocument):
    KIND: ClassVar[str] = "ClusterConfig"
    DESCRIPTION: ClassVar[str] = (
        "Per-cluster settings for handing a placed gang to Kubernetes (`--clusters`, a GitOps repository's "
        "clusters.yaml): context, gang backend, queue, Karmada, pod options, tolerations."
    )

    clusters: Annotated[dict[str, ClusterDecl], BeforeValidator(_clusters)]


def parse_cluster_config(data: Any, source: str) -> dict[str, ClusterConfig]:
    doc = ClusterConfigDoc.read(data, source)
    return {name: c.cluster(name, source) for name, c in doc.clusters.items()}


def apply_context(cluster: ClusterConfig) -> str:
    """Where a job for this cluster is applied: the Karmada control plane for a Karmada member (it serves the
    PropagationPolicy and propagates the job), the cluster itself otherwise."""
    if cluster.karmada:
        if cluster.karmada_context is None:
            raise InputError(cluster.source, cluster.setting_path("karmada_context"),
                             "required to submit to a Karmada member (the Karmada API server's context)")
        return cluster.karmada_context
    return cluster.context


def check_context(cluster: ClusterConfig, key: Literal["context", "karmada_context"], known: Sequence[str],
                  kubeconfig: str) -> None:
    """Refuse a context the cluster's settings name that the kubeconfig does not have. The mistake is in the
    cluster config (a typo, a cluster renamed) as often as in the kubeconfig, and only the cluster config says
    which setting chose the name: the line names that file and field, and the kubeconfig it was looked up in."""
    value = cluster.context if key == "context" else cluster.karmada_context
    if value is None or value in known:
        return
    default = " (the default: the cluster's name)" if key == "context" and value == cluster.name else ""
    raise InputError(cluster.source, cluster.setting_path(key),
                     f"context {value!r}{default} is not in the kubeconfig {kubeconfig} "
                     f"(its contexts: {', '.join(known) or 'none'})")


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
