"""Shared pieces of the real-control-plane tests: reading what the real system did (which node each pod is bound
to, that node's zone and GPU model), waiting for it, and small object builders. (A uniquely named module rather
than conftest, so another test folder's conftest cannot shadow it.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from geosched.kube import keys
from geosched.kube.client import Kube
from geosched.kube.scheduler.pods import GANG_NOTE
from tests.realkube import binaries
from tests.realkube.cluster import wait_for

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]


def wait_until(check: Callable[[], Any], timeout: float = 60.0, every: float = 0.2, what: str = "") -> Any:
    return wait_for(check, timeout, what or repr(check), every)


@dataclass(frozen=True)
class Bound:
    pod: str
    node: str | None
    phase: str
    zone: str | None  # topology.kubernetes.io/zone (on EKS the zone name, us-east-1a)
    fleet_zone: str | None  # the zone as geosched names it: on AWS the zone ID (topology.k8s.aws/zone-id)
    accelerator: str | None  # GKE's cloud.google.com/gke-accelerator, or GFD's nvidia.com/gpu.product
    scheduler: str


def pods(kube: Kube, namespace: str, selector: str | None = None) -> list[Obj]:
    return kube.list_all(f"/api/v1/namespaces/{namespace}/pods", label_selector=selector)[0]


def placement(kube: Kube, namespace: str, selector: str | None = None) -> list[Bound]:
    """Each pod with the node the real scheduler bound it to, and that node's zone and GPU model as the node's
    own labels say."""
    nodes = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in kube.list_all("/api/v1/nodes")[0]}
    out = []
    for pod in pods(kube, namespace, selector):
        node = pod["spec"].get("nodeName")
        labels = nodes.get(node or "", {})
        out.append(Bound(pod["metadata"]["name"], node, (pod.get("status") or {}).get("phase", ""),
                         labels.get(keys.ZONE), labels.get(keys.AWS_ZONE_ID) or labels.get(keys.ZONE),
                         labels.get("cloud.google.com/gke-accelerator")
                         or labels.get("nvidia.com/gpu.product"), pod["spec"].get("schedulerName", "")))
    return sorted(out, key=lambda b: b.pod)


def wait_all_running(kube: Kube, namespace: str, count: int, selector: str | None = None,
                     timeout: float = 90.0) -> list[Bound]:
    """Until `count` pods exist and every one is bound and Running (kwok runs what the scheduler bound)."""
    def done() -> list[Bound] | None:
        found = placement(kube, namespace, selector)
        if len(found) == count and all(b.node and b.phase == "Running" for b in found):
            return found
        return None

    return list(wait_until(done, timeout, what=f"{count} pods Running in {kube.name}/{namespace}: "
                                               f"{placement(kube, namespace, selector)}"))


def events_for(kube: Kube, namespace: str, name: str) -> list[str]:
    events = kube.list_all(f"/api/v1/namespaces/{namespace}/events",
                           field_selector=f"involvedObject.name={name}")[0]
    return [f"{e.get('reason')}: {e.get('message')}" for e in events]


def geosched(*args: str, env: Mapping[str, str] | None = None, timeout: float = 120.0,
             home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, in its own process."""
    full_env = {**os.environ, **(env or {})}
    if home is not None:
        full_env["GEOSCHED_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "geosched", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=ROOT)


def compact_job(path: Path, name: str, *, workers: int, gpus: int, gpu: str = "H100", extra: str = "") -> Path:
    path.write_text(f"apiVersion: geosched.io/v1alpha1\nkind: Job\nname: {name}\nimage: ghcr.io/example/train:1\n"
                    f"workers: {workers}\ngpus_per_worker: {gpus}\ngpu: {gpu}\n{extra}", encoding="utf-8")
    return path


def cluster_config(path: Path, clusters: Mapping[str, Mapping[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "geosched.io/v1alpha1", "kind": "ClusterConfig",
                                    "clusters": {name: {"context": name, **dict(c)} for name, c in clusters.items()}}))
    return path


def kubectl(plane: Any, context: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The kubectl of the control plane's release (scripts/realkube builds it beside kube-apiserver)."""
    return subprocess.run([binaries.find()["kubectl"], "--kubeconfig", str(plane.kubeconfig), "--context", context,
                           *args], capture_output=True, text=True, timeout=120)


def job_pods_selector(job: str) -> str:
    return f"batch.kubernetes.io/job-name={job}"



# --- scheduler mode -----------------------------------------------------------------------------------------------
# Pods that must stay bound but not started (a half-bound gang: geosched releases only members that have not
# started) ask kwok for a long start with its own annotations, as a multi-gigabyte image pull keeps a bound pod
# Pending in a real cluster.
H100_ZONE = "us-east-1a"
SLOW_START = {"pod-create.stage.kwok.x-k8s.io/delay": "1h", "pod-create.stage.kwok.x-k8s.io/jitter-delay": "1h"}
SCHEDULER_CONTEXT = "eks-us-east-1"


@contextmanager
def scheduler_running(plane: Any, namespace: str, home: Path) -> Iterator[subprocess.Popen[str]]:
    """`geosched scheduler run` as a user starts it, in its own process; stopped with SIGTERM, which it must
    answer with a clean exit."""
    log = home / "scheduler.log"
    home.mkdir(exist_ok=True)
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "geosched", "scheduler", "run", "--context", SCHEDULER_CONTEXT, "--kubeconfig",
             str(plane.kubeconfig), "--namespace", namespace, "--no-leader-elect", "-v"],
            stdout=out, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
            env={**os.environ, "GEOSCHED_HOME": str(home)})
        try:
            yield proc
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError(f"the scheduler did not stop on SIGTERM:\n{log.read_text()}") from None
    assert code == 0, f"the scheduler exited {code}:\n{log.read_text()}"


def gang_job(name: str, workers: int, *, gpu_zone: str, memory: str | None = None, backoff_limit: int = 6,
             ignore_disruption: bool = True) -> dict[str, Any]:
    """A training Job for scheduler mode, as a user writes one: Indexed, all workers at once, pods to the geosched
    scheduler, and a podFailurePolicy that does not count a disruption (preemption, or geosched's rollback)."""
    resources: dict[str, Any] = {"limits": {"nvidia.com/gpu": "8"}}
    if memory:
        resources["requests"] = {"memory": memory}
    spec: dict[str, Any] = {
        "completionMode": "Indexed", "completions": workers, "parallelism": workers, "backoffLimit": backoff_limit,
        "template": {"spec": {
            "schedulerName": "geosched", "restartPolicy": "Never",
            "nodeSelector": {"topology.kubernetes.io/zone": gpu_zone},
            "containers": [{"name": "worker", "image": "ghcr.io/example/train:1", "resources": resources}]}}}
    if ignore_disruption:
        spec["podFailurePolicy"] = {"rules": [{"action": "Ignore",
                                               "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def create(kube: Kube, namespace: str, obj: dict[str, Any]) -> None:
    plural = {"Job": "jobs", "Pod": "pods"}[obj["kind"]]
    prefix = "/apis/batch/v1" if obj["kind"] == "Job" else "/api/v1"
    kube.request("POST", f"{prefix}/namespaces/{namespace}/{plural}", body=obj)


def job_condition(kube: Kube, namespace: str, name: str, kind: str) -> bool:
    job = kube.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}") or {}
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def strand(kube: Kube, namespace: str, job: str, gang: str, nodes: list[str], logs: Path | None = None) -> list[str]:
    """Leave `job` half bound, as a geosched replica that crashed mid-gang leaves it: its first pods bound (the
    binding carries geosched's gang annotation, which the API server copies onto the pod) and slow to start."""
    # As many pods as nodes to strand them on: the Job controller makes a gang's pods over several syncs.
    try:
        found = wait_until(lambda: names if len(names := sorted(
            p["metadata"]["name"] for p in pods(kube, namespace, job_pods_selector(job)))) >= len(nodes) else None,
            # Returns once they exist. It timed out in CI runs when Nodes an earlier test left in the zone made
            # `nodes` longer than the Job's pods (conftest's _no_node_left now prevents that): if it ever times out
            # again, the message says what the plane looked like.
            90, what=f"the Job controller's pods of {job}")
    except TimeoutError as exc:
        # What the plane looked like, for the next session to trace (this wait timed out twice in full CI runs).
        state = {"nodes": nodes, "pods": [(p["metadata"]["name"], (p.get("status") or {}).get("phase"))
                                          for p in pods(kube, namespace)],
                 "job": (kube.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}") or {}).get("status"),
                 "events": [(e.get("reason"), e.get("message")) for e in kube.list_all(
                     f"/api/v1/namespaces/{namespace}/events")[0]],
                 # The cluster's components on this namespace (`logs`: the cluster's directory of the plane).
                 "logs": [f"{f.name}: {line[:300]}" for f in sorted((logs or Path("/nonexistent")).glob("*.log"))
                          for line in f.read_text(errors="replace").splitlines() if namespace in line][-40:]}
        raise TimeoutError(f"{exc}: {state}") from None
    stranded = found[:len(nodes)]
    for pod, node in zip(stranded, nodes, strict=True):
        kube.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{pod}",
                     body={"metadata": {"annotations": SLOW_START}},
                     content_type="application/strategic-merge-patch+json")
        kube.request("POST", f"/api/v1/namespaces/{namespace}/pods/{pod}/binding", body={
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "annotations": {GANG_NOTE: gang}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    return stranded


def h100_nodes(kube: Kube) -> list[str]:
    return sorted(n["metadata"]["name"] for n in kube.list_all(
        "/api/v1/nodes", label_selector=f"topology.kubernetes.io/zone={H100_ZONE}")[0])


