"""Kill campaign over every journal step of `geosched up --provisioning-class` and of its `down` (issue 26): the real
CLI in a process of its own, SIGKILLed right after its k-th committed store write, for every k the same command's
unkilled run made (counted from the store as tests/providers/test_nodegroups_kill_steps.py counts them: a step added
to the journal is covered at once), plus seeded random moments in wall time. After each kill the parent runs what a
user would, `geosched down GANG`, and checks that nothing geosched made is left in the cluster (the job and its
Service, Kueue's queue objects geosched applied, the ProvisioningRequest and its PodTemplates without Kueue; and what
Kueue and the autoscaler made because of them: Workloads, requests, the nodes), no prov_requests row open, no
attempt `started`, no usage interval open, the gang `terminated`.

The cluster is the project's API emulator (tests/kubeemu) over HTTP; the plan reads moto's EKS with real boto3, as
tests/providers/test_provreq_cli.py does. The emulator has no controllers, so a thread of the parent plays them
every 20 ms: Kueue (a Workload owned by each queued Job, and a ProvisioningRequest owned by the Workload, named as
Kueue v0.17.0 names it, `<workload>-<check>-<attempt>`, pkg/controller/admissionchecks/provisioning), the
autoscaler (the plan's first zone refused: `Failed`, reason CapacityIsNotFound; the other zone's request answered
`Provisioned` with two EKS-shaped nodes registered for it, and a pod consuming the request bound to each, as
kube-scheduler binds them; condition shapes of kubernetes/autoscaler cluster-autoscaler/apis/provisioningrequest/
autoscaling.x-k8s.io/v1 types.go), and the garbage collector (a Workload whose Job is gone is deleted, a request
whose Workload is gone, and a request's pods and nodes once it is gone, as cluster-autoscaler scales unneeded nodes
away). The CLI's waits (5 s polls) are shortened in the child and the parent; nothing else is changed.

Cost: every run is a process of its own planning on moto and reading the emulator, 5 to 8 s on a loaded 2-core
machine, so killing at every step (15 for `up` through Kueue, 6 for `down`) took 112 s and 62 s a campaign. CI kills
`down` at every step, and `up` (through Kueue, and without it: geosched renders the request and its PodTemplates) at
every write of the request's own journal (`provreqs.py`: the intents, the withdrawn zone's row, Provisioned, the
charge: the steps this path adds) plus a seeded sample of the gang's others, and at a seeded random moment.
GEOSCHED_PROVREQ_KILL_ALL=1 kills at every step of all three. Each campaign's cost is printed (`-s`).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from geosched.kube import keys, provreq
from geosched.kube.backends.kueue import API_VERSION as KUEUE
from geosched.providers import journal, provreqs
from geosched.report.ledger import ledger_intervals
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, MotoServer
from tests.kill import run_killable
from tests.kube.kube_support import DATA
from tests.kubeemu import MultiCluster
from tests.kubeemu.cluster import node_manifest
from tests.providers.eks_support import REGION, ZONES, EksCluster, make_cluster
from tests.providers.prov_support import aws_env
from tests.providers.test_nodegroups_kill_steps import child, job, steps_of
from tests.providers.test_up_cli import run

pytestmark = pytest.mark.integration

NS = "default"
EVERY_STEP = os.environ.get("GEOSCHED_PROVREQ_KILL_ALL") == "1"
RANDOM_KILLS = 3 if EVERY_STEP else 1
OTHER_STEPS = 2  # of the gang's own steps, besides the request journal's, per `up` campaign
SEED = 26
PROVREQS = "autoscaling.x-k8s.io/v1/provisioningrequests"
WORKLOADS = f"{KUEUE}/workloads"
QUEUE = {"ResourceFlavor": "resourceflavors", "ProvisioningRequestConfig": "provisioningrequestconfigs",
         "AdmissionCheck": "admissionchecks", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}
FAILED = {"type": "Failed", "status": "True", "reason": "CapacityIsNotFound",
          "message": "Provisioning Request's pods cannot be scheduled", "lastTransitionTime": "2026-12-07T06:00:00Z"}
PROVISIONED = {"type": "Provisioned", "status": "True", "reason": "CapacityIsProvisioned",
               "message": "Capacity is found in the cluster", "lastTransitionTime": "2026-12-07T06:00:00Z"}


def fast(setattr_: Callable[[Any, str, Any], None]) -> None:
    """The watch's and `down`'s defaults (5 s polls, a 600 s bind wait) shortened: `up` builds its Settings from
    the module's class, `down` takes `take_down`'s default."""
    from geosched.cli import provfailover
    from geosched.providers import provreqdown

    setattr_(provfailover, "Settings", partial(provfailover.Settings, poll_s=0.05, bind_s=5.0, withdraw_s=20.0))
    setattr_(provreqdown.take_down, "__kwdefaults__", {"settings": provreqdown.DownSettings(
        withdraw_s=20.0, release_s=10.0, poll_s=0.05)})


class Controllers:
    """Kueue, the autoscaler, kube-scheduler and the garbage collector, as far as the campaign needs them (the
    module's docstring); `refused` the zone (its name) whose requests fail."""

    def __init__(self, cluster: MultiCluster, name: str, refused: str) -> None:
        self.api, self.refused = cluster[name], refused
        self.made: dict[str, tuple[list[str], list[str]]] = {}  # request uid -> its nodes, its pods
        self.count = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Controllers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10.0)

    def _loop(self) -> None:
        while not self._stop.wait(0.02):
            try:
                self.tick()
            except Exception as exc:  # an object deleted between a list and a write: the next tick sees it
                if "404" not in str(exc) and "409" not in str(exc) and "NotFound" not in type(exc).__name__:
                    self.errors.append(exc)

    def tick(self) -> None:
        jobs = {j["metadata"]["uid"]: j for j in self.api.list("batch/v1/jobs", NS)}
        workloads = {w["metadata"]["uid"]: w for w in self.api.list(WORKLOADS, NS)}
        for w in workloads.values():  # the garbage collector: a Workload's Job gone
            if not {r["uid"] for r in w["metadata"].get("ownerReferences") or []} & set(jobs):
                self.api.delete(WORKLOADS, w["metadata"]["name"], NS)
        owners = {r["uid"] for w in workloads.values() for r in w["metadata"].get("ownerReferences") or []}
        for uid, j in jobs.items():  # Kueue: a queued Job gets a Workload and, through the check, a request
            queue = (j["metadata"].get("labels") or {}).get(keys.KUEUE_QUEUE)
            if queue is None or uid in owners:
                continue
            count = int(j["spec"].get("parallelism") or 1)
            wl = self.api.create({"apiVersion": KUEUE, "kind": "Workload", "metadata": {
                "name": f"job-{j['metadata']['name']}-{uid[:5]}", "namespace": NS, "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": j["metadata"]["name"], "uid": uid,
                     "controller": True}]},
                "spec": {"queueName": queue, "podSets": [{"name": "main", "count": count, "template": {
                    "spec": {"containers": [{"name": "c", "image": "ghcr.io/example/train:1"}]}}}]}})
            self.api.create({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {
                "name": f"{wl['metadata']['name']}-{queue}-1", "namespace": NS, "ownerReferences": [
                    {"apiVersion": KUEUE, "kind": "Workload", "name": wl["metadata"]["name"],
                     "uid": wl["metadata"]["uid"], "controller": True}]},
                "spec": {"provisioningClassName": provreq.BEST_EFFORT_ATOMIC, "podSets": [
                    {"podTemplateRef": {"name": f"ppt-{wl['metadata']['name']}-main"}, "count": count}]}})
        live_workloads = {w["metadata"]["uid"] for w in self.api.list(WORKLOADS, NS)}
        requests = self.api.list(PROVREQS, NS)
        for r in requests:
            refs = r["metadata"].get("ownerReferences") or []
            if refs and not {x["uid"] for x in refs} & live_workloads:  # the garbage collector
                self.api.delete(PROVREQS, r["metadata"]["name"], NS)
                continue
            if (r.get("status") or {}).get("conditions"):
                continue
            zone = self._zone(r, jobs)
            if zone is None:
                continue
            if zone == self.refused:
                self.api.set_status(PROVREQS, r["metadata"]["name"], {"conditions": [FAILED]}, NS)
                continue
            nodes, pods = [], []
            for _ in range(int(r["spec"]["podSets"][0]["count"])):
                self.count += 1
                node = node_manifest(f"ip-10-0-41-{self.count}.ec2.internal", region=REGION, zone=zone,
                                     instance_type="p4d.24xlarge", gpu_product="NVIDIA-A100-SXM4-40GB", gpus=8,
                                     labels={keys.EKS_CAPACITY_TYPE: "ON_DEMAND"})
                self.api.create(node)
                pod = self.api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": f"train-{self.count}", "namespace": NS,
                    "annotations": {provreq.CONSUMES: r["metadata"]["name"]}},
                    "spec": {"nodeName": node["metadata"]["name"], "containers": [
                        {"name": "trainer", "image": "ghcr.io/example/train:1"}]}})
                nodes.append(node["metadata"]["name"])
                pods.append(pod["metadata"]["name"])
            self.made[r["metadata"]["uid"]] = (nodes, pods)
            self.api.set_status(PROVREQS, r["metadata"]["name"], {"conditions": [PROVISIONED]}, NS)
        live = {r["metadata"]["uid"] for r in self.api.list(PROVREQS, NS)}
        for uid in [u for u in self.made if u not in live]:  # the autoscaler scales the unneeded nodes away
            nodes, pods = self.made.pop(uid)
            for p in pods:
                self.api.delete("v1/pods", p, NS)
            for n in nodes:
                self.api.delete("v1/nodes", n)

    def _zone(self, request: dict[str, Any], jobs: dict[str, Any]) -> str | None:
        """The zone the request's pods are pinned to: its PodTemplate's (geosched's own request), else its Job's."""
        ref = request["spec"]["podSets"][0]["podTemplateRef"]["name"]
        template = self.api.get("v1/podtemplates", ref, NS)
        if template is not None:
            return str(template["template"]["spec"]["nodeSelector"][keys.ZONE])
        for j in jobs.values():
            selector = j["spec"]["template"]["spec"].get("nodeSelector") or {}
            if keys.ZONE in selector:
                return str(selector[keys.ZONE])
        return None

    def left(self) -> list[str]:
        """What geosched made, or Kueue and the autoscaler made because of it, still in the cluster."""
        out = [f"{r}/{o['metadata']['name']}" for r in ("batch/v1/jobs", "v1/services", "v1/podtemplates", PROVREQS,
                                                        WORKLOADS, "v1/pods") for o in self.api.list(r, NS)]
        out += [f"{kind}/{o['metadata']['name']}" for kind, plural in QUEUE.items()
                for o in self.api.list(f"{KUEUE}/{plural}", NS if kind == "LocalQueue" else None)]
        return out + [f"node/{n}" for nodes, _ in self.made.values() for n in nodes]


def spawn(mp: Any, home: Path, env: dict[str, str], argv: list[str], *, kill_at: int | None = None,
          kill_after_s: float | None = None) -> bool:
    proc = mp.Process(target=child, args=(str(home), env, argv, kill_at, fast))
    killed = run_killable(proc, kill_after_s, 120.0)
    if kill_at is not None:
        assert proc.exitcode == -9, f"the child must die at step {kill_at}, not finish"
    return killed or proc.exitcode == -9


def down_and_check(home: Path, ctl: Controllers, gang: str, what: str) -> None:
    """`geosched down GANG` as a user runs it after the crash; then nothing of the gang may be left."""
    with Store(home) as store:
        known = journal.gang_record(store, gang) is not None
    if known:
        with Store(home) as store:
            record = journal.gang_record(store, gang)
            intent = any(r.state == "intent" for r in provreqs.open_requests(store, gang))
        if record is not None and record.state == "provisioning" and intent:
            # Killed with a zone's objects journalled and its request not Provisioned: `status` says `creating`.
            shown = run(home, "status", "-o", "json")
            assert [g["state"] for g in json.loads(shown.stdout)["items"]] == ["creating"], (what, shown.output)
        result = run(home, "down", gang, "--yes", "-o", "json")
        assert result.exit_code == 0, f"{what}: down: {result.output}"
        with Store(home) as store:
            assert provreqs.open_requests(store, gang) == [], what
            assert [a.outcome for a in journal.attempts(store, gang) if a.outcome == "started"] == [], what
            assert [i.name for i in ledger_intervals(store) if i.end is None] == [], f"{what}: charged past down"
            assert journal.gang_record(store, gang).state == "terminated", what  # type: ignore[union-attr]
    deadline = time.monotonic() + 5.0
    while ctl.left() and time.monotonic() < deadline:  # the stand-in controllers' last tick (20 ms)
        time.sleep(0.05)  # the controllers' thread deleting what the killed run left, on its own time
    assert ctl.left() == [], f"{what}: left behind"
    assert ctl.errors == [], ctl.errors


def campaign(tmp_path: Path, ctl: Controllers, env: dict[str, str], name: str, argv: Callable[[str], list[str]],
             sample: int | None, setup: Callable[[Path, str], None] | None = None) -> dict[str, Any]:
    """Run `argv(gang)` once unkilled (its steps), then killed after each step (or after each of the request
    journal's and a seeded sample of `sample` others), then at RANDOM_KILLS seeded moments; `down` and the checks
    after each."""
    mp = multiprocessing.get_context("forkserver")
    mp.set_forkserver_preload(["geosched.cli.main", "geosched.cli.provfailover", "geosched.providers.provreqdown",
                               __name__])
    rng = random.Random(f"{SEED}-{name}")
    started = time.monotonic()

    def one(label: str, **kill: Any) -> tuple[bool, float]:
        gang = f"{name}-{label}"
        home = tmp_path / gang
        if setup is not None:
            setup(home, gang)
        at = time.monotonic()
        killed = spawn(mp, home, env, argv(gang), **kill)
        seconds = time.monotonic() - at
        down_and_check(home, ctl, gang, f"{name} killed {kill}")
        return killed, seconds

    _, reference_s = one("ref")
    steps = steps_of(tmp_path / f"{name}-ref")
    assert len(steps) >= 4, steps
    chosen = list(range(1, len(steps) + 1))
    if sample is not None and not EVERY_STEP:
        own = [k for k in chosen if steps[k - 1].startswith("provreqs.py:")]
        others = [k for k in chosen if k not in own]
        chosen = sorted(own + rng.sample(others, min(sample, len(others))))
    for k in chosen:
        one(f"s{k}", kill_at=k)
    randomly = sum(one(f"r{i}", kill_after_s=rng.uniform(0.0, reference_s))[0] for i in range(RANDOM_KILLS))
    return {"command": name, "steps": len(steps), "killed_at_steps": len(chosen), "random": RANDOM_KILLS,
            "random_killed": randomly, "reference_s": round(reference_s, 2),
            "campaign_s": round(time.monotonic() - started, 1), "step_names": steps}


@pytest.fixture
def eks(moto: MotoServer, proxy: Ec2FaultProxy) -> EksCluster:
    return make_cluster(moto.url, ("use1-az2", "use1-az6"))


@pytest.fixture
def world(tmp_path: Path, eks: EksCluster, proxy: Ec2FaultProxy,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MultiCluster, Controllers, dict[str, str]]]:
    """The cluster (Kueue's ProvisioningRequestConfig CRD registered, as tests/providers/test_provreq_ledger.py
    does), its stand-in controllers refusing the plan's first zone (the gang lands in the second), the child's
    environment."""
    fast(monkeypatch.setattr)
    plan = run(tmp_path / "plan", "provision", "--cluster", eks.name, "--region", REGION, "--gpu", "A100:8",
               "--nodes", "2", "--dry-run", "-o", "json")
    assert plan.exit_code == 0, plan.output
    zones = [ZONES[i["zone"]] for i in json.loads(plan.stdout)["items"]]
    assert len(zones) == 2, zones
    (tmp_path / "kube").mkdir()
    with MultiCluster(1, names=[eks.name], directory=tmp_path / "kube") as kube:
        kube[eks.name].register_crd(yaml.safe_load((DATA / "crds" / "kueue.x-k8s.io_provisioningrequestconfigs.yaml")
                                                   .read_text(encoding="utf-8")))
        with Controllers(kube, eks.name, refused=zones[0]) as ctl:
            yield kube, ctl, aws_env(proxy.url)


def up_argv(tmp_path: Path, eks: EksCluster, kube: MultiCluster, *extra: str) -> Callable[[str], list[str]]:
    spec = job(tmp_path / "train.yaml")
    spec.write_text(spec.read_text(encoding="utf-8").replace("H100", "A100"), encoding="utf-8")
    return lambda gang: ["up", str(spec), "--cluster", eks.name, "--region", REGION, "--kubeconfig",
                         str(kube.kubeconfig), "--provisioning-class", provreq.BEST_EFFORT_ATOMIC,
                         "--provisioning-timeout", "30", "--name", gang, *extra, "--yes", "-o", "json"]


def test_up_through_kueue_killed_at_the_request_journal_s_steps_leaks_nothing(
        tmp_path: Path, eks: EksCluster, world: Any) -> None:
    kube, ctl, env = world
    figures = campaign(tmp_path, ctl, env, "pu", up_argv(tmp_path, eks, kube), OTHER_STEPS)
    print({k: v for k, v in figures.items() if k != "step_names"})
    names = figures["step_names"]
    # Both zones journalled as intents before their apply, the first withdrawn, the second Provisioned and charged.
    assert names.count("provreqs.py:_insert") == 2 and "provreqs.py:provisioned" in names, names
    assert "provreqs.py:charge" in names and names.index("provreqs.py:_insert") < names.index(
        "provreqs.py:provisioned"), names


def test_up_without_kueue_killed_at_the_request_journal_s_steps_leaks_nothing(
        tmp_path: Path, eks: EksCluster, world: Any) -> None:
    kube, ctl, env = world
    figures = campaign(tmp_path, ctl, env, "pw", up_argv(tmp_path, eks, kube, "--without-kueue"), OTHER_STEPS)
    print({k: v for k, v in figures.items() if k != "step_names"})


def test_down_killed_at_every_step_leaks_nothing(tmp_path: Path, eks: EksCluster, world: Any) -> None:
    kube, ctl, env = world
    argv = up_argv(tmp_path, eks, kube)

    def setup(home: Path, gang: str) -> None:
        made = run(home, *argv(gang))
        assert made.exit_code == 0, made.output
        with Store(home) as store:
            [row] = provreqs.open_requests(store, gang)
            assert row.state == "provisioned" and len(row.nodes) == 2, row

    figures = campaign(tmp_path, ctl, env, "pd", lambda gang: ["down", gang, "--yes", "-o", "json"], None,
                       setup=setup)
    print({k: v for k, v in figures.items() if k != "step_names"})
