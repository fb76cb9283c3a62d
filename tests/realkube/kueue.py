"""Real Kueue on a real cluster, installed from the release's own manifests, and MultiKueue between clusters.

What is installed is what `kubectl kustomize config/default` renders from the release's module (the same tree
its release manifests are built from): the CRDs with their conversion webhooks, the manager's RBAC, its
ConfigMap `kueue-manager-config`, the webhook configurations. Changed, because the manager runs as a process on
loopback instead of a Deployment behind a Service:
- every webhook and conversion clientConfig points at `https://127.0.0.1:<port><path>` with the cluster CA as
  caBundle (the fixture's certificate; Kueue's internal cert management is off, as with cert-manager);
- the Configuration serves no metrics or health port and elects no leader (one replica), and names the
  MultiKueue dispatcher when asked (`multiKueue.dispatcherName`);
- the manager authenticates with a token of its own ServiceAccount (`kueue-controller-manager`), so the release's
  RBAC is what it runs with;
- VisibilityOnDemand is off: its extension API server would need an APIService routed to it.
The Deployment, the Services and the visibility APIService are left out.
"""

from __future__ import annotations

import base64
import copy
import os
import socket
import ssl
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from geosched.kube.client import Kube
from tests.realkube.binaries import ROOT, Binaries
from tests.realkube.cluster import Cluster, ControlPlane, apply, kubeconfig, kubeconfig_entry, wait_for
from tests.realkube.procs import Proc, StartError, free_port

Obj = dict[str, Any]
NAMESPACE = "kueue-system"
CONFIG_KEY = "controller_manager_config.yaml"
DISPATCHER = "geosched.io/dispatcher"
SKIPPED_KINDS = {"Deployment", "Service", "APIService", "Secret"}


def render(bins: Binaries, directory: Path) -> list[Obj]:
    """The release's manifests, rendered once per session by the kubectl built beside the API server."""
    target = directory / "kueue-release.yaml"
    if not target.exists():
        proc = subprocess.run([bins["kubectl"], "kustomize", str(bins.kueue_config / "default")],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise StartError(f"kubectl kustomize of Kueue's config/default failed: {proc.stderr.strip()}")
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


class Kueue:
    """One Kueue manager on one cluster."""

    def __init__(self, plane: ControlPlane, cluster: Cluster, bins: Binaries, manifests: list[Obj], *,
                 multikueue: bool = False, extra_config: Mapping[str, Any] | None = None,
                 frameworks: tuple[str, ...] = ("batch/job",)) -> None:
        self.cluster = cluster
        self.frameworks = frameworks
        self.directory = cluster.directory / "kueue"
        self.directory.mkdir()
        self.port = free_port()
        ca = cluster.ca.pem
        serving = cluster.ca.issue("kueue-webhook-service.kueue-system.svc", hosts=("127.0.0.1", "localhost"),
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
            config = self._configuration(by_kind, multikueue, extra_config or {})
            config_file = self.directory / "config.yaml"
            config_file.write_text(yaml.safe_dump(config))
            hooks = by_kind.pop("MutatingWebhookConfiguration", []) + by_kind.pop("ValidatingWebhookConfiguration",
                                                                                   [])
            for kind in ("Namespace", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding",
                         "ConfigMap"):
                for obj in by_kind.pop(kind, []):
                    apply(kube, obj)
            token = kube.request(
                "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/kueue-controller-manager/token",
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": {"expirationSeconds": 86400}})["status"]["token"]
        leftover = set(by_kind) - SKIPPED_KINDS
        assert not leftover, f"Kueue's release holds kinds the harness does not install: {leftover}"
        identity = self.directory / "kubeconfig"
        entry = kubeconfig_entry(cluster.name, cluster.server, ca, {"token": token})
        identity.write_text(yaml.safe_dump(kubeconfig([entry], cluster.name)))
        identity.chmod(0o600)
        self.proc = Proc(f"{cluster.name}/kueue", [
            *self._metrics_cert_mount(serving), bins["kueue"], f"--config={config_file}",
            "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=2",
        ], self.directory / "kueue.log", env={**os.environ, "KUBECONFIG": str(identity)})
        cluster.procs.append(self.proc)
        self.proc.wait_ready(self._serving, 120)
        with plane.kube(cluster.name) as kube:
            for hook in hooks:
                for webhook in hook.get("webhooks") or []:
                    webhook["clientConfig"] = loopback_client(self.port, webhook["clientConfig"], ca)
                apply(kube, hook)
            # Ready when the API server reaches the webhooks: a dry-run ClusterQueue goes through the mutating one.
            self.proc.wait_ready(lambda: self._dry_run(kube), 60)

    def _metrics_cert_mount(self, pair: Any) -> list[str]:
        """Without internal cert management Kueue reads its metrics certificate from a fixed path,
        /etc/kueue/metrics/certs (cmd/kueue/main.go), where its Deployment mounts the Secret cert-manager makes; it
        exits if the files are not there, even with metrics off. Here the process gets that path in a private mount
        namespace: an overlay on /etc whose upper layer holds the files (the machine's /etc is not touched). The
        paths reach `sh` as arguments, never inside the script."""
        upper, work = self.directory / "etc-upper", self.directory / "etc-work"
        certs = upper / "kueue" / "metrics" / "certs"
        certs.mkdir(parents=True)
        work.mkdir()
        (certs / "tls.crt").write_bytes(pair.cert)
        (certs / "tls.key").write_bytes(pair.key)
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        script = 'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc && shift 2 && exec "$@"'
        return ["unshare", *user, "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh",
                str(upper), str(work)]

    def _configuration(self, by_kind: dict[str, list[Obj]], multikueue: bool, extra: Mapping[str, Any]) -> Obj:
        (configmap,) = [c for c in by_kind["ConfigMap"] if c["metadata"]["name"] == "kueue-manager-config"]
        config = yaml.safe_load(configmap["data"][CONFIG_KEY])
        config["namespace"] = NAMESPACE
        config["health"] = {"healthProbeBindAddress": "0"}
        config["metrics"] = {"bindAddress": "0"}
        config["webhook"] = {"port": self.port, "host": "127.0.0.1", "certDir": str(self.directory / "certs")}
        config["leaderElection"] = {"leaderElect": False}
        config["internalCertManagement"] = {"enable": False}
        # Kueue's integration names (its Configuration's integrations.frameworks); JobSet's needs the JobSet CRD,
        # which the plane installs before Kueue starts (tests/realkube/jobset.py).
        config["integrations"] = {"frameworks": list(self.frameworks)}
        if multikueue:
            config["multiKueue"] = {"dispatcherName": DISPATCHER, "gcInterval": "30s",
                                    "origin": f"multikueue-{self.cluster.name}"}
        config.update(extra)
        configmap["data"][CONFIG_KEY] = yaml.safe_dump(config)
        return config

    def _wait_established(self, kube: Kube) -> None:
        deadline = time.monotonic() + 60
        while True:
            crds, _ = kube.list_all("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
            pending = [c["metadata"]["name"] for c in crds if c["metadata"]["name"].endswith("kueue.x-k8s.io")
                       and not any(cond.get("type") == "Established" and cond.get("status") == "True"
                                   for cond in (c.get("status") or {}).get("conditions") or [])]
            if not pending:
                return
            if time.monotonic() > deadline:
                raise StartError(f"Kueue's CRDs not established: {pending}")
            time.sleep(0.2)  # real sleep: polling a real kube-apiserver until Kueue's CRDs are Established

    def _serving(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.cluster.ca_file))
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock, \
                context.wrap_socket(sock, server_hostname="127.0.0.1"):
            return True

    def _dry_run(self, kube: Kube) -> bool:
        kube.request("POST", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", query={"dryRun": "All"},
                     body={"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                           "metadata": {"name": "realkube-probe"}, "spec": {}})
        return True


# Kueue's create-multikueue-kubeconfig.sh (site/static/examples/multikueue/create-multikueue-kubeconfig.sh, kueue
# main): the restricted identity MultiKueue uses in a worker, with the script's rules for the kinds run here (batch
# Jobs, JobSets, pods, Workloads; the script also lists Kubeflow, Ray and AppWrapper kinds, not installed here).
MULTIKUEUE_SA = "multikueue-sa"
_VERBS = ["create", "delete", "get", "list", "watch"]
MULTIKUEUE_SA_OBJECTS: tuple[Obj, ...] = (
    {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": MULTIKUEUE_SA, "namespace": NAMESPACE}},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": f"{MULTIKUEUE_SA}-role"},
     "rules": [
         {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": _VERBS},
         {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]},
         {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": _VERBS},
         {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
         {"apiGroups": [""], "resources": ["pods"], "verbs": _VERBS},
         {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": _VERBS},
         {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
     ]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
     "metadata": {"name": f"{MULTIKUEUE_SA}-crb"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{MULTIKUEUE_SA}-role"},
     "subjects": [{"kind": "ServiceAccount", "name": MULTIKUEUE_SA, "namespace": NAMESPACE}]},
    {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
     "metadata": {"name": MULTIKUEUE_SA, "namespace": NAMESPACE,
                  "annotations": {"kubernetes.io/service-account.name": MULTIKUEUE_SA}}},
)
GEOSCHED_WORKER_RBAC = ROOT / "deploy" / "multikueue" / "worker" / "rbac.yaml"


def worker_kubeconfig(plane: ControlPlane, worker: str) -> str:
    """The kubeconfig MultiKueue uses for `worker`, made as Kueue's script makes it: the multikueue-sa token from
    its service-account-token Secret (filled by the controller manager's token controller) and the cluster CA.
    The worker also gets geosched's own deploy/multikueue/worker RBAC, as its README tells users to apply: the
    dispatcher reads the worker's nodes with this identity."""
    with plane.kube(worker) as kube:
        for obj in (*MULTIKUEUE_SA_OBJECTS, *yaml.safe_load_all(GEOSCHED_WORKER_RBAC.read_text())):
            apply(kube, obj)
        secret = wait_for(lambda: ((kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{MULTIKUEUE_SA}") or {})
                                   .get("data") or {}).get("token"), 60, f"{worker}: a token in Secret {MULTIKUEUE_SA}")
    cluster = plane[worker]
    entry = kubeconfig_entry(worker, cluster.server, cluster.ca.pem,
                             {"token": base64.b64decode(secret).decode()}, f"{worker}-{MULTIKUEUE_SA}")
    return yaml.safe_dump(kubeconfig([entry], worker))
