"""Launching into the Terraform network (`--tf-output` / GEOSCHED_TERRAFORM_OUTPUT): subnets, security group,
key pair, placement groups and launch tags on AWS (moto behind the fault proxy), network, subnetwork, firewall
tag, placement policy, service account and labels on GCP (the GCE double); zones the output does not cover are
skipped; an owner or project that disagrees is refused before any API call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest
from botocore.config import Config  # type: ignore[import-untyped]
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

from geosched.console import render
from geosched.core.errors import InputError
from geosched.core.models import Pricing
from geosched.providers import aws as aws_module
from geosched.providers import gcp as gcp_module
from geosched.providers import journal, lifecycle
from geosched.providers.base import AuthError, Budget, LaunchSpec, Provider, UnsupportedError
from geosched.providers.config import ENV_TERRAFORM_OUTPUT, from_env
from geosched.providers.gang import provision
from geosched.providers.gcp import GcpProvider
from geosched.providers.launchsettings import load_terraform_output, parse_terraform_output
from geosched.providers.launchsettings.aws import AwsSettings
from geosched.providers.launchsettings.gcp import GcpSettings
from geosched.providers.plan import GangRequest, PricingMode
from geosched.providers.terraform import NetworkConfig
from geosched.store.db import Store
from geosched_emulators import Ec2FaultProxy, GceDouble, MotoServer
from geosched_emulators.faultproxy import Ec2Fault
from tests.providers.prov_support import PROJECT, fast_settings, moto_client
from tests.providers.test_prov_cli import run

pytestmark = pytest.mark.integration

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl me"
LINK = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}"
MODULE_TAGS = {"team": "ml", "cost-center": "42"}


def output_json(owner: str, aws: dict[str, Any] | None = None, gcp: dict[str, Any] | None = None) -> dict[str, Any]:
    """What `terraform output -json` prints for terraform/examples/multi-region (the `geosched` output)."""
    return {"geosched": {"sensitive": False, "type": ["object", {}],
                         "value": {"schema_version": 1, "aws": aws or {}, "gcp": gcp or {}}}}


def aws_region(owner: str, vpc: str, subnets: dict[str, str], sg: str, groups: dict[str, str]) -> dict[str, Any]:
    return {"vpc_id": vpc, "subnet_ids": subnets, "security_group_id": sg, "key_name": "geosched-us-east-1",
            "placement_group_names": groups, "launch_tags": {**MODULE_TAGS, "geosched-owner": owner}}


def gcp_region(owner: str, project: str = PROJECT, zones: tuple[str, ...] = ("us-central1-a", "us-central1-b"),
               policy: bool = True) -> dict[str, Any]:
    link = f"https://www.googleapis.com/compute/v1/projects/{project}"
    return {"project": project, "network": f"{link}/global/networks/geosched",
            "subnetwork": f"{link}/regions/us-central1/subnetworks/geosched-us-central1", "zones": list(zones),
            "firewall_tag": "geosched-node",
            "placement_policy": f"{link}/regions/us-central1/resourcePolicies/geosched-us-central1-compact"
            if policy else None,
            "service_account_email": f"geosched-node@{project}.iam.gserviceaccount.com",
            "launch_labels": {"team": "ml", "geosched-owner": owner}}


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc, indent=2))
    return path


def owner_of(home: Path) -> str:
    with Store(home) as store:
        return journal.owner(store)


def gcp_with(gce: GceDouble, config: NetworkConfig) -> GcpProvider:
    settings = GcpSettings(project=PROJECT, endpoint=gce.endpoint, terraform=config)
    return GcpProvider(settings, credentials=AnonymousCredentials())  # type: ignore[no-untyped-call]


class AwsNetwork:
    """A VPC built in moto the way terraform/modules/aws-gpu-region builds it: a subnet in use1-az1 and
    use1-az2, a security group, a key pair and a cluster placement group in use1-az1 only (created through
    the proxy, which answers placement groups for moto)."""

    def __init__(self, proxy: Ec2FaultProxy) -> None:
        ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=proxy.url, aws_access_key_id="testing",
                           aws_secret_access_key="testing", config=Config(retries={"total_max_attempts": 3}))
        self.vpc = ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
        self.subnets = {zone: ec2.create_subnet(VpcId=self.vpc, CidrBlock=f"10.40.{16 * i}.0/20",
                                                AvailabilityZoneId=zone)["Subnet"]["SubnetId"]
                        for i, zone in enumerate(("use1-az1", "use1-az2"))}
        self.sg = ec2.create_security_group(GroupName="geosched-us-east-1-nodes", Description="geosched nodes",
                                            VpcId=self.vpc)["GroupId"]
        ec2.delete_key_pair(KeyName="geosched-us-east-1")  # moto's state outlives a test
        ec2.import_key_pair(KeyName="geosched-us-east-1", PublicKeyMaterial=KEY.encode())
        ec2.create_placement_group(GroupName="geosched-use1-az1", Strategy="cluster")
        self.groups = {"use1-az1": "geosched-use1-az1"}

    def region(self, owner: str) -> dict[str, Any]:
        return aws_region(owner, self.vpc, self.subnets, self.sg, self.groups)


@pytest.fixture
def home(tmp_path: Path, proxy: Ec2FaultProxy, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("GEOSCHED_AWS_REGIONS", "us-east-1")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-credentials.json"))
    monkeypatch.delenv(ENV_TERRAFORM_OUTPUT, raising=False)
    monkeypatch.delenv("GEOSCHED_GCP_PROJECT", raising=False)
    key = tmp_path / "id_ed25519.pub"
    key.write_text(KEY + "\n")
    monkeypatch.setenv("GEOSCHED_SSH_PUBLIC_KEY", str(key))
    yield tmp_path / "home"


@pytest.fixture
def network(proxy: Ec2FaultProxy) -> AwsNetwork:
    return AwsNetwork(proxy)


def described(proxy: Ec2FaultProxy, ids: list[str]) -> list[dict[str, Any]]:
    """DescribeInstances through the proxy: moto keeps subnet, groups, key and tags, the proxy adds the
    placement group moto drops (see emulators/geosched_emulators/ec2_extras.py)."""
    raw = moto_client(proxy.url).describe_instances(InstanceIds=ids)
    return [i for r in raw["Reservations"] for i in r["Instances"]]


def test_aws_gangs_launch_into_the_terraform_subnet_group_and_placement_group(
        home: Path, proxy: Ec2FaultProxy, moto: MotoServer, network: AwsNetwork, tmp_path: Path) -> None:
    owner = owner_of(home)
    net_file = write(tmp_path / "network.json", output_json(owner, aws={"us-east-1": network.region(owner)}))
    result = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--regions", "us-east-1",
                 "--tf-output", str(net_file), "--yes", "--name", "gang-net00001", "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["state"] == "ready" and doc["chosen"]["zone"] == "use1-az1"
    # use1-az6 offers the type but has no subnet in the output: no candidate, and the report says why.
    skipped = [(a["zone"], a["outcome"], a["why"]) for a in doc["attempts"] if a["outcome"] == "skipped"]
    assert [z for z, _, _ in skipped] == ["use1-az6"]
    assert "no subnet in the Terraform output" in skipped[0][2]
    instances = described(proxy, [n["provider_id"] for n in doc["nodes"]])
    assert len(instances) == 2
    for inst in instances:
        assert inst["SubnetId"] == network.subnets["use1-az1"] and inst["VpcId"] == network.vpc
        assert [g["GroupId"] for g in inst["SecurityGroups"]] == [network.sg]
        assert inst["Placement"]["GroupName"] == "geosched-use1-az1"
        assert inst["KeyName"] == "geosched-us-east-1"
        tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
        assert tags == {**MODULE_TAGS, "geosched-owner": owner, "geosched-gang": "gang-net00001",
                        "geosched-attempt": tags["geosched-attempt"], "Name": tags["geosched-attempt"]}
        assert tags["geosched-attempt"].startswith("gang-net00001-")
    volumes = moto_client(moto.url).describe_volumes(
        Filters=[{"Name": "attachment.instance-id", "Values": [instances[0]["InstanceId"]]}])["Volumes"]
    assert {t["Key"]: t["Value"] for t in volumes[0]["Tags"]}["geosched-owner"] == owner
    assert {t["Key"]: t["Value"] for t in volumes[0]["Tags"]}["team"] == "ml"

    # A zone without a placement group launches without one (a refusal in use1-az1 moves the gang there).
    proxy.inject(Ec2Fault.insufficient_instance_capacity(), zone="us-east-1b", action="RunInstances")
    second = run(home, "provision", "--gpu", "A100:8", "--nodes", "1", "--provider", "aws", "--regions", "us-east-1",
                 "--tf-output", str(net_file), "--yes", "--name", "gang-net00002", "-o", "json")
    assert second.exit_code == 0, second.output
    doc2 = json.loads(second.output)
    assert doc2["chosen"]["zone"] == "use1-az2"
    (inst2,) = described(proxy, [n["provider_id"] for n in doc2["nodes"]])
    assert inst2["SubnetId"] == network.subnets["use1-az2"]
    assert inst2["Placement"].get("GroupName", "") == ""
    for gang in ("gang-net00001", "gang-net00002"):
        assert run(home, "down", gang, "--yes").exit_code == 0


def test_env_variable_and_dry_run_show_the_subnet_per_zone(
        home: Path, proxy: Ec2FaultProxy, network: AwsNetwork, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = owner_of(home)
    net_file = write(tmp_path / "network.json", output_json(owner, aws={"us-east-1": network.region(owner)}))
    monkeypatch.setenv(ENV_TERRAFORM_OUTPUT, str(net_file))
    proxy.log.clear()
    result = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--regions", "us-east-1",
                 "--dry-run", "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [(c["zone"], c["subnet"]) for c in doc["plan"]] == [
        ("use1-az1", network.subnets["use1-az1"]), ("use1-az2", network.subnets["use1-az2"])]
    assert [(s["zone"], s["reason"]) for s in doc["skipped"]] == [
        ("use1-az6", f"no subnet in the Terraform output ({net_file})")]
    monkeypatch.setattr(render.out, "width", 200)  # CliRunner's 80 columns would fold the ids
    table = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--regions", "us-east-1",
                "--dry-run")
    assert table.exit_code == 0, table.output
    assert network.subnets["use1-az1"] in table.output and network.subnets["use1-az2"] in table.output
    assert "no subnet in the Terraform output" in table.output
    assert proxy.calls == []  # a dry run calls nothing


def test_owner_mismatch_exits_2_before_any_call(home: Path, proxy: Ec2FaultProxy, network: AwsNetwork,
                                                tmp_path: Path) -> None:
    owner = owner_of(home)
    net_file = write(tmp_path / "network.json", output_json("geosched", aws={"us-east-1": network.region("geosched")}))
    proxy.log.clear()
    for extra in ((), ("--dry-run",)):
        result = run(home, "provision", "--gpu", "A100:8", "--nodes", "2", "--provider", "aws", "--regions",
                     "us-east-1", "--tf-output", str(net_file), "--yes", *extra)
        assert result.exit_code == 2, result.output
        assert isinstance(result.exception, InputError)
        message = str(result.exception)
        assert "\n" not in message
        assert message.startswith(f"{net_file}: geosched.value.aws.us-east-1.launch_tags.geosched-owner: ")
        assert f"'geosched' is not this store's owner id {owner!r}" in message
        assert "`owner` variable" in message
    assert proxy.calls == []  # not even a describe, let alone RunInstances
    with Store(home) as store:
        assert journal.gangs(store) == []  # refused before a gang was journalled
    status = run(home, "status")
    assert status.exit_code == 0 and f"owner id of this store: {owner}" in status.output


def test_check_reports_the_network_per_provider(home: Path, proxy: Ec2FaultProxy, network: AwsNetwork,
                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    owner = owner_of(home)
    good = write(tmp_path / "good.json", output_json(owner, aws={"us-east-1": network.region(owner)}))
    result = run(home, "check", "--provider", "aws", "--tf-output", str(good), "-o", "json")
    assert result.exit_code == 0, result.output
    items = {r["item"]: r for r in json.loads(result.stdout)["items"]}
    assert items["network"]["detail"] == f"{good}: us-east-1 (use1-az1, use1-az2)"
    assert items["network"]["status"] == "yes" and items["network"]["ok"] is True
    assert items["network owner"]["detail"] == f"{owner} (this store's owner id)"
    none = run(home, "check", "--provider", "aws")
    assert none.exit_code == 0 and "no Terraform output loaded" in none.output
    bad = write(tmp_path / "bad.json", output_json("someone-else", aws={"us-east-1": network.region("someone-else")}))
    refused = run(home, "check", "--provider", "aws", "--tf-output", str(bad), "-o", "json")
    assert refused.exit_code == 1
    (owner_row,) = [r for r in json.loads(refused.stdout)["items"] if r["item"] == "network owner"]
    assert owner_row["status"] == "no" and f"is not this store's owner id {owner!r}" in owner_row["detail"]


def test_gcp_instances_carry_the_terraform_network(gce: GceDouble, store: Store) -> None:
    owner = journal.owner(store)
    config = parse_terraform_output(output_json(owner, gcp={"us-central1": gcp_region(owner)}), "network.json")
    gcp = gcp_with(gce, config)
    providers: dict[str, Provider] = {"gcp": gcp}
    req = GangRequest("A100", 8, 2, PricingMode.ON_DEMAND, ("gcp",), ("europe-west4", "us-central1"))
    result = provision(req, providers, store, replace(fast_settings(), network=config), gang="gang-net00003")
    assert result.ok, result.message
    assert result.candidate is not None and result.candidate.zone in ("us-central1-a", "us-central1-b")
    skipped = {a.zone: a.message for a in result.attempts if a.outcome == "skipped"}
    assert {"europe-west4-a", "europe-west4-b", "us-central1-c"} <= set(skipped)
    assert all("no subnet in the Terraform output (network.json)" in (m or "") for m in skipped.values())
    assert gce.call_count("instances.insert") == 2  # only the covered zone was tried
    client = compute_v1.InstancesClient(**gce.client_kwargs())
    for node in result.nodes:
        inst = client.get(project=PROJECT, zone=result.candidate.zone, instance=node.provider_id)
        (nic,) = inst.network_interfaces
        assert nic.network == f"{LINK}/global/networks/geosched"
        assert nic.subnetwork == f"{LINK}/regions/us-central1/subnetworks/geosched-us-central1"
        assert [ac.type_ for ac in nic.access_configs] == ["ONE_TO_ONE_NAT"]  # external access as before
        assert list(inst.tags.items) == ["geosched-node"]
        assert [(s.email, list(s.scopes)) for s in inst.service_accounts] == [
            (f"geosched-node@{PROJECT}.iam.gserviceaccount.com", ["https://www.googleapis.com/auth/cloud-platform"])]
        assert list(inst.resource_policies) == [
            f"{LINK}/regions/us-central1/resourcePolicies/geosched-us-central1-compact"]
        labels = dict(inst.labels)
        assert labels["team"] == "ml" and labels["geosched-owner"] == owner
        assert labels["geosched-gang"] == "gang-net00003"
    lifecycle.down(store, providers, "gang-net00003", fast_settings().lifecycle)
    assert gce.instances() == []


def test_gcp_vms_get_no_external_address_when_the_network_says_so(gce: GceDouble, store: Store) -> None:
    """Issue 19 item 9: `public_ips = false` in the GCP module (or GEOSCHED_GCP_PUBLIC_IPS=no without Terraform)
    launches VMs without an access config, so GCE gives them no external address (instances.insert: "If you
    specify no access config, the instance will have no external internet access", Compute Engine REST reference,
    NetworkInterface.accessConfigs); geosched then reaches each by the internal address, the only one it has."""
    owner = journal.owner(store)
    config = parse_terraform_output(output_json(owner, gcp={"us-central1": {**gcp_region(owner), "public_ips": False}}),
                                    "network.json")
    providers: dict[str, Provider] = {"gcp": gcp_with(gce, config)}
    req = GangRequest("A100", 8, 2, PricingMode.ON_DEMAND, ("gcp",), ("us-central1",))
    result = provision(req, providers, store, replace(fast_settings(), network=config), gang="gang-net00004")
    assert result.ok and result.candidate is not None, result.message
    client = compute_v1.InstancesClient(**gce.client_kwargs())
    for node in result.nodes:
        inst = client.get(project=PROJECT, zone=result.candidate.zone, instance=node.provider_id)
        (nic,) = inst.network_interfaces
        assert list(nic.access_configs) == []
        assert node.addresses == (nic.network_i_p,) and nic.network_i_p.startswith("10.")
    lifecycle.down(store, providers, "gang-net00004", fast_settings().lifecycle)
    assert gce.instances() == []


@pytest.mark.parametrize(("value", "public"), [(None, True), ("yes", True), ("no", False), ("False", False)])
def test_gcp_public_ips_setting_without_terraform(value: str | None, public: bool, tmp_path: Path) -> None:
    env = {} if value is None else {"GEOSCHED_GCP_PUBLIC_IPS": value}
    gcp = from_env(env, tmp_path).gcp
    assert gcp.public_ips is public
    spec = LaunchSpec(gang="gang-pub00001", token="t", owner="o", region="us-central1", zone="us-central1-a",
                      instance_type="a2-highgpu-8g", gpu="A100", gpus=8, vcpus=96, pricing=Pricing.ON_DEMAND,
                      names=("n0",))
    body = gcp_module.instance_body(spec, 0, gcp)
    assert [ac.type_ for ac in body.network_interfaces[0].access_configs] == (["ONE_TO_ONE_NAT"] if public else [])


def test_gcp_public_ips_setting_refuses_other_words(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        from_env({"GEOSCHED_GCP_PUBLIC_IPS": "maybe"}, tmp_path)
    assert caught.value.source == "GEOSCHED_GCP_PUBLIC_IPS" and "expected yes or no" in caught.value.reason


def test_gcp_project_must_agree(gce: GceDouble, home: Path, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    owner = owner_of(home)
    doc = output_json(owner, gcp={"us-central1": gcp_region(owner, project="other-project")})
    config = parse_terraform_output(doc, "network.json")
    gcp = gcp_with(gce, config)
    spec = LaunchSpec("gang-x", "gang-x-1", owner, "us-central1", "us-central1-a", "a2-highgpu-8g", "A100", 8, 96,
                      Pricing.ON_DEMAND, ("gang-x-1-0",))
    with pytest.raises(AuthError) as caught:
        gcp.launch(spec, Budget(10.0))
    assert caught.value.code == "ProjectMismatch" and "other-project" in str(caught.value)
    assert gce.call_count("instances.insert") == 0
    # The CLI refuses it before any call when the project is configured.
    monkeypatch.setenv("GEOSCHED_GCP_PROJECT", PROJECT)
    net_file = write(tmp_path / "network.json", doc)
    result = run(home, "provision", "--gpu", "A100:8", "--nodes", "1", "--provider", "gcp", "--tf-output",
                 str(net_file), "--dry-run")
    assert result.exit_code == 2
    assert str(result.exception).startswith(f"{net_file}: geosched.value.gcp.us-central1.project: project "
                                            f"'other-project' is not the configured project '{PROJECT}'")


# --- pure: request building, settings ---------------------------------------------------------------

def spec(zone: str = "use1-az1", owner: str = "o1") -> LaunchSpec:
    return LaunchSpec("gang-x", "gang-x-1", owner, "us-east-1", zone, "p4d.24xlarge", "A100", 8, 96,
                      Pricing.ON_DEMAND, ("gang-x-1-0",), ssh_public_key=KEY)


def aws_config(owner: str = "o1") -> Any:
    region = aws_region(owner, "vpc-0123456789abcdef0", {"use1-az1": "subnet-0123456789abcdef0",
                                                        "use1-az2": "subnet-0123456789abcdef1"},
                        "sg-0123456789abcdef0", {"use1-az1": "geosched-use1-az1"})
    region["launch_tags"]["geosched-gang"] = "not-this"  # a module tag must not rename the gang
    return parse_terraform_output(output_json(owner, aws={"us-east-1": region}), "network.json")


def test_run_params_use_the_network_and_keep_our_tags() -> None:
    net = aws_config().regions("aws")["us-east-1"]
    params = aws_module.run_params(spec(), "ami-1", "us-east-1b", "my-own-key", net)
    assert params["SubnetId"] == "subnet-0123456789abcdef0"
    assert params["SecurityGroupIds"] == ["sg-0123456789abcdef0"]
    assert params["Placement"] == {"AvailabilityZone": "us-east-1b", "GroupName": "geosched-use1-az1"}
    assert params["KeyName"] == "geosched-us-east-1"  # the module's key pair: the one the IAM policy allows
    assert KEY in params["UserData"]  # the user's key still goes in through cloud-init
    for tag_spec in params["TagSpecifications"]:
        tags = {t["Key"]: t["Value"] for t in tag_spec["Tags"]}
        assert tags["geosched-gang"] == "gang-x" and tags["team"] == "ml" and tags["geosched-owner"] == "o1"
    second = aws_module.run_params(spec("use1-az2"), "ami-1", "us-east-1c", None, net)
    assert "GroupName" not in second["Placement"]
    plain = aws_module.run_params(spec(), "ami-1", "us-east-1b", "my-own-key")
    assert "SubnetId" not in plain and plain["KeyName"] == "my-own-key"
    with pytest.raises(UnsupportedError):
        aws_module.run_params(spec("use1-az6"), "ami-1", "us-east-1a", None, net)


def test_aws_provider_refuses_uncovered_zones_and_other_owners_without_calls() -> None:
    provider = aws_module.AwsProvider(AwsSettings(terraform=aws_config()), session=boto3.session.Session(
        aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1"))
    budget = Budget(5.0)
    with pytest.raises(UnsupportedError) as uncovered:
        provider.launch(spec("use1-az6"), budget)
    assert uncovered.value.code == "NoSubnet" and not uncovered.value.region_wide
    with pytest.raises(UnsupportedError) as region:
        provider.launch(replace(spec(), region="us-east-2", zone="use2-az1"), budget)
    assert region.value.region_wide
    with pytest.raises(AuthError) as other:
        provider.launch(spec(owner="o2"), budget)
    assert other.value.code == "OwnerMismatch"
    assert budget.calls == 0


def test_instance_body_without_a_network_is_unchanged() -> None:
    gspec = LaunchSpec("gang-x", "gang-x-1", "o1", "us-central1", "us-central1-a", "a2-highgpu-8g", "A100", 8, 96,
                       Pricing.SPOT, ("gang-x-1-0",))
    body = gcp_module.instance_body(gspec, 0, GcpSettings())
    assert body.network_interfaces[0].network == "global/networks/default"
    assert not body.network_interfaces[0].subnetwork and not body.tags.items and not body.service_accounts
    config = parse_terraform_output(output_json("o1", gcp={"us-central1": gcp_region("o1", policy=False)}), "n.json")
    with_net = gcp_module.instance_body(gspec, 0, GcpSettings(), config.regions("gcp")["us-central1"])
    assert not with_net.resource_policies  # no placement policy in the output: none in the request
    assert dict(with_net.labels)["geosched-index"] == "0" and dict(with_net.labels)["team"] == "ml"


def test_settings_read_the_network_from_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path / "tf.json", output_json("o1", gcp={"us-central1": gcp_region("o1")}))
    settings = from_env({ENV_TERRAFORM_OUTPUT: str(path)}, tmp_path)
    assert settings.network is not None and settings.network == load_terraform_output(path)
    assert settings.aws.terraform is settings.network and settings.gcp.terraform is settings.network
    explicit = write(tmp_path / "other.json", output_json("o2", gcp={"us-central1": gcp_region("o2")}))
    chosen = from_env({ENV_TERRAFORM_OUTPUT: str(path)}, tmp_path, network=explicit)
    assert chosen.network is not None and chosen.network.source == str(explicit)
    assert from_env({}, tmp_path).network is None
    with pytest.raises(InputError) as missing:
        from_env({ENV_TERRAFORM_OUTPUT: str(tmp_path / "nope.json")}, tmp_path)
    assert str(missing.value) == f"{tmp_path / 'nope.json'}: no such file"



def test_check_names_the_terraform_module_of_a_cloud_the_output_does_not_cover(tmp_path: Path) -> None:
    from geosched.providers.cli import _network_rows
    from geosched.providers.config import ProviderSettings

    # Only an AWS region (IDs in EC2's shapes, see AwsNetwork): the GCP check says which module would build one.
    only_aws = output_json("o", aws={"us-east-1": aws_region("o", "vpc-0123abcd", {"use1-az1": "subnet-0123abcd"},
                                                             "sg-0123abcd", {})})
    config = parse_terraform_output(only_aws, "tf.json")
    (row,) = _network_rows("gcp", config, "o", ProviderSettings())
    assert row["ok"] == "no"
    assert row["detail"] == ("tf.json covers no gcp region: no gcp zone can be used (geosched's Terraform module for "
                             "it: terraform/modules/gcp-gpu-region)")
    assert (Path(__file__).parents[2] / "terraform/modules/gcp-gpu-region/main.tf").is_file()
