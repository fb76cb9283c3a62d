"""Which kinds an emulated cluster serves, and the per-kind API server rules the store needs.

The rules are the ones the real registry strategies encode (`pkg/registry/*/strategy.go` in kubernetes):
scope, the status subresource, which field selectors the kind supports, whether a PUT may omit
`metadata.resourceVersion`, whether a PUT may create, and whether DELETE answers with the object or a Status.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import kmock
import yaml

# Field selectors every kind supports; cluster-scoped kinds do not get metadata.namespace.
_META_FIELDS = frozenset({"metadata.name"})
_NS_META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})

POD_FIELDS = frozenset({
    "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
    "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName",
})
EVENT_FIELDS = frozenset({
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
    "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
    "reason", "reportingComponent", "source", "type",
})


@dataclass(frozen=True)
class ResourceSpec:
    """One served resource (all its served versions share one stored object, as with a real CRD)."""

    group: str
    versions: tuple[str, ...]
    plural: str
    kind: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()
    field_labels: frozenset[str] = frozenset()
    # Built-in kinds accept strategic merge patch; custom resources answer 415 to it.
    builtin: bool = True
    unconditional_update: bool = True
    create_on_update: bool = False
    returns_deleted_object: bool = False
    storage_version: str = ""
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")

    @property
    def storage(self) -> str:
        return self.storage_version or self.versions[0]

    @property
    def key(self) -> kmock.resource:
        """The kmock resource the objects are stored under (the storage version)."""
        return kmock.resource(self.group, self.storage, self.plural)

    @property
    def qualified(self) -> str:
        """`pods`, `jobsets.jobset.x-k8s.io`: how the API server names the resource in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def tracks_generation(self) -> bool:
        return self.has_status or not self.builtin

    def api_version(self, version: str | None = None) -> str:
        version = version or self.storage
        return f"{self.group}/{version}" if self.group else version

    def supports_field(self, name: str) -> bool:
        base = _NS_META_FIELDS if self.namespaced else _META_FIELDS
        return name in base or name in self.field_labels


def _core(plural: str, kind: str, namespaced: bool, **kw: Any) -> ResourceSpec:
    return ResourceSpec("", ("v1",), plural, kind, namespaced, **kw)


def _crd(group: str, versions: tuple[str, ...], plural: str, kind: str, namespaced: bool, *,
         status: bool = True, scale: bool = False, storage: str = "") -> ResourceSpec:
    subs = frozenset({"status"} if status else set()) | frozenset({"scale"} if scale else set())
    return ResourceSpec(group, versions, plural, kind, namespaced, subs, builtin=False, unconditional_update=False,
                        returns_deleted_object=True, storage_version=storage)


BUILTIN: tuple[ResourceSpec, ...] = (
    _core("namespaces", "Namespace", False, subresources=frozenset({"status", "finalize"}),
          field_labels=frozenset({"status.phase"}), short_names=("ns",)),
    _core("nodes", "Node", False, subresources=frozenset({"status"}), field_labels=frozenset({"spec.unschedulable"}),
          short_names=("no",)),
    _core("pods", "Pod", True, subresources=frozenset({"status", "binding"}), field_labels=POD_FIELDS,
          returns_deleted_object=True, short_names=("po",)),
    _core("bindings", "Binding", True, verbs=("create",)),
    _core("configmaps", "ConfigMap", True, short_names=("cm",)),
    _core("secrets", "Secret", True, field_labels=frozenset({"type"})),
    _core("services", "Service", True, subresources=frozenset({"status"}), short_names=("svc",)),
    _core("podtemplates", "PodTemplate", True),
    _core("events", "Event", True, field_labels=EVENT_FIELDS, create_on_update=True, short_names=("ev",)),
    ResourceSpec("coordination.k8s.io", ("v1",), "leases", "Lease", True, unconditional_update=False,
                 create_on_update=True),
    ResourceSpec("batch", ("v1",), "jobs", "Job", True, frozenset({"status"}), frozenset({"status.successful"})),
    ResourceSpec("apps", ("v1",), "daemonsets", "DaemonSet", True, frozenset({"status"}), short_names=("ds",)),
    ResourceSpec("events.k8s.io", ("v1",), "events", "Event", True, create_on_update=True),
    ResourceSpec("scheduling.k8s.io", ("v1",), "priorityclasses", "PriorityClass", False, short_names=("pc",)),
    ResourceSpec("apiextensions.k8s.io", ("v1",), "customresourcedefinitions", "CustomResourceDefinition", False,
                 frozenset({"status"}), short_names=("crd",)),
)

# Kubernetes 1.36's gang API: built in, but served only with the GenericWorkload feature gate and the
# scheduling.k8s.io/v1alpha2 group enabled, so a cluster serves it only when a test registers it (`register`).
# Scope and subresources as the 1.36 OpenAPI has them: the PodGroup has a status, the Workload none.
WORKLOAD_API: tuple[ResourceSpec, ...] = (
    ResourceSpec("scheduling.k8s.io", ("v1alpha2",), "workloads", "Workload", True),
    ResourceSpec("scheduling.k8s.io", ("v1alpha2",), "podgroups", "PodGroup", True, frozenset({"status"})),
)

_KUEUE = ("v1beta1", "v1beta2")

# The custom resources geosched renders or reads but the job kinds (`job_kinds()`, below: from their CRDs); scope and
# subresources as in the upstream CRDs.
CUSTOM: tuple[ResourceSpec, ...] = (
    _crd("kueue.x-k8s.io", _KUEUE, "topologies", "Topology", False, status=False, storage="v1beta2"),
    _crd("kueue.x-k8s.io", _KUEUE, "resourceflavors", "ResourceFlavor", False, status=False, storage="v1beta2"),
    _crd("kueue.x-k8s.io", _KUEUE, "localqueues", "LocalQueue", True, storage="v1beta2"),
    _crd("kueue.x-k8s.io", _KUEUE, "clusterqueues", "ClusterQueue", False, storage="v1beta2"),
    _crd("kueue.x-k8s.io", _KUEUE, "workloads", "Workload", True, storage="v1beta2"),
    _crd("kueue.x-k8s.io", _KUEUE, "admissionchecks", "AdmissionCheck", False, storage="v1beta2"),
    _crd("kueue.x-k8s.io", _KUEUE, "multikueueclusters", "MultiKueueCluster", False, storage="v1beta2"),
    _crd("kueue.x-k8s.io", _KUEUE, "multikueueconfigs", "MultiKueueConfig", False, status=False, storage="v1beta2"),
    _crd("scheduling.x-k8s.io", ("v1alpha1",), "podgroups", "PodGroup", True),
    # cluster-autoscaler's (kubernetes/autoscaler cluster-autoscaler/apis/provisioningrequest, its CRD in
    # tests/kube/data/crds): namespaced, conditions in its status subresource.
    _crd("autoscaling.x-k8s.io", ("v1",), "provisioningrequests", "ProvisioningRequest", True),
    _crd("scheduling.volcano.sh", ("v1beta1",), "podgroups", "PodGroup", True, status=False),
    _crd("batch.volcano.sh", ("v1alpha1",), "jobs", "Job", True),
    _crd("topology.volcano.sh", ("v1alpha1",), "hypernodes", "HyperNode", False),
    _crd("networktopology.diktyo.x-k8s.io", ("v1alpha1",), "networktopologies", "NetworkTopology", True,
         status=False),
    _crd("appgroup.diktyo.x-k8s.io", ("v1alpha1",), "appgroups", "AppGroup", True, status=False),
    _crd("policy.karmada.io", ("v1alpha1",), "propagationpolicies", "PropagationPolicy", True, status=False),
    _crd("policy.karmada.io", ("v1alpha1",), "clusterpropagationpolicies", "ClusterPropagationPolicy", False,
         status=False),
)


def spec_from_crd(crd: Mapping[str, Any]) -> ResourceSpec:
    """A ResourceSpec from an apiextensions.k8s.io/v1 CustomResourceDefinition (served versions only)."""
    spec = crd["spec"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    if not served:
        raise ValueError(f"CRD {crd.get('metadata', {}).get('name')!r} serves no version")
    storage = next((v["name"] for v in served if v.get("storage")), served[0]["name"])
    subs: set[str] = set()
    for version in served:
        subs |= set((version.get("subresources") or {}).keys())
    names = spec["names"]
    return ResourceSpec(
        spec["group"], tuple(v["name"] for v in served), names["plural"], names["kind"],
        spec.get("scope", "Namespaced") == "Namespaced", frozenset(subs), builtin=False,
        unconditional_update=False, returns_deleted_object=True, storage_version=storage,
        singular=names.get("singular", ""), short_names=tuple(names.get("shortNames", ())),
    )


# Where the upstream CRDs are: shared/schemas/crds beside the checkout (GEOSCHED_CRD_DIR elsewhere), and the job
# kinds' CRDs it does not hold in tests/kube/data/crds (as tests/kube/kube_support.py validates manifests with them).
_TESTS = Path(__file__).resolve().parent.parent
_CRD_DIRS = (*((Path(os.environ["GEOSCHED_CRD_DIR"]),) if os.environ.get("GEOSCHED_CRD_DIR") else ()),
             _TESTS.parent.parent / "shared" / "schemas" / "crds", Path("/work/shared/schemas/crds"),
             _TESTS / "kube" / "data" / "crds")


def upstream_crd(group: str, plural: str) -> Mapping[str, Any]:
    """The upstream CRD `<group>_<plural>.yaml` (controller-gen's file name), from the first directory holding it."""
    for directory in _CRD_DIRS:
        path = directory / f"{group}_{plural}.yaml"
        if path.is_file():
            crd: Mapping[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
            return crd
    raise FileNotFoundError(f"no CRD {group}_{plural}.yaml in {', '.join(map(str, _CRD_DIRS))} (set GEOSCHED_CRD_DIR "
                            "to shared/schemas/crds)")


@cache
def job_kinds() -> tuple[ResourceSpec, ...]:
    """The resources of geosched's job kinds, one per served kind of its registry (geosched.kube.kinds) that is a
    custom resource, read from the kind's upstream CRD: a kind added to geosched (a module there and its CRD) is
    served here with no line of its own. The built-in batch/v1 Job is in BUILTIN."""
    from geosched.kube import kinds  # the product's registry: this emulator is its test double

    return tuple(spec_from_crd(upstream_crd(kind.group, kind.plural)) for kind in kinds.served()
                 if "." in kind.group)


@dataclass
class Catalog:
    """Lookup of served resources by (group, version, plural); mutable so CRDs can be added at runtime."""

    _by_gvr: dict[tuple[str, str, str], ResourceSpec] = field(default_factory=dict)

    @classmethod
    def default(cls) -> Catalog:
        catalog = cls()
        for spec in (*BUILTIN, *CUSTOM, *job_kinds()):
            catalog.add(spec)
        return catalog

    def add(self, spec: ResourceSpec) -> None:
        for version in spec.versions:
            self._by_gvr[(spec.group, version, spec.plural)] = spec

    def remove(self, group: str, plural: str) -> list[str]:
        """Stop serving a resource (before it is declared again with other versions); the versions it had."""
        gone = [v for (g, v, p) in self._by_gvr if g == group and p == plural]
        for version in gone:
            del self._by_gvr[(group, version, plural)]
        return gone

    def lookup(self, group: str, version: str, plural: str) -> ResourceSpec | None:
        return self._by_gvr.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceSpec | None:
        group, _, version = api_version.rpartition("/")
        for (g, v, _plural), spec in self._by_gvr.items():
            if g == group and v == version and spec.kind == kind:
                return spec
        return None

    def parse(self, resource: str) -> tuple[ResourceSpec, str]:
        """`v1/pods`, `kueue.x-k8s.io/v1beta1/workloads` -> (spec, version)."""
        head, _, plural = resource.rpartition("/")
        group, _, version = head.rpartition("/")
        spec = self.lookup(group, version, plural)
        if spec is None:
            raise KeyError(f"resource {resource!r} is not served (register it first)")
        return spec, version

    def specs(self) -> Iterator[ResourceSpec]:
        seen: set[int] = set()
        for spec in list(self._by_gvr.values()):  # a copy: declaring a spec re-adds it
            if id(spec) not in seen:
                seen.add(id(spec))
                yield spec

    def versions(self) -> Iterable[tuple[ResourceSpec, str]]:
        for (_g, version, _p), spec in self._by_gvr.items():
            yield spec, version
