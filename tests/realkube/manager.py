"""A controller manager from a release's own manifests, run as a process on loopback: what Kueue (kueue.py) and
the JobSet controller (jobset.py) share.

Both releases are kubebuilder projects: `kubectl kustomize config/default` renders their CRDs (with conversion
webhooks), the manager's RBAC and ServiceAccount, a ConfigMap holding the manager's Configuration, the webhook
configurations, a Deployment and the Services. Installed here, changed because the manager is a process on
loopback instead of a Deployment behind a Service:
- every webhook and conversion clientConfig points at `https://127.0.0.1:<port><path>` with the cluster CA as
  caBundle (the fixture's certificate; the release's internal cert management is off, as with cert-manager);
- the Configuration (each subclass's `_configuration`) serves no metrics or health port and elects no leader;
- the manager authenticates with a token of its own ServiceAccount, so the release's RBAC is what it runs with.
"""

from __future__ import annotations

import base64
import copy
import os
import socket
import ssl
import subprocess
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import yaml

from geosched.kube.client import Kube
from tests.realkube.binaries import Binaries
from tests.realkube.cluster import Cluster, ControlPlane, apply, kubeconfig, kubeconfig_entry
from tests.realkube.pki import Pair
from tests.realkube.procs import Proc, StartError, free_port

Obj = dict[str, Any]
CONFIG_KEY = "controller_manager_config.yaml"  # the key of the manager's Configuration in its ConfigMap
SETUP_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding", "ConfigMap")


def kustomize(kubectl: str, config: Path, target: Path, title: str) -> list[Obj]:
    """A release's config/default rendered once per session (into `target`) by the kubectl built beside the API
    server."""
    if not target.exists():
        proc = subprocess.run([kubectl, "kustomize", str(config / "default")], capture_output=True, text=True,
                              timeout=120)
        if proc.returncode != 0:
            raise StartError(f"kubectl kustomize of {title}'s config/default failed: {proc.stderr.strip()}")
        target.write_text(proc.stdout)
    return [d for d in yaml.safe_load_all(target.read_text()) if d]


def loopback_client(port: int, client: Obj, ca: bytes) -> Obj:
    """A webhook's Service clientConfig turned into the URL of a manager serving on loopback."""
    path = client["service"].get("path", "/")
    return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": base64.b64encode(ca).decode()}


def strip(obj: Obj) -> Obj:
    """A rendered object as one applies it: without what the server sets."""
    obj = copy.deepcopy(obj)
    obj.pop("status", None)
    obj["metadata"].pop("creationTimestamp", None)
    return obj


class LoopbackManager(ABC):
    """One manager on one cluster; a subclass names the release and writes its Configuration and command."""

    name: str  # the process's, its directory's and its log's name: "kueue", "jobset"
    title: str  # for messages: "Kueue", "JobSet"
    namespace: str
    service_account: str
    group: str  # the API group whose CRDs must be Established before the manager starts
    skipped_kinds: frozenset[str]  # what the release holds that a process on loopback does without

    def __init__(self, plane: ControlPlane, cluster: Cluster, bins: Binaries, manifests: list[Obj]) -> None:
        self.cluster = cluster
        self.directory = cluster.directory / self.name
        self.directory.mkdir()
        self.port = free_port()
        ca = cluster.ca.pem
        serving = cluster.ca.issue(f"{self.name}-webhook-service.{self.namespace}.svc",
                                   hosts=("127.0.0.1", "localhost"), server=True)
        certs = self.directory / "certs"
        certs.mkdir()
        (certs / "tls.crt").write_bytes(serving.cert)
        (certs / "tls.key").write_bytes(serving.key)
        by_kind: dict[str, list[Obj]] = {}
        for obj in manifests:
            by_kind.setdefault(obj["kind"], []).append(strip(obj))
        with plane.kube(cluster.name) as kube:
            for crd in by_kind.pop("CustomResourceDefinition", []):
                webhook = (crd["spec"].get("conversion") or {}).get("webhook")
                if webhook:
                    webhook["clientConfig"] = loopback_client(self.port, webhook["clientConfig"], ca)
                apply(kube, crd)
            self._wait_established(kube)
            config_file = self.directory / "config.yaml"
            config_file.write_text(yaml.safe_dump(self._configured(by_kind, certs)))
            hooks = by_kind.pop("MutatingWebhookConfiguration", []) + by_kind.pop("ValidatingWebhookConfiguration",
                                                                                   [])
            for kind in SETUP_KINDS:
                for obj in by_kind.pop(kind, []):
                    apply(kube, obj)
            token = kube.request(
                "POST", f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{self.service_account}/token",
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"expirationSeconds": 86400}})["status"]["token"]
        leftover = set(by_kind) - self.skipped_kinds
        assert not leftover, f"{self.title}'s release holds kinds the harness does not install: {leftover}"
        identity = self.directory / "kubeconfig"
        entry = kubeconfig_entry(cluster.name, cluster.server, ca, {"token": token})
        identity.write_text(yaml.safe_dump(kubeconfig([entry], cluster.name)))
        identity.chmod(0o600)
        self.proc = Proc(f"{cluster.name}/{self.name}", self._command(bins, config_file, serving),
                         self.directory / f"{self.name}.log", env={**os.environ, "KUBECONFIG": str(identity)})
        cluster.procs.append(self.proc)
        self.proc.wait_ready(self._serving, 120)
        with plane.kube(cluster.name) as kube:
            for hook in hooks:
                for webhook in hook.get("webhooks") or []:
                    webhook["clientConfig"] = loopback_client(self.port, webhook["clientConfig"], ca)
                apply(kube, hook)
            # Ready when the API server reaches the webhooks: a dry-run object goes through them.
            self.proc.wait_ready(lambda: self._dry_run(kube), 60)

    def _configured(self, by_kind: dict[str, list[Obj]], certs: Path) -> Obj:
        """The release's Configuration (its ConfigMap `<name>-manager-config`) as `_configuration` changes it,
        written back into the ConfigMap that is applied."""
        (configmap,) = [c for c in by_kind["ConfigMap"] if c["metadata"]["name"] == f"{self.name}-manager-config"]
        config: Obj = self._configuration(yaml.safe_load(configmap["data"][CONFIG_KEY]), certs)
        configmap["data"][CONFIG_KEY] = yaml.safe_dump(config)
        return config

    @abstractmethod
    def _configuration(self, config: Obj, certs: Path) -> Obj:
        """The release's Configuration changed for a process on loopback."""

    @abstractmethod
    def _command(self, bins: Binaries, config_file: Path, serving: Pair) -> list[str]:
        """The manager's command line."""

    @abstractmethod
    def _dry_run(self, kube: Kube) -> bool:
        """A dry-run create that goes through the manager's webhooks (failurePolicy Fail)."""

    def _wait_established(self, kube: Kube) -> None:
        deadline = time.monotonic() + 60
        while True:
            crds, _ = kube.list_all("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
            pending = [c["metadata"]["name"] for c in crds if c["metadata"]["name"].endswith(self.group)
                       and not any(cond.get("type") == "Established" and cond.get("status") == "True"
                                   for cond in (c.get("status") or {}).get("conditions") or [])]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise StartError(f"{self.cluster.name}: {self.title}'s CRDs not established: {pending}")
            time.sleep(0.2)  # real sleep: polling a real kube-apiserver until the release's CRDs are Established

    def _serving(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.cluster.ca_file))
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock, \
                context.wrap_socket(sock, server_hostname="127.0.0.1"):
            return True
