"""`geosched up` of an 8-node H100 gang end to end on the real control plane, into the EKS-shaped and the GKE-shaped
cluster, by the very code of scripts/up-demo (tests/realkube/updemo.py `demo`) on the session's plane: so the README's
command cannot rot apart from this test, and CI runs the flow once.

EKS: a managed node group made on moto's EKS (real boto3) through the fault proxy (which answers the placement group
calls moto lacks), its machines joining as kwok Nodes (tests/realkube/nodegroups.py, the test controller standing in
for EKS). GKE: a node pool on the GKE REST double (google-cloud-container unchanged), its machines joining likewise
(`NodepoolController`: the labels and GPU taint GKE sets). In each, geosched waits for them to be Ready, places the
gang on exactly them, the real kube-scheduler binds every pod there, and `geosched down` leaves no group, pool,
node, placement group or launch template behind.

The moto cluster has one subnet, in use1-az6 (moto names it us-east-1a as the plane's EKS account does), so the new
nodes sit in the zone of the cluster's own two p5 nodes, which are free: only the restriction to the new group keeps
the gang off them. The double's GKE cluster is regional in us-central1, where the shipped catalog offers
a3-highgpu-8g in zones a, b and c; the plane's cluster already has free H100 nodes in us-central1-a and -b.

Beyond what `demo` checks itself (exit codes, one group made, 8 nodes joined, every pod Running on exactly them in
the zone geosched chose, nothing left), this pins what it only prints: the outcome, the group's and pool's shape,
the GKE node's labels, providerID and taint, and the usage ledger charging the EKS group while it exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.report.ledger import ledger_intervals
from geosched.store.db import Store
from tests.providers.eks_support import clients
from tests.realkube.plane import EKS, GKE, Plane
from tests.realkube.updemo import EKS_ZONE, EKS_ZONE_ID, GKE_PROJECT, Clouds, Flow, demo

pytestmark = pytest.mark.realkube


def charged(home: Path) -> list[tuple[str | None, str | None, str | None, str | None, bool]]:
    """(job, cluster, zone, instance type, still open) of each usage ledger interval."""
    with Store(home) as store:
        return [(i.job, i.cluster, i.zone, i.instance_type, i.end is None) for i in ledger_intervals(store)]


def eks(stage: str, flow: Flow, clouds: Clouds) -> None:
    if stage == "running":
        assert (flow.outcome["kind"], flow.outcome["status"], flow.outcome["cluster"], flow.outcome["zones"]) == (
            "SubmitOutcome", "applied", EKS, [EKS_ZONE_ID])
        assert flow.group.startswith("up-h100-")
        assert {(b.zone, b.fleet_zone, b.accelerator) for b in flow.bound} == {
            (EKS_ZONE, EKS_ZONE_ID, "NVIDIA-H100-80GB-HBM3")}
    elif stage == "ended":
        # The group is charged to the job, node by node, while it exists: idle now that the job is gone.
        assert charged(flow.home) == [("train", EKS, EKS_ZONE_ID, "p5.48xlarge", True)] * 8
    else:
        assert charged(flow.home) == [("train", EKS, EKS_ZONE_ID, "p5.48xlarge", False)] * 8
        # The group was made in a cluster placement group of its own (8 x p5.48xlarge), with a launch template
        # naming it: both gone with it (demo's list of what is left says so too).
        assert clouds.front.log.count(method="CreatePlacementGroup", status=200) == 1
        assert clouds.front.placement_groups("us-east-1") == {}
        assert clients(clouds.moto.url)[1].describe_launch_templates()["LaunchTemplates"] == []


def gke(stage: str, flow: Flow, clouds: Clouds, plane: Plane) -> None:
    if stage != "running":
        return
    [(key, pool)] = clouds.gke.pools().items()
    assert key.rsplit("/", 1)[-1] == flow.group and flow.group.startswith("up-gke-")
    [zone] = pool["locations"]
    assert (pool["config"]["machineType"], pool["initialNodeCount"], pool["placementPolicy"]) == (
        "a3-highgpu-8g", 8, {"type": "COMPACT"})
    assert (flow.outcome["kind"], flow.outcome["status"], flow.outcome["cluster"], flow.outcome["zones"]) == (
        "SubmitOutcome", "applied", GKE, [zone])
    with plane.kube(GKE) as kube:
        node = kube.request("GET", f"/api/v1/nodes/{flow.nodes[0]}")
    labels = node["metadata"]["labels"]
    assert (labels["cloud.google.com/gke-accelerator"], labels["topology.kubernetes.io/zone"],
            labels["node.kubernetes.io/instance-type"], labels["geosched.io/gang"]) == (
        "nvidia-h100-80gb", zone, "a3-highgpu-8g", "up-gke")
    assert node["spec"]["providerID"] == f"gce://{GKE_PROJECT}/{zone}/{flow.nodes[0]}"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert {(b.zone, b.accelerator) for b in flow.bound} == {(zone, "nvidia-h100-80gb")}


def test_up_puts_an_8_node_h100_gang_on_new_eks_and_gke_capacity_and_down_leaves_nothing(
        realkube: Plane, tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def on(stage: str, flow: Flow, clouds: Clouds) -> None:
        seen.append((flow.context, stage))
        if flow.context == EKS:
            eks(stage, flow, clouds)
        else:
            gke(stage, flow, clouds, realkube)

    printed: list[str] = []
    left = demo(realkube, tmp_path, printed.append, on)
    assert seen == [(c, s) for c in (EKS, GKE) for s in ("running", "ended", "down")]
    assert left and not any(left.values()), left
    # What the user sees: each geosched command, then its pods with their node and zone.
    commands = [line.split(" geosched ", 1)[1].split()[:1] for line in printed
                if line.startswith("$ ") and " geosched " in line]
    assert commands == [["up"], ["down"], ["up"], ["down"]], printed
    assert sum(" Running " in line and " zone " in line for line in printed) == 16, printed
