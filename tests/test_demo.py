"""`geosched demo`'s provisioning and cost stages: the gang it builds from a placement, a real launch with
failover on the emulated clouds (wired only to them, whatever the user's AWS settings say), the assumed job
usage it records, and the run without the emulators (or moto, or a cloud SDK). The whole demo as a process is
in tests/test_cli.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import boto3  # type: ignore[import-untyped]
import pytest

from geosched import policies
from geosched.core import catalog
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import Fleet, Placement, Weights
from geosched.demo import costs, demo_jobs, provisioning
from geosched.policies import PlacementContext
from geosched.providers import journal
from geosched.report import Kind, Source, intervals
from geosched.store.db import Store
from geosched_emulators import MotoServer


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return default_fleet()


@pytest.fixture(scope="module")
def placed(fleet: Fleet) -> list[Placement]:
    ctx = PlacementContext(fleet, default_network())
    out = []
    for job in demo_jobs():
        result = policies.place(job, ctx, policies.DEFAULT_POLICY, Weights())
        assert isinstance(result, Placement)
        out.append(result)
    return out


def _job(placed: list[Placement], name: str) -> Placement:
    return next(p for p in placed if p.job.name == name)


def test_gang_plan_tries_the_placed_zone_first_then_the_other_cloud(placed: list[Placement], fleet: Fleet) -> None:
    p = _job(placed, provisioning.PROVISION_JOB)
    plan = provisioning.gang_plan(p, fleet, catalog.offerings())
    assert not isinstance(plan, str)
    req = plan.request
    placed_provider = fleet.by_name[p.assignments[0].node].provider
    other = req.providers[1]
    assert req.providers[0] == placed_provider and other != placed_provider
    assert req.nodes * req.gpus_per_node == p.job.gpus and req.gpu == p.job.gpu
    assert req.zones[: len(p.zones)] == p.zones
    assert plan.zones[other] and plan.regions[other] == (provisioning.FALLBACK_REGION[other],)
    assert set(req.instance_types) == {provisioning.EMULATED_TYPES[(n, req.gpu)] for n in req.providers}


def test_gang_plan_refuses_a_gpu_the_emulators_lack(placed: list[Placement], fleet: Fleet) -> None:
    p = _job(placed, provisioning.PROVISION_JOB)
    odd = replace(p, job=replace(p.job, gpu="T4"))
    assert "no instance type on both emulators" in str(provisioning.gang_plan(odd, fleet, catalog.offerings()))


def _hostile_aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A user's AWS settings that would send boto3 elsewhere (a closed port) if the demo used them."""
    config = tmp_path / "aws-config"
    config.write_text("[profile work]\nregion = eu-west-3\nendpoint_url = http://127.0.0.1:9\n")
    for key, value in {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ENDPOINT_URL_EC2": "http://127.0.0.1:9",
                       "AWS_PROFILE": "work", "AWS_CONFIG_FILE": str(config),
                       "AWS_SHARED_CREDENTIALS_FILE": str(config), "AWS_ACCESS_KEY_ID": "AKIAUSERSOWNKEY00000",
                       "AWS_SECRET_ACCESS_KEY": "users-own-secret"}.items():
        monkeypatch.setenv(key, value)


def test_provisioning_fails_over_from_the_refused_zone_and_leaves_nothing(
        placed: list[Placement], fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _hostile_aws_environment(monkeypatch, tmp_path)
    before = dict(os.environ)
    with Store(tmp_path / "demo-store") as store:
        outcome = provisioning.run(5, placed, fleet, store)
        assert outcome is not None and outcome.state == "ready"
        assert outcome.launched == 8 and outcome.terminated == 8 and outcome.alive_after_down == 0
        attempts = journal.attempts(store, outcome.gang)
        assert [a.outcome for a in attempts] == ["failed", "launched"]
        assert attempts[0].error_kind == "capacity" and attempts[0].zone in _job(placed, "pretrain-64").zones
        assert attempts[1].provider != attempts[0].provider
        rows = journal.instances(store, gang=outcome.gang)
        assert len([r for r in rows if r.provider_id]) == 8 and {r.state for r in rows} == {"terminated"}
        winner = attempts[1]
    assert dict(os.environ) == before
    text = " ".join(capsys.readouterr().out.split())
    assert "127.0.0.1, no cloud account" in text and "injected fault" in text and "hold 0 live" in text
    if winner.provider == "aws":
        # moto keeps its state in the process: a fresh server shows what the demo left there.
        with MotoServer() as moto:
            # A session of its own: boto3's default one may hold config files read under another environment.
            ec2 = boto3.session.Session().client("ec2", region_name=winner.region, endpoint_url=moto.url,
                                                 aws_access_key_id="x", aws_secret_access_key="x")
            found = [i for r in ec2.describe_instances(Filters=[
                {"Name": "tag:geosched-gang", "Values": [outcome.gang]}])["Reservations"] for i in r["Instances"]]
        assert len(found) == 8 and {i["State"]["Name"] for i in found} == {"terminated"}


def test_assumed_usage_is_one_hour_per_placed_node(placed: list[Placement], fleet: Fleet, tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        assert costs.record_assumed_usage(store, placed, fleet, 1_000_000.0) == sum(len(p.assignments)
                                                                                    for p in placed)
        got = intervals(store)
    for p in placed:
        rows = [i for i in got if i.job == p.job.name]
        assert sum(i.gpus for i in rows) == p.job.gpus
        assert {(i.kind, i.source, i.start, i.end) for i in rows} == {(Kind.JOB, Source.DEMO, 1_000_000.0,
                                                                       1_000_000.0 + 3600.0)}
        assert {i.ref for i in rows} == {a.node for a in p.assignments}


@pytest.mark.parametrize("absent", ["geosched_emulators", "moto"])
def test_demo_without_the_emulators_skips_provisioning_and_still_reports(absent: str, tmp_path: Path) -> None:
    # The product wheel holds no test double (issue 25 item 4): `pip install geosched` then `geosched demo` finds
    # no geosched_emulators; an emulators install whose moto is broken is the same to the demo.
    hidden = tmp_path / "hide"
    (hidden / absent).mkdir(parents=True)
    (hidden / absent / "__init__.py").write_text(f"raise ImportError('{absent} hidden by the test')\n")
    home = tmp_path / "home"
    env = {**os.environ, "GEOSCHED_HOME": str(home), "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([str(hidden), *filter(None, [os.environ.get("PYTHONPATH")])])}
    run = subprocess.run([sys.executable, "-m", "geosched", "demo"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert ("5. Provisioning on emulated clouds: skipped: the emulated clouds are not installed: pip install "
            "./emulators (geosched-emulators, in the geosched repository; scripts/demo installs it)") in " ".join(
        run.stdout.split())
    assert "8. Cost and carbon" in run.stdout and (home / "demo" / "report.html").is_file()
    # Each saving names what it stands on (issue 23 item 6): the baseline's predicted run time and its cause.
    text = " ".join(run.stdout.split())
    spread = re.search(r"saved \$[\d,]+ and [\d,.]+ kgCO2e against spread: (.*?); at equal run time the saving is "
                       r"-?\$[\d,]+", text)
    assert spread is not None, text
    assert re.match(r"its gangs predicted to run up to \d+\.\d\dx as long \(pretrain-\d+; slowest ring hop: "
                    r"[\d.]+% loss, ", spread.group(1)), spread.group(1)
    assert "run x" in text and "at equal run" in text
    with Store(home / "demo" / "store") as store:
        assert journal.gangs(store) == []
        assert {i.job for i in intervals(store)} == {"finetune-8", "pretrain-64", "pretrain-512"}


@pytest.mark.parametrize(("module", "extra"), [("boto3", "aws"), ("google.cloud.compute_v1", "gcp")])
def test_the_provisioning_stage_names_the_sdk_extra_it_lacks(module: str, extra: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # A light install with the emulators but without a cloud SDK the stage drives them with.
    real = provisioning.importlib.util.find_spec
    monkeypatch.setattr(provisioning.importlib.util, "find_spec", lambda name: None if name == module else real(name))
    assert provisioning.emulators_missing() == (f"{module} is not installed; it comes with the {extra!r} extra: "
                                                f"pip install 'geosched[{extra}]'")
    monkeypatch.undo()
    assert provisioning.emulators_missing() is None
