"""Wait until new capacity has joined a cluster: the nodes a label selects exist and are Ready.

`geosched up` creates a node group, and its machines become Nodes only when their kubelets register and report
Ready, minutes after the cloud calls the group ACTIVE. This polls the Nodes the group's label selects (a LIST with
a label selector; a watch would save little at one request per poll and resumes badly across an expired
resourceVersion) until `expected` of them are Ready, or a deadline on an injectable clock passes, and then says in
one line how many came up and, from their own conditions, why the others are not Ready.

What counts (Kubernetes docs, "Nodes", Node status "Conditions"): a node is Ready when its `Ready` condition is
`True`; `False` means the kubelet says it is unhealthy (its reason and message say why, such as `KubeletNotReady`
with "container runtime network not ready ... cni plugin not initialized" while the VPC CNI starts), `Unknown`
that the node controller heard nothing from the kubelet for the grace period (`NodeStatusUnknown`, or
`NodeStatusNeverUpdated` for a kubelet that never posted). A node with no `Ready` condition has not posted status.
A cordoned node (`spec.unschedulable`) is not counted: the gang could not be placed there. Nor is a Ready node that
still carries a taint the node controller sets from conditions (`node.kubernetes.io/not-ready`, `unreachable`,
`network-unavailable`, the pressure taints: Kubernetes docs, "Well-Known Labels, Annotations and Taints"): every
node registers with `not-ready:NoSchedule` and keeps it for a moment after it reports Ready, and the placement
leaves out nodes with taints its pods do not tolerate. So is the taint the kubelet of a cloud's node registers with
until the cloud controller manager has initialised the node (`node.cloudprovider.kubernetes.io/uninitialized`, same
page; EKS and GKE run their cloud provider external).

A GPU node is joined only once its GPUs are allocatable (`needs`: `up` passes `nvidia.com/gpu`): the kubelet reports
Ready before the NVIDIA device plugin or GKE's driver installer and device plugin have advertised them, minutes
later (kubernetes/autoscaler cluster-autoscaler: "allocatable GPU may be equal to 0 up to 15 minutes after" a node
becomes Ready, so it counts such a node unready,
processors/customresources/gpu_processor.go; GKE auto-repairs a node only after 15 minutes of unallocatable GPUs).
Placed on at once, the gang found no GPU on its own new nodes and `up` deleted the group it had just bought.
Where that plugin runs differs: the EKS-optimized Bottlerocket NVIDIA AMIs ship it, but with the EKS-optimized AL2023
NVIDIA AMIs (what `up` creates EKS groups with) the cluster's owner must install it, by its Helm chart or the NVIDIA
GPU operator (Amazon EKS User Guide, "Install Kubernetes device plugin for GPUs", Considerations); GKE installs its
own. Without it the GPUs never become allocatable, so the error at the deadline says so for the nodes that are Ready
but advertise none (`unadvertised`), rather than leaving the user to read 900 s of billed waiting as slowness.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from geosched.core.errors import GeoschedError
from geosched.kube import keys
from geosched.kube.client import NODES, Kube, Resource
from geosched.kube.quantity import whole_count

# Taints a node carries while it is not yet (or no longer) fit for pods, removed by the node lifecycle controller or
# the cloud controller manager, never by the user.
CONDITION_TAINTS = frozenset({*(f"node.kubernetes.io/{t}" for t in (
    "not-ready", "unreachable", "network-unavailable", "unschedulable", "memory-pressure", "disk-pressure",
    "pid-pressure")), "node.cloudprovider.kubernetes.io/uninitialized"})
# What a DaemonSet's name or image holds when it advertises GPUs (`plugin_seen`).
PLUGIN_MARKS = ("device-plugin", "gpu-operator")
DAEMONSETS = Resource("apps/v1", "DaemonSet", "daemonsets", True)
# How many not-Ready nodes the error names (the rest are counted): the line stays one line for a 450-node group.
NAMED = 3


class NodesNotReady(GeoschedError):
    """The nodes did not all join and become Ready before the deadline (an environment failure: exit 1)."""


@dataclass(frozen=True, slots=True)
class NodeState:
    name: str
    ready: bool
    why: str  # empty when ready


def selector_text(labels: Mapping[str, str]) -> str:
    """A label selector as the API's `labelSelector` parameter takes it (equality terms, comma-joined)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def node_state(node: Mapping[str, Any], needs: str | None = None) -> NodeState:
    """Whether one Node (the API's JSON) is Ready, and if not, why, from its conditions; with `needs` (an extended
    resource), only once some of it is allocatable. Pure."""
    name = str((node.get("metadata") or {}).get("name", "?"))
    conditions = [c for c in ((node.get("status") or {}).get("conditions") or []) if isinstance(c, Mapping)]
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None:
        return NodeState(name, False, "no Ready condition (its kubelet has not posted status)")
    if ready.get("status") != "True":
        said = ": ".join(str(x) for x in (ready.get("reason"), ready.get("message")) if x)
        why = f"Ready={ready.get('status', '?')}" + (f" ({said})" if said else "")
        # Pressure conditions name the cause when the kubelet reports one (Node status, "Conditions").
        pressure = [str(c.get("type")) for c in conditions if c.get("type") != "Ready" and c.get("status") == "True"]
        return NodeState(name, False, why + (f", {', '.join(pressure)}" if pressure else ""))
    if (node.get("spec") or {}).get("unschedulable"):
        return NodeState(name, False, "cordoned (spec.unschedulable)")
    tainted = sorted({str(t.get("key")) for t in ((node.get("spec") or {}).get("taints") or [])
                      if isinstance(t, Mapping) and t.get("key") in CONDITION_TAINTS})
    if tainted:
        return NodeState(name, False, f"Ready, still tainted {', '.join(tainted)}")
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    if needs is not None and not whole_count(allocatable.get(needs) if isinstance(allocatable, Mapping) else None):
        return NodeState(name, False, unadvertised(needs))
    return NodeState(name, True, "")


def unadvertised(needs: str) -> str:
    """Why a Ready node does not count yet: it advertises none of `needs`. Pure."""
    return f"Ready, no allocatable {needs} yet (its device plugin has not advertised them)"


def plugin_hint(states: Sequence[NodeState], needs: str | None) -> str | None:
    """At the deadline, what the nodes that are Ready but advertise none of `needs` most likely lack, None when no
    node is in that state. Pure."""
    count = sum(not s.ready and s.why == unadvertised(needs) for s in states) if needs is not None else 0
    if not count:
        return None
    plugin = "the NVIDIA device plugin (or GPU operator)" if needs == keys.GPU else "its device plugin"
    hint = (f"{count} Ready node{'s' if count != 1 else ''} advertise{'' if count != 1 else 's'} no {needs}: "
            f"is {plugin} running in the cluster?")
    if needs == keys.GPU:
        hint += " (the EKS-optimized AL2023 NVIDIA AMIs need it installed; Bottlerocket's and GKE's bring their own)"
    return hint


def plugin_seen(nodes: Sequence[Mapping[str, Any]], daemonsets: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the cluster shows a way for new nodes' GPUs to be advertised: a node already has allocatable
    `nvidia.com/gpu`, or a DaemonSet, by its name or a container image, is a device plugin or NVIDIA's GPU operator
    (NVIDIA's chart: `nvidia-device-plugin`, image `nvcr.io/nvidia/k8s-device-plugin`; the GPU operator runs its own
    `nvidia-device-plugin-daemonset`; GKE: `nvidia-gpu-device-plugin-*` in kube-system). Pure."""
    for node in nodes:
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        if isinstance(allocatable, Mapping) and whole_count(allocatable.get(keys.GPU)):
            return True
    for ds in daemonsets:
        pod = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        containers = [*(pod.get("containers") or []), *(pod.get("initContainers") or [])]
        names = [str((ds.get("metadata") or {}).get("name", "")),
                 *(str(c.get("image", "")) for c in containers if isinstance(c, Mapping))]
        if any(mark in n for n in names for mark in PLUGIN_MARKS):
            return True
    return False


def plugin_warning(kube: Kube) -> str | None:
    """Before capacity is bought: the warning when the cluster shows no GPU advertised and no device plugin
    (`plugin_seen`), else None. Only a warning, never a refusal: a cluster may bring its plugin with the nodes
    (GKE installs driver and plugin itself). A read the API refuses (RBAC on DaemonSets) says nothing."""
    try:
        nodes, _ = kube.list_all(NODES.path())
        daemonsets, _ = kube.list_all(DAEMONSETS.path())
    except ApiException:
        return None
    if plugin_seen(nodes, daemonsets):
        return None
    return (f"no node of cluster {kube.name} advertises {keys.GPU} and no NVIDIA device plugin (or GPU operator) "
            "DaemonSet runs there: the new nodes' GPUs may never become allocatable, and `up` would wait "
            "--join-timeout for them (the EKS-optimized AL2023 NVIDIA AMIs need the plugin installed: Amazon EKS "
            "User Guide, \"Install Kubernetes device plugin for GPUs\")")


def shortfall(states: Sequence[NodeState], expected: int, what: str, timeout_s: float,
              needs: str | None = None) -> str:
    """The one line saying how many of how many came up within `timeout_s` and why the others did not, nodes with
    the same cause said together (a whole group usually fails alike), names and causes bounded by `NAMED`; with
    `needs`, the likely cause when Ready nodes advertise none of it (`plugin_hint`). Pure."""
    up = sum(s.ready for s in states)
    line = f"{up} of {expected} nodes of {what} Ready after {timeout_s:g} s"
    by_why: dict[str, list[str]] = {}
    for s in states:
        if not s.ready:
            by_why.setdefault(s.why, []).append(s.name)
    parts = []
    for why, names in list(by_why.items())[:NAMED]:
        more = f" and {len(names) - NAMED} more" if len(names) > NAMED else ""
        parts.append(f"{len(names)} not Ready ({', '.join(names[:NAMED])}{more}): {why}")
    if len(by_why) > NAMED:
        parts.append(f"{sum(len(n) for n in list(by_why.values())[NAMED:])} more not Ready for other reasons")
    missing = expected - len(states)
    if missing > 0:
        parts.append(f"{missing} not registered")
    if (hint := plugin_hint(states, needs)) is not None:
        parts.append(hint)
    return line + ("; " + "; ".join(parts) if parts else "")


def ready_nodes(states: Sequence[NodeState], expected: int) -> tuple[str, ...] | None:
    """The Ready nodes' names once at least `expected` are Ready, else None. Pure."""
    names = tuple(sorted(s.name for s in states if s.ready))
    return names if len(names) >= expected else None


def wait_ready(kube: Kube, labels: Mapping[str, str], expected: int, *, what: str, timeout_s: float,
               needs: str | None = None, poll_s: float = 5.0, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> tuple[str, ...]:
    """Poll the Nodes `labels` select until `expected` are Ready (with `needs` allocatable); their names.
    `NodesNotReady` (one line) when the deadline passes first. The API's own errors (after the client's retries)
    propagate."""
    start = clock()
    selector = selector_text(labels)
    while True:
        found, _ = kube.list_all(NODES.path(), label_selector=selector)
        states = [node_state(n, needs) for n in found]
        names = ready_nodes(states, expected)
        if names is not None:
            return names
        waited = clock() - start
        if waited >= timeout_s:
            raise NodesNotReady(shortfall(sorted(states, key=lambda s: s.name), expected, what, timeout_s, needs))
        sleep(min(poll_s, max(0.0, timeout_s - waited)))
