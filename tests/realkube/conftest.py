"""The real control plane, started once per test session and shared (see tests/realkube/README.md), and a
namespace on EKS with Kueue's topology-aware scheduling set up, as Kueue's TAS docs set it up.

Without the binaries (scripts/realkube build): under CI (CI set) the suite fails with what is missing and the last
build's log; elsewhere it is skipped, saying how to build them. With GEOSCHED_REALKUBE_BUILD=1 (scripts/test) the
fixture first runs the build, which waits for the one scripts/test started in the background.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tests.realkube import binaries
from tests.realkube.cluster import apply, condition
from tests.realkube.plane import EKS, GKE, KUEUE_V1BETA2, SPECS, Plane
from tests.realkube.realkube_support import wait_until

STARTUP: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The control plane's start-up time, measured in every run that started it (the CI log keeps it)."""
    if STARTUP:
        parts = ", ".join(f"{k} {v:.1f} s" for k, v in STARTUP.items() if k != "total")
        terminalreporter.write_line(f"realkube: control plane started in {STARTUP['total']:.1f} s ({parts})")


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """This folder's tests run last: under scripts/test the control plane is still being built in the background
    while the other suites run (GEOSCHED_REALKUBE_BUILD=1, the fixture then waits for that build)."""
    here = Path(__file__).parent
    items.sort(key=lambda item: here in item.path.parents)


@pytest.fixture(scope="session")
def realkube() -> Iterator[Plane]:
    yield from _started()


@pytest.fixture(autouse=True)
def _no_node_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test on the shared plane, every Node it registered beyond the plane's own is deleted and named in a
    warning (the summary shows it): a Node left behind changes what every later test sees (three p5 Nodes a node-group
    stand-in left in us-east-1a once made the scheduler's rollback test wait for pods it never needed, and moved the
    worker-room baseline's price median)."""
    plane = request.getfixturevalue("realkube") if "realkube" in request.fixturenames else None
    yield
    if plane is None:
        return
    left: dict[str, list[str]] = {}
    for name, cluster in plane.control.clusters.items():
        own = {n["metadata"]["name"] for n in cluster.spec.nodes}
        with plane.kube(name) as kube:
            for node in kube.list_all("/api/v1/nodes")[0]:
                if (found := node["metadata"]["name"]) not in own:
                    kube.request("DELETE", f"/api/v1/nodes/{found}")
                    left.setdefault(name, []).append(found)
    if left:
        warnings.warn(f"{request.node.nodeid} left Nodes on the shared plane (deleted now): {left}", stacklevel=1)


# The ProvisioningRequest CRD of the autoscaler module Kueue v0.17.0 requires (its header names the source).
PROVISIONING_REQUEST_CRD = Path(__file__).parents[1] / "kube" / "data" / "crds" / \
    "autoscaling.x-k8s.io_provisioningrequests.yaml"


@pytest.fixture(scope="session")
def realkube_provreq() -> Iterator[Plane]:
    """A plane of its own, started only by the tests that ask for it: the GKE-shaped cluster alone, with the
    ProvisioningRequest CRD installed before Kueue starts, so Kueue runs its provisioning admission check controller
    (the session's `realkube` plane has no such CRD, as a cluster without cluster-autoscaler's API has none)."""
    yield from _started(specs=tuple(s for s in SPECS if s.name == GKE), crds=(PROVISIONING_REQUEST_CRD,))


def _started(**options: Any) -> Iterator[Plane]:
    try:
        bins = binaries.find(build=os.environ.get("GEOSCHED_REALKUBE_BUILD") == "1")
    except binaries.Missing as exc:
        message = f"the real control plane is not built: {exc}"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(f"{message.splitlines()[0]} (run scripts/realkube build; it needs Go on PATH)")
    # SIGTERM (a CI runner's timeout, `kill`) becomes KeyboardInterrupt, so pytest runs this teardown; pytest
    # killed outright takes the processes with it (procs.py: --pdeathsig).
    previous = signal.signal(signal.SIGTERM, _interrupt)
    start = time.monotonic()
    plane = Plane.start(bins, **options)
    plane.timings["total"] = time.monotonic() - start
    STARTUP.update(plane.timings)
    try:
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(plane.directory, ignore_errors=True)
        signal.signal(signal.SIGTERM, previous)


def kueue_tas_objects(namespace: str, queue: str) -> list[dict[str, Any]]:
    """Kueue's TAS setup as its docs give it, on the EKS cluster's H100 nodes (GFD labels there)."""
    return [
        {"apiVersion": KUEUE_V1BETA2, "kind": "Topology", "metadata": {"name": f"{namespace}-topology"},
         "spec": {"levels": [{"nodeLabel": "topology.kubernetes.io/region"},
                             {"nodeLabel": "topology.kubernetes.io/zone"},
                             {"nodeLabel": "kubernetes.io/hostname"}]}},
        {"apiVersion": KUEUE_V1BETA2, "kind": "ResourceFlavor", "metadata": {"name": f"{namespace}-h100"},
         "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                  "topologyName": f"{namespace}-topology"}},
        {"apiVersion": KUEUE_V1BETA2, "kind": "ClusterQueue", "metadata": {"name": f"{namespace}-gpus"},
         "spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                  "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                                      "flavors": [{"name": f"{namespace}-h100", "resources": [
                                          {"name": "cpu", "nominalQuota": 400},
                                          {"name": "memory", "nominalQuota": "4000Gi"},
                                          {"name": "nvidia.com/gpu", "nominalQuota": 16}]}]}]}},
        {"apiVersion": KUEUE_V1BETA2, "kind": "LocalQueue", "metadata": {"name": queue, "namespace": namespace},
         "spec": {"clusterQueue": f"{namespace}-gpus"}},
    ]


@pytest.fixture
def kueue_namespace(realkube: Plane) -> Iterator[str]:
    with realkube.namespace("submit-kueue", clusters=(EKS,)) as ns:
        objects = kueue_tas_objects(ns, "team-a")
        with realkube.kube(EKS) as kube:
            for obj in objects:
                apply(kube, obj)
            wait_until(lambda: condition(kube.get(f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{ns}-gpus") or {},
                                         "Active"), 60,
                       what="the ClusterQueue Active")
        try:
            yield ns
        finally:
            with realkube.kube(EKS) as kube:
                for obj in reversed(objects[:-1]):  # the LocalQueue goes with the namespace
                    resource = kube.resource(obj["apiVersion"], obj["kind"])
                    assert resource is not None
                    kube.request("DELETE", resource.path(None, obj["metadata"]["name"]))
