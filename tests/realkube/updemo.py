"""`geosched up` into an emulated EKS cluster and an emulated GKE cluster, end to end, as one command a user runs
(scripts/up-demo) and as the core of tests/realkube/test_realkube_up.py and test_realkube_up_gke.py, which run these
same steps on the session's plane and assert on what they return (so the documented command cannot rot apart from
the tests, and CI runs the flow once, not twice).

The parts, all the tests' own: the real control plane (plane.py: real kube-apiserver, scheduler, controller manager,
etcd, Kueue, JobSet, kwok kubelets), moto's EKS behind the fault proxy (placement groups moto lacks), the GKE REST
double (geosched_emulators/gke.py), and the stand-ins for the clouds' node group machinery (nodegroups.py) that make a
group's or pool's machines join the cluster as kwok Nodes. geosched itself runs as a user runs it: `geosched up`,
`geosched down`, in their own processes, talking to those endpoints through the standard AWS / geosched variables.

Each step prints the command and its output; `DemoFailed` says which step did not do what it should (the command
exits 1 then, as it does when anything is left after `down`).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import yaml

from geosched_emulators import Ec2FaultProxy, MotoServer
from geosched_emulators.gke import GkeDouble
from tests.providers.eks_support import NODE_ROLE, clients, one_subnet_cluster
from tests.providers.prov_support import aws_env
from tests.realkube import binaries
from tests.realkube.nodegroups import NODEGROUP, NODEPOOL, NodegroupController, NodepoolController
from tests.realkube.plane import EKS, GKE, SPECS, Plane
from tests.realkube.procs import StartError
from tests.realkube.realkube_support import (
    Bound,
    cluster_config,
    compact_job,
    geosched,
    job_pods_selector,
    pods,
    wait_all_running,
    wait_until,
)

GANG_LABEL = "geosched.io/gang"
# The EKS cluster as AWS knows it: one subnet in use1-az6, which moto names us-east-1a as the plane's EKS account
# does (plane.py), so the new nodes sit in the zone of the cluster's own p5 nodes.
EKS_ZONE_ID, EKS_ZONE, EKS_CIDR = "use1-az6", "us-east-1a", "10.0.16.0/24"
# The GKE cluster: regional in us-central1, where the shipped catalog offers a3-highgpu-8g in zones a, b and c.
GKE_PROJECT, GKE_LOCATION = "ml-platform-prod", "us-central1"
WORKERS, GPUS = 8, 8

Say = Callable[[str], None]


class DemoFailed(Exception):
    """A step did not do what it should; the message names the step and what was seen."""


def check(ok: bool, what: str) -> None:
    if not ok:
        raise DemoFailed(what)


def gke_env(gke: GkeDouble) -> dict[str, str]:
    return {"GEOSCHED_GKE_ENDPOINT": gke.endpoint, "GEOSCHED_GCP_PROJECT": GKE_PROJECT}


def run(say: Say, env: Mapping[str, str], home: Path, *args: str, timeout: float = 120.0) -> CompletedProcess[str]:
    """`geosched ARGS` in its own process, printed as the user's shell line and its output."""
    shown = " ".join(f"{k}={v}" for k, v in env.items() if k.endswith(("ENDPOINT", "ENDPOINT_URL", "PROJECT")))
    say(f"$ {shown} geosched {shlex.join(args)}")
    proc = geosched(*args, env=env, home=home, timeout=timeout)
    for line in (proc.stdout.rstrip() + "\n" + proc.stderr.rstrip()).strip().splitlines():
        say(f"  {line}")
    say(f"  (exit {proc.returncode})")
    return proc


def labelled_nodes(plane: Plane, context: str, selector: str) -> list[str]:
    with plane.kube(context) as kube:
        return sorted(n["metadata"]["name"] for n in kube.list_all("/api/v1/nodes", label_selector=selector)[0])


def show_pods(say: Say, bound: list[Bound]) -> None:
    say("  pods of the job, as the real kube-scheduler bound them:")
    for b in bound:
        say(f"    {b.pod:<16} {b.phase:<8} {b.node}  zone {b.zone}  {b.accelerator}")


@dataclass
class Flow:
    """One cluster's `up` -> Running on the new nodes -> job ends -> `down` -> nothing left. The tests call the
    steps one by one and assert between them; `run_all` is the demo's order."""

    plane: Plane
    context: str
    namespace: str
    workdir: Path
    say: Say
    gang: str
    env: dict[str, str]
    up_args: tuple[str, ...]
    label: str  # the Node label naming the group / pool a node belongs to
    outcome: dict[str, Any] = field(default_factory=dict)
    group: str = ""
    nodes: list[str] = field(default_factory=list)
    bound: list[Bound] = field(default_factory=list)
    kind: str = "node group"  # what the cloud calls the group, as `up` says it

    @property
    def home(self) -> Path:
        return self.workdir / "home"

    def up(self, *extra: str) -> CompletedProcess[str]:
        config = cluster_config(self.workdir / "clusters.yaml", {self.context: {"namespace": self.namespace}})
        job = compact_job(self.workdir / "train.yaml", "train", workers=WORKERS, gpus=GPUS)
        proc = run(self.say, self.env, self.home, "up", str(job), "--cluster", self.context, "--kubeconfig",
                   str(self.plane.kubeconfig), "--clusters", str(config), *self.up_args, "--name", self.gang,
                   "--join-timeout", "180", "--yes", "-o", "json", *extra, timeout=600)
        check(proc.returncode == 0, f"geosched up into {self.context} exited {proc.returncode}")
        self.outcome = yaml.safe_load(proc.stdout)
        check(self.outcome.get("status") == "applied", f"geosched up into {self.context}: {self.outcome}")
        check(f"gang {self.gang}: {self.kind} " in proc.stderr, f"geosched up into {self.context} did not say which "
              f"{self.kind} runs the job")
        return proc

    def running(self, group: str) -> list[Bound]:
        """The job's pods all Running, each on a node of the new `group`, in the zone geosched chose."""
        self.group = group
        self.nodes = labelled_nodes(self.plane, self.context, f"{self.label}={group}")
        check(len(self.nodes) == WORKERS, f"{len(self.nodes)} nodes of {group} joined {self.context}, not {WORKERS}")
        with self.plane.kube(self.context) as kube:
            self.bound = wait_all_running(kube, self.namespace, WORKERS, job_pods_selector("train"), timeout=180)
        show_pods(self.say, self.bound)
        check(sorted(b.node or "" for b in self.bound) == self.nodes,
              f"the pods are not on exactly the nodes of {group}: {self.bound}")
        check({b.fleet_zone for b in self.bound} == set(self.outcome["zones"]),
              f"the pods' zones {sorted({b.fleet_zone or '' for b in self.bound})} are not the zones geosched chose, "
              f"{self.outcome['zones']}")
        return self.bound

    def end_job(self) -> None:
        """The job ends (deleted, as a finished job's owner would); its capacity stays until `down`."""
        self.say(f"  the job ends: its Job deleted (as `kubectl --context {self.context} -n {self.namespace} "
                 "delete job train` would); its nodes stay until `geosched down`")
        with self.plane.kube(self.context) as kube:
            kube.request("DELETE", f"/apis/batch/v1/namespaces/{self.namespace}/jobs/train",
                         query={"propagationPolicy": "Background"})
            wait_until(lambda: not pods(kube, self.namespace, job_pods_selector("train")), 120,
                       what="the job's pods gone")

    def down(self) -> dict[str, Any]:
        proc = run(self.say, self.env, self.home, "down", self.gang, "--yes", "-o", "json")
        check(proc.returncode == 0, f"geosched down {self.gang} exited {proc.returncode}")
        [row] = yaml.safe_load(proc.stdout)["items"]
        check((row["state"], row["terminated"]) == ("terminated", 1), f"geosched down {self.gang}: {row}")
        wait_until(lambda: not labelled_nodes(self.plane, self.context, f"{self.label}={self.group}"), 60,
                   what=f"the nodes of {self.group} gone")
        return dict(row)


def eks_flow(plane: Plane, front: Ec2FaultProxy, namespace: str, workdir: Path, say: Say,
             gang: str = "up-h100") -> Flow:
    return Flow(plane, EKS, namespace, workdir, say, gang, aws_env(front.url),
                ("--region", "us-east-1", "--node-role", NODE_ROLE), NODEGROUP)


def eks_group(moto: MotoServer) -> list[str]:
    eks, _ = clients(moto.url)
    return list(eks.list_nodegroups(clusterName=EKS)["nodegroups"])


def gke_flow(plane: Plane, gke: GkeDouble, namespace: str, workdir: Path, say: Say, gang: str = "up-gke") -> Flow:
    return Flow(plane, GKE, namespace, workdir, say, gang, gke_env(gke), ("--provider", "gcp", "--region",
                                                                          GKE_LOCATION), NODEPOOL, kind="node pool")


def gke_pool(gke: GkeDouble) -> list[str]:
    return [key.rsplit("/", 1)[-1] for key in gke.pools()]


@dataclass(frozen=True)
class Clouds:
    moto: MotoServer
    front: Ec2FaultProxy  # what geosched talks to for AWS: moto behind the fault proxy
    gke: GkeDouble


def left_behind(plane: Plane, clouds: Clouds) -> dict[str, list[str]]:
    """What is left in the clouds and the clusters that geosched made: each list empty after `down`."""
    _, ec2 = clients(clouds.moto.url)
    left = {
        "moto: EKS node groups": eks_group(clouds.moto),
        "moto: EC2 instances": [i["InstanceId"] for r in ec2.describe_instances()["Reservations"]
                                for i in r["Instances"] if i["State"]["Name"] != "terminated"],
        "moto: launch templates": [t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]],
        "fault proxy: placement groups": sorted(clouds.front.placement_groups("us-east-1")),
        "GKE double: node pools": gke_pool(clouds.gke),
    }
    for context in (EKS, GKE):
        left[f"{context}: Nodes of a gang"] = labelled_nodes(plane, context, GANG_LABEL)
    return left


@contextmanager
def started_clouds() -> Iterator[Clouds]:
    """moto with the EKS cluster (built straight on moto, as an operator's cluster exists before geosched runs), the
    fault proxy in front of it, and the GKE double with the GKE cluster."""
    with MotoServer() as moto, Ec2FaultProxy(moto.url) as front, GkeDouble(operation_delay_s=0.5) as gke:
        # moto's backends are per process: another test's cluster of the same name would still be there.
        moto.reset()
        one_subnet_cluster(moto.url, EKS, EKS_ZONE_ID, EKS_ZONE, EKS_CIDR)
        gke.add_cluster(GKE_PROJECT, GKE_LOCATION, GKE)
        yield Clouds(moto, front, gke)


# Called at each stage ("running": the pods Running on the new nodes; "ended": the job deleted, its capacity still
# there; "down": after `geosched down`) with the flow and the clouds: the test asserts there what the demo prints.
Hook = Callable[[str, Flow, Clouds], None]


def demo(plane: Plane, workdir: Path, say: Say, on: Hook | None = None) -> dict[str, list[str]]:
    """Both flows, then what is left (returned; printed). Raises DemoFailed at the first step that fails."""
    with ExitStack() as stack:
        clouds = stack.enter_context(started_clouds())
        ns = stack.enter_context(plane.namespace("up-demo", clusters=(EKS, GKE)))
        eks_made = stack.enter_context(NodegroupController(clouds.moto.url, EKS, plane, EKS))
        gke_made = stack.enter_context(NodepoolController(clouds.gke.endpoint, GKE_PROJECT, GKE_LOCATION, GKE, plane,
                                                          GKE))
        for title, flow, made, controller in (
                ("EKS (moto)", eks_flow(plane, clouds.front, ns, workdir / EKS, say),
                 lambda: eks_group(clouds.moto), eks_made),
                ("GKE (the GKE double)", gke_flow(plane, clouds.gke, ns, workdir / GKE, say),
                 lambda: gke_pool(clouds.gke), gke_made)):
            flow.workdir.mkdir(parents=True, exist_ok=True)
            say(f"\n== {WORKERS} x H100:{GPUS} into {flow.context}, {title} ==")
            start = time.monotonic()
            flow.up()
            names = made()
            check(len(names) == 1, f"{flow.context}: {names} made, not one group")
            flow.running(names[0])
            check(flow.nodes == sorted(controller.made.get(names[0], [])),
                  f"{flow.context}: the nodes of {names[0]} are not the ones its machines registered")
            say(f"  geosched chose {flow.outcome['zones']}; {WORKERS} pods Running on the {WORKERS} new nodes of "
                f"{names[0]}")
            if on:
                on("running", flow, clouds)
            flow.end_job()
            if on:
                on("ended", flow, clouds)
            flow.down()
            if on:
                on("down", flow, clouds)
            say(f"  ({flow.context}: {time.monotonic() - start:.0f} s)")
            check(controller.errors == [], f"{flow.context}: the node stand-in failed: {controller.errors}")
        left = left_behind(plane, clouds)
    say("\n== left after down ==")
    for what, names in left.items():
        say(f"  {what}: {', '.join(names) if names else 'none'}")
    return left


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/up-demo", description=__doc__.split("\n\n")[0])
    parser.parse_args(argv)
    say: Say = lambda line: print(line, flush=True)  # noqa: E731
    try:
        bins = binaries.find()
    except binaries.Missing as exc:
        # One line: the first of what scripts/realkube says is missing (the rest lists every binary).
        print(f"up-demo: the control plane is not built ({str(exc).splitlines()[0]}); scripts/realkube build builds "
              "it (Go 1.26 on PATH)", file=sys.stderr)
        return 1
    workdir = Path(tempfile.mkdtemp(prefix="geosched-up-demo-"))
    start = time.monotonic()
    say("== starting the real control plane (the EKS- and GKE-shaped clusters), moto, the GKE double ==")
    plane: Plane | None = None
    try:
        plane = Plane.start(bins, tuple(s for s in SPECS if s.name in (EKS, GKE)))
        say(f"  control plane started in {time.monotonic() - start:.0f} s")
        left = demo(plane, workdir, say)
    # A step that did not do what it should, a wait that ran out, a part of the plane that did not start: one line
    # (the steps above it are printed), exit 1.
    except (DemoFailed, TimeoutError, StartError, subprocess.TimeoutExpired) as exc:
        print(f"up-demo: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # anything else (an answer of unexpected shape): still one line, named by its type
        print(f"up-demo: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if plane is not None:
            plane.stop()
            shutil.rmtree(plane.directory, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)
    say(f"\n== done in {time.monotonic() - start:.0f} s ==")
    if any(left.values()):
        print("up-demo: something is left after down (listed above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
