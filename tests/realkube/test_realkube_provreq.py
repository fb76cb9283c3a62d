"""Queued provisioning on the real control plane, through `geosched up --provisioning-class`: geosched picks the
zone (the node pool plan over the GKE REST double's zonal cluster in us-central1-c, google-cloud-container
unchanged), renders the job pinned there beside Kueue's ProvisioningRequest admission check
(geosched/kube/provreq.py) and applies them; real Kueue v0.17.0 (its provisioning controller running, the
ProvisioningRequest CRD installed before it started: the `realkube_provreq` plane) makes the ProvisioningRequest,
a test controller standing in for GKE's Dynamic Workload Scheduler (tests/realkube/provreq.py) brings 8
a3-highgpu-8g nodes up in the zone the request's pod template selects and marks it Provisioned, Kueue admits the
job, and the real kube-scheduler binds all 8 pods to those nodes. geosched creates no node pool.

The plane's GKE cluster has H100 nodes in us-central1-a and -b and none in us-central1-c: the pods can run only
on what the request brought up, and only if the zone reached the request.

The same for EKS and GitOps (`up --provider aws --provisioning-class best-effort-atomic-scale-up... --out FILE`,
the file applied with `kubectl apply --server-side` as a GitOps controller applies it): the zone is the plan's over
moto's EKS cluster (real boto3; its one subnet in use1-az6, us-east-1a in this account), the job pinned by zone
name and instance type, and the stand-in brings up EKS-shaped p5 nodes (cluster-autoscaler's flow on EKS).
Through Kueue (Kueue makes the request) and without it (`--without-kueue`: the file holds the request and its
PodTemplate, the pods annotated as its consumers). These run on the plane's one cluster, whose context stands for
an EKS cluster's: it has no node in us-east-1a at all, so again only the request's nodes can take the pods.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.kube import keys, provreq
from geosched.kube.kinds.base import when
from geosched.report.ledger import ledger_intervals
from geosched.store.db import Store
from geosched_emulators import MotoServer
from geosched_emulators.gke import GkeDouble
from tests.providers.eks_support import one_subnet_cluster
from tests.providers.prov_support import aws_env
from tests.realkube.cluster import condition
from tests.realkube.plane import GKE, Plane
from tests.realkube.provreq import MADE_BY, ProvisioningController
from tests.realkube.realkube_support import (
    cluster_config,
    compact_job,
    geosched,
    job_pods_selector,
    kubectl,
    pods,
    wait_all_running,
    wait_until,
)

pytestmark = pytest.mark.realkube
PROJECT, ZONE = "ml-platform-prod", "us-central1-c"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
PROVREQS = "/apis/autoscaling.x-k8s.io/v1/namespaces/{ns}/provisioningrequests"
CLUSTER_SCOPED = ("resourceflavors", "provisioningrequestconfigs", "admissionchecks", "clusterqueues")


def delete_queue_objects(kube: Any) -> None:
    """The cluster-scoped Kueue objects geosched made (provreq.queue_name: one set per class, GPU and namespace),
    left by no test to the next."""
    for plural in CLUSTER_SCOPED:
        for obj in kube.list_all(f"{KUEUE}/{plural}")[0]:
            if obj["metadata"]["name"].startswith(f"{provreq.DEFAULT_NAME}-"):
                kube.request("DELETE", f"{KUEUE}/{plural}/{obj['metadata']['name']}")


@pytest.fixture(scope="module")
def gke() -> Iterator[GkeDouble]:
    with GkeDouble() as double:
        double.add_cluster(PROJECT, ZONE, GKE)  # zonal: its one node location is us-central1-c
        yield double


def test_up_queues_a_gang_through_a_provisioning_request_that_brings_its_nodes_up_in_the_zone_chosen(
        realkube_provreq: Plane, gke: GkeDouble, tmp_path: Path) -> None:
    plane = realkube_provreq
    with plane.namespace("provreq", clusters=(GKE,)) as ns, plane.kube(GKE) as kube, \
            ProvisioningController(plane, GKE, ns) as controller:
        before = {n["metadata"]["name"] for n in kube.list_all("/api/v1/nodes")[0]}
        config = cluster_config(tmp_path / "clusters.yaml", {GKE: {"namespace": ns, "backend": "kueue",
                                                                   "queue": "team-a"}})
        job = compact_job(tmp_path / "train.yaml", "train", workers=8, gpus=8)
        check_name = provreq.queue_name(provreq.Target(zone=ZONE, gpu_label=keys.GKE_ACCELERATOR,
                                                       gpu_value="nvidia-h100-80gb"), ns)
        try:
            proc = geosched("up", str(job), "--cluster", GKE, "--provider", "gcp", "--region", ZONE,
                            "--provisioning-class", provreq.QUEUED_PROVISIONING, "--kubeconfig",
                            str(plane.kubeconfig), "--clusters", str(config), "--yes", "-o", "json",
                            "--name", "dws", env={"GEOSCHED_GKE_ENDPOINT": gke.endpoint,
                                                  "GEOSCHED_GCP_PROJECT": PROJECT},
                            home=tmp_path / "home", timeout=300)
            assert proc.returncode == 0, proc.stderr
            outcome = yaml.safe_load(proc.stdout)
            assert (outcome["status"], outcome["cluster"], outcome["zones"]) == ("applied", GKE, [ZONE])
            assert gke.pools() == {}  # no node pool: the autoscaler makes the nodes
            wait_until(lambda: condition(kube.get(f"{KUEUE}/admissionchecks/{check_name}") or {},
                                         "Active"), 60, what="the AdmissionCheck Active")
            # Kueue made the request from the job's pod template: the zone geosched chose is in it.
            [request] = wait_until(lambda: kube.list_all(PROVREQS.format(ns=ns))[0], 120,
                                   what="Kueue's ProvisioningRequest")
            name = request["metadata"]["name"]
            assert request["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
            [pod_set] = request["spec"]["podSets"]
            assert pod_set["count"] == 8
            bound = wait_all_running(kube, ns, 8, job_pods_selector("train"), timeout=180)
            [template] = controller.seen[name]["templates"].values()
            assert template["template"]["spec"]["nodeSelector"][keys.ZONE] == ZONE
            made = sorted(n["metadata"]["name"] for n in controller.made[name])
            assert len(made) == 8 and not set(made) & before
            # Every pod on a node the request brought up, all in the zone geosched chose, one per node.
            assert sorted(b.node or "" for b in bound) == made
            assert {(b.zone, b.accelerator) for b in bound} == {(ZONE, "nvidia-h100-80gb")}
            # Nothing came up elsewhere: the only new nodes are the request's, all in that zone.
            new = [n for n in kube.list_all("/api/v1/nodes")[0] if n["metadata"]["name"] not in before]
            assert sorted(n["metadata"]["name"] for n in new) == made
            assert {n["metadata"]["labels"][keys.ZONE] for n in new} == {ZONE}
            assert {n["metadata"]["annotations"][MADE_BY] for n in new} == {name}
            # Kueue admitted through the check, and told the pods which request they consume.
            [workload] = kube.list_all(f"{KUEUE}/namespaces/{ns}/workloads")[0]
            assert condition(workload, "Admitted")
            [check] = workload["status"]["admissionChecks"]
            assert (check["name"], check["state"]) == (check_name, "Ready")
            for pod in pods(kube, ns, job_pods_selector("train")):
                assert pod["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"] == name
            # The nodes the request brought up are charged in the usage ledger from their registration, as the
            # job's, found through the pods bound to them (providers/provreqs.py).
            with Store(tmp_path / "home") as store:
                rows = sorted(ledger_intervals(store), key=lambda i: i.name)
            live = {n["metadata"]["name"]: n for n in new}
            assert [i.name for i in rows] == made
            for i in rows:
                meta = live[i.name]["metadata"]
                assert (i.kind, i.provider, i.region, i.zone, i.cluster, i.instance_type, i.gpu, i.gpus, i.job, i.ref,
                        i.end) == ("node", "gcp", "us-central1", ZONE, GKE, "a3-highgpu-8g", "H100", 8, "train",
                                   meta["uid"], None)
                assert i.start == when(meta["creationTimestamp"]) and i.nodegroup
            # `down` deletes the job, so its Workload, the request Kueue owns with it, and so the request's nodes;
            # it closes each node's row once it sees the node gone.
            managed = {p: (kube.get(f"{KUEUE}/{p}/{check_name}") or {}).get("metadata", {}).get("managedFields")
                       for p in CLUSTER_SCOPED}
            down = geosched("down", "dws", "--yes", "-o", "json", home=tmp_path / "home", timeout=300)
            assert down.returncode == 0, down.stderr
            [gang] = yaml.safe_load(down.stdout)["items"]
            assert (gang["state"], gang["terminated"]) == ("terminated", 8)
            # The job is deleted with Background propagation (as kubectl delete does): its pods and Kueue's request
            # go through the garbage collector, a moment after `down` returns on a loaded machine.
            wait_until(lambda: not pods(kube, ns, job_pods_selector("train")), 60, what="the job's pods gone")
            wait_until(lambda: not kube.list_all(PROVREQS.format(ns=ns))[0], 60, what="the request gone")
            wait_until(lambda: not controller.made, 60, what="the request's nodes gone")
            # The last gang through them gone, the Kueue objects geosched made for it go too (Kueue's finalizers
            # let the ClusterQueue and its flavor go once nothing is admitted on them), and `down` says so.
            assert f"removed from {GKE} (geosched made them, no gang queues on them): LocalQueue {check_name}, " \
                   f"ClusterQueue {check_name}" in " ".join(down.stderr.split()), managed
            for plural in CLUSTER_SCOPED:
                wait_until(lambda p=plural: kube.get(f"{KUEUE}/{p}/{check_name}") is None, 60,
                           what=f"{plural} {check_name} gone")
            assert kube.get(f"{KUEUE}/namespaces/{ns}/localqueues/{check_name}") is None
            with Store(tmp_path / "home") as store:
                closed = ledger_intervals(store)
            assert len(closed) == 8 and all(i.end is not None and i.end >= i.start for i in closed)
            report = geosched("report", "cost", "-o", "json", home=tmp_path / "home")
            assert report.returncode == 0, report.stderr
            assert any("ProvisioningRequest" in n and "idle time included" in n
                       for n in yaml.safe_load(report.stdout)["notes"])
        finally:
            delete_queue_objects(kube)
    assert controller.errors == []


EKS_NAME, EKS_ZONE_ID, EKS_ZONE = "ml", "use1-az6", "us-east-1a"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    """The EKS cluster as AWS knows it (moto, real boto3): one subnet, in use1-az6, which moto names us-east-1a."""
    with MotoServer() as server:
        server.reset()  # moto's backends are per process: another suite's cluster of the same name would be there
        one_subnet_cluster(server.url, EKS_NAME, EKS_ZONE_ID, EKS_ZONE, "10.0.40.0/24")
        yield server


@pytest.mark.parametrize("kueue", [True, False], ids=["kueue", "without-kueue"])
def test_up_on_eks_for_gitops_brings_the_gangs_nodes_up_in_the_zone_chosen(
        realkube_provreq: Plane, moto: MotoServer, tmp_path: Path, kueue: bool) -> None:
    plane = realkube_provreq
    out = tmp_path / "gitops" / "train.yaml"
    out.parent.mkdir()
    with plane.namespace("provreq-eks", clusters=(GKE,)) as ns, plane.kube(GKE) as kube, \
            ProvisioningController(plane, GKE, ns, region="us-east-1", zone_ids={EKS_ZONE: EKS_ZONE_ID}) as controller:
        config = cluster_config(tmp_path / "clusters.yaml", {GKE: {"namespace": ns, "queue": "team-a"}})
        job = compact_job(tmp_path / "train.yaml", "train", workers=4, gpus=8)
        proc = geosched("up", str(job), "--cluster", EKS_NAME, "--provider", "aws", "--region", "us-east-1",
                        "--context", GKE, "--clusters", str(config), "--provisioning-class",
                        provreq.BEST_EFFORT_ATOMIC, "--out", str(out), *(() if kueue else ("--without-kueue",)),
                        env=aws_env(moto.url), home=tmp_path / "home", timeout=300)
        assert proc.returncode == 0, proc.stderr
        objects = [d for d in yaml.safe_load_all(out.read_text(encoding="utf-8")) if d]
        try:
            applied = kubectl(plane, GKE, "apply", "--server-side", "--field-manager", "gitops", "-f", str(out))
            assert applied.returncode == 0, applied.stderr
            [request] = wait_until(lambda: kube.list_all(PROVREQS.format(ns=ns))[0], 120,
                                   what="the ProvisioningRequest")
            name = request["metadata"]["name"]
            assert request["spec"]["provisioningClassName"] == provreq.BEST_EFFORT_ATOMIC
            assert [p["count"] for p in request["spec"]["podSets"]] == [4]
            bound = wait_all_running(kube, ns, 4, job_pods_selector("train"), timeout=180)
            [template] = controller.seen[name]["templates"].values()
            assert template["template"]["spec"]["nodeSelector"] == {keys.ZONE: EKS_ZONE,
                                                                    keys.INSTANCE_TYPE: "p5.48xlarge"}
            made = sorted(n["metadata"]["name"] for n in controller.made[name])
            assert len(made) == 4
            # Every pod on a node the request brought up (tainted nvidia.com/gpu=true: tolerated), one per node,
            # all in the zone geosched chose, by name and zone ID.
            assert sorted(b.node or "" for b in bound) == made
            assert {(b.zone, b.fleet_zone) for b in bound} == {(EKS_ZONE, EKS_ZONE_ID)}
            for pod in pods(kube, ns, job_pods_selector("train")):
                assert pod["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"] == name
            if kueue:  # Kueue made the request and admitted the job through the check
                assert [o["kind"] for o in objects][:5] == ["ResourceFlavor", "ProvisioningRequestConfig",
                                                            "AdmissionCheck", "ClusterQueue", "LocalQueue"]
                [workload] = kube.list_all(f"{KUEUE}/namespaces/{ns}/workloads")[0]
                assert condition(workload, "Admitted")
            else:  # the request is the file's own, and Kueue never saw the job
                assert [o["kind"] for o in objects] == ["PodTemplate", "ProvisioningRequest", "Job", "Service"]
                assert name == objects[1]["metadata"]["name"]
                assert kube.list_all(f"{KUEUE}/namespaces/{ns}/workloads")[0] == []
            # The GitOps prune: the file's namespaced objects deleted; the request goes, and its nodes with it.
            deleted = kubectl(plane, GKE, "delete", "--wait=false", "-n", ns, "-f", str(out))
            assert deleted.returncode == 0, deleted.stderr
            wait_until(lambda: not pods(kube, ns, job_pods_selector("train")), 120, what="the job's pods gone")
            wait_until(lambda: not kube.list_all(PROVREQS.format(ns=ns))[0], 120, what="the request gone")
            wait_until(lambda: not controller.made, 60, what="the request's nodes gone")
        finally:
            delete_queue_objects(kube)
    assert controller.errors == []


# A batch Job as people write one: a model-download init container asking for more CPU than the trainer (Kueue counts
# the pod's largest init container when it is more: the quota geosched renders must too, or the Workload is never
# admitted), and the ConfigMap the trainer reads, in the same file (kept with the job: attack4 findings B1, B2).
INIT_JOB = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: train-config
data:
  lr: "0.0003"
---
apiVersion: batch/v1
kind: Job
metadata:
  name: train
spec:
  completionMode: Indexed
  completions: 4
  parallelism: 4
  template:
    spec:
      restartPolicy: Never
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
      initContainers:
        - name: fetch-model
          image: amazon/aws-cli:2.15.0
          resources: {requests: {cpu: "4"}}
      containers:
        - name: trainer
          image: ghcr.io/example/train:1
          resources: {requests: {cpu: "1"}, limits: {nvidia.com/gpu: 8}}
          envFrom:
            - configMapRef: {name: train-config}
"""


def test_kueue_admits_a_gang_whose_init_containers_ask_for_more_than_its_trainers(
        realkube_provreq: Plane, moto: MotoServer, tmp_path: Path) -> None:
    plane = realkube_provreq
    out = tmp_path / "gitops" / "train.yaml"
    out.parent.mkdir()
    with plane.namespace("provreq-init", clusters=(GKE,)) as ns, plane.kube(GKE) as kube, \
            ProvisioningController(plane, GKE, ns, region="us-east-1", zone_ids={EKS_ZONE: EKS_ZONE_ID}):
        config = cluster_config(tmp_path / "clusters.yaml", {GKE: {"namespace": ns, "queue": "team-a"}})
        job = tmp_path / "train.yaml"
        job.write_text(INIT_JOB, encoding="utf-8")
        proc = geosched("up", str(job), "--cluster", EKS_NAME, "--provider", "aws", "--region", "us-east-1",
                        "--context", GKE, "--clusters", str(config), "--provisioning-class",
                        provreq.BEST_EFFORT_ATOMIC, "--out", str(out), env=aws_env(moto.url),
                        home=tmp_path / "home", timeout=300)
        assert proc.returncode == 0, proc.stderr
        try:
            applied = kubectl(plane, GKE, "apply", "--server-side", "--field-manager", "gitops", "-n", ns, "-f",
                              str(out))
            assert applied.returncode == 0, applied.stderr
            assert kube.get(f"/api/v1/namespaces/{ns}/configmaps/train-config") is not None
            # Admitted by the real Kueue (quota 16 cpu for 4 pods of max(1, 4) cpu; it was 4), so it made the request.
            wait_until(lambda: kube.list_all(PROVREQS.format(ns=ns))[0], 120, what="the ProvisioningRequest")
            wait_all_running(kube, ns, 4, job_pods_selector("train"), timeout=180)
            [workload] = kube.list_all(f"{KUEUE}/namespaces/{ns}/workloads")[0]
            assert condition(workload, "Admitted")
        finally:
            kubectl(plane, GKE, "delete", "--wait=false", "-n", ns, "-f", str(out))
            delete_queue_objects(kube)


# Two zones of the EKS cluster (moto names use1-az6 us-east-1a and use1-az1 us-east-1b in this account).
FAILOVER_ZONES = {"us-east-1a": "use1-az6", "us-east-1b": "use1-az1"}


@pytest.mark.parametrize("kueue", [True, False], ids=["kueue", "without-kueue"])
def test_up_withdraws_a_failed_request_and_the_gang_runs_in_the_next_zone(
        realkube_provreq: Plane, moto: MotoServer, tmp_path: Path, kueue: bool) -> None:
    """The stand-in autoscaler refuses the plan's first zone (Failed, CapacityIsNotFound) and provisions the next:
    `up` withdraws the first zone's job (and with it the request, Kueue's or its own), asks the second, and the
    real kube-scheduler binds the gang there."""
    plane = realkube_provreq
    from tests.providers.eks_support import clients

    eks, ec2 = clients(moto.url)
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{50 + i}.0/24", AvailabilityZoneId=zone_id)
               ["Subnet"]["SubnetId"] for i, zone_id in enumerate(FAILOVER_ZONES.values())]
    cluster = f"ml-failover-{'kueue' if kueue else 'plain'}"
    eks.create_cluster(name=cluster, roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={
        "subnetIds": subnets})
    with plane.namespace("provreq-failover", clusters=(GKE,)) as ns, plane.kube(GKE) as kube:
        config = cluster_config(tmp_path / "clusters.yaml", {GKE: {"namespace": ns, "queue": "team-a"}})
        job = compact_job(tmp_path / "train.yaml", "train", workers=4, gpus=8)
        args = ("up", str(job), "--cluster", cluster, "--provider", "aws", "--region", "us-east-1", "--context", GKE,
                "--kubeconfig", str(plane.kubeconfig), "--clusters", str(config), "--provisioning-class",
                provreq.BEST_EFFORT_ATOMIC, *(() if kueue else ("--without-kueue",)), "-o", "json")
        dry = geosched(*args, "--dry-run", env=aws_env(moto.url), home=tmp_path / "home", timeout=300)
        assert dry.returncode == 0, dry.stderr
        [first_id] = yaml.safe_load(dry.stdout)["zones"]
        first = next(n for n, i in FAILOVER_ZONES.items() if i == first_id)
        second = next(n for n in FAILOVER_ZONES if n != first)
        try:
            with ProvisioningController(plane, GKE, ns, region="us-east-1", zone_ids=FAILOVER_ZONES,
                                        fail_zones=frozenset({first})) as controller:
                proc = geosched(*args, "--yes", "--name", "failover", env=aws_env(moto.url),
                                home=tmp_path / "home", timeout=300)
                assert proc.returncode == 0, proc.stderr
                outcome = yaml.safe_load(proc.stdout)
                assert (outcome["status"], outcome["zones"]) == ("applied", [FAILOVER_ZONES[second]])
                [(refused_name, refused, zone)] = controller.failed
                assert zone == first
                bound = wait_all_running(kube, ns, 4, job_pods_selector("train"), timeout=180)
                # The first zone's request is gone (withdrawn with its job); the one left is the second zone's.
                [request] = kube.list_all(PROVREQS.format(ns=ns))[0]
                assert request["metadata"]["uid"] != refused
                made = sorted(n["metadata"]["name"] for n in controller.made[request["metadata"]["name"]])
                assert sorted(b.node or "" for b in bound) == made and len(made) == 4
                assert {(b.zone, b.fleet_zone) for b in bound} == {(second, FAILOVER_ZONES[second])}
                # Journalled: the refused zone rolled back as a capacity refusal, the second launched.
                status = geosched("status", "failover", "-o", "json", home=tmp_path / "home", timeout=60)
                assert status.returncode == 0, status.stderr
                attempts = yaml.safe_load(status.stdout)["attempts"]
                assert [(a["zone"], a["outcome"], a["error"], a["code"]) for a in attempts] == [
                    (first_id, "rolled-back", "capacity", "Failed"), (FAILOVER_ZONES[second], "launched", None, None)]
                assert attempts[0]["why"].startswith(f"ProvisioningRequest {refused_name} Failed (CapacityIsNotFound")
                kube.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/train",
                             query={"propagationPolicy": "Background"})
                if not kueue:
                    kube.request("DELETE", f"{PROVREQS.format(ns=ns)}/{request['metadata']['name']}")
                wait_until(lambda: not pods(kube, ns, job_pods_selector("train")), 120, what="the job's pods gone")
                wait_until(lambda: not kube.list_all(PROVREQS.format(ns=ns))[0], 120, what="the request gone")
                wait_until(lambda: not [m for m in controller.made.values() if m], 60,
                           what="the request's nodes gone")
            assert controller.errors == []
        finally:
            delete_queue_objects(kube)


def test_two_gangs_of_two_gpu_models_on_one_cluster_are_both_admitted_and_both_requests_made(
        realkube_provreq: Plane, moto: MotoServer, tmp_path: Path) -> None:
    """Issue 26: one set of queue objects for every gang made the second `up` (A100) rewrite the first gang's flavor
    and quota; the first, already admitted, held the queue's whole quota and the second waited past its deadline.
    Per (class, GPU, namespace) each gang has its own queue: both are admitted by the real Kueue, each request asks
    for its own instance type, and the pods of both run on the nodes brought up for them."""
    plane = realkube_provreq
    with plane.namespace("provreq-two", clusters=(GKE,)) as ns, plane.kube(GKE) as kube, \
            ProvisioningController(plane, GKE, ns, region="us-east-1", zone_ids={EKS_ZONE: EKS_ZONE_ID}) as controller:
        config = cluster_config(tmp_path / "clusters.yaml", {GKE: {"namespace": ns, "queue": "team-a"}})
        gangs = {"train": ("H100", "p5.48xlarge"), "finetune": ("A100", "p4d.24xlarge")}
        try:
            for name, (gpu, _) in gangs.items():
                job = compact_job(tmp_path / f"{name}.yaml", name, workers=2, gpus=8, gpu=gpu)
                proc = geosched("up", str(job), "--cluster", EKS_NAME, "--provider", "aws", "--region", "us-east-1",
                                "--context", GKE, "--kubeconfig", str(plane.kubeconfig), "--clusters", str(config),
                                "--provisioning-class", provreq.BEST_EFFORT_ATOMIC, "--provisioning-timeout", "150",
                                "--yes", "--name", name, "-o", "json", env=aws_env(moto.url),
                                home=tmp_path / "home", timeout=300)
                assert proc.returncode == 0, proc.stderr
                assert yaml.safe_load(proc.stdout)["zones"] == [EKS_ZONE_ID]
            requests = kube.list_all(PROVREQS.format(ns=ns))[0]
            assert len(requests) == 2
            asked = {}
            for request in requests:
                [template] = controller.seen[request["metadata"]["name"]]["templates"].values()
                selector = template["template"]["spec"]["nodeSelector"]
                assert selector[keys.ZONE] == EKS_ZONE
                asked[selector[keys.INSTANCE_TYPE]] = request
            assert sorted(asked) == sorted(t for _, t in gangs.values())
            workloads = kube.list_all(f"{KUEUE}/namespaces/{ns}/workloads")[0]
            assert len(workloads) == 2 and all(condition(w, "Admitted") for w in workloads)
            for name, (_, instance_type) in gangs.items():
                bound = wait_all_running(kube, ns, 2, job_pods_selector(name), timeout=180)
                made = sorted(n["metadata"]["name"] for n in controller.made[asked[instance_type]["metadata"]["name"]])
                assert sorted(b.node or "" for b in bound) == made and len(made) == 2
            # Two queues, each its own flavor (the GPU) and its namespace; the team's LocalQueue never made.
            ours = f"{provreq.DEFAULT_NAME}-"
            queues = [q for q in kube.list_all(f"{KUEUE}/clusterqueues")[0] if q["metadata"]["name"].startswith(ours)]
            flavors = {f["metadata"]["name"]: f["spec"]["nodeLabels"][keys.INSTANCE_TYPE]
                       for f in kube.list_all(f"{KUEUE}/resourceflavors")[0] if f["metadata"]["name"].startswith(ours)}
            assert sorted(flavors.values()) == sorted(t for _, t in gangs.values()) and len(queues) == 2
            for queue in queues:
                [group] = queue["spec"]["resourceGroups"]
                [flavor] = group["flavors"]
                assert flavor["name"] in flavors
                assert queue["spec"]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": ns}
            assert kube.get(f"{KUEUE}/namespaces/{ns}/localqueues/team-a") is None
            for name in gangs:
                kube.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/{name}",
                             query={"propagationPolicy": "Background"})
            wait_until(lambda: not kube.list_all(PROVREQS.format(ns=ns))[0], 120, what="the requests gone")
            wait_until(lambda: not [m for m in controller.made.values() if m], 60, what="the requests' nodes gone")
        finally:
            delete_queue_objects(kube)
    assert controller.errors == []
