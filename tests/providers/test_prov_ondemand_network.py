"""Without a Terraform output, geosched creates its network on demand: on AWS the security group
`geosched-<owner>` in the default VPC (SSH from the admin CIDRs, everything from the group itself), on GCP the
firewall rules `geosched-<owner>-ssh` / `-internal` on the default network with the network tag
`geosched-<owner>` on every instance. Against moto behind the fault proxy and the GCE double, over real HTTP."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import boto3  # type: ignore[import-untyped]
import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

from geosched.console import render
from geosched.core.errors import EXIT_BAD_INPUT, InputError
from geosched.core.models import Pricing
from geosched.files.access import parse_admin_cidrs
from geosched.providers import journal, lifecycle
from geosched.providers.aws import AwsProvider, ingress_changes
from geosched.providers.base import AuthError, Budget, LaunchSpec, Provider, UnsupportedError
from geosched.providers.config import (
    ADMIN_CIDRS_HOWTO,
    ENV_ADMIN_CIDRS,
    ENV_TERRAFORM_OUTPUT,
    from_env,
    wide_admin_cidrs,
)
from geosched.providers.gang import provision
from geosched.providers.gcp import GcpProvider
from geosched.providers.launchsettings import parse_terraform_output
from geosched.providers.launchsettings.aws import AwsSettings
from geosched.providers.launchsettings.gcp import GcpSettings
from geosched.providers.plan import GangRequest, PricingMode
from geosched.store.db import Store
from geosched_emulators import Ec2Fault, Ec2FaultProxy, FaultRule, GceDouble, GceFault, MotoServer
from tests.providers.prov_support import (
    ADMIN_CIDR,
    PROJECT,
    aws_provider,
    fast_settings,
    gcp_provider,
    moto_client,
    warm,
)
from tests.providers.test_prov_cli import run
from tests.providers.test_prov_network import AwsNetwork, gcp_region, gcp_with, output_json, write

pytestmark = pytest.mark.integration

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me"
SG_ACTIONS = ("DescribeVpcs", "DescribeSecurityGroups", "CreateSecurityGroup", "AuthorizeSecurityGroupIngress",
              "RevokeSecurityGroupIngress")


@pytest.fixture
def home(tmp_path: Path, proxy: Ec2FaultProxy, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("GEOSCHED_AWS_REGIONS", "us-east-1")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-credentials.json"))
    for name in (ENV_TERRAFORM_OUTPUT, "GEOSCHED_GCP_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(ENV_ADMIN_CIDRS, "0.0.0.0/0")  # the world, as an explicit choice (there is no default)
    key = tmp_path / "id_ed25519.pub"
    key.write_text(KEY + "\n")
    monkeypatch.setenv("GEOSCHED_SSH_PUBLIC_KEY", str(key))
    yield tmp_path / "home"


def owner_of(home: Path) -> str:
    with Store(home) as store:
        return journal.owner(store)


def new_owner() -> str:
    """A fresh owner id: moto's state outlives a test, so every test gets groups of its own."""
    return f"o{secrets.token_hex(5)}"


def groups(moto_url: str, name: str, region: str = "us-east-1") -> list[dict[str, Any]]:
    """Security groups of that name in the region's default VPC, straight from moto."""
    ec2 = moto_client(moto_url, region)
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    found: list[dict[str, Any]] = ec2.describe_security_groups(Filters=[
        {"Name": "group-name", "Values": [name]}, {"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"]
    return found


def ingress(group: dict[str, Any]) -> set[tuple[str, Any, Any, str]]:
    """(protocol, from port, to port, source) of every ingress rule."""
    out = set()
    for p in group["IpPermissions"]:
        key = (p["IpProtocol"], p.get("FromPort"), p.get("ToPort"))
        out |= {(*key, r["CidrIp"]) for r in p.get("IpRanges", [])}
        out |= {(*key, r["CidrIpv6"]) for r in p.get("Ipv6Ranges", [])}
        out |= {(*key, g["GroupId"]) for g in p.get("UserIdGroupPairs", [])}
    return out


def count(proxy: Ec2FaultProxy, action: str) -> int:
    return proxy.call_count(action)


# --- AWS -------------------------------------------------------------------------------------------

def test_first_provision_creates_the_group_and_the_second_reuses_it(
        home: Path, proxy: Ec2FaultProxy, moto: MotoServer) -> None:
    owner = owner_of(home)
    name = f"geosched-{owner}"
    assert groups(moto.url, name) == []
    first = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--regions", "us-east-1",
                "--yes", "--name", "gang-ond00001", "-o", "json")
    assert first.exit_code == 0, first.output
    (group,) = groups(moto.url, name)
    gid = group["GroupId"]
    assert ingress(group) == {("tcp", 22, 22, "0.0.0.0/0"), ("-1", None, None, gid)}
    assert {t["Key"]: t["Value"] for t in group["Tags"]} == {"geosched-owner": owner, "Name": name}
    doc = json.loads(first.stdout)
    raw = moto_client(moto.url).describe_instances(InstanceIds=[n["provider_id"] for n in doc["nodes"]])
    instances = [i for r in raw["Reservations"] for i in r["Instances"]]
    assert len(instances) == 2
    for inst in instances:
        # (No subnet is named: EC2 takes the zone's default subnet. moto may pick another VPC's subnet in the
        # zone, so the instance's VPC is not compared.)
        assert [g["GroupId"] for g in inst["SecurityGroups"]] == [gid]
    assert (count(proxy, "CreateSecurityGroup"), count(proxy, "AuthorizeSecurityGroupIngress")) == (1, 2)

    # A second run (a new process: nothing cached) finds the group and changes nothing.
    second = run(home, "provision", "--gpu", "A100:8", "--nodes", "1", "--provider", "aws", "--regions", "us-east-1",
                 "--yes", "--name", "gang-ond00002", "-o", "json")
    assert second.exit_code == 0, second.output
    assert (count(proxy, "CreateSecurityGroup"), count(proxy, "AuthorizeSecurityGroupIngress")) == (1, 2)
    assert count(proxy, "DescribeSecurityGroups") == 2
    (inst2,) = [i for r in moto_client(moto.url).describe_instances(
        InstanceIds=[n["provider_id"] for n in json.loads(second.stdout)["nodes"]])["Reservations"]
        for i in r["Instances"]]
    assert [g["GroupId"] for g in inst2["SecurityGroups"]] == [gid]
    assert [g["GroupId"] for g in groups(moto.url, name)] == [gid]

    # `down` leaves the group: it is shared by the store's gangs, free, and reused.
    for gang in ("gang-ond00001", "gang-ond00002"):
        assert run(home, "down", gang, "--yes").exit_code == 0
    assert run(home, "sweep", "--provider", "aws", "--yes").exit_code == 0
    assert [g["GroupId"] for g in groups(moto.url, name)] == [gid]
    assert count(proxy, "DeleteSecurityGroup") == 0


def test_calls_are_counted_and_cached_per_provider_and_region(aws: AwsProvider, proxy: Ec2FaultProxy) -> None:
    owner = new_owner()
    proxy.log.clear()
    budget = Budget(30.0, 10.0)
    gid = aws.security_group("us-east-2", owner, budget)
    assert [c.method for c in proxy.calls] == ["DescribeVpcs", "DescribeSecurityGroups", "CreateSecurityGroup",
                                               "AuthorizeSecurityGroupIngress", "AuthorizeSecurityGroupIngress"]
    assert budget.calls == len(proxy.calls)
    again = Budget(30.0, 10.0)
    assert aws.security_group("us-east-2", owner, again) == gid and again.calls == 0  # cached
    other = Budget(30.0, 10.0)
    assert aws.security_group("us-east-1", owner, other) != gid  # a group per region
    assert other.calls == 5


T = TypeVar("T")


def race(held: FaultRule[Any], slow: Callable[[], T], fast: Callable[[], T]) -> tuple[T, T]:
    """Run `slow` in a thread until the emulator holds its request (`held`), then `fast` to completion while it
    waits; both results once `slow` is answered."""
    got: list[T] = []
    errors: list[BaseException] = []

    def first() -> None:
        try:
            got.append(slow())
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=first)
    thread.start()
    deadline = time.monotonic() + 10
    while held.hits == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # real sleep: polling a real thread blocked on the server
    assert held.hits == 1
    second = fast()
    thread.join(10)
    assert not errors, errors
    return got[0], second


def test_two_processes_racing_create_one_group(aws: AwsProvider, proxy: Ec2FaultProxy, moto: MotoServer) -> None:
    """The first process's CreateSecurityGroup is held in the proxy while a second process describes, creates
    and authorizes; the first then gets InvalidGroup.Duplicate, describes again and uses the same group."""
    owner = new_owner()
    slow, fast = aws_provider(), aws_provider()
    warm(slow), warm(fast)
    held = proxy.inject(Ec2Fault.stall(1.5), action="CreateSecurityGroup")
    proxy.log.clear()
    first, second = race(held, lambda: slow.security_group("us-east-2", owner, Budget(30.0, 10.0)),
                         lambda: fast.security_group("us-east-2", owner, Budget(30.0, 10.0)))
    assert first == second
    creates = [c for c in proxy.calls if c.method == "CreateSecurityGroup"]
    assert [c.error_code for c in creates] == [None, "InvalidGroup.Duplicate"]  # the held one answered last
    (group,) = groups(moto.url, f"geosched-{owner}", "us-east-2")
    assert ingress(group) == {("tcp", 22, 22, ADMIN_CIDR), ("-1", None, None, second)}


def test_narrowing_the_admin_cidrs_narrows_the_group(aws: AwsProvider, proxy: Ec2FaultProxy,
                                                     moto: MotoServer) -> None:
    owner = new_owner()
    gid = aws.security_group("us-east-1", owner, Budget(30.0, 10.0))
    narrow = AwsProvider(AwsSettings(regions=("us-east-1",), admin_cidrs=("203.0.113.0/24", "2001:db8::/32")),
                         session=boto3.session.Session())
    assert narrow.security_group("us-east-1", owner, Budget(30.0, 10.0)) == gid
    (group,) = groups(moto.url, f"geosched-{owner}")
    assert ingress(group) == {("tcp", 22, 22, "203.0.113.0/24"), ("tcp", 22, 22, "2001:db8::/32"),
                              ("-1", None, None, gid)}
    assert count(proxy, "RevokeSecurityGroupIngress") == 1


def test_no_default_vpc_is_region_wide_and_denied_is_auth(aws: AwsProvider, proxy: Ec2FaultProxy,
                                                          moto: MotoServer) -> None:
    region = "ap-northeast-3"  # used by no other test: its default VPC is removed and put back
    ec2 = moto_client(moto.url, region)
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    for subnet in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]:
        ec2.delete_subnet(SubnetId=subnet["SubnetId"])
    for igw in ec2.describe_internet_gateways(
            Filters=[{"Name": "attachment.vpc-id", "Values": [vpc]}])["InternetGateways"]:
        ec2.detach_internet_gateway(InternetGatewayId=igw["InternetGatewayId"], VpcId=vpc)
        ec2.delete_internet_gateway(InternetGatewayId=igw["InternetGatewayId"])
    ec2.delete_vpc(VpcId=vpc)
    try:
        with pytest.raises(UnsupportedError) as none:
            aws.security_group(region, new_owner(), Budget(30.0, 10.0))
        assert none.value.region_wide and none.value.code == "NoDefaultVpc"
        assert f"no default VPC in {region}" in str(none.value) and "--tf-output" in str(none.value)
    finally:
        ec2.create_default_vpc()
    proxy.inject(Ec2Fault.unauthorized_operation(), action="CreateSecurityGroup")
    owner = new_owner()
    with pytest.raises(AuthError) as denied:
        aws.security_group("us-east-2", owner, Budget(30.0, 10.0))
    assert str(denied.value).startswith(f"UnauthorizedOperation: on-demand security group geosched-{owner} in "
                                        "us-east-2: ")
    assert "emulated" not in str(denied.value)  # the encoded authorization message is redacted


def test_a_terraform_output_creates_nothing(home: Path, proxy: Ec2FaultProxy, tmp_path: Path) -> None:
    owner = owner_of(home)
    network = AwsNetwork(proxy)
    net_file = write(tmp_path / "network.json", output_json(owner, aws={"us-east-1": network.region(owner)}))
    proxy.log.clear()
    result = run(home, "provision", "--gpu", "A100:8", "--nodes", "1", "--provider", "aws", "--regions", "us-east-1",
                 "--tf-output", str(net_file), "--yes", "--name", "gang-ond00003", "-o", "json")
    assert result.exit_code == 0, result.output
    assert [c.method for c in proxy.calls if c.method in SG_ACTIONS] == []
    dry = run(home, "provision", "--gpu", "A100:8", "--nodes", "1", "--provider", "aws", "--regions", "us-east-1",
              "--tf-output", str(net_file), "--dry-run", "-o", "json")
    assert "network" not in json.loads(dry.output)
    assert run(home, "down", "gang-ond00003", "--yes").exit_code == 0


def test_dry_run_says_what_would_be_created_and_calls_nothing(
        home: Path, proxy: Ec2FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    owner = owner_of(home)
    proxy.log.clear()
    result = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--regions", "us-east-1",
                 "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["network"] == [
        {"provider": "aws", "regions": ["us-east-1"], "security_group": f"geosched-{owner}",
         "admin_cidrs": ["0.0.0.0/0"]}]
    monkeypatch.setattr(render.out, "width", 300)
    monkeypatch.setenv(ENV_ADMIN_CIDRS, "203.0.113.0/24")
    table = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--regions", "us-east-1",
                "--dry-run")
    assert table.exit_code == 0, table.output
    assert (f"network: aws (us-east-1): security group geosched-{owner} in each region's default VPC (created if "
            "missing): tcp 22 from 203.0.113.0/24, all traffic from the group itself") in table.output
    assert proxy.calls == []


@pytest.mark.parametrize(("value", "reason"), [
    ("10.0.0.1/8", "'10.0.0.1/8' is not a CIDR (10.0.0.1/8 has host bits set); did you mean 10.0.0.0/8?"),
    ("office", "'office' is not a CIDR ("),
    ("203.0.113.0/24,,198.51.100.0/24", "empty entry in"),
    ("10.0.0.0/33", "'10.0.0.0/33' is not a CIDR ("),
    # An IPv6 zone id names an interface of one machine (RFC 4007 section 11); a firewall rule has none.
    ("fe80::%eth0/64", "'fe80::%eth0/64' carries an IPv6 zone id (%eth0), which names an interface of one machine, "
     "not a network; write fe80::/64"),
])
def test_bad_admin_cidrs_exit_2_naming_the_variable(home: Path, proxy: Ec2FaultProxy, value: str, reason: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_ADMIN_CIDRS, value)
    proxy.log.clear()
    for args in (("provision", "--gpu", "A100:8", "--nodes", "1", "--provider", "aws", "--yes"), ("check",)):
        result = run(home, *args)
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        assert isinstance(result.exception, InputError)
        message = str(result.exception)
        assert message.startswith(f"{ENV_ADMIN_CIDRS}: {reason}") and "\n" not in message
    assert proxy.calls == []


def test_admin_cidrs_setting() -> None:
    assert parse_admin_cidrs("203.0.113.0/24, 2001:db8::/32,198.51.100.7,203.0.113.0/24", ENV_ADMIN_CIDRS) == (
        "203.0.113.0/24", "2001:db8::/32", "198.51.100.7/32")
    settings = from_env({ENV_ADMIN_CIDRS: "203.0.113.0/24"}, Path("/nonexistent"))
    assert settings.aws.admin_cidrs == settings.gcp.admin_cidrs == ("203.0.113.0/24",)
    assert settings.admin_cidrs_from == ENV_ADMIN_CIDRS
    chosen = from_env({ENV_ADMIN_CIDRS: "203.0.113.0/24"}, Path("/nonexistent"), admin_cidrs="0.0.0.0/0")
    assert chosen.aws.admin_cidrs == ("0.0.0.0/0",) and chosen.admin_cidrs_from == "--admin-cidr"
    default = from_env({}, Path("/nonexistent"))  # nothing is open to the world unless chosen
    assert default.aws.admin_cidrs == default.gcp.admin_cidrs == () and default.admin_cidrs_from == ""
    # Pure: what a group needs, from what it has.
    add, revoke = ingress_changes([{"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22,
                                    "IpRanges": [{"CidrIp": "0.0.0.0/0"}]},
                                   {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443,
                                    "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}], "sg-1", ("203.0.113.0/24",))
    assert [p["IpProtocol"] for p in add] == ["-1", "tcp"] and add[1]["IpRanges"][0]["CidrIp"] == "203.0.113.0/24"
    assert [p["IpRanges"][0]["CidrIp"] for p in revoke] == ["0.0.0.0/0"]  # port 443 is not ours to touch


def admin_row(home: Path, *args: str) -> dict[str, object]:
    """The `admin ssh` item of `geosched check -o json`."""
    result = run(home, "check", "--provider", "aws", *args, "-o", "json")
    assert result.exit_code == 0, result.output  # a warning, not a failure
    (row,) = [r for r in json.loads(result.stdout)["items"] if r["item"] == "admin ssh"]
    return dict(row)


def test_check_warns_when_no_admin_cidr_is_set_or_ssh_is_open_to_the_world(home: Path, proxy: Ec2FaultProxy,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render.out, "width", 400)
    owner = owner_of(home)
    monkeypatch.delenv(ENV_ADMIN_CIDRS)
    unset = run(home, "check", "--provider", "aws")
    assert unset.exit_code == 0, unset.output  # a warning, not a failure
    assert f"security group geosched-{owner} in each region's default VPC" in unset.output
    unset_row = admin_row(home)
    assert unset_row == {"provider": "aws", "item": "admin ssh", "status": "warn", "ok": True,
                         "detail": f"no admin CIDR set: provision refuses; {ADMIN_CIDRS_HOWTO}"}
    assert (f"no admin CIDR set: provision refuses; {ADMIN_CIDRS_HOWTO}") in " ".join(unset.output.split())
    world = admin_row(home, "--admin-cidr", "0.0.0.0/0")
    assert world["status"] == "warn" and "open to the world: 0.0.0.0/0 (--admin-cidr)" in world["detail"]
    wide = admin_row(home, "--admin-cidr", "16.0.0.0/4,203.0.113.0/24")
    assert wide["status"] == "warn" and "open to 268,435,456 addresses (16.0.0.0/4)" in wide["detail"]
    # The whole IPv4 internet written as IPv4-mapped IPv6 (RFC 4291 section 2.5.5.2) is the world too.
    mapped = admin_row(home, "--admin-cidr", "::ffff:0.0.0.0/96")
    assert mapped["status"] == "warn" and "open to the world: ::ffff:0:0/96 (--admin-cidr)" in mapped["detail"]
    monkeypatch.setenv(ENV_ADMIN_CIDRS, "203.0.113.0/24")
    narrowed = admin_row(home)
    assert narrowed["status"] == "yes"
    assert narrowed["detail"] == "SSH (tcp 22) from 203.0.113.0/24 (GEOSCHED_ADMIN_CIDRS)"


def test_wide_admin_cidrs_are_those_shorter_than_a_slash_8_or_a_slash_16() -> None:
    assert wide_admin_cidrs(("0.0.0.0/0", "::/0", "16.0.0.0/4", "10.0.0.0/8", "203.0.113.0/24", "2000::/3",
                             "2001::/16", "2001:db8::/32")) == ("0.0.0.0/0", "::/0", "16.0.0.0/4", "2000::/3")
    # IPv4 blocks written inside IPv6 (IPv4-mapped, RFC 4291; NAT64's well-known prefix, RFC 6052) are measured
    # as the IPv4 blocks they are: a /96 of them is 0.0.0.0/0, not a narrow IPv6 block.
    assert wide_admin_cidrs(("::ffff:0:0/96", "::ffff:1000:0/100", "::ffff:a00:0/104", "::ffff:cb00:7100/120",
                             "64:ff9b::/96")) == ("::ffff:0:0/96", "::ffff:1000:0/100", "64:ff9b::/96")
    # A block that holds one of those prefixes whole is at least as wide, however long its own prefix: before,
    # ::fffe:0:0/95 and ::/64 (prefixes an admin could paste) opened SSH to all of IPv4 without a warning.
    assert wide_admin_cidrs(("::fffe:0:0/95", "::/64", "64:ff9b::/64", "2001:db8::/32")) == (
        "::fffe:0:0/95", "::/64", "64:ff9b::/64")


@pytest.mark.parametrize(("cidr", "exposure"), [
    ("0.0.0.0/0", "the whole IPv4 internet (0.0.0.0/0)"),
    ("::/0", "the whole IPv6 internet (::/0)"),
    ("16.0.0.0/4", "268,435,456 addresses (16.0.0.0/4)"),
    ("::ffff:0:0/96", "the whole IPv4 internet (::ffff:0:0/96, IPv4 written as IPv6)"),
    ("::fffe:0:0/95", "the whole IPv4 internet (::fffe:0:0/95 holds ::ffff:0:0/96, IPv4 written as IPv6)"),
])
def test_provision_with_a_wide_admin_cidr_warns_naming_the_exposure_unless_allowed(
        home: Path, proxy: Ec2FaultProxy, cidr: str, exposure: str) -> None:
    """SSH open to the world was accepted silently (issue 19 item 9): one warning line on stderr, the plan as
    asked; `--allow-wide-admin-cidr` says it was meant, and silences it."""
    args = ("provision", "--gpu", "A100:8", "--nodes", "1", "--provider", "aws", "--regions", "us-east-1",
            "--dry-run", "-o", "json", "--admin-cidr", cidr)
    warned = run(home, *args)
    assert warned.exit_code == 0, warned.output
    assert warned.stderr == (f"warning: SSH (tcp 22) of the new machines is open to {exposure}, from --admin-cidr: "
                             "login is key-only, but anyone there can try; narrow it to the networks you administer "
                             "from, or pass --allow-wide-admin-cidr if you mean it\n")
    assert json.loads(warned.stdout)["network"][0]["admin_cidrs"] == [cidr]
    allowed = run(home, *args, "--allow-wide-admin-cidr")
    assert allowed.exit_code == 0 and allowed.stderr == "", allowed.output
    narrow = run(home, *args[:-1], "10.0.0.0/8")
    assert narrow.exit_code == 0 and narrow.stderr == "", narrow.output
    assert proxy.calls == []


@pytest.mark.parametrize("cloud", ["aws", "gcp"])
def test_provision_without_an_admin_cidr_refuses_before_any_call(home: Path, proxy: Ec2FaultProxy, gce: GceDouble,
                                                                 moto: MotoServer, monkeypatch: pytest.MonkeyPatch,
                                                                 cloud: str) -> None:
    monkeypatch.delenv(ENV_ADMIN_CIDRS)
    monkeypatch.setenv("GEOSCHED_GCP_ENDPOINT", gce.endpoint)
    monkeypatch.setenv("GEOSCHED_GCP_PROJECT", PROJECT)
    proxy.log.clear()
    gce.log.clear()
    for extra in ((), ("--dry-run",)):
        result = run(home, "provision", "--gpu", "A100:8", "--nodes", "1", "--provider", cloud, "--yes", *extra)
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        assert str(result.exception) == (f"{ENV_ADMIN_CIDRS}: not set, and the machines would need an SSH rule: "
                                         f"{ADMIN_CIDRS_HOWTO}")
    assert proxy.calls == [] and gce.calls == []
    if cloud == "gcp":
        return
    # The explicit choice on the command line: loopback only, as the demo does.
    chosen = run(home, "provision", "--gpu", "A100:8", "--nodes", "1", "--provider", "aws", "--regions", "us-east-1",
                 "--yes", "--admin-cidr", "127.0.0.1/32", "--name", "gang-ondcidr1", "-o", "json")
    assert chosen.exit_code == 0, chosen.output
    (group,) = groups(moto.url, f"geosched-{owner_of(home)}")
    assert ("tcp", 22, 22, "127.0.0.1/32") in ingress(group)
    assert run(home, "down", "gang-ondcidr1", "--yes").exit_code == 0


# --- GCP -------------------------------------------------------------------------------------------

def test_gcp_firewall_rules_are_created_once_and_instances_carry_the_tag(gce: GceDouble, store: Store) -> None:
    owner = journal.owner(store)
    tag = f"geosched-{owner}"
    req = GangRequest("A100", 8, 2, PricingMode.ON_DEMAND, ("gcp",), ("us-central1",))
    providers: dict[str, Provider] = {"gcp": gcp_provider(gce.endpoint)}
    result = provision(req, providers, store, fast_settings(), gang="gang-ond00004")
    assert result.ok, result.message
    rules = {r["name"]: r for r in gce.firewalls(PROJECT)}
    assert set(rules) == {f"{tag}-ssh", f"{tag}-internal"}
    ssh, internal = rules[f"{tag}-ssh"], rules[f"{tag}-internal"]
    default = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/global/networks/default"
    assert (ssh["network"], ssh["direction"], ssh["sourceRanges"], ssh["targetTags"], ssh["allowed"]) == (
        default, "INGRESS", [ADMIN_CIDR], [tag], [{"IPProtocol": "tcp", "ports": ["22"]}])
    assert "sourceTags" not in ssh
    assert (internal["network"], internal["sourceTags"], internal["targetTags"], internal["allowed"]) == (
        default, [tag], [tag], [{"IPProtocol": "all"}])
    assert "sourceRanges" not in internal  # nothing but port 22 is open to outside
    assert gce.call_count("firewalls.insert") == 2
    for inst in gce.instances(project=PROJECT):
        assert inst["tags"]["items"] == [tag]
        assert inst["networkInterfaces"][0]["network"] == "global/networks/default"

    # A second run in a new process: both rules found, nothing inserted or replaced.
    again: dict[str, Provider] = {"gcp": gcp_provider(gce.endpoint)}
    second = provision(replace(req, nodes=1), again, store, fast_settings(), gang="gang-ond00005")
    assert second.ok, second.message
    assert gce.call_count("firewalls.insert") == 2 and gce.call_count("firewalls.update") == 0
    assert gce.call_count("firewalls.get") == 4
    for gang in ("gang-ond00004", "gang-ond00005"):
        lifecycle.down(store, again, gang, fast_settings().lifecycle)
    assert gce.instances() == [] and len(gce.firewalls(PROJECT)) == 2  # `down` keeps the shared rules


def test_gcp_waits_on_global_operations_and_counts_every_call() -> None:
    with GceDouble(operation_delay_s=0.3) as gce:
        gcp = gcp_provider(gce.endpoint)
        budget = Budget(30.0, 10.0)
        owner = new_owner()
        assert gcp.firewalls(owner, budget) == f"geosched-{owner}"
        assert gce.call_count("globalOperations.wait") >= 2  # each insert waited on at the configured endpoint
        assert budget.calls == len(gce.calls)
        assert all(r["name"].startswith(f"geosched-{owner}-") for r in gce.firewalls(PROJECT))
        cached = Budget(30.0, 10.0)
        assert gcp.firewalls(owner, cached) == f"geosched-{owner}" and cached.calls == 0


def test_gcp_racing_inserts_and_narrowing(gce: GceDouble) -> None:
    owner = new_owner()
    slow, fast = gcp_provider(gce.endpoint), gcp_provider(gce.endpoint)
    held = gce.inject(GceFault.stall(1.0), method="firewalls.insert")
    race(held, lambda: slow.firewalls(owner, Budget(30.0, 10.0)), lambda: fast.firewalls(owner, Budget(30.0, 10.0)))
    inserts = [c for c in gce.calls if c.method == "firewalls.insert"]
    assert sorted(c.status for c in inserts) == [200, 200, 409]
    assert len(gce.firewalls(PROJECT)) == 2

    narrow = GcpProvider(GcpSettings(project=PROJECT, endpoint=gce.endpoint, admin_cidrs=("203.0.113.0/24",)),
                         credentials=AnonymousCredentials())  # type: ignore[no-untyped-call]
    narrow.firewalls(owner, Budget(30.0, 10.0))
    rules = {r["name"]: r for r in gce.firewalls(PROJECT)}
    assert rules[f"geosched-{owner}-ssh"]["sourceRanges"] == ["203.0.113.0/24"]
    assert gce.call_count("firewalls.update") == 1  # only the rule that changed

    gce.inject(GceFault.permission_denied("compute.firewalls.create"), method="firewalls.insert")
    other = new_owner()
    with pytest.raises(AuthError) as denied:
        gcp_provider(gce.endpoint).firewalls(other, Budget(30.0, 10.0))
    assert f"on-demand firewall rule geosched-{other}-ssh: " in str(denied.value)


def test_gcp_terraform_output_creates_no_firewall(gce: GceDouble) -> None:
    owner = new_owner()
    config = parse_terraform_output(output_json(owner, gcp={"us-central1": gcp_region(owner)}), "network.json")
    gcp = gcp_with(gce, config)
    spec = LaunchSpec("gang-ond00006", "gang-ond00006-1", owner, "us-central1", "us-central1-a", "a2-highgpu-8g",
                      "A100", 8, 96, Pricing.ON_DEMAND, ("gang-ond00006-1-0",))
    (inst,) = gcp.launch(spec, Budget(30.0, 10.0))
    assert [c.method for c in gce.calls if c.method.startswith(("firewalls.", "globalOperations."))] == []
    assert gce.firewalls() == []
    gcp.terminate([inst], Budget(30.0, 10.0))


def test_gce_double_firewalls_through_the_sdk(gce: GceDouble) -> None:
    """list, delete and globalOperations.get, which geosched does not call, as the SDK sends them."""
    kwargs = gce.client_kwargs()
    firewalls = compute_v1.FirewallsClient(**kwargs)
    ops = compute_v1.GlobalOperationsClient(**kwargs)
    rule = compute_v1.Firewall(name="fw-a", source_ranges=["198.51.100.0/24"], target_tags=["t"],
                               allowed=[compute_v1.Allowed(I_p_protocol="tcp", ports=["22"])])
    op = firewalls.insert(project=PROJECT, firewall_resource=rule, retry=None)
    assert ops.get(project=PROJECT, operation=op.name, retry=None).status == compute_v1.Operation.Status.DONE
    assert [r.name for r in firewalls.list(project=PROJECT, retry=None)] == ["fw-a"]
    bad = compute_v1.Firewall(name="fw-b", source_ranges=["198.51.100.0/24"])  # neither allowed nor denied
    with pytest.raises(Exception, match="allowed"):
        firewalls.insert(project=PROJECT, firewall_resource=bad, retry=None)
    deleted = firewalls.delete(project=PROJECT, firewall="fw-a", retry=None)
    ops.wait(project=PROJECT, operation=deleted.name, retry=None)
    assert list(firewalls.list(project=PROJECT, retry=None)) == [] and gce.firewalls() == []
