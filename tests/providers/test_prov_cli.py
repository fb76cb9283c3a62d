"""The provisioning commands, mounted the way geosched.cli.main will mount them, against the AWS emulator
configured only through the standard AWS environment variables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner, Result

from geosched.core.errors import EXIT_BAD_INPUT, GeoschedError
from geosched.providers import cli, journal
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, GceDouble, MotoServer
from tests.output_support import valid
from tests.providers.prov_support import aws_alive

pytestmark = pytest.mark.integration


def root_app() -> typer.Typer:
    root = typer.Typer(no_args_is_help=True)

    @root.callback()
    def _root(home: Annotated[Path | None, typer.Option("--home")] = None) -> None:
        pass

    root.add_typer(cli.app)
    catalog = typer.Typer()
    catalog.command("refresh")(cli.catalog_refresh)
    root.add_typer(catalog, name="catalog")
    return root


def run(home: Path, *args: str, stdin: str | None = None) -> Result:
    result = CliRunner().invoke(root_app(), ["--home", str(home), *args], input=stdin)
    if isinstance(result.exception, GeoschedError):  # what geosched.cli.main.main does
        result.exit_code = result.exception.exit_code
    return result


@pytest.fixture
def home(tmp_path: Path, proxy: Ec2FaultProxy, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEOSCHED_AWS_REGIONS", "us-east-1,us-east-2")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-credentials.json"))
    key = tmp_path / "id_ed25519.pub"
    key.write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me\n")
    monkeypatch.setenv("GEOSCHED_SSH_PUBLIC_KEY", str(key))
    return tmp_path / "home"


def test_dry_run_prints_the_ordered_plan_and_calls_nothing(home: Path, proxy: Ec2FaultProxy) -> None:
    result = run(home, "provision", "--gpu", "A100:8", "--nodes", "4", "--provider", "aws", "--regions",
                 "us-east-1,us-east-2", "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    plan = valid(json.loads(result.output))["plan"]
    assert [c["zone"] for c in plan] == ["use1-az1", "use1-az2", "use1-az6", "use2-az1", "use2-az2"]
    assert plan[0]["usd_per_hour"] == pytest.approx(4 * 32.7726) and plan[0]["gco2e_per_hour"] > 0
    assert proxy.calls == []
    table = run(home, "provision", "--gpu", "a100:8", "--nodes", "4", "--dry-run", "--auto")
    assert table.exit_code == 0 and "dry run: no launch API was called" in table.output
    assert proxy.calls == []


def test_provision_status_down(home: Path, proxy: Ec2FaultProxy, moto: MotoServer) -> None:
    proxy.inject(Ec2Fault.insufficient_instance_capacity(), zone="us-east-1b", action="RunInstances")
    declined = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--regions",
                   "us-east-1", stdin="n\n")
    assert declined.exit_code == 1 and proxy.call_count("RunInstances") == 0
    result = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--regions",
                 "us-east-1", "--yes", "--name", "gang-cli00001", "-o", "json")
    assert result.exit_code == 0, result.output
    doc = valid(json.loads(result.output))
    assert doc["state"] == "ready" and doc["chosen"]["zone"] == "use1-az2"
    assert [(a["zone"], a["outcome"], a["error"]) for a in doc["attempts"]] == [
        ("use1-az1", "failed", "capacity"), ("use1-az2", "launched", None)]
    assert set(aws_alive(moto.url, "gang-cli00001")) == {n["provider_id"] for n in doc["nodes"]}

    status = run(home, "status", "-o", "json")
    assert [(g["gang"], g["state"], g["nodes_up"], g["nodes"]) for g in valid(json.loads(status.output))["items"]] == [
        ("gang-cli00001", "ready", 2, 2)]
    detail = valid(json.loads(run(home, "status", "gang-cli00001", "-o", "json").output))
    assert [a["code"] for a in detail["attempts"]] == ["InsufficientInstanceCapacity", None]
    assert [i["state"] for i in detail["instances"]] == ["terminated"] * 2 + ["launched"] * 2
    assert run(home, "status", "gang-cli00001").exit_code == 0

    # A machine terminated behind geosched's back: plain status does not know (no API call), --refresh does.
    from tests.providers.prov_support import moto_client

    lost = doc["nodes"][0]
    moto_client(moto.url, "us-east-1").terminate_instances(InstanceIds=[lost["provider_id"]])
    stale = json.loads(run(home, "status", "-o", "json").output)["items"]
    assert [(g["state"], g["nodes_up"], g["nodes"]) for g in stale] == [("ready", 2, 2)]
    refreshed = run(home, "status", "--refresh")
    assert refreshed.exit_code == 0, refreshed.output
    assert f"gone since the last look: {lost['name']}" in refreshed.output
    assert "geosched provision --resume gang-cli00001" in refreshed.output
    after = json.loads(run(home, "status", "-o", "json").output)["items"]
    assert [(g["state"], g["nodes_up"], g["nodes"]) for g in after] == [("degraded", 1, 2)]

    down = run(home, "down", "gang-cli00001", "--yes", "-o", "json")
    assert down.exit_code == 0, down.output
    assert [(g["gang"], g["state"], g["terminated"], g["errors"]) for g in valid(json.loads(down.stdout))["items"]] \
        == [("gang-cli00001", "terminated", 1, [])]
    assert aws_alive(moto.url, "gang-cli00001") == {}
    assert run(home, "down", "--all", "--yes").output.strip() == "nothing to take down"
    nothing = json.loads(run(home, "down", "--all", "--yes", "-o", "json").stdout)
    assert (nothing["kind"], nothing["items"]) == ("GangDownList", [])


def test_resume_from_the_command_line(home: Path, proxy: Ec2FaultProxy, moto: MotoServer) -> None:
    from geosched.providers.plan import GangRequest

    with Store(home) as store:  # a gang journalled by a run that died before its first launch
        journal.create_gang(store, "gang-cli00002", journal.owner(store),
                            GangRequest("A100", 8, 1, providers=("aws",), regions=("us-east-1",)))
    result = run(home, "provision", "--resume", "gang-cli00002", "-o", "json")
    assert result.exit_code == 0, result.output
    assert len(aws_alive(moto.url, "gang-cli00002")) == 1
    assert run(home, "down", "gang-cli00002", "--yes").exit_code == 0


@pytest.mark.parametrize(("args", "field"), [
    (["provision", "--gpu", "A100:x", "--nodes", "2"], "--gpu"),
    (["provision", "--gpu", "A100:8", "--nodes", "2", "--spot", "--on-demand"], "--spot/--on-demand/--auto"),
    (["provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "azure"], "--provider"),
    (["provision", "--gpu", "A100:8"], "--gpu/--nodes"),
    (["provision", "--gpu", "A100:8", "--nodes", "2", "--name", "Bad_Name"], "--name"),
    (["provision", "--resume", "gang-nothere"], "--resume"),
    (["down"], "GANG/--all"),
    (["down", "gang-nothere", "--yes"], "GANG"),
    (["catalog", "refresh", "--provider", "ssh"], "--provider"),
])
def test_bad_input_is_one_line_and_exit_2(home: Path, args: list[str], field: str) -> None:
    result = run(home, *args)
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert str(result.exception).startswith(f"{field}: ")
    assert "\n" not in str(result.exception)


def test_no_offering_exits_3(home: Path) -> None:
    result = run(home, "provision", "--gpu", "A100:3", "--nodes", "2", "--provider", "aws", "--dry-run")
    assert result.exit_code == 3


def test_check_says_what_is_missing_without_secrets(home: Path, proxy: Ec2FaultProxy) -> None:
    result = run(home, "check")
    assert result.exit_code == 1  # GCP has no credentials here
    out = result.output
    assert "EC2 answered" in out and "no application default credentials" in out
    assert "testing" not in out  # the AWS secret key is never printed
    proxy.inject(Ec2Fault.auth_failure(), action="DescribeAvailabilityZones")
    again = run(home, "check", "--provider", "aws")
    assert again.exit_code == 1 and "auth" in again.output


def test_sweep_lists_and_terminates_orphans(home: Path, proxy: Ec2FaultProxy, moto: MotoServer) -> None:
    from tests.providers.prov_support import moto_client

    with Store(home) as store:
        me = journal.owner(store)
    ec2 = moto_client(moto.url)
    ami = ec2.describe_images(Owners=["amazon"], Filters=[{"Name": "name", "Values": ["Deep Learning*"]}])
    tags = [{"Key": "geosched-gang", "Value": "gang-gone0001"}, {"Key": "geosched-owner", "Value": me}]
    orphan = ec2.run_instances(ImageId=ami["Images"][0]["ImageId"], InstanceType="p4d.24xlarge", MinCount=1,
                               MaxCount=1, TagSpecifications=[{"ResourceType": "instance", "Tags": tags}]
                               )["Instances"][0]["InstanceId"]
    listed = run(home, "sweep", "--provider", "aws", "--regions", "us-east-1", stdin="n\n")
    assert listed.exit_code == 0 and "Terminate 1 instance(s)" in listed.output
    assert orphan in aws_alive(moto.url)
    # As data, it lists and asks nothing (stdout is the document): nothing is terminated without --yes.
    doc = valid(json.loads(run(home, "sweep", "--provider", "aws", "--regions", "us-east-1", "-o", "json").stdout))
    assert [(i["id"], i["gang"], i["owner"]) for i in doc["items"]] == [(orphan, "gang-gone0001", me)]
    assert orphan in aws_alive(moto.url)
    swept = run(home, "sweep", "--provider", "aws", "--regions", "us-east-1", "--yes")
    assert swept.exit_code == 0 and "terminated 1 instance" in swept.output
    assert orphan not in aws_alive(moto.url)


def test_catalog_refresh_writes_offerings_and_prices(home: Path, proxy: Ec2FaultProxy, gce: GceDouble) -> None:
    result = run(home, "catalog", "refresh", "--provider", "aws", "--regions", "us-east-1")
    assert result.exit_code == 0, result.output
    assert "offerings" in result.output and "prices" in result.output
    with Store(home) as store:
        rows = store.db.execute("SELECT COUNT(*) FROM catalog_offerings WHERE provider = 'aws'").fetchone()[0]
    assert rows > 0


def test_catalog_shows_refreshed_prices_with_their_age_and_agrees_with_the_plan(
        home: Path, proxy: Ec2FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 15: `geosched catalog` never showed refreshed data, so it and `provision --dry-run` disagreed."""
    from geosched.cli.main import app as geosched_app

    proxy.set_ondemand_price("p4d.24xlarge", "us-east-1", 21.9576)
    assert run(home, "catalog", "refresh", "--provider", "aws", "--regions", "us-east-1").exit_code == 0
    shown = CliRunner().invoke(geosched_app, ["--home", str(home), "catalog", "--gpu", "A100:8", "--provider", "aws",
                                              "-o", "json"])
    assert shown.exit_code == 0, shown.output
    listed = {r["zone"]: r for r in json.loads(shown.output)["items"] if r["instance_type"] == "p4d.24xlarge"}
    assert listed["use1-az1"]["usd_per_hour"] == pytest.approx(21.9576)
    assert listed["use1-az1"]["price_observed_at"] is not None  # read from the price list just now
    assert listed["use2-az1"]["usd_per_hour"] == pytest.approx(32.7726)  # a region not refreshed: shipped
    assert listed["use2-az1"]["price_observed_at"] is None
    table = CliRunner().invoke(geosched_app, ["--home", str(home), "catalog", "--gpu", "A100:8", "--provider",
                                              "aws", "-o", "wide"], env={"COLUMNS": "200"})
    assert "0 h ago" in table.output and "shipped" in table.output
    dry = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--dry-run", "-o", "json")
    planned = {c["zone"]: c["usd_per_hour"] / 2 for c in json.loads(dry.output)["plan"]}
    assert planned["use1-az1"] == pytest.approx(listed["use1-az1"]["usd_per_hour"])
    assert planned["use2-az1"] == pytest.approx(listed["use2-az1"]["usd_per_hour"])
