"""`geosched submit` on real clusters, each backend that runs here: what the real scheduler and Kueue then did.

- backend none: the Job goes to the cluster's default scheduler; kube-scheduler binds every pod into the zone
  geosched chose (its node affinity is the only thing steering it).
- backend kueue with topology-aware scheduling: Kueue v0.17 suspends the Job, admits its Workload through a
  ClusterQueue whose ResourceFlavor names a Topology, injects the topology assignment, and kube-scheduler binds
  the pods there; geosched's required-topology annotation is what keeps the gang in one zone.
The Kueue objects are the ones Kueue's TAS docs set up (kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling),
in kueue.x-k8s.io/v1beta2, the version v0.17 stores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.realkube.cluster import condition
from tests.realkube.plane import EKS, GANG, GKE, Plane
from tests.realkube.realkube_support import (
    cluster_config,
    compact_job,
    geosched,
    job_pods_selector,
    wait_all_running,
    wait_until,
)

pytestmark = pytest.mark.realkube


def submit(plane: Plane, tmp_path: Path, job: Path, clusters: Path, *contexts: str) -> dict[str, Any]:
    args = ["submit", str(job), "--kubeconfig", str(plane.kubeconfig), "--clusters", str(clusters), "-o", "json"]
    for context in contexts:
        args += ["--context", context]
    proc = geosched(*args, home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    return dict(yaml.safe_load(proc.stdout))


def test_submit_places_the_gang_and_kube_scheduler_binds_it_in_that_zone(realkube: Plane, tmp_path: Path) -> None:
    # A100 only in EKS us-east-1b: the one cluster and zone that holds 2 x 8 of them.
    with realkube.namespace("submit-none", clusters=(GKE, EKS)) as ns:
        config = cluster_config(tmp_path / "clusters.yaml", {GKE: {"namespace": ns}, EKS: {"namespace": ns}})
        job = compact_job(tmp_path / "train.yaml", "train", workers=2, gpus=8, gpu="A100")
        outcome = submit(realkube, tmp_path, job, config)
        # geosched names AWS zones by zone ID: us-east-1b is use1-az2 in this account.
        assert (outcome["status"], outcome["cluster"], outcome["zones"]) == ("applied", EKS, ["use1-az2"])
        with realkube.kube(EKS) as kube:
            bound = wait_all_running(kube, ns, 2, job_pods_selector("train"))
        assert {(b.zone, b.fleet_zone) for b in bound} == {("us-east-1b", "use1-az2")}
        assert {b.scheduler for b in bound} == {"default-scheduler"}
        assert {b.accelerator for b in bound} == {"NVIDIA-A100-SXM4-40GB"}


def test_submit_h100_goes_where_h100s_are_free_across_two_clouds(realkube: Plane, tmp_path: Path) -> None:
    with realkube.namespace("submit-h100", clusters=(GKE, EKS)) as ns:
        config = cluster_config(tmp_path / "clusters.yaml", {GKE: {"namespace": ns}, EKS: {"namespace": ns}})
        job = compact_job(tmp_path / "train.yaml", "train", workers=2, gpus=8)
        outcome = submit(realkube, tmp_path, job, config)
        assert outcome["status"] == "applied" and len(outcome["zones"]) == 1
        with realkube.kube(outcome["cluster"]) as kube:
            bound = wait_all_running(kube, ns, 2, job_pods_selector("train"))
        assert {b.fleet_zone for b in bound} == set(outcome["zones"])
        assert {b.accelerator for b in bound} <= {"NVIDIA-H100-80GB-HBM3", "nvidia-h100-80gb"}


# --- Kueue with topology-aware scheduling ------------------------------------------------------------------------

def test_submit_through_kueue_tas_runs_the_gang_in_one_zone(realkube: Plane, kueue_namespace: str,
                                                            tmp_path: Path) -> None:
    ns = kueue_namespace
    config = cluster_config(tmp_path / "clusters.yaml",
                            {EKS: {"namespace": ns, "backend": "kueue", "queue": "team-a"}})
    job = compact_job(tmp_path / "train.yaml", "train", workers=2, gpus=8)
    outcome = submit(realkube, tmp_path, job, config, EKS)
    assert (outcome["status"], outcome["cluster"], outcome["zones"]) == ("applied", EKS, ["use1-az6"])
    with realkube.kube(EKS) as kube:
        bound = wait_all_running(kube, ns, 2, job_pods_selector("train"), timeout=120)
        workloads = kube.list_all(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads")[0]
    assert {b.zone for b in bound} == {"us-east-1a"}
    (workload,) = workloads
    assert condition(workload, "Admitted")
    # Kueue's TAS assigned the pods' domains itself (topologyAssignment), within the zone geosched asked for.
    (podset,) = workload["status"]["admission"]["podSetAssignments"]
    assert podset.get("topologyAssignment"), podset
    assert workload["spec"]["podSets"][0]["topologyRequest"]["required"] == "topology.kubernetes.io/zone"



# --- Kubernetes' own gang scheduling (the Workload API, alpha in 1.36) ------------------------------------------

def test_submit_with_the_workload_api_runs_the_gang_through_kube_schedulers_gang_plugin(realkube: Plane,
                                                                                      tmp_path: Path) -> None:
    with realkube.namespace("submit-gang", clusters=(GANG,)) as ns:
        config = cluster_config(tmp_path / "clusters.yaml", {GANG: {"namespace": ns, "backend": "workload-api"}})
        job = compact_job(tmp_path / "train.yaml", "train", workers=2, gpus=8)
        outcome = submit(realkube, tmp_path, job, config, GANG)
        assert outcome["status"] == "applied" and len(outcome["zones"]) == 1
        assert [a["kind"] for a in outcome["applied"]] == ["Workload", "PodGroup", "Service", "Job"]
        with realkube.kube(GANG) as kube:
            bound = wait_all_running(kube, ns, 2, job_pods_selector("train"))
            group = kube.get(f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups/train") or {}
            pod = kube.get(f"/api/v1/namespaces/{ns}/pods/{bound[0].pod}") or {}
        assert {b.fleet_zone for b in bound} == set(outcome["zones"])
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": "train"}  # the server kept the field: gate on
        assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}



def test_the_workload_apis_companions_are_owned_by_the_job_and_collected_with_it(realkube: Plane,
                                                                                tmp_path: Path) -> None:
    """Issue 21 item 5: the Workload and PodGroup (and the Service) `submit` makes beside the Job carry an
    ownerReference to that Job's uid, so the real garbage collector deletes them when the Job is deleted."""
    with realkube.namespace("submit-gang-gc", clusters=(GANG,)) as ns:
        config = cluster_config(tmp_path / "clusters.yaml", {GANG: {"namespace": ns, "backend": "workload-api"}})
        job = compact_job(tmp_path / "train.yaml", "train", workers=2, gpus=8)
        outcome = submit(realkube, tmp_path, job, config, GANG)
        assert [a["kind"] for a in outcome["applied"]] == ["Workload", "PodGroup", "Service", "Job"]
        companions = {"Workload": f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/workloads/train",
                      "PodGroup": f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups/train",
                      "Service": f"/api/v1/namespaces/{ns}/services/train"}
        with realkube.kube(GANG) as kube:
            wait_all_running(kube, ns, 2, job_pods_selector("train"))
            uid = (kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs/train") or {})["metadata"]["uid"]
            owners = {kind: [(r["kind"], r["name"], r["uid"]) for r in
                             ((kube.get(path) or {}).get("metadata") or {}).get("ownerReferences") or []]
                      for kind, path in companions.items()}
            assert owners == {kind: [("Job", "train", uid)] for kind in companions}, owners
            kube.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/train",
                         query={"propagationPolicy": "Background"})
            # The real garbage collector (kube-controller-manager) deletes the dependents of a deleted owner.
            wait_until(lambda: all(kube.get(path) is None for path in companions.values()) or None, 90,
                       what="the Job's Workload, PodGroup and Service garbage-collected")
