"""deploy/multikueue: valid against the Kubernetes OpenAPI (strict), consistent with Kueue's Configuration snippet,
and RBAC that allows every request a dispatcher run makes in the manager cluster, no more than it names."""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.kube.client import Kube
from geosched.kube.multikueue.dispatcher import Dispatcher
from geosched.kube.multikueue.kueue import dispatcher_of
from geosched.kube.multikueue.settings import DispatcherSettings, parse_settings
from tests.kubeapi.kubeapi_support import FAST_LEASE, wait_until
from tests.kubeapi.multikueue_support import SITES, kueue_world, reserve_quota, seeded, workload
from tests.kubeapi.test_kubeapi_deploy import allowed, attributes, find, manifests, validate
from tests.kubeemu import MultiCluster

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "multikueue"
WORKER = DEPLOY / "worker"


@pytest.mark.parametrize("obj", manifests(DEPLOY) + manifests(WORKER),
                         ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_every_object_is_valid_for_kubernetes(obj: dict[str, Any]) -> None:
    validate(obj)


def test_the_validation_is_strict() -> None:
    deployment = copy.deepcopy(find("Deployment", folder=DEPLOY))
    deployment["spec"]["template"]["spec"]["containers"][0]["port"] = 9090
    with pytest.raises(AssertionError, match="port"):
        validate(deployment)


def test_kustomization_lists_every_file_but_kueues_own_configuration() -> None:
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text(encoding="utf-8"))["resources"]
    files = {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml", "kueue-configuration.yaml"}
    assert sorted(listed) == sorted(files)


def config() -> DispatcherSettings:
    return parse_settings(yaml.safe_load(find("ConfigMap", folder=DEPLOY)["data"]["dispatcher.yaml"]), "configmap")


def test_the_pieces_fit_together() -> None:
    settings = config()
    snippet = yaml.safe_load((DEPLOY / "kueue-configuration.yaml").read_text(encoding="utf-8"))
    assert (snippet["apiVersion"], snippet["kind"]) == ("config.kueue.x-k8s.io/v1beta2", "Configuration")
    assert dispatcher_of(snippet) == settings.dispatcher_name == "geosched.io/dispatcher"
    deployment = find("Deployment", folder=DEPLOY)
    pod = deployment["spec"]["template"]["spec"]
    account = find("ServiceAccount", folder=DEPLOY)
    assert deployment["spec"]["replicas"] == 2 and settings.leader_election.enabled
    args = pod["containers"][0]["args"]
    assert "--leader-elect" in args and "--in-cluster" in args
    mount = pod["containers"][0]["volumeMounts"][0]["mountPath"]
    assert f"--config={mount}/dispatcher.yaml" in args
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    lease = find("Role", "geosched-multikueue-leader-election", DEPLOY)
    assert lease["metadata"]["namespace"] == settings.leader_election.namespace
    assert lease["rules"][1]["resourceNames"] == [settings.leader_election.name]
    kueue = find("Role", "geosched-multikueue-kueue", DEPLOY)
    assert kueue["metadata"]["namespace"] == settings.kueue_namespace
    assert kueue["rules"][0]["resourceNames"] == [settings.kueue_configmap]
    for binding in (m for m in manifests(DEPLOY) if m["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                        "namespace": account["metadata"]["namespace"]}]


def test_no_rule_is_broader_than_needed() -> None:
    for role in (m for m in manifests(DEPLOY) + manifests(WORKER) if m["kind"] in ("ClusterRole", "Role")):
        for rule in role["rules"]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
            if {"secrets", "configmaps"} & set(rule["resources"]):
                assert rule["resourceNames"] and rule["verbs"] == ["get"]
            if "kueue.x-k8s.io" in rule["apiGroups"]:
                writes = {"create", "update", "patch", "delete", "deletecollection"} & set(rule["verbs"])
                assert not writes or rule["resources"] == ["workloads/status"]


# --- every request of a dispatcher run is allowed by these rules -----------------------------------------

@pytest.fixture
def world(tmp_path: Path) -> Iterator[MultiCluster]:
    with kueue_world(tmp_path, SITES) as mc:
        yield mc


@pytest.mark.integration
def test_rbac_allows_every_request_of_a_dispatcher_run(world: MultiCluster) -> None:
    manager = world["manager"]
    settings = replace(config(), leader_election=replace(FAST_LEASE, name="geosched-multikueue"))
    with Kube.open("manager", world.kubeconfig) as kube:
        for name in ("a", "b"):
            reserve_quota(kube, seeded(manager, workload(name, 1, 8)))
    manager.clear_requests()  # from here on, every request is the dispatcher's
    stop = threading.Event()
    with Dispatcher(Kube.open("manager", world.kubeconfig), settings) as d:
        thread = threading.Thread(target=d.run, args=(stop,), daemon=True)
        thread.start()
        try:
            wait_until(lambda: d.metrics.stats.outcomes["nominated"] == 2, timeout=20, what="two nominations")
        finally:
            stop.set()
            thread.join(10)
    # Nominated, and nothing said before every worker cluster had been read once.
    assert sorted(e["reason"] for e in manager.list("v1/events", "default")) == ["Nominated", "Nominated"]
    # Discovery (/apis/kueue.x-k8s.io/v1beta2) is a non-resource URL every authenticated user may read.
    seen = {attributes(r) for r in manager.requests
            if r.fault is None and not r.path.rstrip("/").endswith(("/v1beta2", "/v1beta1"))}
    kinds = {(g, r, v) for g, r, v, _, _ in seen}
    # The run exercised every kind of request the dispatcher makes...
    assert {("kueue.x-k8s.io", "workloads", "list"), ("kueue.x-k8s.io", "workloads", "watch"),
            ("kueue.x-k8s.io", "clusterqueues", "watch"), ("kueue.x-k8s.io", "admissionchecks", "watch"),
            ("kueue.x-k8s.io", "multikueueconfigs", "watch"), ("kueue.x-k8s.io", "multikueueclusters", "watch"),
            ("kueue.x-k8s.io", "workloads/status", "patch"), ("", "secrets", "get"), ("", "configmaps", "get"),
            ("", "events", "create"), ("coordination.k8s.io", "leases", "create"),
            ("coordination.k8s.io", "leases", "update")} <= kinds
    # ...and the rules allow each one.
    denied = sorted(a for a in seen if not allowed(a, DEPLOY))
    assert denied == []
    # In each worker cluster, what it reads is what deploy/multikueue/worker grants MultiKueue's identity.
    for name in SITES:
        reads = {attributes(r) for r in world[name].requests if r.fault is None}
        assert {(g, r, v) for g, r, v, _, _ in reads} == {("", "nodes", "list"), ("", "pods", "list")}
        assert all(allowed(a, WORKER) for a in reads)


def test_the_dispatcher_runs_the_image_the_repository_builds() -> None:
    """Issue 21 item 13: the Deployment named an image nobody builds; it is deploy/scheduler/Dockerfile's, which
    installs the metrics extra the dispatcher's --metrics-port needs, mapped by kustomize like the scheduler's."""
    root = Path(__file__).resolve().parents[2] / "deploy"
    ours = yaml.safe_load((root / "multikueue" / "kustomization.yaml").read_text(encoding="utf-8"))["images"]
    theirs = yaml.safe_load((root / "scheduler" / "kustomization.yaml").read_text(encoding="utf-8"))["images"]
    assert ours == theirs and [i["name"] for i in ours] == ["geosched"]
    deployment = yaml.safe_load((root / "multikueue" / "deployment.yaml").read_text(encoding="utf-8"))
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "geosched"
    # The wheel is installed with its extras named in brackets: the cluster client and the dispatcher's metrics.
    [extras] = re.findall(r'geosched-\*\.whl\)\[([a-z,]+)\]"', (root / "scheduler" / "Dockerfile").read_text(
        encoding="utf-8"))
    assert {"kubernetes", "metrics"} <= set(extras.split(","))
