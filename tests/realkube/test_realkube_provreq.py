"""Queued provisioning on the real control plane: geosched renders a job placed in zone us-central1-c beside
Kueue's ProvisioningRequest admission check (geosched/kube/provreq.py), real Kueue v0.17.0 (its provisioning
controller running, the ProvisioningRequest CRD installed before it started: the `realkube_provreq` plane) makes
the ProvisioningRequest, a test controller standing in for GKE's Dynamic Workload Scheduler
(tests/realkube/provreq.py) brings 8 a3-highgpu-8g nodes up in the zone the request's pod template selects and
marks it Provisioned, Kueue admits the job, and the real kube-scheduler binds all 8 pods to those nodes.

The plane's GKE cluster has H100 nodes in us-central1-a and -b and none in us-central1-c: the pods can run only
on what the request brought up, and only if the zone reached the request.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from geosched.kube import keys, provreq
from geosched.kube.jobinput import read_job_file
from geosched.kube.submit import apply_manifests
from tests.realkube.cluster import condition
from tests.realkube.plane import GKE, Plane
from tests.realkube.provreq import MADE_BY, ProvisioningController
from tests.realkube.realkube_support import compact_job, job_pods_selector, pods, wait_all_running, wait_until

pytestmark = pytest.mark.realkube
ZONE = "us-central1-c"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
PROVREQS = "/apis/autoscaling.x-k8s.io/v1/namespaces/{ns}/provisioningrequests"


def test_a_gang_queued_through_a_provisioning_request_runs_on_nodes_made_in_the_zone_geosched_chose(
        realkube_provreq: Plane, tmp_path: Path) -> None:
    plane = realkube_provreq
    with plane.namespace("provreq", clusters=(GKE,)) as ns, plane.kube(GKE) as kube, \
            ProvisioningController(plane, GKE, ns) as controller:
        before = {n["metadata"]["name"] for n in kube.list_all("/api/v1/nodes")[0]}
        job = read_job_file(compact_job(tmp_path / "train.yaml", "train", workers=8, gpus=8))
        target = provreq.Target(zone=ZONE, gpu_label=keys.GKE_ACCELERATOR, gpu_value="nvidia-h100-80gb",
                                name=f"{ns}-dws")
        objs = provreq.render(job, target, queue="team-a", namespace=ns)
        cluster_scoped = [o for o in objs if "namespace" not in o["metadata"]]
        try:
            apply_manifests(kube, objs, default_namespace=ns)
            wait_until(lambda: condition(kube.get(f"{KUEUE}/admissionchecks/{target.name}") or {}, "Active"), 60,
                       what="the AdmissionCheck Active")
            # Kueue made the request from the job's pod template: the zone geosched chose is in it.
            [request] = wait_until(lambda: kube.list_all(PROVREQS.format(ns=ns))[0], 120,
                                   what="Kueue's ProvisioningRequest")
            assert request["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
            [pod_set] = request["spec"]["podSets"]
            assert pod_set["count"] == 8
            bound = wait_all_running(kube, ns, 8, job_pods_selector("train"), timeout=180)
            seen = controller.seen[request["metadata"]["name"]]
            [template] = seen["templates"].values()
            assert template["template"]["spec"]["nodeSelector"][keys.ZONE] == ZONE
            made = sorted(n["metadata"]["name"] for n in controller.made[request["metadata"]["name"]])
            assert len(made) == 8 and not set(made) & before
            # Every pod on a node the request brought up, all in the zone geosched chose, one per node.
            assert sorted(b.node or "" for b in bound) == made
            assert {(b.zone, b.accelerator) for b in bound} == {(ZONE, "nvidia-h100-80gb")}
            # Nothing came up elsewhere: the only new nodes are the request's, all in that zone.
            now = kube.list_all("/api/v1/nodes")[0]
            new = [n for n in now if n["metadata"]["name"] not in before]
            assert sorted(n["metadata"]["name"] for n in new) == made
            assert {n["metadata"]["labels"][keys.ZONE] for n in new} == {ZONE}
            assert all(n["metadata"]["annotations"][MADE_BY] == request["metadata"]["name"] for n in new)
            # Kueue admitted through the check, and told the pods which request they consume.
            [workload] = kube.list_all(f"{KUEUE}/namespaces/{ns}/workloads")[0]
            assert condition(workload, "Admitted")
            [check] = workload["status"]["admissionChecks"]
            assert (check["name"], check["state"]) == (target.name, "Ready")
            for pod in pods(kube, ns, job_pods_selector("train")):
                annotations = pod["metadata"].get("annotations") or {}
                assert annotations["autoscaling.x-k8s.io/consume-provisioning-request"] == \
                    request["metadata"]["name"]
            kube.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/train",
                         query={"propagationPolicy": "Background"})
            wait_until(lambda: not pods(kube, ns, job_pods_selector("train")), 120, what="the job's pods gone")
        finally:
            for obj in reversed(cluster_scoped):
                resource = kube.resource(obj["apiVersion"], obj["kind"])
                assert resource is not None
                if kube.get(resource.path(None, obj["metadata"]["name"])) is not None:
                    kube.request("DELETE", resource.path(None, obj["metadata"]["name"]))
    assert controller.errors == []
