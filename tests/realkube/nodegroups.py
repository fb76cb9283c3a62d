"""A test controller standing in for EKS's node group machinery: it watches moto's EKS node groups (real boto3
against moto's server) and makes each ACTIVE group's machines join one real cluster as kwok Nodes, shaped as EKS
registers them, and removes them when the group is deleted. Test code, not product: geosched only ever sees the
cloud's API and the cluster's Nodes, exactly as on EKS.

What a node of a managed node group looks like, each from its source:
- the labels of an EKS managed node group node (tests/kubeapi/real_nodes.py `eks_node`: `kubectl get node -o yaml`
  on EKS, with kubernetes/cloud-provider-aws's topology.k8s.aws/zone-id): eks.amazonaws.com/nodegroup <the group>,
  eks.amazonaws.com/capacityType <the group's ON_DEMAND|SPOT>, node.kubernetes.io/instance-type, topology
  region/zone and zone ID, the name `ip-a-b-c-d.ec2.internal` from an address of the group's subnet, providerID
  `aws:///<zone name>/<instance id>`; the GPU operator's GFD labels, as on the cluster's other nodes (plane.py);
- the group's own `labels` and `taints` (EKS User Guide, "Managed node groups" / node-taints-managed-node-groups:
  applied to every node; the API's NO_SCHEDULE | NO_EXECUTE | PREFER_NO_SCHEDULE become the node's NoSchedule |
  NoExecute | PreferNoSchedule);
- capacity and allocatable of the instance type, nvidia.com/gpu and vpc.amazonaws.com/efa included (nodes.py
  `MACHINES`, `EFA`, with their sources).

`NodepoolController` does the same for GKE node pools on the GKE REST double (geosched_emulators/gke.py, read with
google-cloud-container): each RUNNING pool's machines join as kwok Nodes shaped as GKE registers them
(tests/kubeapi/real_nodes.py `gke_node`: cloud.google.com/gke-nodepool <the pool>, cloud.google.com/gke-accelerator
<the pool's accelerator type>, topology.kubernetes.io/zone <the pool's zone>, node.kubernetes.io/instance-type,
the name gke-<cluster>-<pool>-<8 hex>-<4 chars> and providerID gce://<project>/<zone>/<name> as cloud-provider-gcp
sets them), with the pool's own `config.labels` and `config.taints`, plus the taint GKE puts on every GPU node,
nvidia.com/gpu=present:NoSchedule (GKE docs, "Run GPUs in GKE Standard node pools"); no GFD labels, as the plane's
GKE cluster runs no GPU operator (nodes.py).

`gpus_after_s` makes machines whose GPUs are advertised that long after they register Ready: their Nodes come with
no nvidia.com/gpu in capacity or allocatable, then the controller puts it there, as the NVIDIA device plugin does
once it registers with the kubelet (EKS AL2023 NVIDIA AMIs run it as a DaemonSet; kubernetes/autoscaler's
cluster-autoscaler: "allocatable GPU may be equal to 0 up to 15 minutes after" the node is Ready).

`zones` says, per zone ID, what a group's machines there do (`READY`, the default; `NOT_READY`; `NONE`: no machine
ever registers, as when the cloud accepted the group but never delivered its instances, or their bootstrap could not
reach the API server); `ready=False` is `NOT_READY` in every zone. NOT_READY makes machines whose kubelet registers
but never becomes Ready, as an EKS node does whose VPC CNI
never starts: kwok does not run them (no kwok annotation), and their Ready condition is the one the kubelet posts
then (`KubeletNotReady`, "container runtime network not ready: NetworkReady=false
reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized").
"""

from __future__ import annotations

import hashlib
import ipaddress
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3  # type: ignore[import-untyped]

from geosched.kube.client import Kube
from tests.kubeapi.real_nodes import eks_node, gke_node
from tests.realkube.cluster import KWOK_NODE
from tests.realkube.nodes import A100, GPU_TAINT, H100, MACHINES, kwok
from tests.realkube.poller import Poller

Obj = dict[str, Any]
NODEGROUP = "eks.amazonaws.com/nodegroup"
CAPACITY_TYPE = "eks.amazonaws.com/capacityType"
MADE_BY = "realkube.test/nodegroup-controller"  # marks the nodes this controller made (it deletes only those)
PRODUCT = {"p5.48xlarge": H100, "p4d.24xlarge": A100}
EFFECT = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
READY, NOT_READY, NONE = "ready", "not-ready", "none"
CNI_NOT_READY = ("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
                 "message:Network plugin returns error: cni plugin not initialized")


def group_nodes(group: Obj, subnet: Obj, region: str, *, ready: bool = True) -> list[Obj]:
    """The Nodes the group's machines register as (one per desiredSize). Pure."""
    instance = group["instanceTypes"][0]
    net = ipaddress.ip_network(subnet["CidrBlock"])
    zone, zone_id = subnet["AvailabilityZone"], subnet["AvailabilityZoneId"]
    out = []
    for i in range(int(group["scalingConfig"]["desiredSize"])):
        ip = str(net.network_address + 10 + i)
        instance_id = "i-0" + hashlib.sha256(f"{group['nodegroupArn']}/{i}".encode()).hexdigest()[:16]
        node = eks_node(ip, region=region, zone=zone, zone_id=zone_id, instance_type=instance,
                        product=PRODUCT[instance], instance_id=instance_id, nodegroup=group["nodegroupName"],
                        gpus=MACHINES[instance][4])
        labels = node["metadata"]["labels"]
        labels[CAPACITY_TYPE] = group.get("capacityType") or "ON_DEMAND"
        labels.update(group.get("labels") or {})
        node["metadata"]["annotations"] = {MADE_BY: group["nodegroupArn"].rsplit("/", 1)[-1]}
        taints = [{"key": t["key"], **({"value": t["value"]} if t.get("value") else {}),
                   "effect": EFFECT[t["effect"]]} for t in group.get("taints") or []]
        node = kwok(node, taints)
        if not ready:
            del node["metadata"]["annotations"][KWOK_NODE]
            now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            node["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                             "message": CNI_NOT_READY, "lastHeartbeatTime": now,
                                             "lastTransitionTime": now}]
        out.append(node)
    return out


class _InStep(Poller):
    """Keeps the real cluster's Nodes in step with a cloud's pools (`sync` reads them): a pool ready for the first
    time gets its Nodes, the Nodes this made for a pool that is gone are deleted."""

    def __init__(self, plane: Any, context: str, name: str, *, cluster: str, region: str, ready: bool,
                 poll_s: float) -> None:
        super().__init__(plane, context, name, poll_s)
        self.cluster, self.region, self.ready = cluster, region, ready
        self.made: dict[str, list[str]] = {}  # pool -> node names

    def __exit__(self, *exc: object) -> None:
        """Stopped, every Node this made is deleted: a pool deleted just before (the test's `down`) may not have been
        seen by a last sync, and Nodes left on the shared plane change what later tests see (they did: three p5
        Nodes left in us-east-1a made the scheduler's rollback test wait for pods it never needed)."""
        super().__exit__(*exc)
        with self.plane.kube(self.context) as kube:
            for names in self.made.values():
                for name in names:
                    if kube.get(f"/api/v1/nodes/{name}") is not None:
                        kube.request("DELETE", f"/api/v1/nodes/{name}")
            self.made.clear()

    def _in_step(self, kube: Kube, ready: dict[str, Obj], nodes_of: Callable[[Obj], list[Obj]], label: str) -> None:
        for name, pool in ready.items():
            if name not in self.made:
                nodes = nodes_of(pool)
                for node in nodes:
                    kube.request("POST", "/api/v1/nodes", body=node)
                self.made[name] = [n["metadata"]["name"] for n in nodes]
        for name in [g for g in self.made if g not in ready]:
            for node in kube.list_all("/api/v1/nodes", label_selector=f"{label}={name}")[0]:
                if MADE_BY in (node["metadata"].get("annotations") or {}):
                    kube.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")
            del self.made[name]


class NodegroupController(_InStep):
    """Polls moto's node groups of `cluster` and keeps the real cluster's Nodes in step (a thread; `with` it)."""

    def __init__(self, moto_url: str, cluster: str, plane: Any, context: str, *, region: str = "us-east-1",
                 ready: bool = True, zones: dict[str, str] | None = None, poll_s: float = 0.2,
                 gpus_after_s: float | None = None) -> None:
        super().__init__(plane, context, "nodegroup-controller", cluster=cluster, region=region, ready=ready,
                         poll_s=poll_s)
        self.zones = zones or {}
        self.gpus_after_s = gpus_after_s
        self.withheld: dict[str, tuple[float, dict[str, str]]] = {}  # node -> (registered at, its GPU resources)
        self.advertised: list[str] = []  # nodes whose GPUs were put in their status late, in order
        kw = {"region_name": region, "endpoint_url": moto_url, "aws_access_key_id": "testing",
              "aws_secret_access_key": "testing"}
        self.eks, self.ec2 = boto3.client("eks", **kw), boto3.client("ec2", **kw)

    def sync(self, kube: Kube) -> None:
        names = self.eks.list_nodegroups(clusterName=self.cluster)["nodegroups"]
        active = {}
        for name in names:
            try:
                group = self.eks.describe_nodegroup(clusterName=self.cluster, nodegroupName=name)["nodegroup"]
            except self.eks.exceptions.ResourceNotFoundException:
                continue  # deleted between the list and this describe: it is gone (the race failed a run once)
            if group["status"] == "ACTIVE":
                active[name] = group
        self._in_step(kube, active, self._nodes, NODEGROUP)
        for name, (registered, gpus) in list(self.withheld.items()):
            if time.monotonic() - registered >= (self.gpus_after_s or 0.0):
                node = kube.get(f"/api/v1/nodes/{name}")
                if node is not None:  # not deleted with its group meanwhile
                    status = {k: {**node["status"][k], **gpus} for k in ("capacity", "allocatable")}
                    kube.request("PATCH", f"/api/v1/nodes/{name}/status", body={"status": status},
                                 content_type="application/merge-patch+json")
                    self.advertised.append(name)
                del self.withheld[name]

    def _nodes(self, group: Obj) -> list[Obj]:
        [subnet] = self.ec2.describe_subnets(SubnetIds=group["subnets"][:1])["Subnets"]
        mode = self.zones.get(subnet["AvailabilityZoneId"], READY if self.ready else NOT_READY)
        if mode == NONE:
            return []
        nodes = group_nodes(group, subnet, self.region, ready=mode == READY)
        if self.gpus_after_s is not None:
            for node in nodes:
                gpus = {"nvidia.com/gpu": node["status"]["allocatable"].pop("nvidia.com/gpu")}
                del node["status"]["capacity"]["nvidia.com/gpu"]
                self.withheld[node["metadata"]["name"]] = (time.monotonic(), gpus)
        return nodes


NODEPOOL = "cloud.google.com/gke-nodepool"


def pool_nodes(pool: Obj, *, cluster: str, project: str, region: str) -> list[Obj]:
    """The Nodes a GKE node pool's machines register as (one per initialNodeCount, in its one zone). Pure."""
    config = pool.get("config") or {}
    instance = config["machineType"]
    [accelerator] = config.get("accelerators") or [{}]
    [zone] = pool["locations"]
    digest = hashlib.sha256(f"{project}/{cluster}/{pool['name']}".encode()).hexdigest()
    out = []
    for i in range(int(pool["initialNodeCount"])):
        suffix = hashlib.sha256(f"{digest}/{i}".encode()).hexdigest()[:4]
        name = f"gke-{cluster}-{pool['name']}-{digest[:8]}-{suffix}"
        node = gke_node(name, project=project, region=region, zone=zone, instance_type=instance,
                        accelerator=accelerator["acceleratorType"], pool=pool["name"], gpus=MACHINES[instance][4])
        node["metadata"]["labels"].update(config.get("labels") or {})
        node["metadata"]["annotations"] = {MADE_BY: pool["name"]}
        taints = [GPU_TAINT] + [{"key": t["key"], **({"value": t["value"]} if t.get("value") else {}),
                                 "effect": EFFECT[t["effect"]]} for t in config.get("taints") or []]
        out.append(kwok(node, taints))
    return out


class NodepoolController(_InStep):
    """Polls the GKE double's node pools of `cluster` (google-cloud-container, REST) and keeps the real cluster's
    Nodes in step (a thread; `with` it)."""

    def __init__(self, endpoint: str, project: str, location: str, cluster: str, plane: Any, context: str, *,
                 poll_s: float = 0.2) -> None:
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import container_v1

        super().__init__(plane, context, "nodepool-controller", cluster=cluster, region=location, ready=True,
                         poll_s=poll_s)
        self.client = container_v1.ClusterManagerClient(
            credentials=AnonymousCredentials(), client_options=ClientOptions(api_endpoint=endpoint),  # type: ignore[no-untyped-call]
            transport="rest")
        self.project, self.location = project, location

    def sync(self, kube: Kube) -> None:
        from google.cloud import container_v1

        parent = f"projects/{self.project}/locations/{self.location}/clusters/{self.cluster}"
        running = {}
        for pool in self.client.list_node_pools(parent=parent).node_pools:
            if pool.status == container_v1.NodePool.Status.RUNNING:
                running[pool.name] = container_v1.NodePool.to_dict(pool, use_integers_for_enums=False)
        self._in_step(kube, running, lambda pool: pool_nodes(_camel(pool), cluster=self.cluster,
                                                             project=self.project, region=self.region), NODEPOOL)


def _camel(pool: Obj) -> Obj:
    """The proto-plus dict (snake_case) in the REST shape (camelCase) `pool_nodes` reads."""
    config = pool.get("config") or {}
    return {"name": pool["name"], "locations": list(pool.get("locations") or []),
            "initialNodeCount": int(pool.get("initial_node_count") or 0),
            "config": {"machineType": config.get("machine_type"), "labels": dict(config.get("labels") or {}),
                       "accelerators": [{"acceleratorType": a.get("accelerator_type"),
                                         "acceleratorCount": a.get("accelerator_count")}
                                        for a in config.get("accelerators") or []],
                       "taints": [{"key": t.get("key"), "value": t.get("value"), "effect": t.get("effect")}
                                  for t in config.get("taints") or []]}}
