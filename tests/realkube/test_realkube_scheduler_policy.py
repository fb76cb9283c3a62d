"""The option that tightens the scheduler's RBAC (issue 19 item 9, docs/security.md), on a real kube-apiserver:
deploy/scheduler's ClusterRole lets its ServiceAccount delete and patch the status of any pod, kube-system's
included (RBAC cannot name "pods this scheduler placed"); deploy/scheduler/own-pods, a ValidatingAdmissionPolicy,
narrows that to pods whose schedulerName is geosched, outside kube-system. Each request is made as that
ServiceAccount (a TokenRequest token), with the real RBAC authorizer and the real admission chain."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from geosched.kube.client import Kube, connect_config
from tests.realkube.cluster import apply, kubeconfig, kubeconfig_entry, wait_for
from tests.realkube.plane import EKS, Plane
from tests.realkube.realkube_support import ROOT

pytestmark = pytest.mark.realkube

DEPLOY = ROOT / "deploy" / "scheduler"
SA_NAMESPACE, SA = "geosched-system", "geosched-scheduler"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PLURAL = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
          "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}


def objects(path: Any) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def pod(name: str, scheduler: str) -> dict[str, Any]:
    # A scheduler nobody runs keeps the pod Pending and unbound: what the scheduler's own pods look like before it
    # binds them, and another team's pods waiting on their scheduler.
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": scheduler,
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}


def disruption(name: str) -> dict[str, Any]:
    # The patch the scheduler sends before it releases a gang (kube/scheduler: DisruptionTarget, as preemption does).
    return {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                                       "message": f"{name}: released by geosched"}]}}


@contextmanager
def as_scheduler(realkube: Plane, kube: Kube) -> Iterator[Kube]:
    token = kube.request("POST", f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts/{SA}/token",
                         body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                               "spec": {"expirationSeconds": 600}})["status"]["token"]
    cluster = realkube[EKS]
    config = kubeconfig([kubeconfig_entry(EKS, cluster.server, cluster.ca.pem, {"token": token})], EKS)
    with Kube(connect_config(config, "test"), EKS) as client:
        yield client


def delete(client: Kube, namespace: str, name: str) -> int:
    """A dry-run delete as `client` (it passes authorization and admission, and removes nothing): the status."""
    try:
        client.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", query={"dryRun": "All"})
    except ApiException as exc:
        return int(exc.status)
    return 200


def patch_status(client: Kube, namespace: str, name: str) -> int:
    try:
        client.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", query={"dryRun": "All"},
                       body=disruption(name), content_type="application/strategic-merge-patch+json")
    except ApiException as exc:
        return int(exc.status)
    return 200


def test_the_own_pods_policy_narrows_the_scheduler_to_its_own_pods_outside_kube_system(realkube: Plane) -> None:
    policy = objects(DEPLOY / "own-pods" / "policy.yaml")
    assert [o["kind"] for o in policy] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    with realkube.namespace("sched-policy", clusters=(EKS,)) as ns, realkube.kube(EKS) as kube:
        for name in ("namespace.yaml", "serviceaccount.yaml", "rbac.yaml"):
            for obj in objects(DEPLOY / name):
                apply(kube, obj)
        kube.request("POST", f"/api/v1/namespaces/{ns}/pods", body=pod("ours", "geosched"))
        kube.request("POST", f"/api/v1/namespaces/{ns}/pods", body=pod("theirs", "team-b-scheduler"))
        kube.request("POST", "/api/v1/namespaces/kube-system/pods", body=pod("geosched-policy-probe", "geosched"))
        try:
            with as_scheduler(realkube, kube) as scheduler:
                # RBAC alone (the shipped ClusterRole): every one of these is allowed. This is the exposure.
                wait_for(lambda: delete(scheduler, ns, "theirs") == 200, 30, "the ClusterRole bound")
                assert patch_status(scheduler, ns, "theirs") == 200
                assert delete(scheduler, "kube-system", "geosched-policy-probe") == 200
                try:
                    for obj in policy:
                        apply(kube, obj)
                    # The policy takes effect once the API server has compiled it (a few seconds at most).
                    wait_for(lambda: delete(scheduler, ns, "theirs") == 403, 60, "the policy enforced")
                    assert patch_status(scheduler, ns, "theirs") == 403
                    assert delete(scheduler, "kube-system", "geosched-policy-probe") == 403
                    assert patch_status(scheduler, "kube-system", "geosched-policy-probe") == 403
                    # Its own pods, outside kube-system: the scheduler's work is unchanged.
                    assert delete(scheduler, ns, "ours") == 200
                    assert patch_status(scheduler, ns, "ours") == 200
                    # The policy matches the scheduler's account only: an administrator is not held by it.
                    assert delete(kube, ns, "theirs") == 200
                finally:
                    # Cluster-wide objects: the other tests of the shared plane must not meet them.
                    for obj in reversed(policy):
                        kube.request("DELETE", f"{ADMISSION}/{PLURAL[obj['kind']]}/{obj['metadata']['name']}")
        finally:
            kube.request("DELETE", "/api/v1/namespaces/kube-system/pods/geosched-policy-probe",
                         query={"gracePeriodSeconds": "0"})
