"""Terraform modules checked statically (no terraform binary: python-hcl2 parses them), and geosched's reader of
`terraform output -json` checked against a recorded output of the example root module."""

from __future__ import annotations

import codecs
import copy
import functools
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hcl2
import pytest

from geosched import clouds
from geosched.core.errors import InputError
from geosched.providers.launchsettings import load_terraform_output, parse_terraform_output, read_terraform_output
from geosched.providers.launchsettings.aws import AwsRegionNetwork
from geosched.providers.launchsettings.gcp import GcpRegionNetwork
from geosched.providers.terraform import OUTPUT_NAME, NetworkConfig

ROOT = Path(__file__).resolve().parents[2]
TERRAFORM = ROOT / "terraform"
EXAMPLE = TERRAFORM / "examples" / "multi-region"
FIXTURE = Path(__file__).resolve().parents[1] / "data" / "terraform" / "output.json"

TF_FILES = sorted(TERRAFORM.rglob("*.tf"))
TF_DIRS = sorted({path.parent for path in TF_FILES})
MODULE_DIRS = sorted(path for path in TF_DIRS if path.parent.name == "modules")
ROOT_DIRS = sorted(path for path in TF_DIRS if path.parent.name == "examples")
LAYOUT = ("variables.tf", "main.tf", "outputs.tf", "versions.tf", "README.md")

# python-hcl2 >= 8 keeps source quotes on strings and labels and adds __comments__ unless told otherwise; with
# these options a literal string comes back bare and an expression as "${...}".
HCL_OPTIONS = hcl2.SerializationOptions(with_comments=False, strip_string_quotes=True)
NAME = r"[A-Za-z_][A-Za-z0-9_-]*"
VAR_RE = re.compile(rf"(?<![\w.])var\.({NAME})")
LOCAL_RE = re.compile(rf"(?<![\w.])local\.({NAME})")
MODULE_RE = re.compile(rf"(?<![\w.])module\.({NAME})\.({NAME})")
DATA_RE = re.compile(rf"(?<![\w.])data\.({NAME})\.({NAME})")
RESOURCE_RE = re.compile(rf"(?<![\w.])((?:aws|google)_{NAME})\.({NAME})")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@functools.cache
def parse(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = hcl2.loads(path.read_text(encoding="utf-8"), serialization_options=HCL_OPTIONS)
    return result


@functools.cache
def parse_raw(path: Path) -> dict[str, Any]:
    """python-hcl2's default form: literal strings keep their quotes, so they differ from bare keywords."""
    result: dict[str, Any] = hcl2.loads(path.read_text(encoding="utf-8"))
    return result


def blocks(doc: dict[str, Any], kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, body) of every one-label block of a kind: variable, output, module, locals entries."""
    for entry in doc.get(kind, []):
        for label, body in entry.items():
            if label != "__is_block__":
                yield label, body


def two_label_blocks(doc: dict[str, Any], kind: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(type, name, body) of every resource or data block."""
    for entry in doc.get(kind, []):
        for type_, named in entry.items():
            for name, body in named.items():
                yield type_, name, body


def strings(node: Any) -> Iterator[str]:
    """Every string in a parsed document, object keys included (a key may be an expression)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def expressions(node: Any) -> Iterator[str]:
    """The inside of every ${...} (prose in descriptions mentioning var.x must not count as a reference)."""
    for text in strings(node):
        start = text.find("${")
        while start != -1:
            depth, i = 0, start + 1
            while i < len(text):
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                if depth == 0:
                    break
                i += 1
            yield text[start + 2:i]
            start = text.find("${", i)


def references(node: Any, pattern: re.Pattern[str]) -> set[tuple[str, ...]]:
    return {match.groups() for expr in expressions(node) for match in pattern.finditer(expr)}


def module_files(directory: Path) -> dict[str, dict[str, Any]]:
    return {path.name: parse(path) for path in sorted(directory.glob("*.tf"))}


def declared(directory: Path, kind: str) -> dict[str, dict[str, Any]]:
    return {name: body for doc in module_files(directory).values() for name, body in blocks(doc, kind)}


def locals_of(directory: Path) -> dict[str, Any]:
    return {name: value for doc in module_files(directory).values() for name, value in blocks(doc, "locals")}


def module_calls(directory: Path) -> dict[str, dict[str, Any]]:
    return declared(directory, "module")


# ---------------------------------------------------------------------------------------------------------------
# The modules, statically


def test_the_tree_has_the_expected_modules() -> None:
    # One module per cloud that declares one (a cloud is one module plus its Terraform module, issue 25).
    declared = sorted(spec.terraform_module for spec in clouds.all_specs() if spec.terraform_module)
    assert [str(p.relative_to(ROOT)) for p in MODULE_DIRS] == declared
    assert [p.name for p in ROOT_DIRS] == ["multi-region"]
    assert len(TF_FILES) == 4 * len(TF_DIRS)


@pytest.mark.parametrize("path", TF_FILES, ids=rel)
def test_every_tf_file_parses(path: Path) -> None:
    assert isinstance(parse(path), dict)


@pytest.mark.parametrize("directory", TF_DIRS, ids=rel)
def test_module_layout(directory: Path) -> None:
    for name in LAYOUT:
        assert (directory / name).is_file(), f"{rel(directory)} lacks {name}"
    files = module_files(directory)
    # Each kind of block lives in its conventional file, so a reader knows where to look.
    for name, doc in files.items():
        assert name == "variables.tf" or "variable" not in doc, f"{name} declares variables"
        assert name == "outputs.tf" or "output" not in doc, f"{name} declares outputs"
        assert name == "versions.tf" or "terraform" not in doc, f"{name} has a terraform block"
    readme = (directory / "README.md").read_text(encoding="utf-8")
    for variable in declared(directory, "variable"):
        assert f"`{variable}`" in readme, f"{rel(directory)}/README.md does not document variable {variable}"
    for output in declared(directory, "output"):
        assert f"`{output}`" in readme, f"{rel(directory)}/README.md does not document output {output}"


@pytest.mark.parametrize("directory", TF_DIRS, ids=rel)
def test_versions_pin_terraform_and_providers(directory: Path) -> None:
    (settings,) = parse(directory / "versions.tf")["terraform"]
    assert settings["required_version"] == ">= 1.5"
    (providers,) = settings["required_providers"]
    sources = {name: spec["source"] for name, spec in providers.items() if name != "__is_block__"}
    versions = {name: spec["version"] for name, spec in providers.items() if name != "__is_block__"}
    assert set(sources.values()) <= {"hashicorp/aws", "hashicorp/google"}
    assert set(versions.values()) == {"~> 5.0"}


@pytest.mark.parametrize("directory", MODULE_DIRS, ids=rel)
def test_reusable_modules_configure_no_provider(directory: Path) -> None:
    # A provider block inside a module would stop the root from handing it a per-region alias.
    assert all("provider" not in doc for doc in module_files(directory).values())


@pytest.mark.parametrize("directory", TF_DIRS, ids=rel)
def test_every_referenced_variable_is_declared_in_variables_tf(directory: Path) -> None:
    names = {name for name, _ in blocks(parse(directory / "variables.tf"), "variable")}
    used = {name for doc in module_files(directory).values() for (name,) in references(doc, VAR_RE)}
    assert used - names == set()


@pytest.mark.parametrize("directory", TF_DIRS, ids=rel)
def test_every_declared_variable_is_used(directory: Path) -> None:
    # A variable's own validation block does not count: it would be read by nothing else.
    used = {name for file, doc in module_files(directory).items() if file != "variables.tf"
            for (name,) in references(doc, VAR_RE)}
    assert set(declared(directory, "variable")) - used == set()


@pytest.mark.parametrize("directory", TF_DIRS, ids=rel)
def test_every_variable_has_a_description_and_a_type(directory: Path) -> None:
    variables = declared(directory, "variable")
    assert variables
    # Quoted type constraints ("string") are pre-0.12 syntax that Terraform now rejects; with quotes stripped
    # python-hcl2 would render them exactly like the bare keyword, so this check reads the unstripped parse.
    raw = {name: body for name, body in blocks(parse_raw(directory / "variables.tf"), "variable")}
    for name, body in variables.items():
        assert isinstance(body.get("description"), str) and len(body["description"]) > 10, name
        assert isinstance(body.get("type"), str) and body["type"], name
        raw_type = raw[f'"{name}"']["type"]
        assert not raw_type.startswith('"'), f"{name}: quoted type {raw_type}"


@pytest.mark.parametrize("directory", TF_DIRS, ids=rel)
def test_every_output_is_documented(directory: Path) -> None:
    outputs = declared(directory, "output")
    assert outputs
    for name, body in outputs.items():
        assert isinstance(body.get("description"), str) and len(body["description"]) > 10, name
        assert "value" in body, name


@pytest.mark.parametrize("directory", TF_DIRS, ids=rel)
def test_locals_resources_and_data_sources_referenced_exist(directory: Path) -> None:
    files = module_files(directory)
    defined_locals = set(locals_of(directory))
    used_locals = {name for doc in files.values() for (name,) in references(doc, LOCAL_RE)}
    assert used_locals - defined_locals == set(), "undefined locals"
    assert defined_locals - used_locals == set(), "unused locals"
    resources = {(t, n) for doc in files.values() for t, n, _ in two_label_blocks(doc, "resource")}
    data = {(t, n) for doc in files.values() for t, n, _ in two_label_blocks(doc, "data")}
    assert {ref for doc in files.values() for ref in references(doc, RESOURCE_RE)} - resources == set()
    assert {ref for doc in files.values() for ref in references(doc, DATA_RE)} - data == set()


@pytest.mark.parametrize("directory", ROOT_DIRS, ids=rel)
def test_module_sources_exist(directory: Path) -> None:
    calls = module_calls(directory)
    assert calls
    for name, call in calls.items():
        source = call["source"]
        assert source.startswith("../"), f"module {name}: expected a local path, got {source}"
        target = (directory / source).resolve()
        assert target.is_dir() and target in MODULE_DIRS, f"module {name}: {source} is not a module here"


@pytest.mark.parametrize("directory", ROOT_DIRS, ids=rel)
def test_module_outputs_referenced_exist(directory: Path) -> None:
    calls = module_calls(directory)
    refs = {ref for doc in module_files(directory).values() for ref in references(doc, MODULE_RE)}
    assert refs
    for module, output in sorted(refs):
        assert module in calls, f"module.{module} is not declared"
        outputs = {name for name, _ in blocks(parse((directory / calls[module]["source"]) / "outputs.tf"), "output")}
        assert output in outputs, f"module.{module}.{output}: {calls[module]['source']} has no such output"


@pytest.mark.parametrize("directory", ROOT_DIRS, ids=rel)
def test_module_arguments_match_the_module_variables(directory: Path) -> None:
    meta = {"source", "providers", "version", "count", "for_each", "depends_on", "__is_block__"}
    for name, call in module_calls(directory).items():
        variables = declared((directory / call["source"]).resolve(), "variable")
        arguments = set(call) - meta
        assert arguments - set(variables) == set(), f"module {name}: unknown arguments"
        required = {v for v, body in variables.items() if "default" not in body}
        assert required - arguments == set(), f"module {name}: required variables not set"


def aws_policy_statements() -> list[dict[str, Any]]:
    doc = parse(TERRAFORM / "modules" / "aws-gpu-region" / "main.tf")
    (policy,) = [body for t, n, body in two_label_blocks(doc, "data")
                 if (t, n) == ("aws_iam_policy_document", "geosched")]
    statements: list[dict[str, Any]] = policy["statement"]
    return statements


def test_iam_policy_never_grants_every_action() -> None:
    statements = aws_policy_statements()
    assert len(statements) >= 5
    for statement in statements:
        actions = statement["actions"]
        assert isinstance(actions, list) and actions, statement["sid"]
        for action in actions:
            # Neither "*" nor a whole service ("ec2:*"); explicit actions only.
            assert re.fullmatch(r"[a-z0-9]+:[A-Z][A-Za-z]+", action), f"{statement['sid']}: {action}"
        assert statement.get("effect", "Allow") == "Allow"
        assert "not_actions" not in statement and "not_resources" not in statement


def test_iam_policy_uses_resource_star_only_for_describe() -> None:
    for statement in aws_policy_statements():
        resources = statement["resources"]
        if resources == ["*"] or "*" in resources:
            assert all(a.startswith("ec2:Describe") for a in statement["actions"]), statement["sid"]
            # Still confined: to the module's region.
            conditions = {c["variable"] for c in statement.get("condition", [])}
            assert "aws:RequestedRegion" in conditions


def test_iam_policy_covers_what_geosched_does() -> None:
    by_action: dict[str, list[dict[str, Any]]] = {}
    for statement in aws_policy_statements():
        for action in statement["actions"]:
            by_action.setdefault(action, []).append(statement)
    for needed in ("ec2:DescribeInstances", "ec2:DescribeSpotPriceHistory", "ec2:RunInstances", "ec2:CreateTags",
                   "ec2:TerminateInstances", "ssm:GetParameter", "ec2:DescribeRegions",
                   "ec2:DescribeInstanceTypeOfferings", "servicequotas:GetServiceQuota"):
        assert needed in by_action, needed
    (terminate,) = by_action["ec2:TerminateInstances"]
    assert [c["variable"] for c in terminate["condition"]] == ["ec2:ResourceTag/${local.owner_tag_key}"]
    (create_tags,) = by_action["ec2:CreateTags"]
    assert [(c["variable"], c["values"]) for c in create_tags["condition"]] == [("ec2:CreateAction", ["RunInstances"])]
    tagged = [s for s in by_action["ec2:RunInstances"] if any("instance/*" in r for r in s["resources"])]
    assert [c["variable"] for s in tagged for c in s["condition"]] == ["aws:RequestTag/${local.owner_tag_key}"]
    assert locals_of(TERRAFORM / "modules" / "aws-gpu-region")["owner_tag_key"] == "geosched-owner"


def test_gcp_role_permissions_are_explicit_and_narrow() -> None:
    permissions = locals_of(TERRAFORM / "modules" / "gcp-gpu-region")["geosched_permissions"]
    assert permissions == sorted(set(permissions))
    for permission in permissions:
        assert re.fullmatch(r"compute\.[a-zA-Z]+\.[a-zA-Z]+", permission), permission
    for needed in ("compute.instances.create", "compute.instances.delete", "compute.instances.get",
                   "compute.instances.list", "compute.instances.setLabels", "compute.instances.setMetadata",
                   "compute.zoneOperations.get", "compute.machineTypes.list", "compute.acceleratorTypes.list"):
        assert needed in permissions
    # Nothing that administers the network or IAM.
    assert not [p for p in permissions if re.search(r"firewalls|(?<!sub)networks\.|IamPolicy|serviceAccounts", p)]
    assert locals_of(TERRAFORM / "modules" / "gcp-gpu-region")["node_roles"] == [
        "roles/logging.logWriter", "roles/monitoring.metricWriter"]


def _variable_block(directory: Path, name: str) -> str:
    """A variable's block as written in the module's variables.tf (a top-level block ends at a `}` line)."""
    text = (directory / "variables.tf").read_text()
    match = re.search(rf'^variable "{name}" {{\n.*?^}}\n', text, re.S | re.M)
    assert match, (directory, name)
    return match.group(0)


@pytest.mark.skipif(shutil.which("terraform") is None, reason="needs the terraform binary (no providers, no network)")
@pytest.mark.parametrize("module", ["aws-gpu-region", "gcp-gpu-region"])
def test_peer_cidr_blocks_refuse_networks_wider_than_a_slash_8(tmp_path: Path, module: str) -> None:
    """All traffic on every port is allowed from `peer_cidr_blocks` (issue 19 item 9): 0.0.0.0/0 there opened
    every port of the GPU nodes to the internet. The module's own validation, evaluated by terraform itself
    (`plan` of the variable alone needs neither `init` nor a provider)."""
    (tmp_path / "main.tf").write_text(_variable_block(TERRAFORM / "modules" / module, "peer_cidr_blocks"))

    def plan(value: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["terraform", "plan", "-input=false", "-no-color", f"-var=peer_cidr_blocks={value}"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "TF_CLI_CONFIG_FILE": os.devnull, "CHECKPOINT_DISABLE": "1"})

    for wide in ('["0.0.0.0/0"]', '["198.51.100.0/24", "64.0.0.0/2"]'):
        refused = plan(wide)
        assert refused.returncode != 0 and "wider than /8" in refused.stderr, (wide, refused.stderr)
    for fine in ("[]", '["10.41.0.0/16", "198.51.100.7/32"]', '["10.0.0.0/8"]'):
        accepted = plan(fine)
        assert accepted.returncode == 0, (fine, accepted.stderr)


def test_aws_public_addresses_are_a_choice_defaulting_to_on() -> None:
    """Every AWS node got a public address, hard-coded (issue 19 item 9): a site that runs geosched inside the
    VPC (a bastion, a VPN) turns them off with `public_ips = false`; geosched's launch asks for none itself."""
    module = TERRAFORM / "modules" / "aws-gpu-region"
    subnets = [body for type_, _, body in two_label_blocks(parse(module / "main.tf"), "resource")
               if type_ == "aws_subnet"]
    assert [s["map_public_ip_on_launch"] for s in subnets] == ["${var.public_ips}"]
    variable = declared(module, "variable")["public_ips"]
    assert (variable["type"], variable["default"]) == ("bool", True)


# ---------------------------------------------------------------------------------------------------------------
# The recorded output against the example that would print it


def fixture() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


def hcl_value_matches(hcl: Any, recorded: Any, calls: dict[str, dict[str, Any]], path: str) -> None:
    """Walk the example's output expression beside the recorded value: same keys, and module outputs of the shape
    the module's arguments imply (zones as keys, lists of zones)."""
    if isinstance(hcl, dict):
        assert isinstance(recorded, dict), path
        keys = {}
        for key in hcl:
            match = re.fullmatch(rf"\$\{{\(module\.({NAME})\.region\)\}}", key)
            keys[calls[match.group(1)]["region"] if match else key] = hcl[key]
        assert sorted(keys) == sorted(recorded), path
        for key, value in keys.items():
            hcl_value_matches(value, recorded[key], calls, f"{path}.{key}")
        return
    if isinstance(hcl, int):
        assert recorded == hcl, path
        return
    match = re.fullmatch(rf"\$\{{module\.({NAME})\.({NAME})\}}", hcl)
    assert match, f"{path}: unexpected expression {hcl}"
    call, output = calls[match.group(1)], match.group(2)
    if output == "subnet_ids":
        assert list(recorded) == sorted(call["availability_zone_ids"]), path
    elif output == "placement_group_names":
        zones = sorted(call["availability_zone_ids"]) if call["create_placement_groups"] else []
        assert list(recorded) == zones, path
    elif output == "zones":
        assert recorded == call["zones"], path
    elif output == "placement_policy":
        assert (recorded is None) == (call.get("create_placement_policy") is False), path
    elif output in ("launch_tags", "launch_labels"):
        assert list(recorded) == ["geosched-owner"], path
    elif output == "project":
        assert isinstance(recorded, str) and call["project"] == "${var.gcp_project}", path
    elif output == "public_ips":
        assert recorded is call.get("public_ips", True), path
    else:
        assert isinstance(recorded, str), path


def type_matches(type_: Any, value: Any) -> bool:
    """Terraform's JSON type encoding ("string", ["object", {...}], ["list", T], ...) against a value."""
    if value is None:
        return True
    if isinstance(type_, str):
        checks: dict[str, Callable[[Any], bool]] = {
            "string": lambda v: isinstance(v, str),
            "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
            "bool": lambda v: isinstance(v, bool),
        }
        return checks[type_](value)
    kind, inner = type_
    if kind == "object":
        return isinstance(value, dict) and set(inner) == set(value) and all(
            type_matches(inner[k], value[k]) for k in inner)
    if kind in ("list", "set"):
        return isinstance(value, list) and all(type_matches(inner, v) for v in value)
    if kind == "map":
        return isinstance(value, dict) and all(type_matches(inner, v) for v in value.values())
    if kind == "tuple":
        return isinstance(value, list) and len(inner) == len(value) and all(map(type_matches, inner, value))
    return False


def test_recorded_output_has_exactly_the_example_outputs() -> None:
    assert sorted(fixture()) == sorted(declared(EXAMPLE, "output"))


def test_recorded_output_is_shaped_like_terraform_prints_it() -> None:
    # `terraform output -json` sorts keys at every level and indents by two spaces.
    text = FIXTURE.read_text(encoding="utf-8")
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    for name, envelope in fixture().items():
        assert list(envelope) == ["sensitive", "type", "value"], name
        assert envelope["sensitive"] is False
        assert type_matches(envelope["type"], envelope["value"]), name


def test_recorded_geosched_value_has_the_keys_the_example_output_builds() -> None:
    (value_expr,) = [body["value"] for name, body in declared(EXAMPLE, "output").items() if name == OUTPUT_NAME]
    hcl_value_matches(value_expr, fixture()[OUTPUT_NAME]["value"], module_calls(EXAMPLE), OUTPUT_NAME)


def test_reader_field_names_match_the_example_output() -> None:
    from geosched.providers import launchsettings, terraform
    from geosched.providers.launchsettings import aws, gcp

    (value_expr,) = [body["value"] for name, body in declared(EXAMPLE, "output").items() if name == OUTPUT_NAME]
    assert sorted(value_expr) == sorted(["schema_version", *(c.name for c in launchsettings.networks())])
    for provider, fields in (("aws", aws.AWS_FIELDS), ("gcp", gcp.GCP_FIELDS)):
        for region in value_expr[provider].values():
            assert sorted(region) == sorted(fields), provider
    assert value_expr["schema_version"] == terraform.SCHEMA_VERSION


# ---------------------------------------------------------------------------------------------------------------
# The reader


def test_reader_accepts_the_recorded_output() -> None:
    config = load_terraform_output(FIXTURE)
    assert isinstance(config, NetworkConfig)
    assert config.source == str(FIXTURE)
    assert not config.sensitive
    assert list(config.regions("aws")) == ["us-east-1", "us-west-2"]
    assert list(config.regions("gcp")) == ["europe-west4", "us-central1"]
    east = config.regions("aws")["us-east-1"]
    assert isinstance(east, AwsRegionNetwork)
    assert east.zones == ("use1-az1", "use1-az2", "use1-az4", "use1-az6")
    assert east.subnet_for("use1-az4") == "subnet-0c33d44e55f660771"
    assert east.subnet_for("use1-az3") is None
    assert east.placement_group_for("use1-az1") == "geosched-use1-az1"
    assert east.security_group_id == "sg-0c2f4e6a8b0d1f357"
    assert east.key_name == "geosched-us-east-1"
    assert dict(east.launch_tags) == {"geosched-owner": "geosched"}
    central = config.regions("gcp")["us-central1"]
    assert isinstance(central, GcpRegionNetwork)
    assert central.zones == ("us-central1-a", "us-central1-b", "us-central1-c")
    assert central.subnet_for("us-central1-b") == central.subnetwork
    assert central.subnet_for("us-central1-f") is None
    assert central.firewall_tag == "geosched-node"
    assert central.placement_policy is not None and central.placement_policy.endswith("/geosched-us-central1-compact")
    assert central.service_account_email == "geosched-nodes@geosched-demo.iam.gserviceaccount.com"
    assert config.for_zone("aws", "usw2-az3") is config.regions("aws")["us-west-2"]
    assert config.for_zone("gcp", "europe-west4-b") is config.regions("gcp")["europe-west4"]
    assert config.for_zone("gcp", "use1-az1") is None
    assert config.region("aws", "us-west-2") is config.regions("aws")["us-west-2"]
    assert config.region("onprem", "zurich") is None
    assert len(config.zones()) == 13


def test_network_config_is_immutable() -> None:
    config = load_terraform_output(FIXTURE)
    with pytest.raises(AttributeError):
        config.regions("aws")["us-east-1"].vpc_id = "vpc-0"  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.regions("aws")["us-east-1"].subnet_ids["use1-az9"] = "subnet-0"  # type: ignore[index]
    with pytest.raises(TypeError):
        config.regions("gcp")["x"] = config.regions("gcp")["us-central1"]  # type: ignore[index]


def test_reader_takes_stdin_text_and_utf16_files(tmp_path: Path) -> None:
    text = FIXTURE.read_text(encoding="utf-8")
    assert read_terraform_output(text).source == "<stdin>"
    # PowerShell's `>` writes UTF-16 with a byte-order mark.
    utf16 = tmp_path / "out.json"
    utf16.write_bytes(codecs.BOM_UTF16_LE + text.encode("utf-16-le"))
    assert load_terraform_output(utf16).regions("aws") == load_terraform_output(FIXTURE).regions("aws")


def test_null_placement_policy_and_empty_placement_groups_are_fine() -> None:
    data = fixture()
    value = data[OUTPUT_NAME]["value"]
    value["gcp"]["us-central1"]["placement_policy"] = None
    value["aws"]["us-east-1"]["placement_group_names"] = {}
    config = parse_terraform_output(data, "out.json")
    assert config.regions("gcp")["us-central1"].placement_policy is None
    assert config.regions("aws")["us-east-1"].placement_group_for("use1-az1") is None


def test_a_cloud_without_its_section_has_no_regions() -> None:
    """An output of modules older than a cloud geosched has learnt (or of a root module using one cloud) lacks that
    cloud's section: it reads, with no region of that cloud, instead of failing every existing output file."""
    data = fixture()
    del data[OUTPUT_NAME]["value"]["gcp"]
    config = parse_terraform_output(data, "out.json")
    assert not config.regions("gcp") and "us-east-1" in config.regions("aws")


def test_gcp_public_ips_is_read_and_defaults_to_on_when_an_older_module_printed_none() -> None:
    """Issue 19 item 9: a GCP launch without an external address is the module's `public_ips = false`. An output
    of the module before the choice existed has no such key: its VMs always had an address, so absent means on."""
    data = fixture()
    value = data[OUTPUT_NAME]["value"]
    assert parse_terraform_output(data, "out.json").regions("gcp")["us-central1"].public_ips is True
    value["gcp"]["us-central1"]["public_ips"] = False
    assert parse_terraform_output(data, "out.json").regions("gcp")["us-central1"].public_ips is False
    del value["gcp"]["us-central1"]["public_ips"]
    assert parse_terraform_output(data, "out.json").regions("gcp")["us-central1"].public_ips is True
    for bad in ("no", None, 0):
        value["gcp"]["us-central1"]["public_ips"] = bad
        with pytest.raises(InputError) as caught:
            parse_terraform_output(data, "out.json")
        assert caught.value.field == "geosched.value.gcp.us-central1.public_ips", bad
    variable = declared(TERRAFORM / "modules" / "gcp-gpu-region", "variable")["public_ips"]
    assert (variable["type"], variable["default"]) == ("bool", True)


@pytest.mark.parametrize("where", ["aws", "gcp"])
def test_a_region_key_with_a_trailing_newline_is_refused(where: str) -> None:
    # `$` matches before a final newline: "us-east-1\n" passed as a region (found by this stop's audit).
    data = fixture()
    regions = data[OUTPUT_NAME]["value"][where]
    name = next(iter(regions))
    regions[name + "\n"] = regions.pop(name)
    with pytest.raises(InputError) as info:
        parse_terraform_output(data, "out.json")
    assert "\n" not in str(info.value) and "region" in str(info.value)


def test_one_provider_alone_is_fine() -> None:
    data = fixture()
    data[OUTPUT_NAME]["value"]["gcp"] = {}
    assert list(parse_terraform_output(data, "out.json").regions("aws")) == ["us-east-1", "us-west-2"]


V = f"{OUTPUT_NAME}.value"
EAST = f"{V}.aws.us-east-1"
CENTRAL = f"{V}.gcp.us-central1"


def setter(*path: str | int, value: Any = None, delete: bool = False) -> Callable[[dict[str, Any]], None]:
    def apply(data: dict[str, Any]) -> None:
        node: Any = data
        for key in path[:-1]:
            node = node[key]
        if delete:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return apply


def v(*path: str | int) -> tuple[str | int, ...]:
    return (OUTPUT_NAME, "value", *path)


BAD_VALUES: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("subnets-list", setter(*v("aws", "us-east-1", "subnet_ids"), value=["subnet-0a11b22c33d44e55f"]),
     f"{EAST}.subnet_ids: expected a mapping of zone to subnet id, got a list"),
    ("subnets-empty", setter(*v("aws", "us-east-1", "subnet_ids"), value={}),
     f"{EAST}.subnet_ids: expected at least one zone"),
    ("subnets-zone-name", setter(*v("aws", "us-east-1", "subnet_ids"), value={"us-east-1a": "subnet-0a11b22c"}),
     f"{EAST}.subnet_ids.us-east-1a: expected an availability-zone ID such as use1-az1, got the key 'us-east-1a'"),
    ("subnet-not-subnet", setter(*v("aws", "us-east-1", "subnet_ids", "use1-az1"), value="sg-0c2f4e6a8b0d1f357"),
     f"{EAST}.subnet_ids.use1-az1: expected a subnet id (subnet-...), got 'sg-0c2f4e6a8b0d1f357'"),
    ("subnet-number", setter(*v("aws", "us-east-1", "subnet_ids", "use1-az1"), value=7),
     f"{EAST}.subnet_ids.use1-az1: expected a subnet id (subnet-...), got a number (7)"),
    ("vpc-missing", setter(*v("aws", "us-east-1", "vpc_id"), delete=True), f"{EAST}.vpc_id: required"),
    ("vpc-null", setter(*v("aws", "us-east-1", "vpc_id"), value=None), f"{EAST}.vpc_id: required"),
    ("vpc-bad", setter(*v("aws", "us-east-1", "vpc_id"), value="vpc-xyz"),
     f"{EAST}.vpc_id: expected a VPC id (vpc-...), got 'vpc-xyz'"),
    ("sg-bad", setter(*v("aws", "us-east-1", "security_group_id"), value="geosched-nodes"),
     f"{EAST}.security_group_id: expected a security group id (sg-...), got 'geosched-nodes'"),
    ("key-empty", setter(*v("aws", "us-east-1", "key_name"), value=""),
     f"{EAST}.key_name: expected an EC2 key pair name, got ''"),
    ("aws-unknown-field", setter(*v("aws", "us-east-1", "subnets"), value={}),
     f"{EAST}.subnets: unknown field (known: vpc_id, subnet_ids, security_group_id, key_name, "
     "placement_group_names, launch_tags)"),
    ("aws-region-not-object", setter(*v("aws", "us-east-1"), value="vpc-0e1d2c3b4a5968778"),
     f"{EAST}: expected an object, got a string ('vpc-0e1d2c3b4a5968778')"),
    ("aws-region-bad", setter(*v("aws", "US East"), value={}),
     f"{V}.aws.US East: expected an AWS region name such as us-east-1, got the key 'US East'"),
    ("placement-zone-without-subnet", setter(*v("aws", "us-east-1", "placement_group_names", "use1-az3"),
                                             value="geosched-use1-az3"),
     f"{EAST}.placement_group_names.use1-az3: zone has no subnet in subnet_ids"),
    ("placement-list", setter(*v("aws", "us-east-1", "placement_group_names"), value=[]),
     f"{EAST}.placement_group_names: expected a mapping of zone to placement group name, got a list"),
    ("tags-no-owner", setter(*v("aws", "us-east-1", "launch_tags"), value={"team": "ml"}),
     f"{EAST}.launch_tags: missing the geosched-owner tag the IAM policy requires at launch"),
    ("zone-in-two-regions", setter(*v("aws", "us-west-2", "subnet_ids", "use1-az1"), value="subnet-0a11b22c"),
     f"{V}.aws.us-west-2: zone 'use1-az1' is also listed under aws.us-east-1"),
    ("gcp-subnetwork-elsewhere", setter(*v("gcp", "us-central1", "subnetwork"),
                                        value="https://www.googleapis.com/compute/v1/projects/geosched-demo/regions/"
                                              "europe-west4/subnetworks/geosched-europe-west4"),
     f"{CENTRAL}.subnetwork: points into region europe-west4, not the region it is listed under"),
    ("gcp-subnetwork-name", setter(*v("gcp", "us-central1", "subnetwork"), value="geosched-us-central1"),
     f"{CENTRAL}.subnetwork: expected a subnetwork self link"),
    ("gcp-network-bad", setter(*v("gcp", "us-central1", "network"), value="projects/p/global/networks/n"),
     f"{CENTRAL}.network: expected a network self link"),
    ("gcp-zone-elsewhere", setter(*v("gcp", "us-central1", "zones", 1), value="us-east1-b"),
     f"{CENTRAL}.zones[1]: zone 'us-east1-b' is not in the region it is listed under"),
    ("gcp-zone-twice", setter(*v("gcp", "us-central1", "zones", 1), value="us-central1-a"),
     f"{CENTRAL}.zones[1]: zone 'us-central1-a' listed twice"),
    ("gcp-zones-empty", setter(*v("gcp", "us-central1", "zones"), value=[]),
     f"{CENTRAL}.zones: expected a non-empty list of zones, got a list"),
    ("gcp-zones-string", setter(*v("gcp", "us-central1", "zones"), value="us-central1-a"),
     f"{CENTRAL}.zones: expected a non-empty list of zones, got a string ('us-central1-a')"),
    ("gcp-policy-number", setter(*v("gcp", "us-central1", "placement_policy"), value=1),
     f"{CENTRAL}.placement_policy: expected null or a resource policy self link"),
    ("gcp-policy-missing", setter(*v("gcp", "us-central1", "placement_policy"), delete=True),
     f"{CENTRAL}.placement_policy: required"),
    ("gcp-tag-upper", setter(*v("gcp", "us-central1", "firewall_tag"), value="GeoSched"),
     f"{CENTRAL}.firewall_tag: expected a GCP network tag, got 'GeoSched'"),
    ("gcp-sa-bad", setter(*v("gcp", "us-central1", "service_account_email"), value="nodes"),
     f"{CENTRAL}.service_account_email: expected a service account email (...gserviceaccount.com), got 'nodes'"),
    ("gcp-project-bad", setter(*v("gcp", "us-central1", "project"), value="Geosched Demo"),
     f"{CENTRAL}.project: expected a GCP project ID, got 'Geosched Demo'"),
    ("gcp-labels-no-owner", setter(*v("gcp", "us-central1", "launch_labels"), value={}),
     f"{CENTRAL}.launch_labels: missing the geosched-owner label geosched lists its VMs by"),
    ("gcp-region-bad", setter(*v("gcp", "us-central-1"), value={}),
     f"{V}.gcp.us-central-1: expected a GCP region name such as us-central1, got the key 'us-central-1'"),
    ("gcp-null", setter(*v("gcp"), value=None), f"{V}.gcp: required"),
    ("all-missing", lambda d: [d[OUTPUT_NAME]["value"].pop(c) for c in ("aws", "gcp")],
     f"{V}: no regions: both aws and gcp are empty"),
    ("aws-list", setter(*v("aws"), value=[]),
     f"{V}.aws: expected an object of region name to region settings, got a list"),
    ("no-regions", lambda d: d[OUTPUT_NAME]["value"].update(aws={}, gcp={}),
     f"{V}: no regions: both aws and gcp are empty"),
    ("schema-2", setter(*v("schema_version"), value=2),
     f"{V}.schema_version: unsupported schema version 2 (this geosched reads 1)"),
    ("schema-string", setter(*v("schema_version"), value="1"),
     f"{V}.schema_version: expected an integer, got a string ('1')"),
    ("top-unknown", setter(*v("azure"), value={}),
     f"{V}.azure: unknown field (known: schema_version, aws, gcp)"),
    ("value-list", setter(OUTPUT_NAME, "value", value=[]), f"{V}: expected an object, got a list"),
    ("sensitive-string", setter(OUTPUT_NAME, "sensitive", value="no"),
     f"{OUTPUT_NAME}.sensitive: expected true or false, got a string ('no')"),
    ("envelope-no-value", setter(OUTPUT_NAME, "value", delete=True),
     f"{OUTPUT_NAME}: expected an object with sensitive, type and value"),
    ("no-geosched-output", setter(OUTPUT_NAME, delete=True),
     f"{OUTPUT_NAME}: no output named 'geosched' (outputs: aws_iam_policy_arns, gcp_geosched_role)"),
]


@pytest.mark.parametrize(("mutate", "expected"), [(m, e) for _, m, e in BAD_VALUES], ids=[i for i, _, _ in BAD_VALUES])
def test_bad_output_gives_one_line_with_file_field_and_reason(mutate: Callable[[dict[str, Any]], None],
                                                             expected: str) -> None:
    data = fixture()
    mutate(data)
    with pytest.raises(InputError) as info:
        parse_terraform_output(data, "out.json")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"out.json: {expected}"), message


@pytest.mark.parametrize(("text", "expected"), [
    ("", "<stdin>: empty: expected the JSON printed by `terraform output -json`"),
    ("  \n", "<stdin>: empty"),
    ('{"geosched": {"value": }}', "<stdin>: line 1: not valid JSON: Expecting value"),
    ("{\n\n  oops\n}", "<stdin>: line 3: not valid JSON"),
    ("[]", "<stdin>: (document): expected the object `terraform output -json` prints, got a list"),
    ("{}", "<stdin>: geosched: no output named 'geosched': the state has no outputs (has `terraform apply` run?)"),
    ('{"schema_version": 1, "aws": {}, "gcp": {}}',
     "<stdin>: geosched: no output named 'geosched'; this looks like the bare value of `terraform output -json "
     "geosched`: give the whole `terraform output -json` instead"),
])
def test_bad_text(text: str, expected: str) -> None:
    with pytest.raises(InputError) as info:
        read_terraform_output(text)
    assert "\n" not in str(info.value)
    assert str(info.value).startswith(expected)


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.json: no such file$"):
        load_terraform_output(tmp_path / "nope.json")
    binary = tmp_path / "state.bin"
    binary.write_bytes(b"\x1f\x8b\x08\x00garbage\x80")
    with pytest.raises(InputError, match=r"state\.bin: not UTF-8 or UTF-16 text"):
        load_terraform_output(binary)


def test_another_output_name_can_be_read() -> None:
    data = fixture()
    data["gpu_network"] = data.pop(OUTPUT_NAME)
    assert parse_terraform_output(data, "out.json", output="gpu_network").regions("aws")
    with pytest.raises(InputError, match="aws_iam_policy_arns, gcp_geosched_role, gpu_network"):
        parse_terraform_output(data, "out.json")


SECRET = "s3cr3t-value-xyz"


@pytest.mark.parametrize(("path", "value"), [
    (v("aws", "us-east-1", "subnet_ids"), {SECRET: "subnet-0a11b22c"}),
    (v("aws", "us-east-1", "subnet_ids", "use1-az1"), SECRET),
    (v("aws", "us-east-1", "vpc_id"), SECRET),
    (v("aws", "us-east-1", "launch_tags"), {"x": SECRET}),
    (v("aws", "us-east-1", SECRET), 1),
    (v("aws", SECRET), {}),
    (v("gcp", "us-central1", "zones"), [SECRET]),
    (v("gcp", "us-central1", "zones"), SECRET),
    (v("gcp", "us-central1", "network"), f"https://www.googleapis.com/{SECRET}"),
    (v("gcp", "us-central1", "subnetwork"), "https://www.googleapis.com/compute/v1/projects/geosched-demo/regions/"
                                            "asia-east1/subnetworks/a"),
    (v("schema_version"), SECRET),
    (v("aws", "us-west-2", "subnet_ids", "use1-az1"), "subnet-0a11b22c"),
])
def test_sensitive_values_never_appear_in_errors(path: tuple[str | int, ...], value: Any) -> None:
    data = fixture()
    data[OUTPUT_NAME]["sensitive"] = True
    setter(*path, value=value)(data)
    with pytest.raises(InputError) as info:
        parse_terraform_output(data, "out.json")
    message = str(info.value)
    assert "\n" not in message
    # Example values in reasons ("such as use1-az1") are geosched's words, so only these must not appear.
    for leaked in (SECRET, "asia-east1", "subnet-0a11b22c", "us-west-2", "usw2-az", "geosched-demo"):
        assert leaked not in message, message
    assert message.startswith(f"out.json: {OUTPUT_NAME}.value")


def test_sensitive_paths_name_keys_by_position() -> None:
    data = fixture()
    data[OUTPUT_NAME]["sensitive"] = True
    data[OUTPUT_NAME]["value"]["aws"]["us-west-2"]["subnet_ids"]["usw2-az2"] = "nope"
    with pytest.raises(InputError) as info:
        parse_terraform_output(data, "out.json")
    assert str(info.value) == ("out.json: geosched.value.aws.<key #2>.subnet_ids.<key #2>: expected a subnet id "
                               "(subnet-...), got another string")
    ok = fixture()
    ok[OUTPUT_NAME]["sensitive"] = True
    assert parse_terraform_output(ok, "out.json").sensitive


def test_fixture_is_not_mutated_by_reading() -> None:
    data = fixture()
    before = copy.deepcopy(data)
    parse_terraform_output(data, "out.json")
    assert data == before
