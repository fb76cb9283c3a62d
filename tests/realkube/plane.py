"""The session's control plane: four real clusters, Kueue on three, MultiKueue from the manager to two workers
(the table in tests/realkube/README.md says what each is shaped like).

- manager: GKE's default pool only (2 x e2-standard-8); Kueue as MultiKueue manager, dispatcherName
  geosched.io/dispatcher.
- Every cluster with Kueue also runs the JobSet controller (v0.11.1), and Kueue's jobset integration is on.
- gke-us-central1: GKE Standard without the GPU operator (ExtendedResourceToleration on); H100 and L4 pools in
  us-central1-a, H100 in us-central1-b with one node tainted dedicated=inference; a MultiKueue worker.
- eks-us-east-1: EKS managed node groups with the GPU operator's GFD; p5 (H100) in us-east-1a, p4d (A100) in
  us-east-1b; a MultiKueue worker.
- kubeadm-gang: a self-managed 1.36 with the Workload API's alpha gates on; p5 nodes in two zones; no Kueue.

The workers are MultiKueueClusters of the manager (kubeconfig Secrets `worker-<context>` made as Kueue's script
makes them), in the MultiKueueConfig `geosched-workers` of the AdmissionCheck `multikueue`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from geosched.kube.client import Kube
from tests.realkube import jobset, nodes
from tests.realkube.binaries import Binaries
from tests.realkube.cluster import (
    ClusterSpec,
    ControlPlane,
    apply,
    client_user,
    condition,
    kubeconfig,
    kubeconfig_entry,
    wait_for,
)
from tests.realkube.kueue import NAMESPACE, Kueue, render, worker_kubeconfig
from tests.realkube.procs import StartError, session_dir

MANAGER, GKE, EKS, GANG = "manager", "gke-us-central1", "eks-us-east-1", "kubeadm-gang"
WORKERS = (GKE, EKS)
ADMISSION_CHECK = "multikueue"
MULTIKUEUE_CONFIG = "geosched-workers"
KUEUE_V1BETA2 = "kueue.x-k8s.io/v1beta2"

SPECS = (
    ClusterSpec(MANAGER, nodes=nodes.gke_system_pool(), admission_plugins=("ExtendedResourceToleration",)),
    ClusterSpec(GKE, nodes=nodes.gke_us_central1(), admission_plugins=("ExtendedResourceToleration",)),
    ClusterSpec(EKS, nodes=nodes.eks_us_east_1()),
    # Kubernetes' own gang scheduling (KEP-4671) is alpha in 1.36: a self-managed control plane can turn it on
    # (kubernetes.io/docs/concepts/workloads/podgroup-api), a managed one cannot. Nodes as GFD labels them.
    ClusterSpec(GANG, nodes=nodes.gfd_pool(), feature_gates={"GenericWorkload": True, "GangScheduling": True,
                                                              "TopologyAwareWorkloadScheduling": True},
                runtime_config=("scheduling.k8s.io/v1alpha2=true",)),
)
KUEUE_CLUSTERS = (MANAGER, GKE, EKS)
# Kueue's integration names (its docs' integrations.frameworks): batch Jobs and JobSets, on manager and workers.
KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")


def install_crds(control: ControlPlane, cluster: str, files: Sequence[Path]) -> None:
    """Apply each file's CustomResourceDefinitions (comment headers and `---` separators allowed) and wait until
    the API server serves them (Established)."""
    crds = [d for f in files for d in yaml.safe_load_all(f.read_text()) if d]
    with control.kube(cluster) as kube:
        for crd in crds:
            apply(kube, crd)
        for crd in crds:
            path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
            wait_for(lambda p=path: condition(kube.get(p) or {}, "Established"), 60,
                     f"{cluster}: CRD {crd['metadata']['name']} Established")


class Plane:
    def __init__(self, control: ControlPlane, directory: Path) -> None:
        self.control = control
        self.directory = directory
        self.kubeconfig = control.kubeconfig
        self.timings = control.timings
        self.kueues: dict[str, Kueue] = {}
        self.jobsets: dict[str, jobset.JobSetController] = {}

    @classmethod
    def start(cls, bins: Binaries, specs: Sequence[ClusterSpec] = SPECS, *, crds: Sequence[Path] = ()) -> Plane:
        """The clusters of `specs`, Kueue on those of them in KUEUE_CLUSTERS, MultiKueue when the manager is among
        them. `crds`: CustomResourceDefinition files installed on every Kueue cluster before Kueue starts (Kueue
        sets up some controllers only for APIs served at its start: its provisioning controller only when
        ProvisioningRequests are, sigs.k8s.io/kueue v0.17.0 cmd/kueue/main.go `ServerSupportsProvisioningRequest`)."""
        directory = session_dir()
        control = ControlPlane(bins, directory, specs)
        plane = cls(control, directory)
        try:
            start = time.monotonic()
            if crds:
                for name in KUEUE_CLUSTERS:
                    if name in control.clusters:
                        install_crds(control, name, crds)
                plane.timings["crds"] = time.monotonic() - start
                start = time.monotonic()
            # JobSet first: Kueue's jobset integration needs the JobSet CRD when Kueue starts.
            jobset_manifests = jobset.render(bins, directory)
            for name in KUEUE_CLUSTERS:
                if name in control.clusters:
                    plane.jobsets[name] = jobset.JobSetController(control, control[name], bins, jobset_manifests)
            plane.timings["jobset"] = time.monotonic() - start
            start = time.monotonic()
            manifests = render(bins, directory)
            # One after the other: started side by side (threads), the managers' informers never synced.
            for name in KUEUE_CLUSTERS:
                if name in control.clusters:
                    plane.kueues[name] = Kueue(control, control[name], bins, manifests, multikueue=name == MANAGER,
                                               frameworks=KUEUE_FRAMEWORKS)
            plane.timings["kueue"] = time.monotonic() - start
            if MANAGER in control.clusters:
                start = time.monotonic()
                plane._wire_multikueue()
                plane.timings["multikueue"] = time.monotonic() - start
        except BaseException:
            plane.stop()
            raise
        return plane

    def _wire_multikueue(self) -> None:
        with self.kube(MANAGER) as kube:
            for worker in WORKERS:
                apply(kube, {"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": f"worker-{worker}", "namespace": NAMESPACE},
                             "stringData": {"kubeconfig": worker_kubeconfig(self.control, worker)}})
                apply(kube, {"apiVersion": KUEUE_V1BETA2, "kind": "MultiKueueCluster", "metadata": {"name": worker},
                             "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                                       "location": f"worker-{worker}"}}}})
            apply(kube, {"apiVersion": KUEUE_V1BETA2, "kind": "MultiKueueConfig",
                         "metadata": {"name": MULTIKUEUE_CONFIG}, "spec": {"clusters": list(WORKERS)}})
            apply(kube, {"apiVersion": KUEUE_V1BETA2, "kind": "AdmissionCheck", "metadata": {"name": ADMISSION_CHECK},
                         "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig",
                                                 "name": MULTIKUEUE_CONFIG}}})

            def active() -> bool:
                for worker in WORKERS:
                    found = kube.get(f"/apis/kueue.x-k8s.io/v1beta2/multikueueclusters/{worker}") or {}
                    if not condition(found, "Active"):
                        return False
                return condition(kube.get(f"/apis/kueue.x-k8s.io/v1beta2/admissionchecks/{ADMISSION_CHECK}") or {},
                                  "Active")

            try:
                wait_for(active, 90, "the MultiKueueClusters and the AdmissionCheck to be Active")
            except TimeoutError as exc:
                said = {name: (kube.get(f"/apis/kueue.x-k8s.io/v1beta2/{path}") or {}).get("status")
                        for name, path in [*((w, f"multikueueclusters/{w}") for w in WORKERS),
                                           (ADMISSION_CHECK, f"admissionchecks/{ADMISSION_CHECK}")]}
                raise StartError(f"{exc}: {said}") from None

    # ---- for tests ----

    def __getitem__(self, name: str) -> Any:
        return self.control[name]

    def kube(self, name: str) -> Kube:
        return self.control.kube(name)

    def user_kubeconfig(self, cluster: str, user: str, directory: Path) -> Path:
        """A kubeconfig for `cluster` as another administrator (CN `user`, group system:masters): the audit record
        then tells that user's requests from the harness's."""
        c = self.control[cluster]
        path = directory / f"{user}.kubeconfig"
        entry = kubeconfig_entry(cluster, c.server, c.ca.pem, client_user(c.ca.issue(user, groups=("system:masters",))))
        path.write_text(yaml.safe_dump(kubeconfig([entry], cluster)))
        path.chmod(0o600)
        return path

    @contextmanager
    def namespace(self, name: str, clusters: Sequence[str] = (MANAGER, *WORKERS), *,
                  pods_first: bool = True) -> Iterator[str]:
        """A namespace in each cluster for one test; deleted after it, waiting until the real namespace controller
        has removed it and all it held (its pods gone: kwok deletes them), so the next test finds the nodes free.

        With `pods_first` (the default) the harness deletes the namespace's pods itself as soon as the namespace is
        Terminating: kube-controller-manager's namespace controller first acts a fixed 5 s after the deletion
        (namespaceDeletionGracePeriod in pkg/controller/namespace), and a pod still running then makes it look again
        only seconds later; measured on test_realkube_submit.py, 10.9 s per namespace with pods, 5.9 s with them
        deleted first (about 5 s for each of some 40 tests). A Terminating namespace admits no new object
        (NamespaceLifecycle), so no controller can replace a pod deleted. `pods_first=False` leaves the pods to
        the namespace controller, for the test that the pods go with their namespace."""
        for cluster in clusters:
            with self.kube(cluster) as kube:
                apply(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
                wait_for(lambda k=kube: k.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"), 60,
                         f"{cluster}: ServiceAccount default in {name}")
        try:
            yield name
        finally:
            for cluster in clusters:
                with self.kube(cluster) as kube:
                    kube.request("DELETE", f"/api/v1/namespaces/{name}", query={"propagationPolicy": "Background"})
                    if pods_first:
                        kube.request("DELETE", f"/api/v1/namespaces/{name}/pods")
            for cluster in clusters:
                with self.kube(cluster) as kube:
                    wait_for(lambda k=kube: k.get(f"/api/v1/namespaces/{name}") is None, 120,
                             f"{cluster}: namespace {name} deleted")

    def stop(self) -> None:
        self.control.stop()
