"""What a compact job's worker pods ask for beyond GPUs, per cluster (ClusterConfig `pods:`), with defaults per
cloud taken from the placed nodes' instance type. Pure. A user's own manifests (Job, JobSet, PyTorchJob) are
theirs: nothing here touches them.

```yaml
clusters:
  eks-us-east-1:
    pods:
      efa: auto               # vpc.amazonaws.com/efa per worker: auto (default) = the worker's share of the
                              # placed machine's EFA devices by its share of the GPUs (8 GPUs of a
                              # p5.48xlarge: 32; 4 GPUs: 16), or a count, or 0 for none; unset behind Kueue:
                              # none (the ClusterQueue must cover vpc.amazonaws.com/efa first)
      hugepages_2mi: 5120Mi   # optional hugepages-2Mi per worker (default: none)
      host_network: false     # hostNetwork (default false: EFA and the device plugin need no host network)
      shm: memory             # /dev/shm: memory (default, a memory-backed emptyDir) or none
      shm_size: 64Gi          # optional sizeLimit of that emptyDir (default: none, bounded by the pod's memory)
      cpu: "90"               # optional cpu request per worker
      memory: 1Ti             # optional memory request per worker
      priority_class: training  # optional priorityClassName
      gpudirect: tcpxo        # optional, GKE only: GPUDirect-TCPX (a3-highgpu-8g) or -TCPXO (a3-megagpu-8g)
      gpudirect_networks: [gpu-nic-1, gpu-nic-2, gpu-nic-3, gpu-nic-4, gpu-nic-5, gpu-nic-6, gpu-nic-7, gpu-nic-8]
                              # the cluster's GPU NIC Network objects, 4 (tcpx) or 8 (tcpxo) (default vpc1..vpcN)
      gpudirect_image: us-docker.pkg.dev/...  # optional: the RxDM daemon image (default: the tag GKE's page pins)
```

A compact job file may set the same keys under its own `pods:`; each key it sets wins over its cluster's.

Why these defaults, by the sources:

- EFA: on EKS the EFA device plugin advertises `vpc.amazonaws.com/efa`, one per EFA interface, and a pod gets only
  the EFA devices it requests; an NCCL job asks for all of them so that NCCL's aws-ofi-nccl plugin uses every
  network card (docs.aws.amazon.com/eks/latest/userguide/node-efa.html). The counts are the instance types' EFA
  interfaces (docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html): p4d/p4de.24xlarge 4,
  p5.48xlarge and p5e.48xlarge 32, p5en.48xlarge 16.
- Huge pages: libfabric's EFA provider prefers 2 MiB huge pages for its buffers (ofiwg/libfabric#9739), but a
  pod may ask for them only where the node reserves them, which depends on the AMI: opt in with `hugepages_2mi`.
- /dev/shm: a container's default /dev/shm is 64 MiB, too small for NCCL's shared-memory transport and PyTorch's
  data loader workers; a memory-backed emptyDir mounted at /dev/shm is the Kubernetes way to enlarge it
  (kubernetes.io/docs/concepts/storage/volumes/#emptydir, `medium: Memory`), as the EKS and GKE training examples do.
- hostNetwork stays off by default: EFA traffic bypasses the kernel through the device, not the pod network. GKE's
  GPUDirect-TCPX/TCPXO (a3-highgpu/a3-megagpu) does need `host_network: true` with its multi-network setup
  (cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx) only in its older form; the page's
  current manifests use multi-networking instead, which `gpudirect:` renders (geosched/kube/gpudirect.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self

from pydantic import ValidationInfo, field_validator, model_validator

from geosched.core.errors import InputError
from geosched.files.decl import pods as pods_decl
from geosched.files.decl.base import Refused, validate
from geosched.files.decl.pods import PodOptionsDecl
from geosched.kube import gpudirect as gpudirect_stack
from geosched.kube.resources import amount

EFA = "vpc.amazonaws.com/efa"
HUGEPAGES_2MI = "hugepages-2Mi"
# EFA interfaces per instance type (EC2 user guide, "Supported instance types" for EFA with accelerators).
EFA_PER_INSTANCE = {"p4d.24xlarge": 4, "p4de.24xlarge": 4, "p5.48xlarge": 32, "p5e.48xlarge": 32,
                    "p5en.48xlarge": 16}
NETWORK_NAME = re.compile(pods_decl.NETWORK_NAME)
SHM_VOLUME = "dshm"


@dataclass(frozen=True, slots=True)
class PodOptions:
    efa: int | str | None = None  # a count, AUTO, or None: AUTO except behind Kueue (see `efa_count`)
    hugepages_2mi: str | None = None
    host_network: bool = False
    shm: bool = True
    shm_size: str | None = None
    cpu: str | None = None
    memory: str | None = None
    priority_class: str | None = None
    gpudirect: str | None = None  # a key of gpudirect.STACKS
    gpudirect_networks: tuple[str, ...] = ()  # set (4 or 8 names) exactly when gpudirect is
    gpudirect_image: str | None = None


DEFAULT = PodOptions()


class _Read(PodOptionsDecl):
    """The declaration (geosched.files.decl.pods) with the checks that need Kubernetes' vocabulary."""

    @model_validator(mode="before")
    @classmethod
    def _sorted(cls, data: Any) -> Any:
        # Runs before the declaration's own check of the keys: of several unknown keys the first by name is named,
        # as the hand-written reader did (a stable line whatever order the file lists them in).
        return dict(sorted(data.items(), key=lambda item: str(item[0]))) if isinstance(data, Mapping) else data

    @field_validator("hugepages_2mi", "shm_size", "cpu", "memory", mode="before")
    @classmethod
    def _quantity(cls, value: Any, info: ValidationInfo) -> str:
        resource = {"hugepages_2mi": HUGEPAGES_2MI, "cpu": "cpu"}.get(str(info.field_name), "memory")
        if amount(resource, value) is None or not amount(resource, value):
            raise Refused(f"expected a Kubernetes quantity above 0, got {value!r}")
        return str(value)

    @model_validator(mode="after")
    def _across(self) -> Self:
        stack, networks, image = self.gpudirect, self.gpudirect_networks, self.gpudirect_image
        if stack is None:
            for key in ("gpudirect_networks", "gpudirect_image"):
                if getattr(self, key) is not None:
                    raise Refused("only with gpudirect: tcpx or tcpxo", key)
            return self
        nics = gpudirect_stack.STACKS[stack].nics
        if networks is None:
            networks = gpudirect_stack.default_networks(stack)
        if (not isinstance(networks, list | tuple) or len(networks) != nics
                or not all(isinstance(n, str) and NETWORK_NAME.fullmatch(n) for n in networks)):
            raise Refused(f"expected the names of the {nics} GPU NIC networks GPUDirect-{stack.upper()} uses "
                          f"(Network object names), got {networks!r}", "gpudirect_networks")
        if len(set(networks)) != nics:
            raise Refused(f"each network once, got {list(networks)!r}", "gpudirect_networks")
        # isprintable() is False for whitespace and for control characters (an ESC sequence would reach a
        # terminal when the rendered pod is shown); no image reference holds either.
        if image is not None and (not isinstance(image, str) or not image or not image.isprintable()
                                  or " " in image):
            raise Refused(f"expected an image reference, got {image!r}", "gpudirect_image")
        if self.host_network:
            # GKE multi-networking gives GPUDirect's NICs to the pod's own network namespace through the CNI
            # plugin; a hostNetwork pod has no namespace of its own and the kubelet calls no CNI plugin for it, so
            # its `networking.gke.io/interfaces` would attach nothing. The page's current manifests leave
            # hostNetwork off (gpudirect.py cites them), as does NVIDIA's GKE TCPXO profile
            # (docs.nvidia.com/aicr/latest/integrator-guide/gke-tcpxo-networking: "hostNetwork: false").
            raise Refused("must be false with gpudirect: its NICs reach the pod through GKE multi-networking, "
                          "which hostNetwork pods do not get", "host_network")
        if isinstance(self.efa, int) and self.efa > 0:
            raise Refused("EFA is AWS's and gpudirect GKE's: a pod cannot use both", "efa")
        return self


def parse(data: Any, source: str, path: str) -> PodOptions:
    """The `pods:` mapping of one cluster, read strictly: one line naming the field and why on a bad value."""
    if data is None:
        return DEFAULT
    if not isinstance(data, Mapping):
        raise InputError(source, path, "expected a mapping of pod options")
    read = validate(_Read, data, source, path)
    stack = read.gpudirect
    networks = () if stack is None else tuple(read.gpudirect_networks or gpudirect_stack.default_networks(stack))
    return PodOptions(efa=read.efa, hugepages_2mi=read.hugepages_2mi, host_network=read.host_network,
                      shm=read.shm == "memory", shm_size=read.shm_size, cpu=read.cpu, memory=read.memory,
                      priority_class=read.priority_class, gpudirect=stack, gpudirect_networks=networks,
                      gpudirect_image=read.gpudirect_image)


def merged(cluster: PodOptions, job: Mapping[str, Any] | None, source: str) -> PodOptions:
    """The cluster's options with the keys a compact job's own `pods:` sets taken from the job."""
    if not job:
        return cluster
    return parse({**to_dict(cluster), **job}, source, "pods")


def to_dict(options: PodOptions) -> dict[str, Any]:
    written = PodOptionsDecl.build(**{**{f: getattr(options, f) for f in PodOptions.__slots__},
                                      "shm": "memory" if options.shm else "none",
                                      "gpudirect_networks": list(options.gpudirect_networks)}).row()
    if options.gpudirect is None:  # only when set: the digests of clusters without GPUDirect do not change
        for key in ("gpudirect", "gpudirect_networks", "gpudirect_image"):
            del written[key]
    return written


def efa_count(options: PodOptions, machines: Iterable[tuple[str, int]], gpus_per_worker: int,
              kueue: bool = False) -> int:
    """EFA devices per worker: the option's count, or (auto) the worker's share of the placed machine's EFA devices
    by its share of the GPUs (a whole p5.48xlarge: 32; half of it: 16), the fewest if the gang spans machine types;
    0 when a placed type has none or no type is known. Unset behind Kueue: none, since Kueue admits a workload
    only if its ClusterQueue covers every resource its pods request, and an existing queue rarely covers EFA;
    say `efa: auto` once it does (`submit --kueue-objects` renders a ClusterQueue that covers what pods request)."""
    if isinstance(options.efa, int):
        return options.efa
    if options.efa is None and kueue:
        return 0
    counts = [EFA_PER_INSTANCE.get(t, 0) * min(gpus_per_worker, gpus) // gpus if gpus > 0 else 0
              for t, gpus in set(machines)]
    return min(counts) if counts else 0


def apply(pod_spec: dict[str, Any], options: PodOptions, machines: Iterable[tuple[str, int]],
          gpus_per_worker: int, kueue: bool = False) -> None:
    """Set the options on a compact job's worker pod spec (its first container is the worker), in place.
    `machines`: the placed nodes' (instance type, GPUs)."""
    container = pod_spec["containers"][0]
    resources = container.setdefault("resources", {})
    limits, requests = resources.setdefault("limits", {}), {}
    efa = efa_count(options, machines, gpus_per_worker, kueue)
    if efa:
        limits[EFA] = efa
    if options.hugepages_2mi is not None:
        # Huge pages are never overcommitted: the API server requires request == limit.
        limits[HUGEPAGES_2MI] = requests[HUGEPAGES_2MI] = options.hugepages_2mi
    if options.cpu is not None:
        requests["cpu"] = options.cpu
    if options.memory is not None:
        requests["memory"] = options.memory
    if HUGEPAGES_2MI in limits and "memory" not in requests and "cpu" not in requests:
        # A pod asking for huge pages must ask for cpu or memory too (API server validation).
        requests["memory"] = limits[HUGEPAGES_2MI]
    if requests:
        resources["requests"] = requests
    if options.host_network:
        pod_spec["hostNetwork"] = True
        # With the host's network, cluster DNS (the rendezvous Service) is reachable only with this policy.
        pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    if options.shm:
        empty: dict[str, Any] = {"medium": "Memory"}
        if options.shm_size is not None:
            empty["sizeLimit"] = options.shm_size
        pod_spec.setdefault("volumes", []).append({"name": SHM_VOLUME, "emptyDir": empty})
        container.setdefault("volumeMounts", []).append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
    if options.priority_class is not None:
        pod_spec["priorityClassName"] = options.priority_class


def machines(nodes: Mapping[str, Any], names: Iterable[str]) -> list[tuple[str, int]]:
    """(instance type, GPUs) of the placed nodes (geosched Node records by name) that are known."""
    return [(str(n.instance_type), int(n.gpus)) for name in names
            if (n := nodes.get(name)) is not None and n.instance_type]
