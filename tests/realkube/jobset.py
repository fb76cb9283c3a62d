"""The real JobSet controller (sigs.k8s.io/jobset v0.11.1) on a real cluster, installed from the release's manifests.

What is installed is what `kubectl kustomize config/default` renders from the release's module (its release
manifests are built from that tree): the JobSet CRD, the manager's RBAC, its ConfigMap, the webhook configurations
(JobSet defaulting and validation; the pod webhooks, which select only pods labelled
`jobset.sigs.k8s.io/jobset-name`). Changed, because the manager runs as a process on loopback instead of a
Deployment behind a Service, as tests/realkube/kueue.py does for Kueue:
- every webhook and the CRD's conversion clientConfig point at `https://127.0.0.1:<port><path>` with the cluster
  CA as caBundle (the fixture's certificate); the release's internal cert management (cert-controller writing a
  Secret and patching the webhook configurations) is off, as with cert-manager;
- the Configuration serves no metrics or health port and elects no leader (one replica);
- the manager authenticates with a token of its own ServiceAccount (`jobset-controller-manager`), so the release's
  RBAC is what it runs with.
The Deployment, the Services and the (empty) cert Secret are left out.

On a MultiKueue manager the controller runs too, and leaves the queued JobSet alone: Kueue's webhook sets its
`spec.managedBy` to `kueue.x-k8s.io/multikueue`, which JobSet's reconciler skips (JobSet >= v0.6).
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from geosched.kube.client import Kube
from tests.realkube.binaries import Binaries
from tests.realkube.cluster import Cluster, ControlPlane, apply, kubeconfig, kubeconfig_entry
from tests.realkube.kueue import loopback_client, strip
from tests.realkube.procs import Proc, StartError, free_port

Obj = dict[str, Any]
NAMESPACE = "jobset-system"
SERVICE_ACCOUNT = "jobset-controller-manager"
CONFIG_KEY = "controller_manager_config.yaml"
CRD = "jobsets.jobset.x-k8s.io"
API = "jobset.x-k8s.io/v1alpha2"
SKIPPED_KINDS = {"Deployment", "Service", "Secret"}


def render(bins: Binaries, directory: Path) -> list[Obj]:
    """The release's manifests, rendered once per session by the kubectl built beside the API server."""
    target = directory / "jobset-release.yaml"
    if not target.exists():
        proc = subprocess.run([bins["kubectl"], "kustomize", str(bins.jobset_config / "default")],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise StartError(f"kubectl kustomize of JobSet's config/default failed: {proc.stderr.strip()}")
        target.write_text(proc.stdout)
    return [d for d in yaml.safe_load_all(target.read_text()) if d]


class JobSetController:
    """One JobSet controller manager on one cluster."""

    def __init__(self, plane: ControlPlane, cluster: Cluster, bins: Binaries, manifests: list[Obj]) -> None:
        self.cluster = cluster
        self.directory = cluster.directory / "jobset"
        self.directory.mkdir()
        self.port = free_port()
        ca = cluster.ca.pem
        serving = cluster.ca.issue(f"jobset-webhook-service.{NAMESPACE}.svc", hosts=("127.0.0.1", "localhost"),
                                   server=True)
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
            config_file.write_text(yaml.safe_dump(self._configuration(by_kind, certs)))
            hooks = by_kind.pop("MutatingWebhookConfiguration", []) + by_kind.pop("ValidatingWebhookConfiguration",
                                                                                   [])
            for kind in ("Namespace", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding",
                         "ConfigMap"):
                for obj in by_kind.pop(kind, []):
                    apply(kube, obj)
            token = kube.request(
                "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token",
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"expirationSeconds": 86400}})["status"]["token"]
        leftover = set(by_kind) - SKIPPED_KINDS
        assert not leftover, f"JobSet's release holds kinds the harness does not install: {leftover}"
        identity = self.directory / "kubeconfig"
        entry = kubeconfig_entry(cluster.name, cluster.server, ca, {"token": token})
        identity.write_text(yaml.safe_dump(kubeconfig([entry], cluster.name)))
        identity.chmod(0o600)
        # The Deployment's own arguments (--config, --zap-log-level=2).
        self.proc = Proc(f"{cluster.name}/jobset", [bins["jobset"], f"--config={config_file}", "--zap-log-level=2"],
                         self.directory / "jobset.log", env={**os.environ, "KUBECONFIG": str(identity)})
        cluster.procs.append(self.proc)
        self.proc.wait_ready(self._serving, 120)
        with plane.kube(cluster.name) as kube:
            for hook in hooks:
                for webhook in hook.get("webhooks") or []:
                    webhook["clientConfig"] = loopback_client(self.port, webhook["clientConfig"], ca)
                apply(kube, hook)
            # Ready when the API server reaches the webhooks: a dry-run JobSet goes through the mutating and the
            # validating one (both failurePolicy Fail).
            self.proc.wait_ready(lambda: self._dry_run(kube), 60)

    def _configuration(self, by_kind: dict[str, list[Obj]], certs: Path) -> Obj:
        (configmap,) = [c for c in by_kind["ConfigMap"] if c["metadata"]["name"] == "jobset-manager-config"]
        config: Obj = yaml.safe_load(configmap["data"][CONFIG_KEY])
        # Field names: api/config/v1alpha1/configuration_types.go of the release. "0" turns a server off
        # (controller-runtime's metrics and health options).
        config["webhook"] = {"port": self.port, "host": "127.0.0.1", "certDir": str(certs)}
        config["metrics"] = {"bindAddress": "0", "certDir": str(certs)}
        config["health"] = {"healthProbeBindAddress": "0"}
        config["leaderElection"] = {"leaderElect": False}
        config["internalCertManagement"] = {"enable": False}
        configmap["data"][CONFIG_KEY] = yaml.safe_dump(config)
        return config

    def _wait_established(self, kube: Kube) -> None:
        deadline = time.monotonic() + 60
        while True:
            crd = kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}") or {}
            if any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (crd.get("status") or {}).get("conditions") or []):
                return
            if time.monotonic() > deadline:
                raise StartError(f"{self.cluster.name}: the JobSet CRD not established")
            time.sleep(0.2)  # real sleep: polling a real kube-apiserver until the CRD is Established

    def _serving(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.cluster.ca_file))
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock, \
                context.wrap_socket(sock, server_hostname="127.0.0.1"):
            return True

    def _dry_run(self, kube: Kube) -> bool:
        pod = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
        kube.request("POST", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets",
                     query={"dryRun": "All"},
                     body={"apiVersion": API, "kind": "JobSet", "metadata": {"name": "realkube-probe"},
                           "spec": {"replicatedJobs": [{"name": "w", "replicas": 1,
                                                        "template": {"spec": {"template": pod}}}]}})
        return True
