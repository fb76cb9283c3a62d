"""deploy/scheduler: valid against the Kubernetes OpenAPI (strict), and RBAC that allows what a run does, no more
than it names."""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from geosched.kube.scheduler import parse_settings
from tests.kubeapi.kubeapi_support import FAST_LEASE, add_gang, add_nodes, scheduler, settings, wait_until
from tests.kubeemu import MultiCluster, RequestRecord, parse_api_path

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "scheduler"
K8S_VERSIONS = ("1.29", kubernetes_validate.utils.latest_version())


def manifests(folder: Path = DEPLOY) -> list[dict[str, Any]]:
    """Every object the folder's kustomization applies."""
    listed = yaml.safe_load((folder / "kustomization.yaml").read_text(encoding="utf-8"))["resources"]
    docs: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.yaml")):
        if path.name in listed:
            docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    return docs


def find(kind: str, name: str | None = None, folder: Path = DEPLOY) -> dict[str, Any]:
    return next(m for m in manifests(folder)
                if m["kind"] == kind and (name is None or m["metadata"]["name"] == name))


def validate(obj: Mapping[str, Any]) -> None:
    for version in K8S_VERSIONS:
        try:
            kubernetes_validate.validate(dict(obj), version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise AssertionError(f"{obj['kind']}/{obj['metadata']['name']} invalid for {version}: {exc}") from None


@pytest.mark.parametrize("obj", manifests(), ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_every_object_is_valid_for_kubernetes(obj: dict[str, Any]) -> None:
    validate(obj)


def test_the_validation_is_strict() -> None:
    deployment = copy.deepcopy(find("Deployment"))
    deployment["spec"]["replica"] = 2
    with pytest.raises(AssertionError, match="replica"):
        validate(deployment)


def test_kustomization_lists_every_file() -> None:
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text(encoding="utf-8"))["resources"]
    assert sorted(listed) == sorted(p.name for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml")


def test_the_pieces_fit_together() -> None:
    deployment = find("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    account = find("ServiceAccount")
    config = parse_settings(yaml.safe_load(find("ConfigMap")["data"]["scheduler.yaml"]), "configmap")
    assert deployment["spec"]["replicas"] == 2 and config.leader_election.enabled
    assert "--leader-elect" in pod["containers"][0]["args"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert {m["metadata"].get("namespace") for m in manifests() if m["kind"] not in
            ("Namespace", "ClusterRole", "ClusterRoleBinding")} == {config.leader_election.namespace}
    role = find("Role")
    assert role["rules"][1]["resourceNames"] == [config.leader_election.name]
    mount = pod["containers"][0]["volumeMounts"][0]["mountPath"]
    assert f"--config={mount}/scheduler.yaml" in pod["containers"][0]["args"]
    for binding in (find("ClusterRoleBinding"), find("RoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                        "namespace": account["metadata"]["namespace"]}]


def test_no_rule_is_broader_than_needed() -> None:
    for role in (find("ClusterRole"), find("Role")):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
            assert "secrets" not in rule["resources"]
            if rule["resources"] == ["pods"]:
                assert not {"update", "patch", "create"} & set(rule["verbs"])


# --- every request of a scheduler run is allowed by these rules ----------------------------------------

VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def attributes(record: RequestRecord) -> tuple[str, str, str, str | None, str | None]:
    """(apiGroup, resource[/subresource], verb, namespace, name) as the API server's authorizer sees them."""
    path = parse_api_path(record.path)
    assert path.group is not None and path.plural is not None, record.path
    resource = path.plural + (f"/{path.subresource}" if path.subresource else "")
    if record.method == "GET":
        verb = "watch" if record.watch else ("get" if path.name else "list")
    else:
        verb = VERBS[record.method]
    return path.group, resource, verb, path.namespace, path.name


def allowed(attrs: tuple[str, str, str, str | None, str | None], folder: Path = DEPLOY) -> bool:
    group, resource, verb, namespace, name = attrs
    grants: list[tuple[dict[str, Any], str | None]] = []
    for m in manifests(folder):
        if m["kind"] in ("ClusterRole", "Role"):
            scope = m["metadata"]["namespace"] if m["kind"] == "Role" else None
            grants += [(rule, scope) for rule in m["rules"]]
    for rule, scope in grants:
        if scope is not None and namespace != scope:
            continue
        if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"] and (
                "resourceNames" not in rule or name in rule["resourceNames"]):
            return True
    return False


@pytest.mark.integration
def test_rbac_allows_every_request_of_a_scheduler_run(clusters: MultiCluster) -> None:
    assert (FAST_LEASE.namespace, FAST_LEASE.name) == ("geosched-system", "geosched-scheduler")
    cluster = clusters["cluster-a"]
    add_nodes(cluster, "us-east1", "ab", 2)
    owner = cluster.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                            "spec": {"parallelism": 1, "template": {"spec": {"containers": []}}}})
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "j-0", "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                                              "uid": owner["metadata"]["uid"], "controller": True}]},
           "spec": {"schedulerName": "geosched", "containers": [{"name": "c", "image": "x", "resources": {
               "limits": {"nvidia.com/gpu": "8"}}}]}}
    cluster.create(pod)
    pods = add_gang(cluster, "g", 2)
    cluster.inject(500, method="POST", path=r"/pods/g-1/binding$", times=None)  # forces a release
    with scheduler(clusters, config=settings()) as running:
        wait_until(lambda: running.stats.rollbacks >= 1 and running.stats.gangs_bound >= 1)
        wait_until(lambda: len(cluster.list("v1/events")) >= 2)
        cluster.drop_watches()
        time.sleep(0.3)  # real sleep: the scheduler's watches must reconnect after being dropped
    assert cluster.get("v1/pods", pods[0], "default") is None  # released

    seen = {attributes(r) for r in cluster.requests if r.fault is None}
    kinds = {(g, r, v) for g, r, v, _, _ in seen}
    # The run exercised every kind of request the scheduler makes...
    assert {("", "pods", "list"), ("", "pods", "watch"), ("", "pods/binding", "create"),
            ("", "pods/status", "patch"), ("", "pods", "delete"), ("", "pods", "get"), ("", "nodes", "list"),
            ("", "events", "create"), ("batch", "jobs", "get"), ("coordination.k8s.io", "leases", "update"),
            ("scheduling.x-k8s.io", "podgroups", "watch")} <= kinds
    # ...and the rules allow each one.
    denied = sorted(a for a in seen if not allowed(a))
    assert denied == []



def test_the_own_pods_policy_component_is_valid_and_lists_its_file() -> None:
    """deploy/scheduler/own-pods (the option that narrows the ClusterRole, docs/security.md): a kustomize Component
    whose objects are valid for Kubernetes (admissionregistration v1 is GA from 1.30, so the latest schema only).
    What it does is tested on a real kube-apiserver: tests/realkube/test_realkube_scheduler_policy.py."""
    folder = DEPLOY / "own-pods"
    component = yaml.safe_load((folder / "kustomization.yaml").read_text(encoding="utf-8"))
    assert component["kind"] == "Component" and component["resources"] == ["policy.yaml"]
    docs = [d for d in yaml.safe_load_all((folder / "policy.yaml").read_text(encoding="utf-8")) if d]
    for obj in docs:
        kubernetes_validate.validate(obj, kubernetes_validate.utils.latest_version(), strict=True)
    policy, binding = docs
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    # The policy names the account the kustomization deploys, and the scheduler name its configuration sets.
    account = find("ServiceAccount")["metadata"]
    assert f"system:serviceaccount:{account['namespace']}:{account['name']}" in policy["spec"]["matchConditions"][0][
        "expression"]
    config = find("ConfigMap")
    assert "scheduler_name: geosched" in next(iter(config["data"].values()))
    assert 'oldObject.spec.schedulerName == "geosched"' in policy["spec"]["validations"][0]["expression"]
