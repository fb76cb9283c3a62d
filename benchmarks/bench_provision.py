"""Provisioning under failure, against the local emulators (run from the repo root, by hand:
python -m benchmarks.bench_provision [--runs 1000] [--trials 10]).

1. Failover: a 16-node gang over 20 zones of which half are out of capacity (a random half each trial,
   zones ranked by randomly perturbed prices), on AWS (moto behind the fault proxy: one RunInstances per
   zone) and GCP (the GCE double: one insert per node). Reported: time to a complete gang, sequential and
   with 4 zones in parallel, against the time of a single-zone launch of the same gang with no failure;
   API calls per successful gang as the emulators counted them, for a store that has provisioned before (the
   network made on demand exists; the one-time cost of making it is ~5 calls per region on AWS, 4 on GCP).
2. Campaign: `--runs` provisioning processes under random faults (capacity, throttling, 5xx, stalls,
   quota), killed with SIGKILL at random moments, then resumed or taken down (tests/providers/campaign.py).
   Reported: leaked instances (target 0), records left open (target 0), kills, resumes.

All numbers are emulator numbers: they measure geosched's own work and call pattern, not cloud latency.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from geosched.core.models import Offering, Pricing
from geosched.core.retry import RetryPolicy
from geosched.providers import journal, lifecycle
from geosched.providers.aws import VCPU_QUOTA_CODES
from geosched.providers.base import Provider
from geosched.providers.gang import ProvisionSettings, provision
from geosched.providers.lifecycle import LifecycleSettings
from geosched.providers.plan import GangRequest
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, GceDouble, GceFault, MotoServer
from geosched_emulators.gce import DEFAULT_MACHINE_TYPES, only_in, with_zones
from tests.providers import campaign
from tests.providers.prov_support import aws_env, aws_provider, gcp_provider, warm

NODES = 16
# 20 AWS zones (moto's AZ names and ids) in six regions; p4d.24xlarge in each.
AWS_ZONES: tuple[tuple[str, str, str], ...] = tuple(
    (region, zid, name) for region, pairs in (
        ("us-east-1", (("use1-az6", "us-east-1a"), ("use1-az1", "us-east-1b"), ("use1-az2", "us-east-1c"),
                       ("use1-az4", "us-east-1d"), ("use1-az3", "us-east-1e"), ("use1-az5", "us-east-1f"))),
        ("us-east-2", (("use2-az1", "us-east-2a"), ("use2-az2", "us-east-2b"), ("use2-az3", "us-east-2c"))),
        ("us-west-2", (("usw2-az2", "us-west-2a"), ("usw2-az1", "us-west-2b"), ("usw2-az3", "us-west-2c"),
                       ("usw2-az4", "us-west-2d"))),
        ("eu-central-1", (("euc1-az1", "eu-central-1a"), ("euc1-az2", "eu-central-1b"),
                          ("euc1-az3", "eu-central-1c"))),
        ("eu-west-1", (("euw1-az3", "eu-west-1a"), ("euw1-az1", "eu-west-1b"), ("euw1-az2", "eu-west-1c"))),
        ("ca-central-1", (("cac1-az1", "ca-central-1a"),)),
    ) for zid, name in pairs)
# 20 GCE zones in five made-up regions of the double.
GCE_ZONES = tuple(f"bench{r}-{z}" for r in range(1, 6) for z in "abcd")


def settings(parallel: int) -> ProvisionSettings:
    return ProvisionSettings(zone_timeout_s=30.0, call_timeout_s=10.0, poll_s=0.05, parallel=parallel,
                             retry=RetryPolicy(attempts=4, initial_s=0.05, max_s=0.5),
                             lifecycle=LifecycleSettings(settle_s=1.0, poll_s=0.05))


@dataclass(frozen=True)
class Trial:
    seconds: float
    emulator_calls: int
    counted_calls: int
    attempts: int
    ok: bool


def offer(provider: str, region: str, zone: str, instance_type: str, price: float) -> Offering:
    return Offering(provider, instance_type, "A100", 8, 96, 1152, region, zone, price, None)


def trial(provider: Provider, offers: list[Offering], out: list[str], inject: Callable[[str], object],
          calls: Callable[[], int], clear: Callable[[], None], parallel: int, home: Path) -> Trial:
    clear()
    for zone in out:
        inject(zone)
    request = GangRequest("A100", 8, NODES, providers=(provider.name,))
    with Store(home) as store:
        # Each trial meets its refusals afresh: what earlier trials learnt (unavailable offerings, remembered
        # for 15 min) would otherwise send it straight to a free zone.
        journal.forget_expired(store, now=math.inf)
        before = calls()
        started = time.perf_counter()
        result = provision(request, {provider.name: provider}, store, settings(parallel), offerings=offers)
        seconds = time.perf_counter() - started
        used = calls() - before
        clear()
        lifecycle.down(store, {provider.name: provider}, result.gang, settings(1).lifecycle)
    return Trial(seconds, used, result.api_calls, len([a for a in result.attempts if a.outcome != "skipped"]),
                 result.ok)


def failover(cloud: str, provider: Provider, zones: list[tuple[str, str]], instance_type: str,
             inject: Callable[[str], object], calls: Callable[[], int], clear: Callable[[], None],
             trials: int, seed: int, workdir: Path) -> dict[str, Any]:
    """`zones`: (region, zone as the plan names it); `inject(zone)` makes a zone refuse every launch.

    Orders: `random` ranks zones by randomly perturbed prices (the refusing half lands anywhere in the plan);
    `worst` makes the refusing half the cheapest, so all ten are tried before a free zone."""
    rng = random.Random(seed)
    runs: dict[str, list[Trial]] = {}

    def record(name: str, t: Trial) -> None:
        runs.setdefault(name, []).append(t)

    # One store, as one user has: the security group / firewall rules made on demand for its owner are created
    # once, in the warm-up, and every timed gang finds them (as every gang after a user's first does).
    home = workdir / f"{cloud}-store"
    for region in dict.fromkeys(r for r, _ in zones):  # SDK clients and caches of every region, untimed
        zone = next(z for r, z in zones if r == region)
        trial(provider, [offer(cloud, region, zone, instance_type, 30.0)], [], inject, calls, clear, 1, home)
    for _ in range(trials):
        out = set(rng.sample([z for _, z in zones], len(zones) // 2))
        shuffled = [offer(cloud, r, z, instance_type, 32.77 * rng.uniform(0.9, 1.1)) for r, z in zones]
        worst = [offer(cloud, r, z, instance_type, (20.0 if z in out else 40.0) + rng.random()) for r, z in zones]
        free = min((o for o in shuffled if o.zone not in out), key=lambda o: o.price_ondemand or 0.0)
        record("single zone, no failure", trial(provider, [free], [], inject, calls, clear, 1, home))
        for order, offers in (("random", shuffled), ("worst", worst)):
            for k in (1, 4):
                record(f"{order} order, K={k}", trial(provider, offers, sorted(out), inject, calls, clear, k, home))
    single = statistics.median(x.seconds for x in runs["single zone, no failure"])
    report: dict[str, Any] = {}
    for name, rows in runs.items():
        ok = [r for r in rows if r.ok]
        median = statistics.median(r.seconds for r in rows)
        report[name] = {
            "complete": f"{len(ok)}/{len(rows)}",
            "median_s": round(median, 3),
            "max_s": round(max(r.seconds for r in rows), 3),
            "x_single_zone": round(median / single, 1),
            "zones_tried_median": statistics.median(r.attempts for r in rows),
            "api_calls_per_gang_median": statistics.median(r.emulator_calls for r in ok) if ok else None,
            "api_calls_counted_by_geosched_median": statistics.median(r.counted_calls for r in ok) if ok else None,
        }
    return report


def exhaust(gce: GceDouble, zone: str) -> object:
    return gce.inject(GceFault.zone_resource_pool_exhausted(), zone=zone, method="instances.insert", times="always")


def count_calls(gce: GceDouble) -> int:
    return len(gce.calls)


def bench_failover(moto: MotoServer, proxy: Ec2FaultProxy, trials: int, seed: int, workdir: Path) -> dict[str, Any]:
    regions = tuple(dict.fromkeys(r for r, _, _ in AWS_ZONES))
    aws = aws_provider(regions)
    # A readable vCPU limit (room for every gang of the run), as on a real account: without one moto answers
    # NoSuchResourceException and the quota pre-check stops before reading usage, so it would cost nothing here.
    proxy.set_service_quota(VCPU_QUOTA_CODES[("p", Pricing.ON_DEMAND)], 100_000, region=None)
    warm(aws, regions)
    names = {zid: name for _, zid, name in AWS_ZONES}
    aws_report = failover(
        "aws", aws, [(r, zid) for r, zid, _ in AWS_ZONES], "p4d.24xlarge",
        inject=lambda z: proxy.inject(Ec2Fault.insufficient_instance_capacity(), zone=names[z],
                                      action="RunInstances", times="always"),
        calls=lambda: len(proxy.calls), clear=proxy.clear_faults, trials=trials, seed=seed, workdir=workdir)
    a2 = next(m for m in DEFAULT_MACHINE_TYPES if m.name == "a2-highgpu-8g")
    out: dict[str, Any] = {"aws (one RunInstances per zone)": aws_report}
    # GCE answers capacity refusals in the insert's operation; `operation_delay_s` is how long operations
    # take (0: at once; 0.3 s: slow zones, where trying zones in parallel pays).
    for delay in (0.0, 0.3):
        with GceDouble(zones=with_zones(*GCE_ZONES), machine_types=[only_in(a2, *GCE_ZONES)],
                       operation_delay_s=delay) as gce:
            gcp = gcp_provider(gce.endpoint)
            out[f"gcp (one insert per node), operations take {delay:g} s"] = failover(
                "gcp", gcp, [(z.rsplit("-", 1)[0], z) for z in GCE_ZONES], "a2-highgpu-8g",
                inject=partial(exhaust, gce), calls=partial(count_calls, gce), clear=gce.clear_faults,
                trials=trials, seed=seed, workdir=workdir / f"delay{delay:g}")
    return out


def report_progress(done: int, outcomes: list[campaign.RunOutcome]) -> None:
    if done % 100 == 0:
        print(json.dumps({"progress": done, **campaign.summary(outcomes)}), file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000, help="campaign runs (default 1000)")
    parser.add_argument("--trials", type=int, default=10, help="failover trials per setting (default 10)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-failover", action="store_true")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    with MotoServer() as moto, Ec2FaultProxy(moto.url) as proxy, GceDouble() as gce, \
            tempfile.TemporaryDirectory() as tmp:
        os.environ.update(aws_env(proxy.url))
        if not args.skip_failover:
            started = time.perf_counter()
            out["failover: 16-node gang, 20 zones, half out of capacity"] = bench_failover(
                moto, proxy, args.trials, args.seed, Path(tmp) / "failover")
            out["failover bench seconds"] = round(time.perf_counter() - started, 1)
            print(json.dumps(out, indent=2), flush=True)
        if args.runs:
            started = time.perf_counter()
            outcomes = campaign.campaign(campaign.Emulators(moto, proxy, gce), args.runs, args.seed,
                                         Path(tmp) / "campaign", progress=report_progress)
            stats = campaign.summary(outcomes)
            time.sleep(campaign.MAX_STALL_S)
            stats["alive_at_the_end"] = sum(len(campaign.alive(campaign.Emulators(moto, proxy, gce), o.plan.gang))
                                            for o in outcomes)
            stats["wall_seconds"] = round(time.perf_counter() - started, 1)
            stats["dirty_runs"] = [{"gang": o.plan.gang, "notes": o.notes} for o in outcomes if not o.clean][:10]
            out["campaign: SIGKILL at random points under random faults"] = stats
    print(json.dumps({k: v for k, v in out.items() if k.startswith("campaign")}, indent=2))


if __name__ == "__main__":
    main()
