"""The demo's provisioning stage: one placed job launched as a real gang on the emulated clouds, zone first
with failover (after a capacity fault injected in the first-choice zone), held briefly, then taken down.

The gang goes through the same `provision` and `down` as `geosched provision` and `geosched down`, journalled
in the demo's own store, never in the user's.
"""

from __future__ import annotations

import importlib
import importlib.util
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rich.markup import escape

from geosched.console import render
from geosched.core import catalog
from geosched.core.extras import extra_for
from geosched.core.models import Fleet, Offering, Placement
from geosched.core.retry import RetryPolicy
from geosched.providers import lifecycle
from geosched.providers.cli import attempt_rows, attempts_table
from geosched.providers.gang import ProvisionSettings, plan_gang, provision
from geosched.providers.lifecycle import LifecycleSettings
from geosched.providers.plan import GangRequest
from geosched.store.db import Store

PROVISION_JOB = "pretrain-64"
# 8-GPU instance types the emulators hold, per (provider, GPU model): moto knows every EC2 type; the GCE
# double is started selling these in the zones the request names.
EMULATED_TYPES: Mapping[tuple[str, str], str] = {
    ("gcp", "H100"): "a3-highgpu-8g", ("gcp", "A100"): "a2-highgpu-8g",
    ("aws", "H100"): "p5.48xlarge", ("aws", "A100"): "p4d.24xlarge",
}
# After the placed zones, the other cloud's region is the fallback (one region keeps the plan short to read).
FALLBACK_REGION: Mapping[str, str] = {"aws": "us-east-1", "gcp": "us-central1"}
HOLD_S = 1.0
# The emulators answer in milliseconds: short deadlines and polls keep the stage quick. `geosched provision`
# on real clouds uses the defaults (10 min per zone, 2 s polls, 120 s settle).
SETTINGS = ProvisionSettings(
    zone_timeout_s=30.0, call_timeout_s=10.0, poll_s=0.1, retry=RetryPolicy(attempts=3, initial_s=0.1, max_s=0.5),
    lifecycle=LifecycleSettings(settle_s=2.0, poll_s=0.1, budget_s=60.0, call_timeout_s=10.0))


@dataclass(frozen=True)
class GangPlan:
    """The gang for a placed job: its request, and per provider the zones and regions it names."""

    job: str
    request: GangRequest
    zones: Mapping[str, tuple[str, ...]]
    regions: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class GangOutcome:
    gang: str
    state: str
    launched: int
    terminated: int
    alive_after_down: int
    attempts: int


def gang_plan(p: Placement, fleet: Fleet, offerings: Iterable[Offering]) -> GangPlan | str:
    """Pure: the placed job as a gang of whole nodes, its placed zone(s) first, then the other cloud's
    fallback region; a string says why the job cannot be provisioned on the emulators."""
    nodes = [fleet.by_name[a.node] for a in p.assignments if a.node in fleet.by_name]
    if not nodes or len(nodes) != len(p.assignments):
        return f"{p.job.name}: placed on nodes outside the fleet"
    provider, gpu, per_node = nodes[0].provider, p.job.gpu or nodes[0].gpu, nodes[0].gpus
    other = "aws" if provider == "gcp" else "gcp"
    own_type, other_type = EMULATED_TYPES.get((provider, gpu)), EMULATED_TYPES.get((other, gpu))
    if own_type is None or other_type is None or p.job.gpus % per_node:
        return f"{p.job.name}: {gpu} x {per_node} per node has no instance type on both emulators"
    offers = list(offerings)
    zones = {provider: tuple(p.zones),
             other: tuple(sorted({o.zone for o in offers if o.provider == other and o.instance_type == other_type
                                  and o.region == FALLBACK_REGION[other]}))}
    region_of = {(o.provider, o.zone): o.region for o in offers}
    regions = {name: tuple(sorted({region_of[(name, z)] for z in zs if (name, z) in region_of}))
               for name, zs in zones.items()}
    request = GangRequest(gpu=gpu, gpus_per_node=per_node, nodes=p.job.gpus // per_node,
                          providers=(provider, other), zones=(*zones[provider], *zones[other]),
                          instance_types=(own_type, other_type))
    return GangPlan(p.job.name, request, zones, regions)


# The test doubles are their own distribution (emulators/ in the repository, issue 25 item 4): the product wheel
# holds none, so a `pip install geosched` has no emulated cloud to provision on.
EMULATORS_MISSING = ("the emulated clouds are not installed: pip install ./emulators (geosched-emulators, in the "
                     "geosched repository; scripts/demo installs it)")


def emulators_missing() -> str | None:
    """Why the emulated clouds cannot start, as one line naming what to install, else None: the stage drives the
    doubles with the aws and gcp SDKs (their extras), and the doubles are the geosched-emulators distribution."""
    for module in ("boto3", "google.cloud.compute_v1"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # a parent package (google.cloud) is missing
            found = False
        if not found:
            missing = extra_for(ModuleNotFoundError(module, name=module))
            assert missing is not None  # both names are in geosched.core.extras.EXTRA_OF_MODULE
            return str(missing)
    try:
        importlib.import_module("geosched_emulators")
        importlib.import_module("moto.server")
    except ImportError:
        return EMULATORS_MISSING
    return None


def run(n: int, placed: Sequence[Placement], fleet: Fleet, store: Store) -> GangOutcome | None:
    """The stage: prints what it does; returns what happened to the gang, or None when skipped."""
    head = f"[bold]{n}. Provisioning[/] on emulated clouds"
    missing = emulators_missing()
    if missing is not None:
        render.out.print(f"{head}: skipped: " + escape(missing), markup=True)
        return None
    target = next((p for p in placed if p.job.name == PROVISION_JOB), None)
    plan = gang_plan(target, fleet, catalog.offerings()) if target else f"{PROVISION_JOB} was not placed"
    if isinstance(plan, str):
        render.out.print(f"{head}: skipped: {escape(str(plan))}", markup=True)
        return None
    # Here, not at the top: the emulators and the SDKs take seconds to import, and `geosched` imports this module.
    from geosched.demo.clouds import emulated_clouds

    req = plan.request
    fallback = req.providers[1]
    render.out.print(f"{head}: emulated AWS (moto) and GCE (local REST double) on 127.0.0.1, no cloud account. "
                     f"{plan.job} as {req.nodes} x {req.gpu}:{req.gpus_per_node}: its placed zone first, then "
                     f"{fallback} {', '.join(plan.regions[fallback])} (instance types the emulators hold: "
                     f"{', '.join(req.instance_types)}); journal in {escape(str(store.path))}", markup=True)
    with emulated_clouds(plan.zones.get("gcp", ()), req.instance_types, plan.regions.get("aws", ())) as clouds:
        providers = dict(clouds.providers)
        candidates = plan_gang(req, providers, store).candidates
        if not candidates:
            render.out.print("  skipped: no offering in the shipped catalog matches this request")
            return None
        render.out.print("  plan, cheapest first: " + "; ".join(
            f"{i}. {c.provider} {c.zone} {c.instance_type} ${c.usd_per_hour:,.2f}/h"
            for i, c in enumerate(candidates[:4], start=1)) + (f"; ... {len(candidates)} in all"
                                                               if len(candidates) > 4 else ""))
        first = candidates[0]
        code = clouds.refuse(first)
        render.out.print(f"  injected fault: {first.provider} {first.zone} refuses every launch with {code} "
                         "(out of capacity), so the gang must fail over")
        result = provision(req, providers, store, SETTINGS)
        attempts_table(f"attempts for {result.gang}", attempt_rows(result.attempts))
        render.out.print(f"  {result.gang}: {result.state}: {result.message} ({result.api_calls} API calls, "
                         f"{result.elapsed_s:.1f} s)", markup=False)
        if result.ok:
            time.sleep(HOLD_S)  # held briefly, so its (tiny) usage shows in the cost report
        down = lifecycle.down(store, providers, result.gang, SETTINGS.lifecycle)
        alive = clouds.alive(result.gang, plan.regions)
    held = f"held {HOLD_S:g} s, then " if result.ok else ""
    render.out.print(f"  {held}`down`: {down.state}, {down.terminated} terminated; the emulated clouds hold "
                     f"{alive} live instance(s) of {result.gang} (asked through the providers' describe)")
    return GangOutcome(result.gang, result.state, len(result.nodes), down.terminated, alive,
                       len(result.attempts))
