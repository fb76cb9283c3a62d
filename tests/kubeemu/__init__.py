"""A multi-cluster Kubernetes API emulator for integration tests: kmock's KubernetesEmulator extended with the
API server behaviours the official `kubernetes` client relies on, served over real HTTP on 127.0.0.1.

See README.md in this folder for what is emulated, what is simplified, and how the client surfaces faults.
"""

from .catalog import BUILTIN, CUSTOM, WORKLOAD_API, Catalog, ResourceSpec, spec_from_crd
from .cluster import EmulatedCluster, node_manifest, pod_manifest
from .emulator import KubeEmulator, parse_api_path
from .errors import ApiError
from .faults import FaultRule, RequestRecord
from .multicluster import MultiCluster, cluster_names, kubeconfig_dict, write_kubeconfig
from .store import Store

__all__ = [
    "BUILTIN",
    "CUSTOM",
    "WORKLOAD_API",
    "ApiError",
    "Catalog",
    "EmulatedCluster",
    "FaultRule",
    "KubeEmulator",
    "MultiCluster",
    "RequestRecord",
    "ResourceSpec",
    "Store",
    "cluster_names",
    "kubeconfig_dict",
    "node_manifest",
    "parse_api_path",
    "pod_manifest",
    "spec_from_crd",
    "write_kubeconfig",
]
