"""A test controller standing in for GKE's Dynamic Workload Scheduler (the `queued-provisioning.gke.io` class of
ProvisioningRequests): it watches the ProvisioningRequests Kueue creates in one namespace, makes each one's nodes
join the real cluster as kwok Nodes shaped as GKE registers them, in the zone the request's pod template selects,
and then marks the request Provisioned, as the autoscaler does. Test code, not product: geosched and Kueue only
ever see the ProvisioningRequest API and the cluster's Nodes, as on GKE.

Shapes, each from its source:
- the request (autoscaling.x-k8s.io/v1, the CRD of the autoscaler module Kueue v0.17.0 requires,
  tests/kube/data/crds): `spec.podSets[]` of {podTemplateRef.name, count}, each PodTemplate a copy of the job's
  pod template with Kueue's admission applied (sigs.k8s.io/kueue v0.17.0
  pkg/controller/admissionchecks/provisioning/controller.go `createPodTemplate`);
- the nodes: GKE's labels (tests/kubeapi/real_nodes.py `gke_node`: the zone, accelerator, machine type, node pool
  and providerID), the zone and accelerator those of the pod template's `nodeSelector`, the machine the one GKE
  gives that accelerator count (a3-highgpu-8g: 8 x nvidia-h100-80gb, "GPU machine types" in the Compute Engine
  docs; nodes.py `MACHINES`), tainted as GKE taints every GPU node (nvidia.com/gpu=present:NoSchedule, "Run GPUs
  in GKE Standard node pools") and the nodes of a queued-provisioning pool (cloud.google.com/gke-queued=true:
  NoSchedule, labelled cloud.google.com/gke-queued=true; geosched/kube/provreq.py `QUEUED_TAINT` says where
  that shape is seen); the pool is the one the template selects (cloud.google.com/gke-nodepool), else a name of
  this controller's (`dws-<hash>`: GKE's own naming of pools it makes is not documented);
- the status: conditions as cluster-autoscaler writes them (kubernetes/autoscaler
  cluster-autoscaler/provisioningrequest/conditions/conditions.go `AddOrUpdateCondition`: metav1.Condition with
  observedGeneration; Accepted/"Accepted"/"ProvisioningRequest is accepted by ClusterAutoscaler", then
  Provisioned/"CapacityIsProvisioned"/"Capacity is found in the cluster"), written to the status subresource.

With `fail_zones`, a request whose template selects one of those zones is not provisioned: it is marked Failed
(reason CapacityIsNotFound, conditions.go `CapacityIsNotFoundReason`; the types.go of the same API: "CA sets
'Failed=true' with Reason=CapacityIsNotFound" when it will not retry), as the autoscaler does when the zone has
no capacity for the gang.

A request whose template selects no zone is not provisioned (the error is kept for the test): nodes "anywhere"
would prove nothing about the zone geosched chose.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from geosched.kube.client import Kube
from tests.kubeapi.real_nodes import eks_node, gke_node
from tests.realkube.nodes import A100, GPU_TAINT, H100, MACHINES, kwok
from tests.realkube.poller import Poller

Obj = dict[str, Any]
API = "/apis/autoscaling.x-k8s.io/v1"
ZONE, ACCELERATOR, NODEPOOL = ("topology.kubernetes.io/zone", "cloud.google.com/gke-accelerator",
                               "cloud.google.com/gke-nodepool")
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# GPU feature discovery's product name per EKS GPU instance type (nodes.py H100, A100).
PRODUCT_FOR = {"p5.48xlarge": H100, "p4d.24xlarge": A100}
# The taint of the GPU node group cluster-autoscaler scales on EKS: as geosched's own groups are tainted
# (providers/nodegroups/spec.py GPU_TAINT); EKS taints nothing by default, so a platform team sets one.
EKS_GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
QUEUED = "cloud.google.com/gke-queued"
QUEUED_TAINT = {"key": QUEUED, "value": "true", "effect": "NoSchedule"}
MADE_BY = "realkube.test/provisioning-controller"  # marks the nodes this controller made: the request's name
# (accelerator, GPUs per pod) -> the GKE machine type that carries them (Compute Engine "GPU machine types").
MACHINE_FOR = {("nvidia-h100-80gb", 8): "a3-highgpu-8g", ("nvidia-l4", 4): "g2-standard-48"}
ACCEPTED_MSG = "ProvisioningRequest is accepted by ClusterAutoscaler"
FAILED_REASON, FAILED_MSG = "CapacityIsNotFound", "Capacity is not found, CA will not retry"
PROVISIONED_REASON, PROVISIONED_MSG = "CapacityIsProvisioned", "Capacity is found in the cluster"


def request_nodes(request: Obj, templates: dict[str, Obj], *, project: str, region: str,
                  zone_ids: dict[str, str] | None = None, taken: Collection[str] = ()) -> list[Obj]:
    """The Nodes a request's pod sets come up as. Pure; ValueError when a template selects no zone or no GPU. A
    template selecting a zone and an instance type (and no GKE accelerator) comes up as EKS nodes (`_eks_nodes`),
    named by addresses no node of `taken` (the names of the nodes up already) has."""
    out = []
    for pod_set in request["spec"]["podSets"]:
        template = templates[pod_set["podTemplateRef"]["name"]]["template"]
        spec = template.get("spec") or {}
        selector = spec.get("nodeSelector") or {}
        if selector.get(ZONE) and selector.get(INSTANCE_TYPE) and not selector.get(ACCELERATOR):
            out += _eks_nodes(request, pod_set, selector, region=region, zone_ids=zone_ids or {},
                              taken={*taken, *(n["metadata"]["name"] for n in out)})
            continue
        if not selector.get(ZONE) or not selector.get(ACCELERATOR):
            raise ValueError(f"{request['metadata']['name']}: the pod template selects no {ZONE} and "
                             f"{ACCELERATOR} ({selector})")
        gpus = max(int((c.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu")
                       or (c.get("resources") or {}).get("requests", {}).get("nvidia.com/gpu") or 0)
                   for c in spec["containers"])
        instance = MACHINE_FOR[(selector[ACCELERATOR], gpus)]
        digest = hashlib.sha256(f"{request['metadata']['uid']}/{pod_set['podTemplateRef']['name']}".encode()
                                ).hexdigest()
        pool = selector.get(NODEPOOL) or f"dws-{digest[:8]}"
        for i in range(int(pod_set["count"])):
            suffix = hashlib.sha256(f"{digest}/{i}".encode()).hexdigest()[:4]
            name = f"gke-{pool}-{digest[8:16]}-{suffix}"
            node = gke_node(name, project=project, region=region, zone=selector[ZONE], instance_type=instance,
                            accelerator=selector[ACCELERATOR], pool=pool, gpus=MACHINES[instance][4])
            node["metadata"]["labels"][QUEUED] = "true"
            node["metadata"]["annotations"] = {MADE_BY: request["metadata"]["name"]}
            out.append(kwok(node, [GPU_TAINT, QUEUED_TAINT]))
    return out


def _eks_nodes(request: Obj, pod_set: Obj, selector: Obj, *, region: str,
               zone_ids: dict[str, str], taken: Collection[str]) -> list[Obj]:
    """A pod set's nodes as cluster-autoscaler brings them up on EKS: nodes of the managed node group it scales
    (eks.amazonaws.com/nodegroup `ca-gpu-<hash>`), shaped as EKS registers them (tests/kubeapi/real_nodes.py
    `eks_node`: zone name and zone ID, instance type, providerID), with GPU feature discovery's labels."""
    instance_type, zone = selector[INSTANCE_TYPE], selector[ZONE]
    digest = hashlib.sha256(f"{request['metadata']['uid']}/{pod_set['podTemplateRef']['name']}".encode()).hexdigest()
    out: list[Obj] = []
    # EKS names a node by its private address: two requests' nodes up at once (two gangs) take different ones.
    free = iter(range(10, 255))
    for i in range(int(pod_set["count"])):
        while True:
            node = eks_node(f"10.0.40.{next(free)}", region=region, zone=zone, zone_id=zone_ids[zone],
                            instance_type=instance_type, product=PRODUCT_FOR[instance_type],
                            instance_id=f"i-0{digest[:8]}{i:08x}", nodegroup=f"ca-gpu-{digest[:8]}",
                            gpus=MACHINES[instance_type][4])
            if node["metadata"]["name"] not in taken:
                break
        node["metadata"]["annotations"] = {MADE_BY: request["metadata"]["name"]}
        out.append(kwok(node, [EKS_GPU_TAINT]))
    return out


def provisioned_status(request: Obj, now: datetime, *, failed: bool = False) -> Obj:
    """The request's status once its nodes exist (or, `failed`, once the autoscaler gave up on it), as
    cluster-autoscaler writes it. Pure."""
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    generation = request["metadata"].get("generation", 1)

    def cond(kind: str, reason: str, message: str) -> Obj:
        return {"type": kind, "status": "True", "observedGeneration": generation, "lastTransitionTime": stamp,
                "reason": reason, "message": message}

    last = (cond("Failed", FAILED_REASON, FAILED_MSG) if failed else
            cond("Provisioned", PROVISIONED_REASON, PROVISIONED_MSG))
    return {"conditions": [cond("Accepted", "Accepted", ACCEPTED_MSG), last]}


class ProvisioningController(Poller):
    """Polls the ProvisioningRequests of `namespace` on `context` and provisions each once (a thread; `with` it);
    the nodes of a request that is gone are deleted, and every node it made is deleted when it stops."""

    def __init__(self, plane: Any, context: str, namespace: str, *, project: str = "ml-platform-prod",
                 region: str = "us-central1", zone_ids: dict[str, str] | None = None, poll_s: float = 0.2,
                 fail_zones: frozenset[str] = frozenset()) -> None:
        super().__init__(plane, context, "provisioning-controller", poll_s)
        self.fail_zones = fail_zones
        self.failed: list[tuple[str, str, str]] = []  # (name, uid, zone) of each request refused
        self.uids: dict[str, str] = {}  # request name -> the uid of the request of that name handled
        self.namespace, self.project, self.region, self.zone_ids = namespace, project, region, zone_ids
        self.made: dict[str, list[Obj]] = {}  # request name -> the nodes made for it
        self.seen: dict[str, Obj] = {}  # request name -> the request as first seen, with its templates

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        with self.plane.kube(self.context) as kube:
            for nodes in self.made.values():
                for node in nodes:
                    if kube.get(f"/api/v1/nodes/{node['metadata']['name']}") is not None:
                        kube.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")

    def sync(self, kube: Kube) -> None:
        requests = kube.list_all(f"{API}/namespaces/{self.namespace}/provisioningrequests")[0]
        names = {r["metadata"]["name"] for r in requests}
        for request in requests:
            name, uid = request["metadata"]["name"], request["metadata"]["uid"]
            if name in self.made and self.uids.get(name) == uid:
                continue
            if name in self.made:  # a new request under a name handled before (geosched's own, zone by zone)
                for node in self.made.pop(name):
                    kube.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")
            self.uids[name] = uid
            templates = {ps["podTemplateRef"]["name"]: kube.request(
                "GET", f"/api/v1/namespaces/{self.namespace}/podtemplates/{ps['podTemplateRef']['name']}")
                for ps in request["spec"]["podSets"]}
            self.seen[name] = {"request": request, "templates": templates}
            zones = {(t["template"].get("spec") or {}).get("nodeSelector", {}).get(ZONE) for t in templates.values()}
            refused = sorted(z for z in zones if z in self.fail_zones)
            if refused:
                self.made[name] = []
                self.failed.append((name, uid, refused[0]))
                kube.request("PATCH", f"{API}/namespaces/{self.namespace}/provisioningrequests/{name}/status",
                             body={"status": provisioned_status(request, datetime.now(UTC), failed=True)},
                             content_type="application/merge-patch+json")
                continue
            try:
                nodes = request_nodes(request, templates, project=self.project, region=self.region,
                                      zone_ids=self.zone_ids,
                                      taken={n["metadata"]["name"] for made in self.made.values() for n in made})
            except (ValueError, KeyError) as exc:
                if repr(exc) not in self.errors:
                    self.errors.append(repr(exc))
                continue
            for node in nodes:
                kube.request("POST", "/api/v1/nodes", body=node)
            self.made[name] = nodes
            kube.request("PATCH", f"{API}/namespaces/{self.namespace}/provisioningrequests/{name}/status",
                         body={"status": provisioned_status(request, datetime.now(UTC))},
                         content_type="application/merge-patch+json")
        for name in [n for n in self.made if n not in names]:  # the request is gone: so are its nodes
            for node in self.made.pop(name):
                kube.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")
