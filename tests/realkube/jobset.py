"""The real JobSet controller (sigs.k8s.io/jobset v0.11.1) on a real cluster, installed from the release's manifests.

What is installed is what `kubectl kustomize config/default` renders from the release's module (its release
manifests are built from that tree): the JobSet CRD, the manager's RBAC, its ConfigMap, the webhook configurations
(JobSet defaulting and validation; the pod webhooks, which select only pods labelled
`jobset.sigs.k8s.io/jobset-name`). Changed as tests/realkube/manager.py says
(the manager a process on loopback, as for Kueue): the webhooks and the CRD's conversion point at loopback; the
release's internal cert management (cert-controller writing a Secret and patching the webhook configurations) is
off; no metrics or health port, no leader election (one replica); the manager runs with a token of its own
ServiceAccount (`jobset-controller-manager`). The Deployment, the Services and the (empty) cert Secret are left out.

On a MultiKueue manager the controller runs too, and leaves the queued JobSet alone: Kueue's webhook sets its
`spec.managedBy` to `kueue.x-k8s.io/multikueue`, which JobSet's reconciler skips (JobSet >= v0.6).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from geosched.kube.client import Kube
from tests.realkube.binaries import Binaries
from tests.realkube.manager import LoopbackManager, kustomize
from tests.realkube.pki import Pair

Obj = dict[str, Any]
NAMESPACE = "jobset-system"
API = "jobset.x-k8s.io/v1alpha2"


def render(bins: Binaries, directory: Path) -> list[Obj]:
    """The release's manifests, rendered once per session."""
    return kustomize(bins["kubectl"], bins.jobset_config, directory / "jobset-release.yaml", "JobSet")


class JobSetController(LoopbackManager):
    """One JobSet controller manager on one cluster."""

    name = "jobset"
    title = "JobSet"
    namespace = NAMESPACE
    service_account = "jobset-controller-manager"
    group = "jobset.x-k8s.io"
    skipped_kinds = frozenset({"Deployment", "Service", "Secret"})

    def _configuration(self, config: Obj, certs: Path) -> Obj:
        # Field names: api/config/v1alpha1/configuration_types.go of the release. "0" turns a server off
        # (controller-runtime's metrics and health options).
        config["webhook"] = {"port": self.port, "host": "127.0.0.1", "certDir": str(certs)}
        config["metrics"] = {"bindAddress": "0", "certDir": str(certs)}
        config["health"] = {"healthProbeBindAddress": "0"}
        config["leaderElection"] = {"leaderElect": False}
        config["internalCertManagement"] = {"enable": False}
        return config

    def _command(self, bins: Binaries, config_file: Path, serving: Pair) -> list[str]:
        # The Deployment's own arguments (--config, --zap-log-level=2).
        return [bins["jobset"], f"--config={config_file}", "--zap-log-level=2"]

    def _dry_run(self, kube: Kube) -> bool:
        # Through the mutating and the validating webhook (both failurePolicy Fail).
        pod = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}
        kube.request("POST", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets",
                     query={"dryRun": "All"},
                     body={"apiVersion": API, "kind": "JobSet", "metadata": {"name": "realkube-probe"},
                           "spec": {"replicatedJobs": [{"name": "w", "replicas": 1,
                                                        "template": {"spec": {"template": pod}}}]}})
        return True
