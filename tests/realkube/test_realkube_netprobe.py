"""The cluster network probe (geosched/kube/netprobe/run.py) against the real control plane: the probe pods made
as a user holding only deploy/netprobe/rbac.yaml's Role (the real RBAC authorizer), bound by the real kube-scheduler
to exactly the nodes they are pinned to through the GPU taint they tolerate, and every one deleted at the end,
after a run that measured and after one where nothing could schedule and the deadline passed.

kwok runs no container and keeps no log, so the test stands in for the kubelet, and says so: a thread
(`Kubelet` below) takes each client pod the scheduler bound and kwok reports Running, runs the pod's own command
(`sh -c CLIENT_SCRIPT ...` with the probes' ping and iperf3 command lines) on this machine, with each peer pod's IP
replaced by 127.0.0.1 where one local `iperf3 -s` (the peer pod's own command) stands for every peer, keeps its
output as the pod's log, and marks the pod Succeeded as a kubelet would (pods/status). That output is real iputils
ping and iperf3 -J output, parsed by the probes' own parsers into LinkStats. The log itself is read through the
injected source; that the prober may read pods/log at all is asked of the real authorizer
(SelfSubjectAccessReview), as is what it may not do.

The nodes: the GKE-shaped cluster's four H100 nodes, two in us-central1-a and two in us-central1-b, every one
tainted nvidia.com/gpu=present:NoSchedule (nodes.py); the probe pods ask for no GPU, so ExtendedResourceToleration
adds nothing and only the toleration the probe passes lets them on.
"""

from __future__ import annotations

import re
import shlex
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from geosched.cli.main import app
from geosched.core.models import pair_key
from geosched.kube.client import Kube
from geosched.kube.netprobe import pods as probe_pods
from geosched.kube.netprobe import run as netprobe_run
from geosched.kube.netprobe.pods import ECHO, PEER, ROLE_LABEL, RUN_LABEL, THROUGHPUT, ProbeSettings
from geosched.kube.netprobe.run import probe_nodes, zone_of
from geosched.kube.tolerations import Toleration
from geosched.probes.aggregate import node_pair_links
from geosched.probes.failures import FailureKind
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, MotoServer
from tests.providers.eks_support import NODE_ROLE, one_subnet_cluster
from tests.providers.prov_support import aws_env
from tests.realkube.cluster import client_user, kubeconfig, kubeconfig_entry
from tests.realkube.nodegroups import NodegroupController
from tests.realkube.plane import EKS, GKE, Plane
from tests.realkube.realkube_support import (
    cluster_config,
    compact_job,
    job_pods_selector,
    wait_all_running,
    wait_until,
)

pytestmark = pytest.mark.realkube
ROOT = Path(__file__).parents[2]
PROBER = "geosched-prober"
GPU = Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prober_kube(plane: Plane, namespace: str, directory: Path) -> Kube:
    """The cluster as a user with no group and only the shipped Role, bound in `namespace`."""
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "netprobe" / "rbac.yaml").read_text()))
    with plane.kube(GKE) as admin:
        for doc in docs:
            doc["metadata"]["namespace"] = namespace
            kind = "roles" if doc["kind"] == "Role" else "rolebindings"
            admin.request("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/{kind}", body=doc)
    c = plane[GKE]
    path = directory / "prober.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig([kubeconfig_entry(GKE, c.server, c.ca.pem,
                                                                client_user(c.ca.issue(PROBER)))], GKE)))
    path.chmod(0o600)
    return Kube.open(GKE, path)


def allowed(kube: Kube, namespace: str, verb: str, resource: str, subresource: str = "") -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "resource": resource,
                                              "subresource": subresource}}}
    answer = kube.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review)
    return bool(answer["status"].get("allowed"))


class Kubelet(threading.Thread):
    """Stands in for the kubelets kwok does not run: each bound, Running client pod's command is run here, one at a
    time (one local iperf3 server stands for every peer), its output kept as the pod's log, the pod then marked
    Succeeded. Records the node each probe pod was bound to."""

    def __init__(self, plane: Plane, namespace: str, context: str = GKE, port: int | None = None) -> None:
        super().__init__(daemon=True)
        self.plane, self.namespace, self.context, self.port = plane, namespace, context, port
        self.logs: dict[str, str] = {}
        self.bound: dict[str, tuple[str, str]] = {}  # pod -> (node it is pinned to, node it was bound to)
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with self.plane.kube(self.context) as kube:
            while not self.stop.is_set():
                try:
                    self._sync(kube)
                except Exception as exc:  # said by the test, not lost in a thread
                    self.errors.append(repr(exc))
                self.stop.wait(0.2)

    def _sync(self, kube: Kube) -> None:
        found, _ = kube.list_all(f"/api/v1/namespaces/{self.namespace}/pods", label_selector=RUN_LABEL)
        peers = [p for p in found if p["metadata"]["labels"][ROLE_LABEL] == PEER]
        self._saw_peers(peers)
        ips = {str(p["status"]["podIP"]) for p in peers if (p.get("status") or {}).get("podIP")}
        for pod in found:
            name = pod["metadata"]["name"]
            if pod["spec"].get("nodeName"):
                self.bound[name] = (probe_pods.node_of(pod), pod["spec"]["nodeName"])
            role = pod["metadata"]["labels"][ROLE_LABEL]
            if role == PEER or name in self.logs or (pod.get("status") or {}).get("phase") != "Running":
                continue
            command = self._command(pod, [self._local(a, ips) for a in pod["spec"]["containers"][0]["command"]])
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            self.logs[name] = done.stdout
            phase = "Succeeded" if done.returncode == 0 else "Failed"
            kube.request("PATCH", f"/api/v1/namespaces/{self.namespace}/pods/{name}/status",
                         body={"status": {"phase": phase}}, content_type="application/merge-patch+json")

    def _saw_peers(self, peers: list[Any]) -> None:
        """Called with the peer pods at each pass (a subclass picks among their nodes)."""

    def _command(self, pod: Any, command: list[str]) -> list[str]:
        """The client pod's command as this machine runs it (a subclass rewrites some of its tests)."""
        return command

    def _local(self, arg: str, ips: set[str]) -> str:
        for ip in ips:  # whole addresses only: 10.0.0.1 is not a prefix of 10.0.0.12
            arg = re.sub(rf"(?<=\s){re.escape(ip)}(?=\s|$)", "127.0.0.1", arg)
        if self.port is not None:  # the one local server's port stands for the peers' 5201
            arg = re.sub(r"(?<=\s-p )5201(?=\s|$)", str(self.port), arg)
        return arg

    def log_of(self, kube: Kube, namespace: str, pod: Any) -> str:
        return self.logs[pod["metadata"]["name"]]


@pytest.fixture
def h100_nodes(realkube: Plane) -> dict[str, str]:
    with realkube.kube(GKE) as kube:
        found, _ = kube.list_all("/api/v1/nodes", label_selector="cloud.google.com/gke-nodepool in (h100-a,h100-b)")
    nodes = {n["metadata"]["name"]: zone_of(n) for n in found}
    assert sorted(nodes.values()) == ["us-central1-a"] * 2 + ["us-central1-b"] * 2
    return nodes


@pytest.fixture
def iperf_port() -> Iterator[int]:
    if shutil.which("iperf3") is None or shutil.which("ping") is None:
        pytest.skip("iperf3 and ping run the pods' commands here")
    port = free_port()
    command = probe_pods.peer_pod("r", 0, "n", [], ProbeSettings(port=port, peer_lifetime_s=300), "ns")
    proc = subprocess.Popen(command["spec"]["containers"][0]["command"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)  # real sleep: polling a real iperf3 server until it listens
    try:
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def run_pods(kube: Kube, namespace: str) -> list[str]:
    found, _ = kube.list_all(f"/api/v1/namespaces/{namespace}/pods", label_selector=RUN_LABEL)
    return sorted(p["metadata"]["name"] for p in found)


def test_probe_pods_land_on_their_nodes_measure_and_are_all_deleted(
        realkube: Plane, h100_nodes: dict[str, str], iperf_port: int, tmp_path: Path) -> None:
    settings = ProbeSettings(ping_count=5, ping_interval_s=0.2, iperf_seconds=1, iperf_omit_s=0, port=iperf_port)
    with realkube.namespace("netprobe", clusters=(GKE,)) as ns:
        kubelet = Kubelet(realkube, ns)
        kubelet.start()
        try:
            with prober_kube(realkube, ns, tmp_path) as kube:
                # What the Role grants, and what it does not, as the real authorizer answers.
                assert all(allowed(kube, ns, v, "pods") for v in ("create", "get", "list", "delete"))
                assert allowed(kube, ns, "get", "pods", "log")
                assert not allowed(kube, ns, "create", "pods", "exec")
                assert not allowed(kube, ns, "get", "secrets")
                assert not allowed(kube, "default", "create", "pods")
                # The text read pods/log goes through (Kube.read_text), on an endpoint the real server answers in
                # text to any authenticated user (system:public-info-viewer): kwok has no kubelet to serve logs.
                assert kube.read_text("/readyz") == "ok"
                result = probe_nodes(kube, h100_nodes, namespace=ns, tolerations=[GPU], settings=settings,
                                     timeout_s=120, poll_s=0.5, logs=kubelet.log_of)
                assert run_pods(kube, ns) == []  # every pod of the run deleted
        finally:
            kubelet.stop.set()
            kubelet.join(10)
    assert kubelet.errors == []
    report = result.report
    assert report.failures == (), report.failures
    assert result.leftover == ()
    # 4 peers, an echo client per source of the full mesh's 6 pairs, a throughput client per zone pair's
    # representative pair (a-a, b-b, a-b).
    assert len(report.plan.echo_pairs) == 6 and len(report.plan.throughput_pairs) == 3
    sources = {s for s, _ in report.plan.echo_pairs} | {s for s, _ in report.plan.throughput_pairs}
    assert result.created == 4 + len({s for s, _ in report.plan.echo_pairs}) + len(
        {s for s, _ in report.plan.throughput_pairs})
    assert sources <= set(h100_nodes)
    # The real scheduler bound every probe pod to exactly the node it is pinned to, through the GPU taint.
    assert len(kubelet.bound) == result.created
    assert all(pinned == bound for pinned, bound in kubelet.bound.values()), kubelet.bound
    assert {bound for _, bound in kubelet.bound.values()} == set(h100_nodes)
    # Measured: every pair an echo, three a throughput; the probes' LinkStats from real ping / iperf3 output.
    assert {(e.src, e.dst) for e in report.echoes} == set(report.plan.echo_pairs)
    assert {(t.src, t.dst) for t in report.throughputs} == set(report.plan.throughput_pairs)
    links = node_pair_links(report)
    assert len(links) == 6
    assert all(0 < x.rtt_p50_ms <= x.rtt_p95_ms < 50 and x.loss == 0.0 for x in links.values())
    for t in report.throughputs:  # the three measured pairs carry iperf3's goodput (loopback here)
        assert t.iperf.gbps > 0.1
        assert links[pair_key(t.src, t.dst)].throughput_gbps == pytest.approx(t.iperf.gbps)
    # As the placement reads it: every node pair, and the zone pairs a-a, a-b, b-b.
    view, samples = netprobe_run.to_view(report, h100_nodes)
    assert set(view.node_links) == set(links) and len(samples) == 6 + 3
    assert sorted(view.zone_links) == [("us-central1-a", "us-central1-a"), ("us-central1-a", "us-central1-b"),
                                       ("us-central1-b", "us-central1-b")]
    assert {kind for name in kubelet.logs for kind in (ECHO, THROUGHPUT) if f"-{kind}-" in name} == {ECHO, THROUGHPUT}


def test_without_the_toleration_nothing_schedules_and_every_pod_is_deleted_at_the_deadline(
        realkube: Plane, h100_nodes: dict[str, str], tmp_path: Path) -> None:
    with realkube.namespace("netprobe-tainted", clusters=(GKE,)) as ns, prober_kube(realkube, ns, tmp_path) as kube:
        start = time.monotonic()
        result = probe_nodes(kube, h100_nodes, namespace=ns, tolerations=(), timeout_s=8, poll_s=0.5)
        took = time.monotonic() - start
        assert run_pods(kube, ns) == []
    report = result.report
    assert result.created == 4 and result.leftover == ()
    assert report.echoes == () and report.throughputs == ()
    by_kind: dict[FailureKind, list[str]] = {}
    for f in report.failures:
        by_kind.setdefault(f.kind, []).append(f.subject)
    # Each peer pod named, Pending at the deadline; every planned pair skipped for want of its peer.
    assert sorted(by_kind[FailureKind.DEADLINE]) == sorted(h100_nodes)
    assert all("still Pending at the probe's deadline" in f.reason for f in report.failures
               if f.kind is FailureKind.DEADLINE)
    assert len(by_kind[FailureKind.SKIPPED]) == 6 + 3
    assert took < 8 + 30, took


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        server.reset()  # moto's backends are per process: another suite's cluster of this name would be there
        one_subnet_cluster(server.url, EKS, "use1-az6", "us-east-1a", "10.0.19.0/24")
        yield server


@pytest.fixture(scope="module")
def front(moto: MotoServer) -> Iterator[Ec2FaultProxy]:
    """What geosched talks to: moto behind the fault proxy, which answers the placement group calls moto lacks (a
    multi-node p5 gang's group is made in a cluster placement group of its own: providers/README.md)."""
    with Ec2FaultProxy(moto.url) as proxy:
        yield proxy


def test_up_probe_measures_the_new_nodes_over_the_cluster_and_places_on_the_measurements(
        realkube: Plane, moto: MotoServer, front: Ec2FaultProxy, iperf_port: int, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`geosched up --probe` in this process (so the kubelet stand-in's logs can be the probe's log source): a
    2-node p5 group joins (tests/realkube/nodegroups.py), the probe pods land on exactly its nodes through the
    group's taint nvidia.com/gpu=true:NoSchedule, their measurements reach the store and the placement, every probe
    pod is deleted, and the job runs on the group."""
    home = tmp_path / "home"
    with realkube.namespace("up-probe", clusters=(EKS,)) as ns, \
            NodegroupController(moto.url, EKS, realkube, EKS) as controller:
        kubelet = Kubelet(realkube, ns, EKS, port=iperf_port)
        kubelet.start()
        monkeypatch.setattr(netprobe_run, "api_logs", kubelet.log_of)
        try:
            config = cluster_config(tmp_path / "clusters.yaml", {EKS: {"namespace": ns}})
            job = compact_job(tmp_path / "train.yaml", "train", workers=2, gpus=8)
            result = CliRunner().invoke(app, [
                "--home", str(home), "up", str(job), "--cluster", EKS, "--kubeconfig", str(realkube.kubeconfig),
                "--clusters", str(config), "--region", "us-east-1", "--node-role", NODE_ROLE, "--name", "probed",
                "--yes", "--probe", "--probe-timeout", "120", "--join-timeout", "120"], env=aws_env(front.url))
            assert result.exit_code == 0, (result.output, result.exception)
            [group] = controller.made
            new = sorted(controller.made[group])
            with realkube.kube(EKS) as kube:
                assert run_pods(kube, ns) == []  # every probe pod deleted
                bound = wait_all_running(kube, ns, 2, job_pods_selector("train"), timeout=120)
                assert sorted(b.node or "" for b in bound) == new
                kube.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/train",
                             query={"propagationPolicy": "Background"})
        finally:
            kubelet.stop.set()
            kubelet.join(10)
        assert kubelet.errors == []
        # Peer pods on both nodes, an echo and a throughput client on the pair's source: bound where pinned.
        assert len(kubelet.bound) == 4 and all(p == b for p, b in kubelet.bound.values()), kubelet.bound
        assert {b for _, b in kubelet.bound.values()} == set(new)
        assert "probed 1 node pairs of " in result.output, result.output
        # The measurement is in the store, as `geosched probe`'s would be: the node pair and the zone's own link.
        with Store(home) as store:
            view = store.network_view()
        link = view.node_link(*new)
        assert link is not None and 0 < link.rtt_p50_ms < 50 and link.loss == 0.0 and link.throughput_gbps > 0.1
        assert view.zone_link("use1-az6", "use1-az6") is not None
        down = CliRunner().invoke(app, ["--home", str(home), "down", "probed", "--yes"], env=aws_env(front.url))
        assert down.exit_code == 0, down.output
    assert controller.errors == []


# A congested link, made real in a private network namespace (unshare -n: nothing of the host's network is
# touched): loopback at a 1500-byte MTU behind a token bucket (tbf, which this kernel has; netem it lacks) that a
# bulk iperf3 flow keeps full, so every echo request and reply waits in the queue. Measured here: ping RTT ~12 ms
# p50 against ~0.04 ms on the bare loopback.
CONGESTED = ("ip link set lo up && ip link set lo mtu 1500 && tc qdisc add dev lo root tbf rate 20mbit burst 5000 "
             "latency 30ms && (iperf3 -s -1 -p 5999 >/dev/null 2>&1 &) && sleep 0.3 && "
             "(iperf3 -c 127.0.0.1 -p 5999 -t 15 >/dev/null 2>&1 &) && sleep 1 && ")


class SlowNodeKubelet(Kubelet):
    """The kubelet stand-in, with every echo test to or from one node (`slow`, chosen by `pick` among the nodes the
    probe measures, once its pods exist) run over a congested link (`CONGESTED`): the probe's own ping command, its
    output real iputils output, only the link under it slow."""

    def __init__(self, plane: Plane, namespace: str, context: str, port: int, pick: Any) -> None:
        super().__init__(plane, namespace, context, port)
        self.pick = pick
        self.slow: str | None = None

    def _saw_peers(self, peers: list[Any]) -> None:
        if self.slow is None and peers:
            self.slow = self.pick(sorted({probe_pods.node_of(p) for p in peers}))

    def _command(self, pod: Any, command: list[str]) -> list[str]:
        source = probe_pods.node_of(pod)
        head, tests = command[:4], command[4:]
        for i in range(0, len(tests), 3):  # (kind, peer node, command line) triples (pods.CLIENT_SCRIPT)
            if tests[i] == ECHO and self.slow in (source, tests[i + 1]):
                tests[i + 2] = shlex.join(["unshare", "-n", "sh", "-c", CONGESTED + tests[i + 2]])
        return [*head, *tests]


def test_up_probe_moves_the_gang_off_the_node_whose_links_measure_slow(
        realkube: Plane, moto: MotoServer, front: Ec2FaultProxy, iperf_port: int, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`up --spare-nodes 1 --probe`: a 3-node p5 group for a 2-worker gang. Without measurements every node of the
    group is alike, and the placement (a dry-run submit on the network model, as `up` without --probe places)
    puts the gang on two of them; the kubelet stand-in makes the links of one of those two slow (its throughput
    echo tests run over a congested link, `CONGESTED`; the others over the bare loopback), and with the probe's
    measurements the gang lands on the other two nodes: the measured links, not the node order, chose them."""
    from geosched.cli.up import NODEGROUP_LABEL, on_the_group
    from geosched.kube.config import ClusterConfig
    from geosched.kube.submit import SubmitOptions, submit

    if shutil.which("tc") is None or shutil.which("unshare") is None:
        pytest.skip("tc and unshare make the congested link")
    home = tmp_path / "home"
    # The node the network model alone would give a worker: the first by name is what a tie between identical
    # nodes falls to (checked below against the real placement's dry run, so a change there fails loudly).
    with realkube.namespace("up-probe-move", clusters=(EKS,)) as ns, \
            NodegroupController(moto.url, EKS, realkube, EKS) as controller:
        kubelet = SlowNodeKubelet(realkube, ns, EKS, iperf_port, pick=lambda nodes: nodes[0])
        kubelet.start()
        monkeypatch.setattr(netprobe_run, "api_logs", kubelet.log_of)
        try:
            config = cluster_config(tmp_path / "clusters.yaml", {EKS: {"namespace": ns}})
            job = compact_job(tmp_path / "train.yaml", "train", workers=2, gpus=8)
            result = CliRunner().invoke(app, [
                "--home", str(home), "up", str(job), "--cluster", EKS, "--kubeconfig", str(realkube.kubeconfig),
                "--clusters", str(config), "--region", "us-east-1", "--node-role", NODE_ROLE, "--name", "moved",
                "--spare-nodes", "1", "--yes", "--probe", "--probe-timeout", "200", "--join-timeout", "120"],
                env=aws_env(front.url))
            assert result.exit_code == 0, (result.output, result.exception)
            [group] = controller.made
            new = sorted(controller.made[group])
            assert len(new) == 3 and kubelet.slow in new
            assert "probed 3 node pairs of " in result.output, result.output
            # With the measurements, the gang runs on the two nodes whose link is fast.
            with realkube.kube(EKS) as kube:
                assert run_pods(kube, ns) == []
                bound = wait_all_running(kube, ns, 2, job_pods_selector("train"), timeout=120)
                assert sorted(b.node or "" for b in bound) == sorted(set(new) - {kubelet.slow})
                kube.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/train",
                             query={"propagationPolicy": "Background"})
                wait_until(lambda: not kube.list_all(f"/api/v1/namespaces/{ns}/pods",
                                                     label_selector=job_pods_selector("train"))[0],
                           120, what="the job's pods gone")
            # Without them, the same placement on the same three (free again) nodes takes the slow one.
            blind = submit(job, kubeconfig=realkube.kubeconfig, contexts=(EKS,),
                           clusters={EKS: on_the_group(ClusterConfig(name=EKS, context=EKS, namespace=ns), "aws")},
                           options=SubmitOptions(dry_run=True, node_labels={NODEGROUP_LABEL: group}))
            assert blind.placement is not None, blind
            assert kubelet.slow in {a.node for a in blind.placement.assignments}
        finally:
            kubelet.stop.set()
            kubelet.join(10)
        assert kubelet.errors == []
        with Store(home) as store:
            view = store.network_view()
        fast_pair = sorted(set(new) - {kubelet.slow})
        slow_link, fast_link = view.node_link(kubelet.slow, fast_pair[0]), view.node_link(*fast_pair)
        assert slow_link is not None and fast_link is not None
        assert fast_link.rtt_p50_ms < 1.0 < slow_link.rtt_p50_ms, (slow_link, fast_link)
        down = CliRunner().invoke(app, ["--home", str(home), "down", "moved", "--yes"], env=aws_env(front.url))
        assert down.exit_code == 0, down.output
    assert controller.errors == []
