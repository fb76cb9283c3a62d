"""The cluster network probe's pods and what they print. Pure: manifests in, log text out, no I/O.

Two kinds of pod, each pinned to one node:

- a **peer** on every node measured: `iperf3 -s` on the pod network for a bounded lifetime (`timeout` kills it on
  the node even if geosched is gone), whose pod IP is the address the others ping and send to;
- a **client** per source node and phase (echo, then throughput, as the SSH engine orders them: a throughput test
  fills its link's queues and would inflate any RTT measured across it): it runs the probes' own commands
  (geosched/probes/commands.py: `ping -n -c ... -w ...`, `iperf3 -c ... -J`) one after another and prints each
  output between marker lines, then exits.

Pinning is the DaemonSet controller's (Kubernetes docs, "DaemonSet", "How Daemon Pods are scheduled": a required
node affinity `matchFields` on `metadata.name`), so the real scheduler binds the pod and checks its tolerations;
the pods tolerate the GPU taints of the nodes (the caller passes them) and ask for no GPU. Least privilege: no
service account token, no host network, non-root (uid/gid 65534), every capability dropped, no privilege
escalation, RuntimeDefault seccomp, a read-only root file system (an emptyDir at /tmp, where iperf3 makes its
buffer file), which the Pod Security Standards' `restricted` profile admits; ping needs no CAP_NET_RAW: the pod's
`net.ipv4.ping_group_range` sysctl (in Kubernetes' safe set since v1.18, "Using sysctls in a Kubernetes Cluster")
lets gid 65534 open ICMP datagram sockets, which iputils ping uses when it may.

The log format (written by `CLIENT_SCRIPT`, read by `parse_log`):

    @@geosched-probe echo <peer node>
    <ping's stdout and stderr>
    @@geosched-probe exit <ping's exit status>
    ...
    @@geosched-probe end
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geosched.kube.tolerations import Toleration, to_manifest
from geosched.probes import commands
from geosched.probes.failures import Failure, FailureKind
from geosched.probes.parsers import OutputError, parse_iperf3, parse_ping
from geosched.probes.results import EchoResult, ThroughputResult

# nicolaka/netshoot (github.com/nicolaka/netshoot, its Dockerfile): Alpine with iperf3 and iputils ping among its
# network tools, multi-arch, public on Docker Hub; pinned to a release tag. Any image with `sh`, `timeout`,
# iputils `ping` and `iperf3` 3.x on PATH serves (`--probe-image`).
DEFAULT_IMAGE = "nicolaka/netshoot:v0.13"
RUN_LABEL = "geosched.io/netprobe-run"
ROLE_LABEL = "geosched.io/netprobe-role"
NODE_ANNOTATION = "geosched.io/netprobe-node"  # the node a pod is pinned to (names can outgrow a pod name)
MARK = "@@geosched-probe"
NOBODY = 65534
PEER, ECHO, THROUGHPUT = "peer", "echo", "throughput"

# Argv: triples of (kind, peer node, command line). Each command line is one of geosched/probes/commands.py's
# argv lists quoted by `shlex.join` (as the SSH probes send them), run by `sh -c`; node names and addresses only
# ever travel as separate arguments, never pasted into this script.
CLIENT_SCRIPT = f"""\
while [ "$#" -ge 3 ]; do
  echo "{MARK} $1 $2"
  sh -c "$3" 2>&1
  echo "{MARK} exit $?"
  shift 3
done
echo "{MARK} end"
"""


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    image: str = DEFAULT_IMAGE
    ping_count: int = 20
    ping_interval_s: float = 0.2
    reply_timeout_s: float = 1.0
    iperf_seconds: int = 5
    iperf_omit_s: int = 1
    connect_timeout_s: float = 5.0
    port: int = 5201
    peer_lifetime_s: int = 600  # the longest a peer's iperf3 server lives on its node, whatever happens to geosched


@dataclass(frozen=True, slots=True)
class Section:
    kind: str
    peer: str
    output: str
    exit_status: int | None  # None: the output was cut before its exit line


def pod_name(run: str, role: str, index: int) -> str:
    """`geosched-probe-<run>-<role>-<index>`: a DNS-1123 label for any run id of letters, digits and '-'."""
    return f"geosched-probe-{run}-{role}-{index}"


def peer_pod(run: str, index: int, node: str, tolerations: Sequence[Toleration], settings: ProbeSettings,
             namespace: str) -> dict[str, Any]:
    command = ["timeout", "-k", "2", str(settings.peer_lifetime_s), "iperf3", "-s", "-p", str(settings.port)]
    return _pod(run, PEER, index, node, tolerations, settings, namespace, command)


def client_pod(run: str, role: str, index: int, node: str, tests: Sequence[tuple[str, str, Sequence[str]]],
               tolerations: Sequence[Toleration], settings: ProbeSettings, namespace: str) -> dict[str, Any]:
    """`tests`: (kind, peer node, argv) in the order they run."""
    args = [a for kind, peer, argv in tests for a in (kind, peer, commands.to_command_line(argv))]
    return _pod(run, role, index, node, tolerations, settings, namespace, ["sh", "-c", CLIENT_SCRIPT, "sh", *args],
                restart="Never")


def echo_command(address: str, settings: ProbeSettings) -> list[str]:
    return commands.ping(address, settings.ping_count, settings.ping_interval_s, settings.reply_timeout_s)


def throughput_command(address: str, settings: ProbeSettings) -> list[str]:
    return commands.iperf_client(address, settings.port, settings.iperf_seconds, settings.iperf_omit_s,
                                 settings.connect_timeout_s)


def _pod(run: str, role: str, index: int, node: str, tolerations: Sequence[Toleration], settings: ProbeSettings,
         namespace: str, command: list[str], restart: str = "Always") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name(run, role, index), "namespace": namespace,
                     "labels": {RUN_LABEL: run, ROLE_LABEL: role, "app.kubernetes.io/managed-by": "geosched"},
                     "annotations": {NODE_ANNOTATION: node}},
        "spec": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}},
            "tolerations": [to_manifest(t) for t in tolerations],
            "restartPolicy": restart,
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "terminationGracePeriodSeconds": 2,
            "securityContext": {
                "runAsNonRoot": True, "runAsUser": NOBODY, "runAsGroup": NOBODY,
                "seccompProfile": {"type": "RuntimeDefault"},
                "sysctls": [{"name": "net.ipv4.ping_group_range", "value": f"{NOBODY} {NOBODY}"}]},
            "containers": [{
                "name": "probe", "image": settings.image, "command": command,
                # No CPU limit: a throttled iperf3 measures its quota, not the network.
                "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"memory": "256Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}]}],
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
        },
    }


_MARK_LINE = re.compile(rf"^{re.escape(MARK)} (\S+)(?: (\S+))?$")


def parse_log(text: str) -> tuple[list[Section], bool]:
    """The client's sections, and whether its end line came (False: the log was cut, the pod killed)."""
    sections: list[Section] = []
    current: tuple[str, str] | None = None
    lines: list[str] = []
    ended = False
    for line in text.splitlines():
        mark = _MARK_LINE.match(line.rstrip("\r"))
        if mark is None:
            if current is not None:
                lines.append(line)
            continue
        word, rest = mark.group(1), mark.group(2)
        if word == "exit" and current is not None:
            status = int(rest) if rest is not None and rest.isdigit() else None
            sections.append(Section(current[0], current[1], "\n".join(lines) + "\n", status))
            current, lines = None, []
        elif word == "end":
            ended = True
        elif word in (ECHO, THROUGHPUT) and rest is not None:
            current, lines = (word, rest), []
    if current is not None:
        sections.append(Section(current[0], current[1], "\n".join(lines) + "\n", None))
    return sections, ended


def results(source: str, text: str, planned: Iterable[tuple[str, str]]) -> tuple[
        list[EchoResult], list[ThroughputResult], list[Failure]]:
    """One client's log -> the probes' own result values (the same parsers as over SSH); each planned (kind, peer)
    it did not report, or reported unusably, is a `probe` failure of that pair."""
    echoes: list[EchoResult] = []
    throughputs: list[ThroughputResult] = []
    failures: list[Failure] = []
    sections, _ = parse_log(text)
    seen: set[tuple[str, str]] = set()
    for s in sections:
        subject = f"{source}->{s.peer}"
        seen.add((s.kind, s.peer))
        try:
            if s.exit_status is None:
                raise OutputError("the output was cut (the pod ended before the test did)")
            if s.kind == ECHO:
                echoes.append(EchoResult(source, s.peer, parse_ping(s.output, "", s.exit_status)))
            else:
                if s.exit_status != 0 and not s.output.lstrip().startswith("{"):
                    raise OutputError(f"iperf3 exit {s.exit_status}: {_excerpt(s.output)}")
                throughputs.append(ThroughputResult(source, s.peer, parse_iperf3(s.output)))
        except OutputError as exc:
            failures.append(Failure(subject, FailureKind.PROBE, f"{s.kind}: {exc}"))
    for kind, peer in planned:
        if (kind, peer) not in seen:
            failures.append(Failure(f"{source}->{peer}", FailureKind.PROBE, f"{kind}: not in the pod's log"))
    return echoes, throughputs, failures


def node_of(pod: Mapping[str, Any]) -> str:
    return str(((pod.get("metadata") or {}).get("annotations") or {}).get(NODE_ANNOTATION, ""))


def _excerpt(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
