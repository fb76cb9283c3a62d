"""Randomised fault campaign: provisioning in a real child process against the emulators, with capacity
refusals, throttling, 5xx, stalls and quota faults, killed with SIGKILL at a random moment; then `resume` or
`down` from the parent, and the invariants checked:

- nothing leaked: every live instance carrying the gang's tag is recorded in the store by its provider id
  (after resume), and after `down` none is left;
- no orphan records: after `down` no journal row is still open (intent, launched or terminating);
- nothing billed that is gone: some runs also lose a machine behind geosched's back after the kill (an EC2 spot
  reclaim, a GCE preemption with action STOP or DELETE), some then run `status --refresh` (`lifecycle.refresh`);
  after the resume no usage-ledger row is open for a machine that is not running, and after `down` none at all.

Children come from a forkserver that has already imported boto3, google-cloud-compute and geosched, so a
run costs a fork, not an interpreter start. Used by tests/providers/test_prov_campaign.py and
benchmarks/bench_provision.py.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geosched.core.retry import RetryPolicy
from geosched.providers import journal, lifecycle
from geosched.providers.base import Provider
from geosched.providers.failover import Ttls
from geosched.providers.gang import ProvisionSettings, provision, resume
from geosched.providers.journal import read_request, request_json
from geosched.providers.lifecycle import LifecycleSettings
from geosched.providers.plan import GangRequest, PricingMode
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, GceDouble, GceFault, MotoServer
from tests.kill import run_killable
from tests.providers.prov_support import (
    AWS_REGIONS,
    AWS_ZONES,
    GCP_REGIONS,
    GCP_ZONES,
    PROJECT,
    aws_alive,
    aws_env,
    aws_provider,
    gce_alive,
    gcp_provider,
    moto_client,
    warm,
)

# Stalls are shorter than the settle time: a request held by the server lands before `resume`/`down` stop
# waiting for it. The margin covers moto's own time on a loaded machine: with 0.3 s, one run in a thousand
# saw a held launch land after `resume` had returned (`down` still caught it).
MAX_STALL_S = 0.9
SETTLE_S = 2.0


def settings() -> ProvisionSettings:
    return ProvisionSettings(
        zone_timeout_s=1.5, call_timeout_s=0.8, poll_s=0.05,
        retry=RetryPolicy(attempts=4, initial_s=0.02, max_s=0.1),
        ttls=Ttls(capacity_s=0.5, quota_s=0.5, unsupported_s=0.5),
        lifecycle=LifecycleSettings(settle_s=SETTLE_S, poll_s=0.05, budget_s=60.0, call_timeout_s=5.0),
    )


@dataclass(frozen=True)
class Emulators:
    moto: MotoServer
    proxy: Ec2FaultProxy
    gce: GceDouble

    def env(self) -> dict[str, str]:
        return {**aws_env(self.proxy.url), "GEOSCHED_GCP_ENDPOINT": self.gce.endpoint}


@dataclass(frozen=True)
class RunPlan:
    seed: int
    gang: str
    providers: tuple[str, ...]
    nodes: int
    pricing: PricingMode
    faults: tuple[tuple[str, dict[str, Any]], ...]
    kill_after_s: float | None
    then: str
    preempt: str | None = None  # "aws", "stop", "delete": how one machine is lost after the kill
    refresh: bool = False


@dataclass
class RunOutcome:
    plan: RunPlan
    killed: bool
    child_ok: bool | None
    child_calls: int
    emulator_calls: int
    resumed_ok: bool | None
    unrecorded: int
    leaked_after_down: int
    open_rows: int
    billed_gone: int
    seconds: float
    child_seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.unrecorded == 0 and self.leaked_after_down == 0 and self.open_rows == 0 and self.billed_gone == 0


def providers_for(names: tuple[str, ...], env: dict[str, str]) -> dict[str, Provider]:
    out: dict[str, Provider] = {}
    if "aws" in names:
        out["aws"] = aws_provider()
    if "gcp" in names:
        out["gcp"] = gcp_provider(env["GEOSCHED_GCP_ENDPOINT"])
    return out


def child(home: str, env: dict[str, str], plan_doc: dict[str, Any]) -> None:
    """The provisioning process under test (runs in a forked child; may be SIGKILLed anywhere)."""
    os.environ.update(env)
    request = read_request(plan_doc["request"], "plan", plan_doc["gang"])
    assert request is not None
    with Store(Path(home)) as store:
        result = provision(request, providers_for(request.providers, env), store, settings(), gang=plan_doc["gang"])
    Path(home, "result.json").write_text(json.dumps({"ok": result.ok, "calls": result.api_calls}))


def random_plan(rng: random.Random, index: int) -> RunPlan:
    providers = rng.choice([("aws",), ("gcp",), ("gcp", "aws")])
    nodes = rng.randint(1, 4)
    faults: list[tuple[str, dict[str, Any]]] = []
    aws_zones = list(AWS_ZONES.values())
    for _ in range(rng.randint(0, 3)):  # capacity: zones refuse every launch
        if rng.random() < 0.5:
            faults.append(("aws", {"fault": Ec2Fault.insufficient_instance_capacity().to_dict(),
                                   "zone": rng.choice(aws_zones), "action": "RunInstances", "times": "always"}))
        elif rng.random() < 0.5:
            faults.append(("gcp", {"fault": GceFault.zone_resource_pool_exhausted().to_dict(),
                                   "zone": rng.choice(GCP_ZONES), "method": "instances.insert", "times": "always"}))
        else:  # room for part of the gang only: a partial gang to roll back
            faults.append(("gcp-capacity", {"zone": rng.choice(GCP_ZONES), "count": rng.randint(0, max(0, nodes - 1))}))
    if rng.random() < 0.5:  # throttling and 5xx, retried in place
        faults.append(("aws", {"fault": rng.choice([Ec2Fault.request_limit_exceeded(), Ec2Fault.internal_error()]
                                                   ).to_dict(), "action": "RunInstances", "times": rng.randint(1, 2)}))
        faults.append(("gcp", {"fault": rng.choice([GceFault.rate_limited(), GceFault.unavailable(),
                                                    GceFault.resource_operation_rate_exceeded()]).to_dict(),
                               "method": "instances.insert", "times": rng.randint(1, 2)}))
    if rng.random() < 0.3:  # a stalled zone: past the call timeout, so failover goes on without it
        seconds = rng.uniform(0.6, MAX_STALL_S)
        faults.append(("aws", {"fault": Ec2Fault.stall(seconds).to_dict(), "zone": rng.choice(aws_zones),
                               "action": "RunInstances", "times": 1}))
        faults.append(("gcp", {"fault": GceFault.stall(seconds).to_dict(), "zone": rng.choice(GCP_ZONES),
                               "method": "instances.insert", "times": 1}))
    if rng.random() < 0.1:
        faults.append(("gcp", {"fault": GceFault.quota_exceeded("NVIDIA_A100_GPUS", 0).to_dict(),
                               "zone": rng.choice(GCP_ZONES), "method": "instances.insert", "times": "always"}))
    # A launch takes 0.05-1 s against the emulators (less on an idle machine): most kills land mid-flight, some
    # hit a finished run.
    kill = rng.uniform(0.0, 0.4) if rng.random() < 0.8 else None
    pricing = rng.choice([PricingMode.ON_DEMAND, PricingMode.ON_DEMAND, PricingMode.SPOT])
    then = rng.choice(["resume", "down"])
    preempt = rng.choice(["aws", "stop", "delete"]) if rng.random() < 0.3 else None
    return RunPlan(seed=index, gang=f"gang-c{index:06d}", providers=providers, nodes=nodes, pricing=pricing,
                   faults=tuple(faults), kill_after_s=kill, then=then, preempt=preempt, refresh=rng.random() < 0.5)


def arm(emu: Emulators, plan: RunPlan) -> None:
    emu.proxy.clear_faults()
    # The double scans every operation it ever ran on each call: start each run from a clean one (every
    # run ends with nothing alive, which is checked before this).
    emu.gce.reset()
    for target, spec in plan.faults:
        if target == "aws":
            emu.proxy.inject(Ec2Fault.from_dict(spec["fault"]), zone=spec.get("zone"), action=spec.get("action"),
                             times=spec["times"])
        elif target == "gcp":
            emu.gce.inject(GceFault.from_dict(spec["fault"]), zone=spec.get("zone"), method=spec.get("method"),
                           times=spec["times"])
        else:
            emu.gce.set_capacity(spec["zone"], "a2-highgpu-8g", spec["count"])


def alive(emu: Emulators, gang: str) -> dict[str, str]:
    return {**aws_alive(emu.moto.url, gang), **gce_alive(emu.gce, gang)}


def run_one(emu: Emulators, plan: RunPlan, workdir: Path, mp: Any) -> RunOutcome:
    started = time.monotonic()
    home = workdir / plan.gang
    home.mkdir(parents=True)
    request = GangRequest("A100", 8, plan.nodes, plan.pricing, plan.providers, AWS_REGIONS + GCP_REGIONS)
    arm(emu, plan)
    emu.proxy.log.clear()
    emu.gce.log.clear()
    env = emu.env()
    proc = mp.Process(target=child, args=(str(home), env, {"gang": plan.gang, "request": request_json(request)}))
    child_started = time.monotonic()
    killed = run_killable(proc, plan.kill_after_s, 60.0)
    child_seconds = time.monotonic() - child_started
    emulator_calls = len(emu.proxy.calls) + len(emu.gce.calls)
    emu.proxy.clear_faults()
    emu.gce.clear_faults()
    for zone in GCP_ZONES:
        emu.gce.set_capacity(zone, "a2-highgpu-8g", None)
    result_file = home / "result.json"
    child_doc = json.loads(result_file.read_text()) if result_file.exists() else None
    outcome = RunOutcome(plan, killed, child_doc["ok"] if child_doc else None, child_doc["calls"] if child_doc else 0,
                         emulator_calls, None, 0, 0, 0, 0, 0.0, child_seconds)
    providers = providers_for(("aws", "gcp"), env)
    with Store(home) as store:
        record = journal.gang_record(store, plan.gang)
        if record is None:
            # Killed before the gang was journalled: then no API call was made either.
            time.sleep(0.05)  # real sleep: a launch the killed child sent may still land on the emulator
            outcome.unrecorded = len(alive(emu, plan.gang))
        else:
            # Before any repair, every machine must already be accounted for by an attempt the store holds.
            tokens = {a.token for a in journal.attempts(store, plan.gang)}
            for inst in providers["aws"].describe(plan.gang, AWS_REGIONS, _budget()) + \
                    providers["gcp"].describe(plan.gang, (), _budget()):
                if inst.state.exists and inst.token not in tokens:
                    outcome.unrecorded += 1
                    outcome.notes.append(f"{inst.provider_id}: attempt {inst.token} not in the store")
            if plan.preempt is not None:
                lose_one(emu, plan)
            if plan.refresh:
                lifecycle.refresh(store, providers, [plan.gang], settings().lifecycle)
            if plan.then == "resume":
                result = resume(plan.gang, providers, store, settings())
                outcome.resumed_ok = result.ok
                up = alive(emu, plan.gang)
                known = {r.provider_id for r in journal.instances(store, gang=plan.gang, states=("launched",))}
                missing = set(up) - known
                outcome.unrecorded += len(missing)
                outcome.notes.extend(f"{i}: alive after resume, not recorded" for i in sorted(missing))
                if result.ok and (len(up) != plan.nodes or len(set(up.values())) != 1):
                    outcome.notes.append(f"resumed gang has {len(up)} nodes in {sorted(set(up.values()))}")
                    outcome.unrecorded += abs(len(up) - plan.nodes)
                if missing:  # what the journal said, for whoever has to find out why
                    tried = [(a.seq, a.zone, a.outcome, a.error_kind, a.error_code) for a in result.attempts]
                    rows = [(r.name, r.zone, r.state, r.note, r.provider_id)
                            for r in journal.instances(store, gang=plan.gang)]
                    outcome.notes.extend([f"attempts: {tried}", f"rows: {rows}"])
                outcome.billed_gone += billed_but_not_running(emu, store, plan.gang)
            down = lifecycle.down(store, providers, plan.gang, settings().lifecycle)
            outcome.notes.extend(down.errors)
            outcome.billed_gone += len(open_ledger(store, plan.gang))
            outcome.open_rows = len(journal.instances(store, gang=plan.gang, states=journal.OPEN_STATES))
        outcome.leaked_after_down = len(alive(emu, plan.gang))
    outcome.seconds = time.monotonic() - started
    shutil.rmtree(home, ignore_errors=True)
    return outcome


def lose_one(emu: Emulators, plan: RunPlan) -> None:
    """One machine of the gang lost behind geosched's back, as a spot reclaim does."""
    aws = aws_alive(emu.moto.url, plan.gang)
    gcp = gce_alive(emu.gce, plan.gang)
    if plan.preempt == "aws" and aws:
        instance_id, zone = sorted(aws.items())[0]
        moto_client(emu.moto.url, zone[:-1]).terminate_instances(InstanceIds=[instance_id])
    elif gcp:
        name, zone = sorted(gcp.items())[0]
        if plan.preempt == "stop":
            emu.gce.set_instance_status(PROJECT, zone, name, "TERMINATED")
        else:
            emu.gce.remove_instance(PROJECT, zone, name)


def open_ledger(store: Store, gang: str) -> list[str]:
    """Provider refs of the gang's usage rows still open (billed)."""
    rows = store.db.execute("SELECT ref FROM usage WHERE job = ? AND ended_at IS NULL AND source = 'provider'",
                            (gang,))
    return [str(r[0]) for r in rows]


def billed_but_not_running(emu: Emulators, store: Store, gang: str) -> int:
    running = set(aws_alive(emu.moto.url, gang, states=("pending", "running"))) | {
        i["name"] for i in emu.gce.instances(project=PROJECT) if i.get("labels", {}).get("geosched-gang") == gang
        and i.get("status") in ("PROVISIONING", "STAGING", "RUNNING")}
    return len([ref for ref in open_ledger(store, gang) if ref not in running])


def _budget() -> Any:
    from geosched.providers.base import Budget

    return Budget(60.0, 10.0)


@contextmanager
def forkserver() -> Iterator[Any]:
    """A multiprocessing context whose children fork from a server that has imported the SDKs already."""
    mp = multiprocessing.get_context("forkserver")
    mp.set_forkserver_preload(["tests.providers.campaign"])
    yield mp


# moto scans every instance it ever held (terminated ones too) on each DescribeInstances, so a long campaign
# slows down quadratically; resetting it between runs (when nothing is alive) keeps runs comparable.
MOTO_RESET_EVERY = 40


def campaign(emu: Emulators, runs: int, seed: int, workdir: Path,
             progress: Callable[[int, list[RunOutcome]], None] | None = None) -> list[RunOutcome]:
    rng = random.Random(seed)
    outcomes: list[RunOutcome] = []
    with forkserver() as mp:
        for i in range(runs):
            if i % MOTO_RESET_EVERY == 0:
                if i:
                    emu.moto.reset()
                warm(aws_provider())  # both regions built in moto before the clock matters
            outcomes.append(run_one(emu, random_plan(rng, seed * 100000 + i), workdir, mp))
            if progress is not None:
                progress(i + 1, outcomes)
    return outcomes


def summary(outcomes: list[RunOutcome]) -> dict[str, Any]:
    return {
        "runs": len(outcomes),
        "killed": sum(o.killed for o in outcomes),
        "completed_in_child": sum(bool(o.child_ok) for o in outcomes),
        "resumed": sum(o.resumed_ok is not None for o in outcomes),
        "resumed_ok": sum(bool(o.resumed_ok) for o in outcomes),
        "unrecorded_instances": sum(o.unrecorded for o in outcomes),
        "leaked_after_down": sum(o.leaked_after_down for o in outcomes),
        "orphan_records": sum(o.open_rows for o in outcomes),
        "preempted": sum(o.plan.preempt is not None for o in outcomes),
        "billed_gone": sum(o.billed_gone for o in outcomes),
        "seconds": round(sum(o.seconds for o in outcomes), 1),
    }
