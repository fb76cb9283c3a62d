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
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from geosched.kube.client import Kube
from tests.realkube.binaries import ROOT, Binaries
from tests.realkube.cluster import Cluster, ControlPlane, apply, kubeconfig, kubeconfig_entry, wait_for
from tests.realkube.manager import LoopbackManager, kustomize
from tests.realkube.pki import Pair

Obj = dict[str, Any]
NAMESPACE = "kueue-system"
DISPATCHER = "geosched.io/dispatcher"


def render(bins: Binaries, directory: Path) -> list[Obj]:
    """The release's manifests, rendered once per session."""
    return kustomize(bins["kubectl"], bins.kueue_config, directory / "kueue-release.yaml", "Kueue")


class Kueue(LoopbackManager):
    """One Kueue manager on one cluster."""

    name = "kueue"
    title = "Kueue"
    namespace = NAMESPACE
    service_account = "kueue-controller-manager"
    group = "kueue.x-k8s.io"
    skipped_kinds = frozenset({"Deployment", "Service", "APIService", "Secret"})

    def __init__(self, plane: ControlPlane, cluster: Cluster, bins: Binaries, manifests: list[Obj], *,
                 multikueue: bool = False, extra_config: Mapping[str, Any] | None = None,
                 frameworks: tuple[str, ...] = ("batch/job",)) -> None:
        self.frameworks = frameworks
        self.multikueue = multikueue
        self.extra_config = extra_config or {}
        super().__init__(plane, cluster, bins, manifests)

    def _command(self, bins: Binaries, config_file: Path, serving: Pair) -> list[str]:
        return [*self._metrics_cert_mount(serving), bins["kueue"], f"--config={config_file}",
                "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=2"]

    def _metrics_cert_mount(self, pair: Pair) -> list[str]:
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

    def _configuration(self, config: Obj, certs: Path) -> Obj:
        config["namespace"] = NAMESPACE
        config["health"] = {"healthProbeBindAddress": "0"}
        config["metrics"] = {"bindAddress": "0"}
        config["webhook"] = {"port": self.port, "host": "127.0.0.1", "certDir": str(certs)}
        config["leaderElection"] = {"leaderElect": False}
        config["internalCertManagement"] = {"enable": False}
        # Kueue's integration names (its Configuration's integrations.frameworks); JobSet's needs the JobSet CRD,
        # which the plane installs before Kueue starts (tests/realkube/jobset.py).
        config["integrations"] = {"frameworks": list(self.frameworks)}
        if self.multikueue:
            config["multiKueue"] = {"dispatcherName": DISPATCHER, "gcInterval": "30s",
                                    "origin": f"multikueue-{self.cluster.name}"}
        config.update(self.extra_config)
        return config

    def _dry_run(self, kube: Kube) -> bool:
        # Through the mutating webhook.
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
