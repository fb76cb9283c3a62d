"""The providers write the usage ledger: a node interval opens when the journal learns an instance is up and
closes when it is terminated or found gone, in the same transaction as the journal, and the cost report
prices each machine once (its ledger row, not also its journal row). Against moto (behind the fault proxy)
and the GCE double, over real HTTP."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from geosched.providers import journal, lifecycle
from geosched.providers.aws import AwsProvider
from geosched.providers.base import Budget
from geosched.providers.gang import provision, resume
from geosched.providers.gcp import GcpProvider
from geosched.providers.plan import GangRequest
from geosched.report.cli import make_app
from geosched.report.journal import journal_intervals
from geosched.report.ledger import intervals, ledger_intervals
from geosched.report.records import Interval
from geosched.store.db import Store
from geosched_emulators import GceDouble, MotoServer
from tests.providers.prov_support import AWS_REGIONS, GCP_REGIONS, aws_alive, fast_settings, gce_alive
from tests.providers.test_prov_lifecycle import crash_then

pytestmark = pytest.mark.integration


def request(nodes: int, cloud: str) -> GangRequest:
    return GangRequest("A100", 8, nodes, providers=(cloud,), regions=AWS_REGIONS + GCP_REGIONS)


def node_rows(store: Store, gang: str) -> list[Interval]:
    return sorted((i for i in ledger_intervals(store) if i.job == gang), key=lambda i: i.name)


def report_json(home: Path, *args: str) -> dict[str, object]:
    app = typer.Typer()
    app.add_typer(make_app(lambda: Store(home)), name="report")
    run = CliRunner().invoke(app, ["report", "cost", *args, "-o", "json"])
    assert run.exit_code == 0, run.output
    doc: dict[str, object] = json.loads(run.stdout)
    return doc


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_launch_opens_and_down_closes_one_row_per_machine(cloud: str, aws: AwsProvider, gcp: GcpProvider,
                                                          moto: MotoServer, gce: GceDouble, store: Store) -> None:
    provider = aws if cloud == "aws" else gcp
    settings = fast_settings()
    before = time.time()
    result = provision(request(2, cloud), {cloud: provider}, store, settings, gang="gang-usage01")
    launched = time.time()
    assert result.ok, result.message
    up = aws_alive(moto.url, result.gang) if cloud == "aws" else gce_alive(gce, result.gang)
    kept = sorted(journal.instances(store, gang=result.gang, states=("launched",)), key=lambda r: r.name)
    assert len(up) == 2 and {r.provider_id for r in kept} == set(up)

    rows = node_rows(store, result.gang)
    assert [(i.kind, i.source, i.name, i.ref) for i in rows] == [("node", "provider", r.name, r.provider_id)
                                                                   for r in kept]
    for i, r in zip(rows, kept, strict=True):
        assert (i.provider, i.region, i.zone, i.instance_type, i.gpu, i.gpus, i.pricing) == \
            (cloud, r.region, r.zone, r.instance_type, "A100", r.gpus, r.pricing)
        assert r.gpus > 0 and i.cluster is None
        # Opened at the launch time the provider reports (EC2's LaunchTime has whole seconds); still running.
        assert before - 1.0 <= i.start <= launched and i.end is None

    # Reconcile loops run again and again: nothing is opened twice.
    for _ in range(2):
        lifecycle.reconcile(store, {cloud: provider}, result.gang, "keep", settings.lifecycle)
    assert node_rows(store, result.gang) == rows

    downing = time.time()
    down = lifecycle.down(store, {cloud: provider}, result.gang, settings.lifecycle)
    done = time.time()
    assert down.state == "terminated", down.errors
    closed = node_rows(store, result.gang)
    assert [(i.id, i.start) for i in closed] == [(i.id, i.start) for i in rows]
    assert all(i.end is not None and downing <= i.end <= done for i in closed)
    lifecycle.reconcile(store, {cloud: provider}, result.gang, "down", settings.lifecycle)  # re-reads the gone
    assert node_rows(store, result.gang) == closed

    # The journal shows the same machines; the report counts the ledger's rows only, once each.
    assert {i.ref for i in journal_intervals(store) if i.job == result.gang} == {i.ref for i in closed}
    assert [i.id for i in intervals(store) if i.job == result.gang] == [i.id for i in closed]
    doc = report_json(store.home, "--by", "provider", "--since", "1h")
    rows_out = {str(r["provider"]): r for r in doc["rows"]}  # type: ignore[attr-defined]
    assert set(rows_out) == {cloud}
    gpu_hours = sum((i.end or 0.0) - i.start for i in closed) * 8 / 3600.0
    assert rows_out[cloud]["intervals"] == 2
    assert rows_out[cloud]["gpu_hours"] == pytest.approx(gpu_hours, rel=1e-6)
    assert float(rows_out[cloud]["cost_usd"]) > 0.0


def test_a_machine_seen_gone_is_closed_when_reconcile_notices(aws: AwsProvider, moto: MotoServer,
                                                              store: Store) -> None:
    from tests.providers.prov_support import moto_client

    settings = fast_settings()
    result = provision(request(1, "aws"), {"aws": aws}, store, settings, gang="gang-usage02")
    assert result.ok, result.message
    (instance_id,) = aws_alive(moto.url, result.gang)
    # Terminated behind geosched's back (a spot reclaim, a person in the console).
    terminated = time.time()
    moto_client(moto.url, _region(store, instance_id)).terminate_instances(InstanceIds=[instance_id])
    time.sleep(1.5)  # EC2 reports the transition in whole seconds: make "when" distinguishable from "noticed"
    noticed = time.time()
    lifecycle.reconcile(store, {"aws": aws}, result.gang, "keep", settings.lifecycle)
    (row,) = node_rows(store, result.gang)
    # Closed when EC2 says the machine went (its StateTransitionReason time), not when reconcile noticed.
    assert row.ref == instance_id and row.end is not None and int(terminated) <= row.end < noticed
    lifecycle.down(store, {"aws": aws}, result.gang, settings.lifecycle)
    assert node_rows(store, result.gang) == [row]


def _region(store: Store, instance_id: str) -> str:
    (row,) = [r for r in journal.instances(store) if r.provider_id == instance_id]
    return row.region


def test_crash_after_launch_then_resume_adopts_and_opens_once(gcp: GcpProvider, gce: GceDouble,
                                                              store: Store) -> None:
    # The crash comes after the launch call and before the journal heard of the machines: no ledger row yet
    # (their intent rows have no instance id, so the report cannot see them either) until resume finds them.
    gang = crash_then(store, gcp, "after-launch")
    assert node_rows(store, gang) == []
    assert len(gce_alive(gce, gang)) == 3
    settings = fast_settings(lifecycle=fast_settings().lifecycle.__class__(settle_s=0.2, poll_s=0.05))
    adopted = time.time()
    result = resume(gang, {"gcp": gcp}, store, settings)
    assert result.ok, result.message
    rows = node_rows(store, gang)
    assert {i.ref for i in rows} == set(gce_alive(gce, gang)) and len(rows) == 3
    # Counted from the machines' launch (GCE creationTimestamp), not from when the resume found them.
    assert all(i.start < adopted and i.end is None for i in rows)
    created = {inst.provider_id: inst.launched_at for inst in gcp.describe(gang, GCP_REGIONS, Budget(10.0))}
    assert {i.ref: i.start for i in rows} == pytest.approx(created)
    assert [i.id for i in intervals(store) if i.job == gang] == [i.id for i in rows]
    lifecycle.down(store, {"gcp": gcp}, gang, settings.lifecycle)
    assert all(i.end is not None for i in node_rows(store, gang))


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_status_refresh_marks_preempted_machines_and_stops_billing_them(
        cloud: str, aws: AwsProvider, gcp: GcpProvider, moto: MotoServer, gce: GceDouble, store: Store) -> None:
    """Issue 15: a spot gang preempted behind geosched's back stayed "ready" and billed until someone ran `down`.
    A refresh reads the providers, closes the lost machine's interval at the time the provider reports and says
    what to do, terminating nothing."""
    from tests.providers.prov_support import moto_client

    provider = aws if cloud == "aws" else gcp
    settings = fast_settings()
    result = provision(request(2, cloud), {cloud: provider}, store, settings, gang=f"gang-refresh-{cloud}")
    assert result.ok, result.message
    victim, survivor = sorted(journal.instances(store, gang=result.gang, states=("launched",)), key=lambda r: r.name)
    assert victim.provider_id is not None
    preempted = time.time()
    if cloud == "aws":
        moto_client(moto.url, victim.region).terminate_instances(InstanceIds=[victim.provider_id])
    else:  # a spot VM preempted with action STOP: TERMINATED, still there, its GPUs released
        gce.set_instance_status(gcp.project, victim.zone, victim.provider_id, "TERMINATED")
    time.sleep(1.5)  # real sleep: EC2 reports the transition in whole seconds
    noticed = time.time()

    (health,) = lifecycle.refresh(store, {cloud: provider}, [result.gang], settings.lifecycle)
    assert (health.wanted, health.up, health.lost, health.errors) == (2, 1, (victim.name,), ())
    assert health.degraded and health.advice is not None and f"--resume {result.gang}" in health.advice
    rows = {i.name: i for i in node_rows(store, result.gang)}
    gone = rows[victim.name]
    assert gone.end is not None and int(preempted) <= gone.end < noticed
    assert rows[survivor.name].end is None
    # Nothing was terminated by the refresh: the survivor still runs.
    alive = aws_alive(moto.url, result.gang) if cloud == "aws" else gce_alive(gce, result.gang)
    assert survivor.provider_id in alive

    # Refreshing again changes nothing (idempotent), then down ends the gang.
    (again,) = lifecycle.refresh(store, {cloud: provider}, [result.gang], settings.lifecycle)
    assert (again.up, again.lost) == (1, ())
    assert node_rows(store, result.gang)[0].end == sorted(rows.values(), key=lambda i: i.name)[0].end
    lifecycle.down(store, {cloud: provider}, result.gang, settings.lifecycle)
