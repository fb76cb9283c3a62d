"""geosched as MultiKueue's dispatcher with real Kueue v0.17 on a manager and two worker clusters.

A user's batch/v1 Job, labelled with its LocalQueue on the manager: Kueue's webhook suspends it, Kueue reserves
quota for its Workload, the MultiKueue admission check waits for a dispatcher (Kueue's Configuration names
geosched.io/dispatcher); `geosched multikueue dispatch` nominates a worker; Kueue's MultiKueue controller copies
the Workload and the Job there; the worker's Kueue admits it; the worker's kube-scheduler binds the pods onto kwok
nodes. Every step but the nomination is the real thing.

The dispatcher runs as the ServiceAccount of deploy/multikueue (its ClusterRole and Roles applied as the deploy
README says, the worker Secret names filled in), so its least-privilege RBAC meets the real authorizer; it reads
the workers as Kueue's multikueue-sa (deploy/multikueue/worker granting node reads).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.kube.client import Kube
from tests.realkube.cluster import apply, condition, kubeconfig, kubeconfig_entry, wait_for
from tests.realkube.kueue import DISPATCHER
from tests.realkube.plane import ADMISSION_CHECK, EKS, GKE, KUEUE_V1BETA2, MANAGER, WORKERS, Plane
from tests.realkube.realkube_support import ROOT, geosched, job_pods_selector, wait_all_running, wait_until

pytestmark = pytest.mark.realkube
LEASE = "geosched-multikueue"
NAMESPACE = "geosched-system"
# Short, in client-go's proportions (15 / 10 / 2), so a takeover after a crash takes seconds.
CONFIG = f"""apiVersion: geosched.io/v1alpha1
kind: DispatcherConfig
dispatcher_name: {DISPATCHER}
refresh_s: 2
stale_after_s: 30
leader_election:
  enabled: true
  namespace: {NAMESPACE}
  name: {LEASE}
  lease_duration_s: 4
  renew_deadline_s: 3
  retry_period_s: 0.5
"""


def dispatcher_identity(plane: Plane, directory: Path) -> Path:
    """deploy/multikueue's namespace, ServiceAccount and RBAC on the manager (Secret names edited in, as its
    README asks), and a kubeconfig with a token of that ServiceAccount."""
    deploy = ROOT / "deploy" / "multikueue"
    with plane.kube(MANAGER) as kube:
        for name in ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml"):
            for obj in yaml.safe_load_all((deploy / name).read_text()):
                if obj["kind"] == "Role" and obj["metadata"]["name"] == "geosched-multikueue-kueue":
                    for rule in obj["rules"]:
                        if rule["resources"] == ["secrets"]:
                            rule["resourceNames"] = [f"worker-{w}" for w in WORKERS]
                apply(kube, obj)
        token = kube.request("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/geosched-multikueue/token",
                             body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                   "spec": {"expirationSeconds": 3600}})["status"]["token"]
    cluster = plane[MANAGER]
    path = directory / "dispatcher.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig([kubeconfig_entry(MANAGER, cluster.server, cluster.ca.pem,
                                                                {"token": token})], MANAGER)))
    return path


def queues(plane: Plane, namespace: str) -> None:
    """The manager's ClusterQueue with the MultiKueue admission check, and the same queue names in every worker
    (Kueue's setup_multikueue: namespaces and LocalQueues mirrored)."""
    def cluster_queue(check: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                                "flavors": [{"name": f"{namespace}-default", "resources": [
                                    {"name": "cpu", "nominalQuota": 1000},
                                    {"name": "memory", "nominalQuota": "8000Gi"},
                                    {"name": "nvidia.com/gpu", "nominalQuota": 64}]}]}]}
        if check:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": ADMISSION_CHECK}]}
        return {"apiVersion": KUEUE_V1BETA2, "kind": "ClusterQueue", "metadata": {"name": f"{namespace}-cq"},
                "spec": spec}

    for cluster in (MANAGER, *WORKERS):
        with plane.kube(cluster) as kube:
            apply(kube, {"apiVersion": KUEUE_V1BETA2, "kind": "ResourceFlavor",
                         "metadata": {"name": f"{namespace}-default"}})
            apply(kube, cluster_queue(cluster == MANAGER))
            apply(kube, {"apiVersion": KUEUE_V1BETA2, "kind": "LocalQueue",
                         "metadata": {"name": "team", "namespace": namespace},
                         "spec": {"clusterQueue": f"{namespace}-cq"}})
            wait_for(lambda k=kube: condition(k.get(f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{namespace}-cq")
                                               or {}, "Active"), 60, f"{cluster}: ClusterQueue active")


def drop_queues(plane: Plane, namespace: str) -> None:
    for cluster in (MANAGER, *WORKERS):
        with plane.kube(cluster) as kube:
            for path in (f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{namespace}-cq",
                         f"/apis/kueue.x-k8s.io/v1beta2/resourceflavors/{namespace}-default"):
                kube.request("DELETE", path)



def user_job(name: str, workers: int, *, gpu: str | None = None) -> dict[str, Any]:
    """A Job as a team submits it to Kueue: the queue label, all workers at once, GPUs as limits; pinned to a GPU
    model only by GFD's label when asked."""
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [{
        "name": "worker", "image": "ghcr.io/example/train:1",
        "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"nvidia.com/gpu": "8"}}}]}
    if gpu:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": gpu}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
            "spec": {"parallelism": workers, "completions": workers, "completionMode": "Indexed",
                     "suspend": True, "template": {"spec": spec}}}


class Replica:
    def __init__(self, plane: Plane, identity: Path, home: Path, config: Path, name: str) -> None:
        self.log = home / f"{name}.log"
        home.mkdir(parents=True, exist_ok=True)
        self._out = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "geosched", "multikueue", "dispatch", "--context", MANAGER, "--kubeconfig",
             str(identity), "--config", str(config), "--no-record", "-v"],
            stdout=self._out, stderr=subprocess.STDOUT, cwd=ROOT, env={**_environ(), "GEOSCHED_HOME": str(home)})

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(30)
        finally:
            self._out.close()


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)


def lease_holder(kube: Kube) -> str | None:
    lease = kube.get(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE}") or {}
    return (lease.get("spec") or {}).get("holderIdentity")


def workload_of(kube: Kube, namespace: str, job: str) -> dict[str, Any] | None:
    for wl in kube.list_all(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads")[0]:
        if any(o.get("name") == job for o in wl["metadata"].get("ownerReferences") or []):
            return dict(wl)
    return None


def run_through_multikueue(plane: Plane, manager: Kube, ns: str, job: str, gpu: str, replica: Replica) -> list[Any]:
    """Submit a 2 x 8 GPU Job on the manager; wait until Kueue sent its Workload to EKS and the pods run there."""
    manager.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body=user_job(job, 2, gpu=gpu))
    where = wait_until(lambda: (workload_of(manager, ns, job) or {}).get("status", {}).get("clusterName"), 90,
                       what=f"Kueue to send the {job} Workload to a worker ({replica.log.read_text()[-2000:]})")
    assert where == EKS
    with plane.kube(EKS) as eks:
        return wait_all_running(eks, ns, 2, job_pods_selector(job), timeout=90)


@pytest.fixture
def mk_namespace(realkube: Plane) -> Iterator[str]:
    with realkube.namespace("mk-dispatch") as ns:
        queues(realkube, ns)
        try:
            yield ns
        finally:
            drop_queues(realkube, ns)


def test_dispatch_sends_each_job_where_geosched_chose_and_a_second_replica_takes_over(
        realkube: Plane, mk_namespace: str, tmp_path: Path) -> None:
    ns = mk_namespace
    identity = dispatcher_identity(realkube, tmp_path)
    config = tmp_path / "dispatcher.yaml"
    config.write_text(CONFIG)
    with ExitStack() as stack, realkube.kube(MANAGER) as manager:
        first = Replica(realkube, identity, tmp_path / "home", config, "first")
        stack.callback(first.stop)
        wait_until(lambda: lease_holder(manager), 30, what="the first replica leading")
        leader = lease_holder(manager)
        second = Replica(realkube, identity, tmp_path / "home", config, "second")
        stack.callback(second.stop)

        # A100s only in EKS us-east-1b (GFD labels there): the one worker that can run it.
        bound = run_through_multikueue(realkube, manager, ns, "a100", "NVIDIA-A100-SXM4-40GB", first)
        assert {b.zone for b in bound} == {"us-east-1b"} and {b.scheduler for b in bound} == {"default-scheduler"}
        events = manager.list_all(f"/api/v1/namespaces/{ns}/events")[0]
        assert any(e["reason"] == "Nominated" and EKS in e["message"] for e in events), events

        # The leader crashes (SIGKILL: no release); the other replica takes the Lease when it expires.
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
        wait_until(lambda: lease_holder(manager) not in (None, leader), 30, what="the second replica taking over")
        # GFD's product label exists only on EKS (GKE runs no GFD): EKS us-east-1a.
        bound = run_through_multikueue(realkube, manager, ns, "h100", "NVIDIA-H100-80GB-HBM3", second)
        assert {b.zone for b in bound} == {"us-east-1a"}
        assert second.stop() == 0, second.log.read_text()
    # Nothing ran on the other worker.
    with realkube.kube(GKE) as gke:
        assert not gke.list_all(f"/api/v1/namespaces/{ns}/pods")[0]


def test_dispatch_once_beside_a_leader_refuses_and_writes_nothing(realkube: Plane, mk_namespace: str,
                                                                   tmp_path: Path) -> None:
    identity = dispatcher_identity(realkube, tmp_path)
    config = tmp_path / "dispatcher.yaml"
    config.write_text(CONFIG)
    leader = Replica(realkube, identity, tmp_path / "home", config, "leader")
    try:
        with realkube.kube(MANAGER) as manager:
            wait_until(lambda: lease_holder(manager), 30, what="a leader")
        proc = geosched("multikueue", "dispatch", "--context", MANAGER, "--kubeconfig", str(identity), "--config",
                        str(config), "--once", "--no-record", home=tmp_path / "home")
    finally:
        assert leader.stop() == 0, leader.log.read_text()
    assert proc.returncode == 1, proc.stderr
    assert f"another dispatcher holds the Lease {NAMESPACE}/{LEASE}" in proc.stderr


def user_jobset(name: str, gpu: str) -> dict[str, Any]:
    """A JobSet as a team submits it to Kueue (Kueue's docs, "Run a JobSet": the queue-name label on the JobSet,
    https://kueue.sigs.k8s.io/docs/tasks/run/jobsets/): two replicated jobs, a leader and one worker, each a pod of
    8 GPUs on GFD's product label; field names from the JobSet v1alpha2 CRD of the release the plane runs."""
    def replicated(role: str) -> dict[str, Any]:
        pod = {"restartPolicy": "Never", "nodeSelector": {"nvidia.com/gpu.product": gpu}, "containers": [{
            "name": role, "image": "ghcr.io/example/train:1",
            "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"nvidia.com/gpu": "8"}}}]}
        return {"name": role, "replicas": 1,
                "template": {"spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0,
                                      "template": {"spec": pod}}}}

    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "team"}},
            "spec": {"suspend": True, "replicatedJobs": [replicated("leader"), replicated("worker")]}}


def jobset_status(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    """A JobSet's status without its zero-valued fields: the worker's JobSet controller writes `restarts: 0`, while
    Kueue's status patch of the manager's copy is a merge patch of what changed in the Go struct, where an absent
    `restarts` already reads 0, so it never sends it (pkg/util/client PatchStatus; seen on this plane)."""
    status = (kube.get(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/{name}") or {}).get("status") or {}
    return {k: v for k, v in status.items() if v not in (0, None, "", [], {})}


def test_a_jobset_queued_on_the_manager_runs_on_the_worker_and_in_the_zone_geosched_chose(
        realkube: Plane, mk_namespace: str, tmp_path: Path) -> None:
    ns, name = mk_namespace, "h100-jobset"
    identity = dispatcher_identity(realkube, tmp_path)
    config = tmp_path / "dispatcher.yaml"
    config.write_text(CONFIG)
    with ExitStack() as stack, realkube.kube(MANAGER) as manager, realkube.kube(EKS) as eks:
        replica = Replica(realkube, identity, tmp_path / "home", config, "dispatcher")
        stack.callback(replica.stop)
        manager.request("POST", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets",
                        body=user_jobset(name, "NVIDIA-H100-80GB-HBM3"))
        # Kueue's webhook hands the JobSet to MultiKueue on the manager (spec.managedBy), so the manager's JobSet
        # controller leaves it alone.
        queued = manager.get(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/{name}") or {}
        assert queued["spec"].get("managedBy") == "kueue.x-k8s.io/multikueue", queued["spec"]
        where = wait_until(lambda: (workload_of(manager, ns, name) or {}).get("status", {}).get("clusterName"), 120,
                           what=f"Kueue to send the {name} Workload to a worker ({replica.log.read_text()[-2000:]})")
        # GFD's H100 label exists only on EKS (GKE runs no GFD): geosched nominated EKS, and only EKS.
        assert where == EKS
        workload = workload_of(manager, ns, name) or {}
        assert [ps["name"] for ps in workload["spec"]["podSets"]] == ["leader", "worker"]
        events = manager.list_all(f"/api/v1/namespaces/{ns}/events")[0]
        assert any(e["reason"] == "Nominated" and EKS in e["message"] for e in events), events

        # On the worker: MultiKueue's copy of the JobSet, the JobSet controller's Jobs (one per replicated job),
        # the Job controller's pods, bound by kube-scheduler to kwok nodes in EKS's H100 zone.
        remote = wait_until(lambda: eks.get(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/{name}"), 60,
                            what="MultiKueue's JobSet on the worker")
        assert remote["metadata"]["labels"].get("kueue.x-k8s.io/multikueue-origin"), remote["metadata"]
        assert not remote["spec"].get("managedBy"), remote["spec"]
        bound = wait_all_running(eks, ns, 2, f"jobset.sigs.k8s.io/jobset-name={name}", timeout=120)
        assert {b.zone for b in bound} == {"us-east-1a"} and {b.scheduler for b in bound} == {"default-scheduler"}
        assert len({b.node for b in bound}) == 2  # 8 GPUs each: one p5.48xlarge per pod
        jobs = {j["metadata"]["name"]: j for j in eks.list_all(f"/apis/batch/v1/namespaces/{ns}/jobs")[0]}
        assert sorted(jobs) == [f"{name}-leader-0", f"{name}-worker-0"]
        assert all(any(o["kind"] == "JobSet" and o["name"] == name for o in j["metadata"]["ownerReferences"])
                   for j in jobs.values())

        # Kueue copies the worker's JobSet status to the manager's JobSet (its MultiKueue adapter's SyncJob).
        seen: dict[str, Any] = {}

        def mirrored() -> dict[str, Any] | None:
            seen.update(manager=jobset_status(manager, ns, name), worker=jobset_status(eks, ns, name))
            ready = {s["name"]: s.get("ready") for s in seen["worker"].get("replicatedJobsStatus") or []}
            same = seen["manager"] == seen["worker"]
            return seen["manager"] if ready == {"leader": 1, "worker": 1} and same else None

        try:
            status = wait_until(mirrored, 60, what="the manager's JobSet status to mirror the worker's")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}: {seen}") from None
        assert {s["name"]: s["active"] for s in status["replicatedJobsStatus"]} == {"leader": 1, "worker": 1}
        # Nothing ran on the manager or the other worker.
        assert not manager.list_all(f"/apis/batch/v1/namespaces/{ns}/jobs")[0]
        assert not manager.list_all(f"/api/v1/namespaces/{ns}/pods")[0]
        with realkube.kube(GKE) as gke:
            assert not gke.list_all(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets")[0]
            assert not gke.list_all(f"/api/v1/namespaces/{ns}/pods")[0]
        assert replica.stop() == 0, replica.log.read_text()
