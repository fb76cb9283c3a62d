"""Savings against baselines: recorded jobs re-placed by spread, tas, cheapest and carbon-blind on a snapshot fleet."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import typer
from report_support import T0, H, used
from typer.testing import CliRunner

from geosched import policies
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import Assignment, CarbonSignal, Job, NodeState, Placement
from geosched.report.baseline import recorded_placements
from geosched.report.cli import make_app
from geosched.report.report import report
from geosched.store.db import Store
from tests.output_support import valid

JOB = Job(name="finetune-8", workers=1, gpus_per_worker=8, gpu="A100")
HOURS = 2


@pytest.fixture
def placed(tmp_path: Path) -> tuple[Store, Placement]:
    """finetune-8 placed by zone-first on the embedded fleet and run there for 2 h (a kube job interval)."""
    store = Store(tmp_path)
    return store, run_recorded(store, JOB)


def run_recorded(store: Store, job: Job, start: dict[str, Any] | None = None) -> Placement:
    """`job` placed by zone-first on the embedded fleet, recorded (with a time-shifted job's `start` block), and run
    there for HOURS (kube job intervals)."""
    result = policies.place(job, policies.PlacementContext(default_fleet(), default_network()))
    assert isinstance(result, Placement)
    store.record_placement(result, start)
    for a in result.assignments:
        node = default_fleet().by_name[a.node]
        used(store, f"{job.name}-{a.node}", T0, T0 + HOURS * H, kind="job", job=job.name, provider=node.provider,
             region=node.region, zone=node.zone, cluster=node.cluster, instance_type=node.instance_type,
             gpu=node.gpu, gpus=a.workers * job.gpus_per_worker, source="kube")
    return result


def _doc(store: Store) -> dict[str, Any]:
    now = T0 + 24 * H
    text = report(store, "cost", "job", T0, now, "json", now=now).text
    return json.loads(text or "")  # type: ignore[no-any-return]


def test_each_baseline_re_places_the_job_for_the_same_span(placed: tuple[Store, Placement]) -> None:
    store, _ = placed
    doc = _doc(store)
    outcomes = {o["placement"]: o for o in doc["baselines"]["jobs"]}
    assert set(outcomes) == {"recorded", "spread", "tas", "cheapest", "carbon-blind"}
    # The recorded placement, costed on the snapshot, is exactly what the ledger says it cost.
    assert outcomes["recorded"]["note"] == "modelled on the snapshot"
    assert outcomes["recorded"]["usd"] == pytest.approx(doc["total"]["cost_usd"], rel=1e-12)
    # Cheapest, worked out independently: the cheapest $/GPU-h A100 node with 8 free GPUs, for 8 GPUs x 2 h.
    cheapest = min(n.price_ondemand / n.gpus for n in default_fleet().nodes
                   if n.gpu == "A100" and n.gpus_free >= 8 and n.state is NodeState.READY and n.price_ondemand)
    assert outcomes["cheapest"]["usd"] == pytest.approx(cheapest * 8 * HOURS, rel=1e-12)
    for o in outcomes.values():
        assert o["usd"] > 0 and o["gco2e"] > 0


def test_savings_are_baseline_minus_recorded(placed: tuple[Store, Placement]) -> None:
    store, _ = placed
    doc = _doc(store)
    by_label = {o["placement"]: o for o in doc["baselines"]["jobs"]}
    savings = {s["baseline"]: s for s in doc["baselines"]["savings"]}
    assert list(savings) == ["spread", "tas", "cheapest", "carbon-blind"]
    for label, s in savings.items():
        assert s["jobs"] == 1
        assert s["saved_usd"] == pytest.approx(by_label[label]["usd"] - by_label["recorded"]["usd"], rel=1e-9, abs=1e-9)
        assert s["saved_gco2e"] == pytest.approx(by_label[label]["gco2e"] - by_label["recorded"]["gco2e"], abs=1e-6)
    # The default policy is carbon-blind with the default weights: it finds the recorded placement again.
    assert savings["carbon-blind"]["saved_usd"] == pytest.approx(0.0, abs=1e-9)


def test_a_job_without_placement_and_nodes_outside_the_snapshot(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ghost = policies.place(JOB, policies.PlacementContext(default_fleet(), default_network()))
    assert isinstance(ghost, Placement)
    store.record_placement(replace(ghost, assignments=(Assignment("ghost-node", ghost.zones[0], 1),)))
    used(store, "finetune-8", T0, T0 + H, kind="job", job="finetune-8", gpus=8, source="kube")
    used(store, "orphan", T0, T0 + H, kind="job", job="orphan", gpus=8, source="kube")
    outcomes = {(o["job"], o["placement"]): o for o in _doc(store)["baselines"]["jobs"]}
    assert outcomes[("orphan", "recorded")]["note"] == "no recorded placement"
    assert outcomes[("finetune-8", "recorded")]["note"].startswith("ledger figures")
    assert ("finetune-8", "cheapest") in outcomes


def test_the_placement_a_window_ran_under() -> None:
    docs = [{"id": 1, "job": "a", "created_at": 10.0}, {"id": 2, "job": "a", "created_at": 20.0},
            {"id": 3, "job": "a", "created_at": 40.0}, {"id": 4, "job": "b", "created_at": 50.0},
            {"id": 5, "job": "b", "created_at": 60.0}]
    chosen = recorded_placements(docs, until=30.0)
    assert (chosen["a"]["id"], chosen["b"]["id"]) == (2, 4)


def test_an_hourly_only_signal_still_lets_the_baselines_score_carbon(placed: tuple[Store, Placement]) -> None:
    store, _ = placed
    signal = CarbonSignal(intensity={}, profile={"gcp:us-central1": (10.0, 20.0)})
    text = report(store, "carbon", "job", T0, T0 + 24 * H, "json", now=T0 + 24 * H, carbon=signal).text
    assert len(json.loads(text or "")["baselines"]["jobs"]) == 5


def test_each_baseline_is_charged_for_its_own_predicted_run_time(tmp_path: Path) -> None:
    """A baseline whose placement makes every step slower runs longer, and pays for it (issue 11, item 7)."""
    store = Store(tmp_path)
    gang = Job(name="pretrain-16", workers=2, gpus_per_worker=8, gpu="H100")
    recorded = run_recorded(store, gang)
    assert len(recorded.zones) == 1
    spread = policies.place(gang, policies.PlacementContext(default_fleet(), default_network()), "spread")
    assert isinstance(spread, Placement) and len(spread.zones) == 2  # across zones: a slower ring
    ratio = spread.score.step_ms / recorded.score.step_ms
    assert ratio > 1.1
    # Worked out independently: the spread nodes' $/GPU-h x 8 GPUs each x the recorded 2 h x the slow-down.
    fleet = default_fleet().by_name
    expected = sum(fleet[a.node].price_ondemand / fleet[a.node].gpus * 8 * a.workers  # type: ignore[operator]
                   for a in spread.assignments) * HOURS * ratio
    outcomes = {o["placement"]: o for o in _doc(store)["baselines"]["jobs"]}
    assert outcomes["spread"]["usd"] == pytest.approx(expected, rel=1e-9)
    assert outcomes["spread"]["run_ratio"] == pytest.approx(ratio, rel=1e-9)
    assert outcomes["recorded"]["run_ratio"] == 1.0


@pytest.mark.parametrize(("kind", "by", "embodied"), [("cost", "job", False), ("carbon", "region", True)])
def test_the_documents_rows_and_baselines_have_their_schemas_shape(placed: tuple[Store, Placement], kind: str,
                                                                   by: str, embodied: bool) -> None:
    store, _ = placed
    now = T0 + 24 * H
    doc = valid(json.loads(report(store, kind, by, T0, now, "json", now=now, embodied=embodied).text or ""))
    assert doc["rows"] and doc["baselines"]["jobs"] and doc["baselines"]["savings"]
    # The schema knows the shapes: a renamed, missing or display-style key is an error.
    for path, broken in (("rows", {**doc["rows"][0], "GPU-h": 1.0}),
                         ("rows", {k: v for k, v in doc["rows"][0].items() if k != "gpu_hours"}),
                         ("rows", {**{k: v for k, v in doc["rows"][0].items() if k != by}, "zone": "x"}),
                         ("savings", {**doc["baselines"]["savings"][0], "saved_usd": "12"}),
                         ("jobs", {k: v for k, v in doc["baselines"]["jobs"][0].items() if k != "run_ratio"})):
        bad = copy.deepcopy(doc)
        (bad["rows"] if path == "rows" else bad["baselines"][path])[0] = broken
        with pytest.raises(AssertionError):
            valid(bad)


def test_a_time_shifted_job_says_what_waiting_saved(tmp_path: Path) -> None:
    """Issue 24: a flexible job recorded with its start block is also costed as if started when it was decided:
    the same nodes, `deferred_s` earlier, at the hourly grid of those hours; the saving is that less the record."""
    store = Store(tmp_path)
    start = {"at": "2024-01-01T00:00Z", "decided_at": "2023-12-31T19:00Z", "deferred_s": 5 * H}
    result = run_recorded(store, JOB, start)  # decided 5 h before it ran, T0 .. T0 + 2 h
    region = default_fleet().by_name[result.assignments[0].node].region_key
    hour = int(T0 // H)
    # Dirty in the 5 hours before T0, clean from T0 on: waiting saved 3/4 of the emissions.
    signal = CarbonSignal(intensity={}, hourly={region: {**{hour - k: 400.0 for k in range(1, 6)},
                                                         hour: 100.0, hour + 1: 100.0}})
    doc = json.loads(report(store, "carbon", "job", T0 - 6 * H, T0 + 24 * H, "json", now=T0 + 24 * H,
                            carbon=signal).text or "")
    by_label = {o["placement"]: o for o in doc["baselines"]["jobs"]}
    assert by_label["start-now"]["gco2e"] == pytest.approx(4 * by_label["recorded"]["gco2e"], rel=1e-9)
    assert "when it was decided" in by_label["start-now"]["note"]
    saved = {s["baseline"]: s for s in doc["baselines"]["savings"]}["start-now"]
    assert saved["saved_gco2e"] == pytest.approx(3 * by_label["recorded"]["gco2e"], rel=1e-9)
    valid(doc)


def _slow_baseline(tmp_path: Path) -> tuple[Store, float]:
    """pretrain-16 recorded by zone-first in one zone; spread puts it across two zones, a slower ring."""
    store = Store(tmp_path / "home")
    gang = Job(name="pretrain-16", workers=2, gpus_per_worker=8, gpu="H100")
    recorded = run_recorded(store, gang)
    spread = policies.place(gang, policies.PlacementContext(default_fleet(), default_network()), "spread")
    assert isinstance(spread, Placement)
    return store, spread.score.step_ms / recorded.score.step_ms


def test_each_saving_says_what_it_stands_on(tmp_path: Path) -> None:
    """Issue 23 item 6: a saving against a baseline whose gangs were predicted to run longer says how much longer
    and why, and what is left at equal run time."""
    store, ratio = _slow_baseline(tmp_path)
    doc = _doc(store)
    saving = {s["baseline"]: s for s in doc["baselines"]["savings"]}["spread"]
    spread = {o["placement"]: o for o in doc["baselines"]["jobs"]}["spread"]
    assert saving["run_ratio"] == pytest.approx(ratio, rel=1e-9)
    # Before the run time was scaled, the baseline's cost was its cost over the ratio.
    assert saving["saved_usd_at_equal_run_time"] == pytest.approx(
        saving["baseline_usd"] / ratio - saving["recorded_usd"], rel=1e-9)
    assert spread["bound"].startswith("slowest ring hop: ")
    assert saving["stands_on"].startswith(f"against spread: its gangs predicted to run up to {ratio:.2f}x as long "
                                          f"(pretrain-16; slowest ring hop: ")
    assert "snapshot 'embedded default' (the shipped network model, not measurements)" in saving["stands_on"]
    blind = {s["baseline"]: s for s in doc["baselines"]["savings"]}["carbon-blind"]
    assert blind["run_ratio"] == 1.0 and "prices and grid alone" in blind["stands_on"]


@pytest.mark.parametrize(("kind", "columns"), [("cost", ("saved $", "run x")), ("carbon", ("saved kgCO2e", "run x"))])
def test_the_report_table_shows_the_baselines(tmp_path: Path, kind: str, columns: tuple[str, ...]) -> None:
    """The table shows the baselines that `-o json` carries (issue 23 item 6), not the usage rows alone."""
    _, ratio = _slow_baseline(tmp_path)
    app = typer.Typer()
    app.add_typer(make_app(lambda: Store(tmp_path / "home")), name="report")
    run = CliRunner().invoke(app, ["report", kind, "--by", "job", "--since", "2024-01-01", "--until", "2024-01-02"],
                             env={"COLUMNS": "200"})
    assert run.exit_code == 0, run.output
    text = " ".join(run.stdout.split())  # long lines wrap at the terminal's width
    assert "against baselines" in text
    for column in columns:
        assert column in text
    for label in ("spread", "tas", "cheapest", "carbon-blind"):
        assert f"against {label}: " in text
    assert f"up to {ratio:.2f}x as long" in text
