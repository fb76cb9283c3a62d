"""GKE GPUDirect-TCPX (A3 High, a3-highgpu-8g) and GPUDirect-TCPXO (A3 Mega, a3-megagpu-8g) on a compact job's
worker pods: the `pods.gpudirect` option (geosched/kube/podoptions.py). Pure.

What a pod needs, by GKE's "Maximize GPU network bandwidth in Standard mode clusters"
(cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx, "Add GPUDirect to your manifests")
and the manifests that page deploys (github.com/GoogleCloudPlatform/container-engine-accelerators,
gpudirect-tcpx/nccl-test-latest.yaml and gpudirect-tcpxo/nccl-test-latest.yaml):

- multi-network annotations: `networking.gke.io/default-interface: eth0` and `networking.gke.io/interfaces`, a
  JSON list putting eth0 on the `default` network and eth1..eth4 (TCPX) or eth1..eth8 (TCPXO) on the GPU NIC
  networks, which the cluster's admin named when creating the GKENetworkParamSet/Network objects (the page calls
  them vpc1..vpcN; `gpudirect_networks` says the cluster's own);
- the receive-datapath manager (RxDM, "tcpx-daemon" / "tcpxo-daemon") beside the worker, with the GPU device
  nodes given to it by `devices.gke.io/container.<name>` (TCPXO adds /dev/dmabuf_import_helper), the
  capabilities the page lists instead of privileged (NET_ADMIN; TCPXO also NET_BIND_SERVICE), the host's
  /sys and /proc/sys at /hostsysfs and /hostprocsysfs, and the NVIDIA libraries the installer DaemonSet put in
  /home/kubernetes/bin/nvidia/lib64 mounted at /usr/local/nvidia/lib64;
- the worker: the same libraries and `LD_LIBRARY_PATH=/usr/local/nvidia/lib64` (where NCCL loads its net plugin,
  libnccl-net.so, from); TCPX: the daemon's unix socket through a shared emptyDir (daemon /run/tcpx, worker /tmp)
  and the interface variables of the page's NCCL configuration (NCCL_SOCKET_IFNAME, NCCL_GPUDIRECTTCPX_*);
  TCPXO: /dev/aperture_devices and NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY. The remaining NCCL tuning variables are
  the page's `nccl-env-profile.sh` in that libraries folder, which the worker's command sources.

Where geosched differs from the page: the daemon runs as a native sidecar (an init container with
`restartPolicy: Always`, kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/, on by default since
Kubernetes 1.29) rather than as a second plain container, because a Job's pod whose daemon never exits never
completes, and a completed worker must let its Job succeed.

Only where the page says it works: every placed node a GKE node (`cloud.google.com/gke-nodepool`) of the
machine type of that stack, and each worker holding a whole node's 8 GPUs (the page: a workload uses all GPUs
and all secondary NICs of its node). Anything else is refused in one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geosched.core import nodelabels
from geosched.core.models import Node
from geosched.kube import keys

LIBRARIES_HOST = "/home/kubernetes/bin/nvidia/lib64"
LIBRARIES_MOUNT = "/usr/local/nvidia/lib64"
GPUS = 8


@dataclass(frozen=True, slots=True)
class Stack:
    name: str
    machine_type: str
    nics: int
    daemon: str
    image: str
    devices: tuple[str, ...]
    capabilities: tuple[str, ...]


_NVIDIA = (*(f"/dev/nvidia{i}" for i in range(GPUS)), "/dev/nvidiactl", "/dev/nvidia-uvm")
# Images and tags as the page's manifests pin them (nccl-test-latest.yaml; tcpxo: nccl-test.yaml's newer tag).
STACKS = {
    "tcpx": Stack("tcpx", "a3-highgpu-8g", 4, "tcpx-daemon",
                  "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12", _NVIDIA, ("NET_ADMIN",)),
    "tcpxo": Stack("tcpxo", "a3-megagpu-8g", 8, "tcpxo-daemon",
                   "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21",
                   (*_NVIDIA, "/dev/dmabuf_import_helper"), ("NET_ADMIN", "NET_BIND_SERVICE")),
}


def default_networks(stack: str) -> tuple[str, ...]:
    """The page's network names: vpc1..vpc4 (TCPX) or vpc1..vpc8 (TCPXO)."""
    return tuple(f"vpc{i}" for i in range(1, STACKS[stack].nics + 1))


def refusal(stack: str, nodes: Mapping[str, Node], placed: Iterable[str], gpus_per_worker: int) -> str | None:
    """Why `stack` cannot serve this placement, or None when it can."""
    want = STACKS[stack]
    names = sorted(set(placed))
    if not names or any(n not in nodes for n in names):
        return "the placed nodes are unknown, so they cannot be shown to be GKE " + want.machine_type + " nodes"
    for name in names:
        node = nodes[name]
        if keys.GKE_NODEPOOL not in nodelabels.selectable(node):
            return (f"node {name} is not a GKE node (no {keys.GKE_NODEPOOL} label): GPUDirect-{stack.upper()} "
                    "is GKE's")
        if node.instance_type != want.machine_type:
            return (f"node {name} is {node.instance_type or 'of an unknown machine type'}; "
                    f"GPUDirect-{stack.upper()} runs on {want.machine_type} only")
    if gpus_per_worker != GPUS:
        return f"a worker must hold all {GPUS} GPUs of its node, not {gpus_per_worker}"
    return None


def apply(template: dict[str, Any], stack: str, networks: Sequence[str], daemon_image: str | None) -> None:
    """Add the stack to a worker pod template (metadata and spec; its first container is the worker), in place."""
    want = STACKS[stack]
    interfaces = [{"interfaceName": "eth0", "network": "default"},
                  *({"interfaceName": f"eth{i}", "network": n} for i, n in enumerate(networks, start=1))]
    annotations = template.setdefault("metadata", {}).setdefault("annotations", {})
    annotations["networking.gke.io/default-interface"] = "eth0"
    annotations["networking.gke.io/interfaces"] = json.dumps(interfaces, separators=(",", ":"))
    annotations[f"devices.gke.io/container.{want.daemon}"] = "".join(f"- path: {d}\n" for d in want.devices)

    spec = template["spec"]
    libraries = {"name": "libraries", "mountPath": LIBRARIES_MOUNT}
    volumes = [{"name": "libraries", "hostPath": {"path": LIBRARIES_HOST}},
               {"name": "sys", "hostPath": {"path": "/sys"}},
               {"name": "proc-sys", "hostPath": {"path": "/proc/sys"}}]
    daemon_mounts = [dict(libraries), {"name": "sys", "mountPath": "/hostsysfs"},
                     {"name": "proc-sys", "mountPath": "/hostprocsysfs"}]
    worker_mounts = [dict(libraries)]
    env = [{"name": "LD_LIBRARY_PATH", "value": LIBRARIES_MOUNT}]
    if stack == "tcpx":
        volumes.append({"name": "tcpx-socket", "emptyDir": {}})
        daemon_mounts.append({"name": "tcpx-socket", "mountPath": "/run/tcpx"})
        worker_mounts.append({"name": "tcpx-socket", "mountPath": "/tmp"})
        # The page's manifest writes the --setup_param value as `\"--verbose 128 2 0 \"`, shell quoting that
        # survived into YAML; the daemon wants the words inside the quotes, which an argv element carries as is.
        command = ["/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset", "a3vm", "--gpu_shmem_type", "fd",
                   "--uds_path", "/run/tcpx", "--setup_param", "--verbose 128 2 0 "]
        env += [{"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
                {"name": "NCCL_GPUDIRECTTCPX_CTRL_DEV", "value": "eth0"},
                {"name": "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME",
                 "value": ",".join(f"eth{i}" for i in range(1, len(networks) + 1))}]
        args: list[str] = []
    else:
        volumes.append({"name": "aperture-devices", "hostPath": {"path": "/dev/aperture_devices"}})
        worker_mounts.append({"name": "aperture-devices", "mountPath": "/dev/aperture_devices"})
        command = ["/bin/sh", "-c"]
        args = ["set -ex\nchmod 755 /fts/entrypoint_rxdm_container.sh\n"
                f"/fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics={want.nics} --uid= --alsologtostderr\n"]
        env.append({"name": "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", "value": "/dev/aperture_devices"})
    daemon: dict[str, Any] = {
        "name": want.daemon, "image": daemon_image or want.image, "imagePullPolicy": "Always",
        "command": command, "restartPolicy": "Always",
        "securityContext": {"capabilities": {"add": list(want.capabilities)}},
        "volumeMounts": daemon_mounts, "env": [{"name": "LD_LIBRARY_PATH", "value": LIBRARIES_MOUNT}]}
    if args:
        daemon["args"] = args
    spec.setdefault("initContainers", []).append(daemon)
    spec.setdefault("volumes", []).extend(volumes)
    worker = spec["containers"][0]
    worker.setdefault("volumeMounts", []).extend(worker_mounts)
    # The stack's variables replace the worker's own of the same name: NCCL must find the plugin the node has.
    names = {e["name"] for e in env}
    worker["env"] = [*(e for e in worker.get("env", []) if e.get("name") not in names), *env]
