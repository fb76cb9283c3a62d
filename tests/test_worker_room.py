"""A node offers a gang only the workers it has room for besides GPUs (`geosched.core.room`): `place` holds a worker's
cpu and memory requests to the catalog's size of each node's instance type, so a job whose pods ask more than a
machine has is not put there (audit finding 3: the upstream LWS vLLM example, 1124Gi per pod, was placed on
g6.48xlarge machines of 768 GiB). The live path (`submit`, allocatable minus bound pods' requests) is tested on the
real control plane: tests/realkube/test_realkube_worker_room.py."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import geosched
from geosched.core import catalog, room
from geosched.core.models import Placement
from geosched.core.specs import spec_index
from geosched.kube.jobinput import read_job_file

ROOT = Path(__file__).resolve().parents[1]
# kubernetes-sigs/lws v0.10.0 docs/examples/vllm/GPU/lws.yaml, unchanged but for its header (the file cites it):
# 2 groups of a leader and a worker, each pod limits nvidia.com/gpu 8, memory 1124Gi, requests cpu 125.
LWS = ROOT / "tests" / "kube" / "data" / "leaderworkerset.yaml"
GIB = 2**30


def _sizes() -> dict[str, tuple[float, float]]:
    return {t: (s.vcpus, s.memory_gib) for (_, t), s in spec_index(catalog.offerings()).items()}


def test_the_lws_example_asks_each_worker_for_its_memory_and_cpu() -> None:
    job = read_job_file(LWS).job
    assert dict(job.worker_requests) == {"cpu": 125_000, "memory": 1124 * GIB, "ephemeral-storage": 800 * GIB}


def test_place_puts_the_lws_example_only_on_machines_that_hold_a_pod() -> None:
    placed = geosched.place(LWS)
    assert isinstance(placed, Placement)
    nodes = geosched.api.default_fleet().by_name
    sizes = _sizes()
    for a in placed.assignments:
        vcpus, memory = sizes[nodes[a.node].instance_type]
        assert memory >= 1124 and vcpus >= 125, (a.node, nodes[a.node].instance_type, vcpus, memory)


def test_without_its_requests_the_same_gang_lands_where_a_pod_does_not_fit() -> None:
    """The baseline that makes the test above able to fail: the gang alone goes to a machine of less than 1124 GiB
    (the audit's g6.48xlarge), so the requests are what moved it."""
    job = replace(read_job_file(LWS).job, worker_requests=())
    placed = geosched.place(job)
    assert isinstance(placed, Placement)
    nodes = geosched.api.default_fleet().by_name
    assert any(_sizes()[nodes[a.node].instance_type][1] < 1124 for a in placed.assignments)


def test_explain_names_the_resource_a_filtered_node_lacks() -> None:
    run = subprocess.run([sys.executable, "-m", "geosched", "place", str(LWS), "--explain", "-o", "json"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    reasons = [r["reason"] for r in json.loads(run.stdout)["rejected"]]
    assert any("without room for a worker's memory (1124Gi)" in r for r in reasons), reasons
    assert any("without room for a worker's cpu (125 cpu)" in r for r in reasons), reasons


def test_a_gang_no_machine_holds_is_a_no_fit_that_says_why(tmp_path: Path) -> None:
    job = tmp_path / "big.yaml"
    job.write_text("apiVersion: geosched.io/v1alpha1\nkind: Job\nname: big\nimage: ghcr.io/example/train:1\n"
                   "workers: 2\ngpus_per_worker: 8\npods:\n  memory: 4Ti\n", encoding="utf-8")
    assert dict(read_job_file(job).job.worker_requests) == {"memory": 4 * 2**40}
    run = subprocess.run([sys.executable, "-m", "geosched", "place", str(job)], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode != 0
    assert "without room for a worker's memory (4096Gi)" in run.stdout + run.stderr


def test_a_live_node_is_held_to_its_own_room_not_its_catalog_size() -> None:
    """A node read from a cluster carries what is left of its allocatable (`Node.room`): that wins over the
    catalog's size of its type, and an extended resource it does not list is one it has none of."""
    fleet = geosched.api.default_fleet()
    node = next(n for n in fleet.nodes if n.instance_type == "p5.48xlarge")
    specs = spec_index(catalog.offerings())
    assert room.resolve(node, specs).has("memory") == 2048 * GIB  # the catalog's 2 TiB
    live = replace(node, room={"memory": 10 * GIB, "cpu": 4000})
    resolved = room.resolve(live, specs)
    assert (resolved.has("memory"), resolved.has("vpc.amazonaws.com/efa")) == (10 * GIB, 0)
    assert room.resolve(node, specs).has("vpc.amazonaws.com/efa") == room.UNLIMITED  # the catalog does not say
