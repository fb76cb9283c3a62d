"""The cluster network probe's pods and logs (geosched/kube/netprobe/pods.py), pure: the manifests' pinning,
tolerations and least privilege; the client script run for real here (sh, iputils ping 20221126 and iperf 3.12 over
loopback, as the pod runs them on its node) and its log parsed into the probes' own results and LinkStats; the
captured testbed outputs (tests/probes/data: iputils ping, iperf3 -J) inside the markers; cut and missing output."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from geosched.kube.netprobe import pods
from geosched.kube.netprobe.pods import CLIENT_SCRIPT, ECHO, MARK, THROUGHPUT, ProbeSettings
from geosched.kube.tolerations import Toleration
from geosched.probes.aggregate import node_pair_links
from geosched.probes.failures import FailureKind
from geosched.probes.plan import Plan
from geosched.probes.results import RunReport
from geosched.probes.settings import PlanKind

DATA = Path(__file__).parents[1] / "probes" / "data"
GPU = Toleration("nvidia.com/gpu", "Equal", "present", "NoSchedule")
FAST = ProbeSettings(ping_count=5, ping_interval_s=0.2, iperf_seconds=1, iperf_omit_s=0)


def test_every_pod_is_pinned_to_its_node_tolerates_the_gpu_taint_and_holds_no_privilege() -> None:
    peer = pods.peer_pod("r1", 3, "gke-train-h100-a-x7k2", [GPU], FAST, "probes")
    client = pods.client_pod("r1", ECHO, 3, "gke-train-h100-a-x7k2",
                             [(ECHO, "n2", pods.echo_command("10.8.0.7", FAST))], [GPU], FAST, "probes")
    for pod in (peer, client):
        spec = pod["spec"]
        assert pod["metadata"]["namespace"] == "probes" and pod["metadata"]["labels"][pods.RUN_LABEL] == "r1"
        assert pods.node_of(pod) == "gke-train-h100-a-x7k2"
        # The DaemonSet controller's pinning: the real scheduler binds it, checking taints and resources.
        assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                    "values": ["gke-train-h100-a-x7k2"]}]}]}
        assert "nodeName" not in spec
        assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
                                        "effect": "NoSchedule"}]
        assert spec["automountServiceAccountToken"] is False and "hostNetwork" not in spec
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["sysctls"] == [{"name": "net.ipv4.ping_group_range", "value": "65534 65534"}]
        [container] = spec["containers"]
        assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                                "capabilities": {"drop": ["ALL"]}}
        assert "nvidia.com/gpu" not in str(container["resources"]) and "cpu" not in container["resources"]["limits"]
        assert container["image"] == pods.DEFAULT_IMAGE
    assert peer["spec"]["restartPolicy"] == "Always" and client["spec"]["restartPolicy"] == "Never"
    assert peer["spec"]["containers"][0]["command"] == ["timeout", "-k", "2", "600", "iperf3", "-s", "-p", "5201"]
    # The addresses travel as quoted arguments of the probes' own command lines, never pasted into the script.
    assert client["spec"]["containers"][0]["command"][:4] == ["sh", "-c", CLIENT_SCRIPT, "sh"]
    assert client["spec"]["containers"][0]["command"][4:] == [
        ECHO, "n2", "ping -n -c 5 -i 0.2 -W 1 -w 3 10.8.0.7"]
    assert "10.8.0.7" not in CLIENT_SCRIPT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def iperf_server() -> Iterator[int]:
    if shutil.which("iperf3") is None or shutil.which("ping") is None:
        pytest.skip("iperf3 and ping are needed to run the pod's script here")
    port = free_port()
    # The peer pod's own command, on this machine.
    proc = subprocess.Popen(pods.peer_pod("r", 0, "n", [], ProbeSettings(port=port, peer_lifetime_s=60), "ns")
                            ["spec"]["containers"][0]["command"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


def test_the_client_script_run_for_real_gives_the_probes_results_and_link_stats(iperf_server: int) -> None:
    settings = ProbeSettings(ping_count=5, ping_interval_s=0.2, iperf_seconds=1, iperf_omit_s=0, port=iperf_server)
    tests = [(ECHO, "peer-b", pods.echo_command("127.0.0.1", settings)),
             (THROUGHPUT, "peer-b", pods.throughput_command("127.0.0.1", settings))]
    command = pods.client_pod("r", THROUGHPUT, 0, "peer-a", tests, [], settings, "ns")["spec"]["containers"][0]
    log = subprocess.run(command["command"], capture_output=True, text=True, timeout=60, check=True).stdout
    sections, ended = pods.parse_log(log)
    assert ended and [(s.kind, s.peer, s.exit_status) for s in sections] == [
        (ECHO, "peer-b", 0), (THROUGHPUT, "peer-b", 0)]
    echoes, throughputs, failures = pods.results("peer-a", log, [(ECHO, "peer-b"), (THROUGHPUT, "peer-b")])
    assert failures == []
    [echo] = echoes
    assert (echo.src, echo.dst, echo.echo.sent, echo.echo.received) == ("peer-a", "peer-b", 5, 5)
    [tp] = throughputs
    assert tp.iperf.gbps > 0.1  # loopback
    report = RunReport(Plan(PlanKind.FULL, 0, (("peer-a", "peer-b"),), (("peer-a", "peer-b"),)), 0.0, 1.0,
                       tuple(echoes), tuple(throughputs), ())
    [(pair, link)] = node_pair_links(report).items()
    assert pair == ("peer-a", "peer-b")
    assert 0 < link.rtt_p50_ms <= link.rtt_p95_ms < 50 and link.loss == 0.0
    assert link.throughput_gbps == pytest.approx(tp.iperf.gbps)


def logged(*parts: tuple[str, str, str, int | None], end: bool = True) -> str:
    out = []
    for kind, peer, text, status in parts:
        out.append(f"{MARK} {kind} {peer}\n{text}")
        if status is not None:
            out.append(f"{MARK} exit {status}\n")
    if end:
        out.append(f"{MARK} end\n")
    return "".join(out)


def test_captured_outputs_inside_the_markers_parse_as_over_ssh() -> None:
    log = logged((ECHO, "b", (DATA / "ping_intra_zone.txt").read_text(), 0),
                 (ECHO, "c", (DATA / "ping_inter_zone_loss.txt").read_text(), 1),
                 (THROUGHPUT, "b", (DATA / "iperf3_client.json").read_text(), 0))
    echoes, throughputs, failures = pods.results("a", log, [(ECHO, "b"), (ECHO, "c"), (THROUGHPUT, "b")])
    assert failures == []
    assert [(e.dst, e.echo.sent) for e in echoes] == [("b", 20), ("c", 26)]  # -w: ping sends on until its deadline
    assert echoes[1].echo.loss > 0  # exit 1 with statistics: loss, a measurement
    assert throughputs[0].iperf.gbps > 0


def test_refused_cut_and_missing_outputs_are_failures_of_their_pairs() -> None:
    log = logged((THROUGHPUT, "b", (DATA / "iperf3_refused.json").read_text(), 1),
                 (ECHO, "c", "PING 10.0.0.3 (10.0.0.3) 56(84) bytes of data.\n", None), end=False)
    echoes, throughputs, failures = pods.results("a", log, [(THROUGHPUT, "b"), (ECHO, "c"), (ECHO, "d")])
    assert echoes == [] and throughputs == []
    assert [(f.subject, f.kind) for f in failures] == [("a->b", FailureKind.PROBE), ("a->c", FailureKind.PROBE),
                                                       ("a->d", FailureKind.PROBE)]
    assert failures[0].reason.startswith("throughput: iperf3: ")
    assert "cut" in failures[1].reason and failures[2].reason == "echo: not in the pod's log"
    # Output that merely looks like a marker inside a tool's text does not start a section.
    assert pods.parse_log(f"x {MARK} echo z\n")[0] == []
