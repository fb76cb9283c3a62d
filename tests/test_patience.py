"""Patience with aging (policies/patience.py, issue 22): a multi-node gang whose best placement now is far slower than
a healthy ring of its shape waits for one, until it has waited the extra run time a slow start costs.

The fleet: two zones of two 8-GPU nodes; inside a zone the shipped GOOD link, between the zones a crawl (1 Gbit/s).
A 2 x 8 GPU gang (default profile: 1,000 MB per step after 1,000 ms of compute) in one zone steps in
1,000 + 2(2-1)/2 x 1,000 MB x 8 / 50 Gbit/s + 0.2 ms = 1,160.2 ms; across the zones in
1,000 + 8,000 + 3 ms = 9,003 ms: 7.76x slower, beyond the 3x limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from geosched.core.models import Job, LinkStats, NetworkView, NoFit, Placement, Schedule, pair_key
from geosched.files.documents import fleet_to_dict, network_to_dict
from geosched.policies import PlacementContext, place
from geosched.policies.patience import MAX_WAIT_S, SLOWDOWN_LIMIT, UNKNOWN_RUNTIME_WAIT_S, Waiting, patience_s
from geosched.simulate import SimOptions, TraceJob, simulate
from tests.handmade import GOOD, fleet, node

CRAWL = LinkStats(rtt_p50_ms=3.0, rtt_p95_ms=5.0, loss=0.0, throughput_gbps=1.0)
HEALTHY_MS = 1160.2
SLOW_MS = 9003.0
GANG = Job("gang", workers=2, gpus_per_worker=8)


def ctx(busy: tuple[str, ...] = ()) -> PlacementContext:
    """za1, za2, zb1, zb2; the nodes in `busy` have no GPU free."""
    f = fleet([node(n, z, free=0 if n in busy else None) for z in ("za", "zb") for n in (f"{z}1", f"{z}2")])
    view = NetworkView(zone_links={pair_key("za", "za"): GOOD, pair_key("zb", "zb"): GOOD, pair_key("za", "zb"): CRAWL})
    return PlacementContext(f, view)


def test_a_gang_offered_only_a_slow_ring_waits_and_says_so() -> None:
    result = place(GANG, ctx(busy=("za1", "zb1")), waiting=Waiting(0.0, 1000.0))
    assert isinstance(result, NoFit) and result.waiting
    slowdown = SLOW_MS / HEALTHY_MS
    assert slowdown > SLOWDOWN_LIMIT
    limit = 1000.0 * (slowdown - 1)  # the extra run time a slow start would cost
    assert result.retry_after_s == pytest.approx(limit)
    reason = result.reasons[0].reason
    assert reason.startswith("waiting for a healthy ring: best now is 7.8x slower than on the idle fleet")
    assert "9,003 ms in za, zb vs 1,160 ms" in reason
    assert "is waiting under policy 'zone-first'" in result.message and "no fit" not in result.message


def test_it_starts_on_the_slow_ring_once_it_has_waited_the_extra_run_time() -> None:
    limit = 1000.0 * (SLOW_MS / HEALTHY_MS - 1)
    busy = ctx(busy=("za1", "zb1"))
    assert isinstance(place(GANG, busy, waiting=Waiting(limit - 1, 1000.0)), NoFit)
    started = place(GANG, busy, waiting=Waiting(limit, 1000.0))
    assert isinstance(started, Placement) and started.zones == ("za", "zb")
    assert started.score.step_ms == pytest.approx(SLOW_MS)


def test_no_patience_where_the_wait_is_unknown_on_the_idle_fleet_on_one_node_or_for_a_baseline() -> None:
    busy = ctx(busy=("za1", "zb1"))
    assert isinstance(place(GANG, busy), Placement)  # waiting unknown: a stateless ask would refuse for ever
    assert isinstance(place(GANG, busy, "pack", waiting=Waiting(0.0, 1000.0)), Placement)
    idle = place(GANG, ctx(), waiting=Waiting(0.0, 1000.0))
    assert isinstance(idle, Placement) and len(idle.zones) == 1
    one_node = Job("one", workers=1, gpus_per_worker=8)
    assert isinstance(place(one_node, busy, waiting=Waiting(0.0, 1000.0)), Placement)
    # A healthy ring somewhere: it is taken at once, whatever the wait.
    assert isinstance(place(GANG, ctx(busy=("za1",)), waiting=Waiting(0.0, 1000.0)), Placement)


def test_the_runtime_comes_from_the_jobs_schedule_else_the_wait_is_an_hour_and_never_more_than_a_day() -> None:
    busy = ctx(busy=("za1", "zb1"))
    unknown = place(GANG, busy, waiting=Waiting(0.0))
    assert isinstance(unknown, NoFit) and unknown.retry_after_s == pytest.approx(UNKNOWN_RUNTIME_WAIT_S)
    assert "its run time unknown" in unknown.reasons[0].reason
    assert isinstance(place(GANG, busy, waiting=Waiting(UNKNOWN_RUNTIME_WAIT_S)), Placement)
    declared = Job("gang", workers=2, gpus_per_worker=8, schedule=Schedule(runtime_s=100.0))
    result = place(declared, busy, waiting=Waiting(0.0))
    assert isinstance(result, NoFit) and result.retry_after_s == pytest.approx(100.0 * (SLOW_MS / HEALTHY_MS - 1))
    assert patience_s(10.0, 1e9) == MAX_WAIT_S
    assert patience_s(10.0, None) == UNKNOWN_RUNTIME_WAIT_S


def test_the_reference_is_placed_once_per_gang_shape_and_shared_by_the_snapshots_copies() -> None:
    base = ctx()
    busy = base.with_free(np.array([0, 8, 0, 8]))
    place(GANG, busy, waiting=Waiting(0.0, 1000.0))
    assert list(base.reference_steps.values()) == [pytest.approx(HEALTHY_MS)]
    place(
        Job("other-name", workers=2, gpus_per_worker=8),
        base.with_free(np.array([0, 8, 0, 8])),
        waiting=Waiting(0.0, 1000.0),
    )
    assert len(base.reference_steps) == 1


def trace_job(i: int, submit: float, gpus: int, duration: float) -> TraceJob:
    return TraceJob(id=f"j{i}", submit_time_s=submit, gpus=gpus, duration_s=duration, gpus_per_worker=8, line=i)


def test_the_replay_asks_a_waiting_gang_again_when_its_patience_runs_out_and_backfills_meanwhile() -> None:
    # za1 and zb1 are held for the whole replay (not by a replayed job): no healthy ring ever comes.
    limit = 1000.0 * (SLOW_MS / HEALTHY_MS - 1)
    (result,) = simulate(
        [trace_job(1, 0, 16, 1000), trace_job(2, 10, 8, 50)],
        ctx(busy=("za1", "zb1")),
        ["zone-first"],
        options=SimOptions(backfill=True),
    )
    starts = {r.id: (r.start_s, r.slowdown) for r in result.records}
    assert starts["j2"] == (10, 1.0)  # behind the waiting head, the backfill starts what it can
    assert starts["j1"][0] == pytest.approx(max(limit, 60.0))
    assert starts["j1"][1] == pytest.approx(SLOW_MS / 1000)
    assert result.unplaced == 0


def test_the_replay_gang_takes_the_healthy_ring_when_it_comes_within_its_patience() -> None:
    # za holds two nodes, zb and zc one each, every pair of zones a crawl. j1 (16 GPUs, 2,000 s) takes za at 0; j2
    # (16 GPUs, 1,000 s) at 10 is offered zb1 + zc1 only, 7.76x slower: it waits, and takes za when j1 ends.
    f = fleet([node("za1", "za"), node("za2", "za"), node("zb1", "zb"), node("zc1", "zc")])
    links = {pair_key(a, b): GOOD if a == b else CRAWL for a in ("za", "zb", "zc") for b in ("za", "zb", "zc")}
    three = PlacementContext(f, NetworkView(zone_links=links))
    trace = [trace_job(1, 0, 16, 2000), trace_job(2, 10, 16, 1000)]
    (patient,) = simulate(trace, three, ["zone-first"])
    j2 = next(r for r in patient.records if r.id == "j2")
    j1_ends = 2000 * HEALTHY_MS / 1000  # j1 runs its 2,000 s at its ring's pace
    assert j2.start_s == pytest.approx(j1_ends) and j2.zones == ("za",)
    assert j2.slowdown == pytest.approx(HEALTHY_MS / 1000)

    def impatient(job: Job, at: PlacementContext, policy: str, weights: object, waiting: object) -> Placement | NoFit:
        return place(job, at, policy, None, explain=False)  # the same policy, not told the wait

    (hasty,) = simulate(trace, three, ["zone-first"], place_fn=impatient)
    j2_now = next(r for r in hasty.records if r.id == "j2")
    assert (j2_now.start_s, j2_now.zones) == (10, ("zb", "zc"))
    assert patient.avg_jct_s < hasty.avg_jct_s  # j2 ends at 2,320 + 1,160 s against 10 + 9,003 s


def test_place_waited_says_waiting_exits_3_and_documents_it(tmp_path: Path) -> None:
    c = ctx(busy=("za1", "zb1"))
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(fleet_to_dict(c.fleet)))
    (tmp_path / "network.yaml").write_text(yaml.safe_dump(network_to_dict(c.network)))
    (tmp_path / "job.yaml").write_text(
        yaml.safe_dump({"name": "gang", "workers": 2, "gpus_per_worker": 8, "schedule": {"runtime": "1000s"}})
    )

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "geosched",
                "place",
                str(tmp_path / "job.yaml"),
                "--fleet",
                str(tmp_path / "fleet.yaml"),
                "--network",
                str(tmp_path / "network.yaml"),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={"GEOSCHED_HOME": str(tmp_path / "home"), "COLUMNS": "200", "PATH": "/usr/bin"},
        )

    now = run()
    assert now.returncode == 0, now.stderr  # no --waited: the wait is unknown, the gang starts as always
    waiting = run("--waited", "10m", "-o", "json")
    assert waiting.returncode == 3, waiting.stderr
    doc = json.loads(waiting.stdout)
    assert doc["waiting"] is True and doc["retry_after_s"] == pytest.approx(1000 * (SLOW_MS / HEALTHY_MS - 1) - 600)
    assert doc["rejected"][0]["reason"].startswith("waiting for a healthy ring")
    table = run("--waited", "10m")
    assert table.returncode == 3 and "is waiting under policy 'zone-first'" in table.stderr
    assert run("--waited", "2h").returncode == 0  # 7,200 s > 6,760 s: its patience has run out
    bad = run("--waited", "soon")
    assert bad.returncode == 2 and "expected a duration" in bad.stderr


def test_scheduler_mode_refuses_with_the_waiting_reason_counted_from_the_pods_creation() -> None:
    from geosched.kube import keys
    from geosched.kube.scheduler.decide import Decision, Refusal, View, decide
    from geosched.kube.scheduler.gangs import group
    from geosched.kube.scheduler.pods import pod_info

    c = ctx()
    free = np.array([0 if n in ("za1", "zb1") else 8 for n in c.names])
    view = View(c, free, [{keys.ZONE: n.zone} for n in c.fleet.nodes], [() for _ in c.fleet.nodes])
    pods = [
        pod_info(
            {
                "metadata": {
                    "name": f"w-{i}",
                    "namespace": "ml",
                    "uid": f"uid-{i}",
                    "labels": {keys.COSCHED_POD_GROUP: "g"},
                    "creationTimestamp": "2023-06-10T08:00:00Z",
                },
                "spec": {"containers": [{"name": "c", "resources": {"limits": {keys.GPU: "8"}}}]},
                "status": {"phase": "Pending"},
            }
        )
        for i in range(2)
    ]
    (gang,) = group(pods, [], {("pod-group", "ml", "g"): 2}, {})
    created = 1686384000.0  # 2023-06-10T08:00:00Z
    waiting = decide(gang, view, now=created + 600)
    assert isinstance(waiting, Refusal)
    assert waiting.reason.startswith("waiting for a healthy ring: best now is 7.8x slower")
    assert "no fit" not in waiting.reason
    assert isinstance(decide(gang, view, now=created + UNKNOWN_RUNTIME_WAIT_S), Decision)
    assert isinstance(decide(gang, view), Decision)  # no clock: the wait is unknown, no patience


def test_the_python_api_takes_the_wait_as_the_cli_does() -> None:
    from geosched import api

    busy = ctx(busy=("za1", "zb1"))
    assert isinstance(api.place(GANG, busy.fleet, busy.network), Placement)
    waiting = api.place(GANG, busy.fleet, busy.network, waited_s=60.0)
    assert isinstance(waiting, NoFit) and waiting.waiting
