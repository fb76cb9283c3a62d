"""Real Kubernetes clusters on loopback: one etcd, and per cluster kube-apiserver (its own etcd prefix, RBAC and
the Node authorizer, service-account tokens), kube-controller-manager, kube-scheduler and kwok (simulated kubelets
for the nodes the tests create, and for their pods).

One etcd serves every cluster, each API server under its own `--etcd-prefix`: that is how Kubernetes' own
integration tests share one etcd between test API servers (test/integration/framework: a random prefix per
server); an API server reads and watches only under its prefix, so the clusters see nothing of each other.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from geosched.kube.client import APPLY_PATCH, Kube
from tests.realkube.binaries import Binaries
from tests.realkube.pki import CA, Pair, service_account_key
from tests.realkube.procs import Proc, StartError, free_port

Obj = dict[str, Any]
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
# kwok manages the nodes that carry this annotation, as its docs' examples mark them; other nodes would be a
# real kubelet's.
KWOK_NODE = "kwok.x-k8s.io/node"
START_TIMEOUT_S = 120.0
# The API servers' audit log records the requests to Kueue's API group by everyone but Kueue itself (its own
# watches and status writes would drown them): which version a client used is what the real server saw.
AUDIT_POLICY: Obj = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "users": ["system:serviceaccount:kueue-system:kueue-controller-manager"]},
        {"level": "Metadata", "resources": [{"group": "kueue.x-k8s.io"}]},
        {"level": "None"},
    ],
}


def _start(make: Any, ready: Any, timeout_s: float = START_TIMEOUT_S, tries: int = 3) -> Proc:
    """Start a server on freshly picked ports; if it dies because a port was taken between free_port() and its
    bind (another lane's test), pick again."""
    for attempt in range(tries):
        proc: Proc = make()
        try:
            proc.wait_ready(ready, timeout_s)
            return proc
        except StartError as exc:
            proc.stop()
            if "address already in use" not in str(exc) or attempt == tries - 1:
                raise
    raise AssertionError("unreachable")


class Etcd:
    def __init__(self, bins: Binaries, directory: Path) -> None:
        self.directory = directory
        self.url = ""

        def make() -> Proc:
            client, peer = free_port(), free_port()
            self.url = f"http://127.0.0.1:{client}"
            peer_url = f"http://127.0.0.1:{peer}"
            data = directory / "etcd-data"
            return Proc("etcd", [
                bins["etcd"], "--name=realkube", f"--data-dir={data}", f"--listen-client-urls={self.url}",
                f"--advertise-client-urls={self.url}", f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}", f"--initial-cluster=realkube={peer_url}",
                # Test data: durability buys nothing, fsync on a shared disk costs seconds per write burst.
                "--unsafe-no-fsync", "--log-level=warn", "--auto-compaction-mode=revision",
                "--auto-compaction-retention=1000",
            ], directory / "etcd.log")

        def ready() -> bool:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer:
                return bool(json.load(answer).get("health") == "true")

        self.proc = _start(make, ready)

    def stop(self) -> None:
        self.proc.stop()


def client_user(pair: Pair) -> Obj:
    return {"client-certificate-data": base64.b64encode(pair.cert).decode(),
            "client-key-data": base64.b64encode(pair.key).decode()}


def kubeconfig_entry(context: str, server: str, ca: bytes, user: Obj, user_name: str | None = None
                     ) -> tuple[Obj, Obj, Obj]:
    """One context's cluster, user and context stanzas (the CA and the credentials inline, as kubeadm writes)."""
    user_name = user_name or context
    return ({"name": context, "cluster": {"server": server,
                                          "certificate-authority-data": base64.b64encode(ca).decode()}},
            {"name": user_name, "user": user},
            {"name": context, "context": {"cluster": context, "user": user_name}})


def kubeconfig(entries: Iterable[tuple[Obj, Obj, Obj]], current: str) -> Obj:
    clusters, users, contexts = [], [], []
    for cluster, user, context in entries:
        clusters.append(cluster)
        users.append(user)
        contexts.append(context)
    return {"apiVersion": "v1", "kind": "Config", "clusters": clusters, "users": users, "contexts": contexts,
            "current-context": current, "preferences": {}}


@dataclass(frozen=True)
class ClusterSpec:
    """One cluster. `admission_plugins` are enabled beside the defaults (GKE runs ExtendedResourceToleration,
    EKS does not); `feature_gates` and `runtime_config` go to the API server (and the gates to the controller
    manager and scheduler too, as a cluster enables a gate everywhere)."""

    name: str
    nodes: Sequence[Obj] = ()
    admission_plugins: tuple[str, ...] = ()
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    runtime_config: tuple[str, ...] = ()


class Cluster:
    def __init__(self, spec: ClusterSpec, bins: Binaries, etcd: Etcd, directory: Path, index: int) -> None:
        self.spec = spec
        self.name = spec.name
        self.bins = bins
        self.etcd = etcd
        self.directory = directory / spec.name
        self.directory.mkdir()
        self.index = index
        self.procs: list[Proc] = []
        self.ca = CA(f"{spec.name}-ca")
        self.ca_file = self.directory / "ca.crt"
        self.ca_file.write_bytes(self.ca.pem)
        self.admin = self.ca.issue("realkube-admin", groups=("system:masters",))
        self.admin_files = self.admin.write(self.directory, "admin")
        self.sa_key = service_account_key()
        self.sa_pub_file, self.sa_key_file = self.sa_key.write(self.directory, "sa")
        self.port = 0
        self.server = ""
        self.apiserver: Proc | None = None
        self.audit_log = self.directory / "audit.log"

    # ---- the API server ----

    def _gates(self) -> list[str]:
        gates = self.spec.feature_gates
        return [f"--feature-gates={','.join(f'{k}={str(v).lower()}' for k, v in sorted(gates.items()))}"] \
            if gates else []

    def start_apiserver(self) -> None:
        serving = self.ca.issue("kube-apiserver", hosts=("127.0.0.1", "localhost", "10.96.0.1", "kubernetes",
                                                         "kubernetes.default", "kubernetes.default.svc",
                                                         "kubernetes.default.svc.cluster.local"), server=True)
        cert, key = serving.write(self.directory, "apiserver")
        plugins = ",".join(("NodeRestriction", *self.spec.admission_plugins))
        audit_policy = self.directory / "audit-policy.yaml"
        audit_policy.write_text(yaml.safe_dump(AUDIT_POLICY))

        def make() -> Proc:
            self.port = free_port()
            self.server = f"https://127.0.0.1:{self.port}"
            argv = [
                self.bins["kube-apiserver"], f"--etcd-servers={self.etcd.url}", f"--etcd-prefix=/{self.name}",
                "--bind-address=127.0.0.1", f"--secure-port={self.port}", "--advertise-address=127.0.0.1",
                f"--tls-cert-file={cert}", f"--tls-private-key-file={key}", f"--client-ca-file={self.ca_file}",
                f"--service-account-issuer={SA_ISSUER}", f"--service-account-key-file={self.sa_pub_file}",
                f"--service-account-signing-key-file={self.sa_key_file}",
                "--service-cluster-ip-range=10.96.0.0/16", "--authorization-mode=Node,RBAC",
                f"--enable-admission-plugins={plugins}",
                # The kubernetes Service's endpoint would be 127.0.0.1, which Endpoints validation refuses; nothing
                # here routes Service traffic anyway.
                "--endpoint-reconciler-type=none", "--profiling=false", "--v=1",
                f"--audit-policy-file={audit_policy}", f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                *self._gates(),
            ]
            if self.spec.runtime_config:
                argv.append(f"--runtime-config={','.join(self.spec.runtime_config)}")
            return Proc(f"{self.name}/kube-apiserver", argv, self.directory / "kube-apiserver.log")

        self._apiserver_make = make
        self.apiserver = make()
        self.procs.append(self.apiserver)

    def _get(self, path: str) -> tuple[int, bytes]:
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(*(str(p) for p in self.admin_files))
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=context, timeout=5)
        try:
            conn.request("GET", path)
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()

    def wait_apiserver(self) -> None:
        assert self.apiserver is not None
        for attempt in range(3):
            try:
                self.apiserver.wait_ready(lambda: self._get("/readyz")[0] == 200, START_TIMEOUT_S)
                return
            except StartError as exc:
                self.apiserver.stop()
                self.procs.remove(self.apiserver)
                if "address already in use" not in str(exc) or attempt == 2:
                    raise
                self.apiserver = self._apiserver_make()
                self.procs.append(self.apiserver)

    # ---- the other components ----

    def component_kubeconfig(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        path = self.directory / f"{user.replace(':', '-')}.kubeconfig"
        entry = kubeconfig_entry(self.name, self.server, self.ca.pem, client_user(self.ca.issue(user, groups=groups)))
        path.write_text(yaml.safe_dump(kubeconfig([entry], self.name)))
        path.chmod(0o600)
        return path

    def start_components(self) -> None:
        """kube-controller-manager and kube-scheduler under their bootstrap identities (the API server's RBAC
        bootstrap binds system:kube-controller-manager and system:kube-scheduler), kwok with the nodes' powers.
        No serving ports (--secure-port=0): nothing scrapes them, and no port can collide."""
        kcm = self.component_kubeconfig("system:kube-controller-manager")
        self.procs.append(Proc(f"{self.name}/kube-controller-manager", [
            self.bins["kube-controller-manager"], f"--kubeconfig={kcm}", "--secure-port=0", "--leader-elect=false",
            "--use-service-account-credentials=true", f"--service-account-private-key-file={self.sa_key_file}",
            f"--root-ca-file={self.ca_file}", f"--cluster-name={self.name}", "--v=1", *self._gates(),
        ], self.directory / "kube-controller-manager.log"))
        scheduler = self.component_kubeconfig("system:kube-scheduler")
        self.procs.append(Proc(f"{self.name}/kube-scheduler", [
            self.bins["kube-scheduler"], f"--kubeconfig={scheduler}", "--secure-port=0", "--leader-elect=false",
            "--v=1", *self._gates(),
        ], self.directory / "kube-scheduler.log"))
        # kwok stands in for every node's kubelet at once: the Node authorizer would confine a kubelet to its own
        # node, so kwok gets the powers of all of them (system:masters), as kwokctl's clusters give it.
        kwok = self.component_kubeconfig("kwok-controller", groups=("system:masters",))
        stages = ",".join(str(p) for p in kwok_stages(self.bins.kwok_stages, self.directory.parent))
        self.procs.append(Proc(f"{self.name}/kwok", [
            self.bins["kwok"], f"--kubeconfig={kwok}", f"--config={stages}", "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE}=fake", "--node-lease-duration-seconds=40",
            f"--cidr=10.{100 + self.index}.0.0/16", f"--node-ip=10.{200 + self.index}.0.1",
        ], self.directory / "kwok.log"))

    def check_alive(self) -> None:
        for proc in self.procs:
            if not proc.alive():
                raise StartError(f"{proc.name} exited with {proc.popen.returncode}:\n{proc.tail()}")

    def audit_events(self) -> list[Obj]:
        """The API server's audit record (AUDIT_POLICY: who asked for which Kueue API version)."""
        if not self.audit_log.exists():
            return []
        return [json.loads(line) for line in self.audit_log.read_text().splitlines() if line.strip()]

    def kubeconfig_entry(self) -> tuple[Obj, Obj, Obj]:
        return kubeconfig_entry(self.name, self.server, self.ca.pem, client_user(self.admin))

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()


class ControlPlane:
    """Several clusters over one etcd, and one kubeconfig with a context per cluster (admin identities)."""

    def __init__(self, bins: Binaries, directory: Path, specs: Sequence[ClusterSpec]) -> None:
        self.directory = directory
        self.clusters: dict[str, Cluster] = {}
        self.timings: dict[str, float] = {}
        self.kubeconfig = directory / "kubeconfig"
        self.etcd: Etcd | None = None
        start = time.monotonic()
        try:
            self.etcd = Etcd(bins, directory)
            self.timings["etcd"] = time.monotonic() - start
            for index, spec in enumerate(specs):
                self.clusters[spec.name] = Cluster(spec, bins, self.etcd, directory, index)
            for cluster in self.clusters.values():  # the API servers start side by side
                cluster.start_apiserver()
            for cluster in self.clusters.values():
                cluster.wait_apiserver()
            self.timings["apiservers"] = time.monotonic() - start
            self.kubeconfig.write_text(yaml.safe_dump(kubeconfig(
                [c.kubeconfig_entry() for c in self.clusters.values()], next(iter(self.clusters)))))
            self.kubeconfig.chmod(0o600)
            for cluster in self.clusters.values():
                cluster.start_components()
            for spec in specs:
                self.add_nodes(spec.name, spec.nodes)
            for name in self.clusters:
                self.wait_settled(name)
            self.timings["clusters"] = time.monotonic() - start
        except BaseException:
            self.stop()
            raise

    def __iter__(self) -> Iterator[Cluster]:
        return iter(self.clusters.values())

    def __getitem__(self, name: str) -> Cluster:
        return self.clusters[name]

    def kube(self, name: str) -> Kube:
        return Kube.open(name, self.kubeconfig)

    def add_nodes(self, name: str, nodes: Iterable[Obj]) -> None:
        with self.kube(name) as kube:
            for node in nodes:
                kube.request("POST", "/api/v1/nodes", body=node)

    def wait_settled(self, name: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until the cluster can run pods: the default ServiceAccount exists (the controller manager is working)
        and every kwok node is Ready without the node lifecycle controller's not-ready taint."""
        cluster = self.clusters[name]
        deadline = time.monotonic() + timeout_s
        with self.kube(name) as kube:
            while True:
                cluster.check_alive()
                sa = kube.get("/api/v1/namespaces/default/serviceaccounts/default")
                nodes, _ = kube.list_all("/api/v1/nodes")
                pending = [n["metadata"]["name"] for n in nodes if not _node_ready(n)]
                if sa is not None and not pending:
                    return
                if time.monotonic() > deadline:
                    raise StartError(f"{name}: not settled after {timeout_s:.0f} s (default ServiceAccount "
                                     f"{'there' if sa else 'missing'}; nodes not ready: {pending})")
                time.sleep(0.2)  # real sleep: polling a real kube-apiserver until its nodes and ServiceAccount settle

    def stop(self) -> None:
        for cluster in reversed(list(self.clusters.values())):
            cluster.stop()
        if self.etcd is not None:
            self.etcd.stop()


# What the kubelet does with a pod deleted while it runs, which kwok's stages lack (its "general" pod stages, which
# it calls work in progress, delete a pod only once it has no finalizers, and only pod-complete makes one terminal):
# it stops the containers and moves the pod to a terminal phase before it goes (kubernetes.io/docs/concepts/
# workloads/pods/pod-lifecycle, "Termination of Pods": Failed, a container stopped by SIGTERM exiting 143). Only
# then does the Job controller count the pod and remove its batch.kubernetes.io/job-tracking finalizer, and only
# then does kwok's pod-delete stage remove it.
POD_TERMINATE: Obj = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": "pod-terminate"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": [
            {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
            {"key": ".status.phase", "operator": "In", "values": ["Pending", "Running"]},
        ]},
        "next": {"statusTemplate": """{{ $now := Now }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 143
      finishedAt: {{ $now | Quote }}
      reason: Error
{{ end }}
phase: Failed
"""},
    },
}


def kwok_stages(source: Path, directory: Path) -> list[Path]:
    """kwok's stages (scripts/realkube copies them from its release) with the pods' default delays at zero, and
    POD_TERMINATE: a pod is created, becomes ready and goes at once unless it asks for a delay with kwok's
    annotations (`pod-create.stage.kwok.x-k8s.io/delay`, as a slow image pull), which the stages still read.
    (pod-delete's jitter up to the deletionTimestamp, the end of the grace period, goes too: a stopped container
    is gone as soon as it exits.)"""
    out = directory / "kwok-stages"
    if not out.exists():
        out.mkdir()
        for path in sorted(source.glob("*.yaml")):
            stage = yaml.safe_load(path.read_text())
            delay = stage["spec"].get("delay")
            if stage["spec"]["resourceRef"]["kind"] == "Pod" and delay:
                delay["durationMilliseconds"] = 0
                delay["jitterDurationMilliseconds"] = 0
                if ".metadata.deletionTimestamp" in str(delay.get("jitterDurationFrom")):
                    del delay["jitterDurationFrom"]
            (out / path.name).write_text(yaml.safe_dump(stage))
        (out / "pod-terminate.yaml").write_text(yaml.safe_dump(POD_TERMINATE))
    return sorted(out.glob("*.yaml"))


def condition(obj: Obj, kind: str) -> bool:
    """Whether the object's status has condition `kind` True."""
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def _node_ready(node: Obj) -> bool:
    conditions = {c.get("type"): c.get("status") for c in (node.get("status") or {}).get("conditions") or []}
    taints = {t.get("key") for t in (node.get("spec") or {}).get("taints") or []}
    return conditions.get("Ready") == "True" and "node.kubernetes.io/not-ready" not in taints


def apply(kube: Kube, obj: Obj, *, manager: str = "realkube") -> Obj:
    """Server-side apply of one object (its kind found by discovery), forced: the harness owns what it applies."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    resource = kube.resource(api_version, kind)
    if resource is None:
        raise LookupError(f"{kube.name}: {api_version} {kind} is not served")
    meta = obj["metadata"]
    path = resource.path(meta.get("namespace") if resource.namespaced else None, meta["name"])
    return dict(kube.request("PATCH", path, query={"fieldManager": manager, "force": "true"},
                             body=obj, content_type=APPLY_PATCH))


def wait_for(check: Any, timeout_s: float, what: str, every_s: float = 0.2) -> Any:
    """The first truthy value of `check()`; TimeoutError after `timeout_s` (never an AssertionError, so a strict
    xfail with raises=AssertionError cannot pass on a timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)  # real sleep: polling the real control plane between checks
