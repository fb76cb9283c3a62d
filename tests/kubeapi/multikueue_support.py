"""A MultiKueue manager and its worker clusters on the Kubernetes API emulator, shaped as Kueue sets them up.
(A uniquely named module rather than conftest, so another test folder's conftest cannot shadow it.)

Shapes: Kueue's own CRDs (shared/schemas/crds, kubernetes-sigs/kueue ff69552e79ad) are registered on every
cluster from their published schemas, and every Kueue object seeded here is validated against them. The
setup follows site/content/en/docs/tasks/manage/setup_multikueue.md: ClusterQueue with the MultiKueue
AdmissionCheck, MultiKueueConfig listing the MultiKueueClusters, each with a kubeconfig Secret (key
`kubeconfig`) in kueue-system; a Workload as Kueue's batch/Job integration creates it (podSet `main`), given
its quota reservation the way Kueue gives it: server-side apply on the status subresource, manager
`kueue-admission` (pkg/workload/patching/patching.go).

Worker nodes carry the providerIDs and labels EKS and GKE set (`aws:///us-east-1a/i-...` with
`topology.k8s.aws/zone-id`; `gce://project/zone/name`), so the catalog prices them and the regions' grids
weigh their carbon.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from geosched.kube import keys
from geosched.kube.client import APPLY_PATCH, Kube
from tests.kube.kube_support import crd_dir, validate_manifest
from tests.kubeemu import EmulatedCluster, MultiCluster, node_manifest
from tests.kubeemu.multicluster import kubeconfig_dict

V1B2 = "kueue.x-k8s.io/v1beta2"
V1B1 = "kueue.x-k8s.io/v1beta1"
CHECK = "multikueue-check"
CONFIG = "multikueue-config"
QUEUE = "cluster-queue"
DISPATCHER = "geosched.io/dispatcher"
H100 = "NVIDIA-H100-80GB-HBM3"
NOW = "2026-12-03T08:00:00Z"


@dataclass(frozen=True)
class Site:
    """A worker cluster's GPU pool: nodes in one zone of a real offering, some already busy."""

    provider: str  # aws | gcp
    region: str
    zone: str  # the zone name (the label), e.g. us-east-1a
    instance_type: str
    nodes: int
    busy: int = 0  # nodes whose 8 GPUs are held by a running pod
    zone_id: str | None = None  # AWS zone ID (topology.k8s.aws/zone-id)


def register_kueue_crds(cluster: EmulatedCluster, *, served: Sequence[str] = ("v1beta1", "v1beta2")) -> None:
    """Kueue's CRDs as published; `served` narrows the versions served (a Kueue before v1beta2 serves v1beta1)."""
    for crd in kueue_crds(crd_dir()):
        crd = copy.deepcopy(crd)
        for version in crd["spec"]["versions"]:
            version["served"] = version["name"] in served
        cluster.register_crd(crd)


@cache
def kueue_crds(directory: Path) -> tuple[dict[str, Any], ...]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(yaml.load(p.read_text(encoding="utf-8"), Loader=loader)
                 for p in sorted(directory.glob("kueue.x-k8s.io_*.yaml")))


def seeded(cluster: EmulatedCluster, obj: dict[str, Any]) -> dict[str, Any]:
    validate_manifest(obj)
    cluster.create(obj)
    return obj


def add_site(cluster: EmulatedCluster, site: Site) -> list[str]:
    names = []
    for i in range(site.nodes):
        name = f"{cluster.name}-gpu-{i}"
        labels = {keys.AWS_ZONE_ID: site.zone_id} if site.zone_id else {}
        node = node_manifest(name, region=site.region, zone=site.zone, instance_type=site.instance_type,
                             gpu_product=H100, gpus=8, labels=labels)
        node["spec"]["providerID"] = (f"aws:///{site.zone}/i-{i:017x}" if site.provider == "aws"
                                      else f"gce://geosched-test/{site.zone}/{name}")
        cluster.create(node)
        if i < site.busy:
            cluster.add_pod(f"busy-{i}", node_name=name, phase="Running", gpus=8)
        names.append(name)
    return names


def manager_setup(mc: MultiCluster, manager: str, workers: Sequence[str], *,
                  dispatcher: str = DISPATCHER, api: str = V1B2) -> None:
    """Kueue's objects in the manager: the Configuration, a MultiKueue ClusterQueue, the worker clusters."""
    m = mc[manager]
    m.add_namespace("kueue-system")
    configuration = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                     "multiKueue": {"dispatcherName": dispatcher}}
    m.create({"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
              "data": {"controller_manager_config.yaml": yaml.safe_dump(configuration)}})
    seeded(m, {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}})
    seeded(m, cluster_queue(QUEUE, [CHECK], api))
    seeded(m, cluster_queue("local-only", [], api))
    seeded(m, {"apiVersion": api, "kind": "AdmissionCheck", "metadata": {"name": CHECK},
               "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                        "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": CONFIG}}})
    seeded(m, {"apiVersion": api, "kind": "MultiKueueConfig", "metadata": {"name": CONFIG},
               "spec": {"clusters": list(workers)}})
    for w in workers:
        add_worker(mc, manager, w, api)


def add_worker(mc: MultiCluster, manager: str, worker: str, api: str = V1B2) -> None:
    m = mc[manager]
    kubeconfig = yaml.safe_dump(kubeconfig_dict([mc[worker]]))
    m.create({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": f"{worker}-secret", "namespace": "kueue-system"},
              "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()}})
    ref = {"locationType": "Secret", "location": f"{worker}-secret"}
    # v1beta2 moved the kubeconfig under clusterSource (beside clusterProfileRef).
    spec = {"clusterSource": {"kubeConfig": ref}} if api == V1B2 else {"kubeConfig": ref}
    seeded(m, {"apiVersion": api, "kind": "MultiKueueCluster", "metadata": {"name": worker}, "spec": spec})


def cluster_queue(name: str, checks: Sequence[str], api: str = V1B2) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                            "flavors": [{"name": "default-flavor",
                                         "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 10000}]}]}],
    }
    if checks and api == V1B2:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    elif checks:
        spec["admissionChecks"] = list(checks)  # v1beta1's list (v1beta2 keeps only the strategy)
    return {"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def workload(name: str, pods: int, gpus: int, *, namespace: str = "default",
             topology: str | None = None, api: str = V1B2) -> dict[str, Any]:
    """A Workload as Kueue's batch/Job integration creates it for an Indexed Job of `pods` GPU pods."""
    container = {"name": "trainer", "image": "ghcr.io/example/trainer:1.0",
                 "resources": {"limits": {keys.GPU: str(gpus)}, "requests": {keys.GPU: str(gpus)}}}
    pod_set: dict[str, Any] = {"name": "main", "count": pods,
                               "template": {"metadata": {}, "spec": {"containers": [container],
                                                                     "restartPolicy": "Never"}}}
    if topology:
        pod_set["topologyRequest"] = {"required": topology}
    return {"apiVersion": api, "kind": "Workload",
            "metadata": {"name": f"job-{name}-3f9a2", "namespace": namespace,
                         "labels": {"kueue.x-k8s.io/job-uid": f"uid-{name}"}},
            "spec": {"active": True, "podSets": [pod_set], "priority": 0, "queueName": "user-queue"}}


def reserve_quota(kube: Kube, wl: Mapping[str, Any], *, queue: str = QUEUE,
                  checks: Sequence[str] = (CHECK,)) -> dict[str, Any]:
    """QuotaReserved and the admission checks Pending, written as Kueue writes them."""
    pod_set = wl["spec"]["podSets"][0]
    per_pod = int(pod_set["template"]["spec"]["containers"][0]["resources"]["limits"][keys.GPU])
    status = {
        "admission": {"clusterQueue": queue, "podSetAssignments": [
            {"name": "main", "count": pod_set["count"], "flavors": {keys.GPU: "default-flavor"},
             "resourceUsage": {keys.GPU: str(per_pod * pod_set["count"])}}]},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                        "message": f"Quota reserved in ClusterQueue {queue}", "lastTransitionTime": NOW,
                        "observedGeneration": 1}],
        "admissionChecks": [{"name": c, "state": "Pending", "message": "", "lastTransitionTime": NOW}
                            for c in checks],
    }
    return kueue_status(kube, wl, status)


def kueue_status(kube: Kube, wl: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    meta = wl["metadata"]
    api = wl["apiVersion"]
    body = {"apiVersion": api, "kind": "Workload",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]}, "status": dict(status)}
    path = f"/apis/{api}/namespaces/{meta['namespace']}/workloads/{meta['name']}/status"
    answer = kube.request("PATCH", path, query={"fieldManager": "kueue-admission", "force": True}, body=body,
                          content_type=APPLY_PATCH)
    assert isinstance(answer, dict)
    validate_manifest(validatable(answer))
    return answer


def admit(kube: Kube, wl: Mapping[str, Any], cluster: str) -> dict[str, Any]:
    """What Kueue writes when a worker admitted the Workload: clusterName set, nominations cleared."""
    status = dict(wl["status"])
    status.pop("nominatedClusterNames", None)
    status["clusterName"] = cluster
    status["admissionChecks"] = [{**c, "state": "Ready"} for c in status["admissionChecks"]]
    return kueue_status(kube, wl, status)


def validatable(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as the schema sees it (server-set metadata is not part of a CRD's schema checks)."""
    meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace", "labels", "annotations")}
    return {**obj, "metadata": meta}


# | worker | nodes (8 x H100 each) | where | $/h per node | grid gCO2e/kWh |
# | worker1 | 3, 1 busy | GKE us-central1-a, a3-highgpu-8g | 43.07 | 413 |
# | worker2 | 8 | GKE europe-north1-c, a3-highgpu-8g | 96.71 | 39 |
# | worker3 | 8, 2 busy | EKS us-east-1a (use1-az1), p5.48xlarge | 98.32 | 379 |
SITES = {
    "worker1": Site("gcp", "us-central1", "us-central1-a", "a3-highgpu-8g", nodes=3, busy=1),
    "worker2": Site("gcp", "europe-north1", "europe-north1-c", "a3-highgpu-8g", nodes=8),
    "worker3": Site("aws", "us-east-1", "us-east-1a", "p5.48xlarge", nodes=8, busy=2, zone_id="use1-az1"),
}


@contextmanager
def kueue_world(directory: Path, sites: Mapping[str, Site], *, api: str = V1B2) -> Iterator[MultiCluster]:
    """A manager (`manager`) and one worker cluster per site, Kueue set up as MultiKueue's guide does; with
    `api` v1beta1 the manager serves only v1beta1 (a Kueue that predates v1beta2)."""
    with MultiCluster(1 + len(sites), names=["manager", *sites], directory=directory) as mc:
        for cluster in mc:
            register_kueue_crds(cluster, served=(api.rpartition("/")[2],) if cluster.name == "manager"
                                else ("v1beta1", "v1beta2"))
        mc["manager"].add_namespace("geosched-system")
        for name, site in sites.items():
            add_site(mc[name], site)
        manager_setup(mc, "manager", list(sites), api=api)
        yield mc
        for cluster in mc:
            assert cluster.server_errors == [], cluster.server_errors


def multikueue_sync(mc: MultiCluster, kube: Kube, workers: Sequence[str], manager: str = "manager") -> None:
    """A stand-in for one reconcile of MultiKueue's Workload controller with an external dispatcher (Kueue cannot
    run here), following pkg/controller/admissionchecks/multikueue/workload.go: a copy of the Workload in each
    nominated worker and in no other; once a worker's copy holds a quota reservation, that worker becomes
    `.status.clusterName` (nominations cleared, as Kueue writes it) and the other copies go."""
    resource = "kueue.x-k8s.io/v1beta2/workloads"
    for wl in mc[manager].list(resource):
        meta, status = wl["metadata"], wl.get("status") or {}
        cluster = status.get("clusterName")
        if not cluster:
            reserved = [w for w in status.get("nominatedClusterNames") or []
                        if (copy_ := mc[w].get(resource, meta["name"], meta["namespace"])) is not None
                        and any(c.get("type") == "QuotaReserved" and c.get("status") == "True"
                                for c in (copy_.get("status") or {}).get("conditions") or [])]
            if reserved:
                cluster = reserved[0]
                admit(kube, wl, cluster)
        targets = [cluster] if cluster else list(status.get("nominatedClusterNames") or [])
        for w in workers:
            remote = mc[w].get(resource, meta["name"], meta["namespace"])
            if w in targets and remote is None:
                mc[w].create({"apiVersion": V1B2, "kind": "Workload",
                              "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                                           "labels": dict(meta.get("labels") or {})},
                              "spec": copy.deepcopy(wl["spec"])})
            elif w not in targets and remote is not None:
                mc[w].delete(resource, meta["name"], meta["namespace"])


def copies(mc: MultiCluster, name: str, workers: Sequence[str]) -> list[str]:
    """The workers holding a copy of the Workload `job-<name>-3f9a2`."""
    return [w for w in workers if mc[w].get("kueue.x-k8s.io/v1beta2/workloads", f"job-{name}-3f9a2", "default")]
