"""The settings (issue 14): one table, a config file fed to click, flag > environment > file > default, a bad file
is one line naming the file and the key (exit 2), `geosched config show | path`, docs/settings.md current."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from geosched import settings
from geosched.core.errors import InputError
from geosched.files import gate
from geosched.providers import config as provider_config
from geosched.store.db import default_home
from tests.test_cli import JOBS, ROOT

JOB = JOBS / "train-8.yaml"


def run(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "geosched", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A process environment with no GEOSCHED_* variable but a home and a config file of the test's own."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GEOSCHED_")}
    return {**clean, "GEOSCHED_HOME": str(tmp_path / "home"), "GEOSCHED_CONFIG": str(tmp_path / "config.yaml"),
            "COLUMNS": "200"}


def weights_of(result: subprocess.CompletedProcess[str]) -> dict[str, float]:
    assert result.returncode == 0, result.stderr
    doc: dict[str, float] = json.loads(result.stdout)["weights"]
    return doc


def test_flag_beats_environment_beats_file_beats_default(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("weights:\n  cost: 0.3\n  carbon: 0.2\n")
    place = ("place", JOB, "-o", "json")
    assert weights_of(run(*place, env=env)) == {"network": 1.0, "cost": 0.3, "carbon": 0.2}
    env["GEOSCHED_COST_WEIGHT"] = "0.4"
    assert weights_of(run(*place, env=env))["cost"] == 0.4
    assert weights_of(run(*place, "--cost-weight", "0.5", env=env))["cost"] == 0.5


def test_the_config_file_sets_the_output_where_the_command_offers_it(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("output: yaml\npolicy: spread\n")
    placed = run("place", JOB, env=env)
    assert placed.returncode == 0 and "policy: spread" in placed.stdout.splitlines(), placed.stderr
    # csv is offered by catalog, not by place (geosched/console/output.py): place keeps its table rather than failing.
    (tmp_path / "config.yaml").write_text("output: csv\npolicy: spread\n")
    listed = run("catalog", "--limit", "1", env=env)
    assert listed.returncode == 0 and listed.stdout.startswith("provider,region,zone,"), listed.stderr
    placed = run("place", JOB, env=env)
    assert placed.returncode == 0 and "by spread" in placed.stdout, placed.stderr


@pytest.mark.parametrize(("content", "where", "why"), [
    ("weights:\n  cost: -1\n", "weights.cost", "expected a finite number >= 0"),
    ("weights:\n  cost: .nan\n", "weights.cost", "expected a finite number >= 0"),
    ("outptu: json\n", "outptu", "did you mean 'output'"),
    ("weights: 3\n", "weights", "expected a mapping"),
    ("policy: fastest\n", "policy", "expected one of"),
    ("output: xml\n", "output", "expected one of"),
    ("admin_cidrs: [203.0.113.7/24]\n", "admin_cidrs", "did you mean 203.0.113.0/24"),
    ("input_limits: {trace: lots}\n", "input_limits", "whole number of MiB"),
    ("- a list\n", "", "expected a mapping of settings"),
    ("a: [\n", "line 2", "not valid YAML"),
])
def test_a_bad_config_file_is_one_line_naming_file_and_key(env: dict[str, str], tmp_path: Path, content: str,
                                                           where: str, why: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(content)
    result = run("place", JOB, env=env)
    assert result.returncode == 2, result.stdout
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"error: {path}: {where}") and why in result.stderr, result.stderr


def test_a_named_config_file_must_exist_the_default_one_need_not(env: dict[str, str], tmp_path: Path) -> None:
    result = run("config", "path", env=env)
    assert result.returncode == 2 and "no such file (named by GEOSCHED_CONFIG)" in result.stderr
    del env["GEOSCHED_CONFIG"]
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    result = run("config", "path", env=env)
    assert result.returncode == 0 and result.stdout.strip() == str(tmp_path / "xdg" / "geosched" / "config.yaml")


def test_help_reads_no_config_file(env: dict[str, str], tmp_path: Path) -> None:
    """`-h` is handled before the settings are read (their declaration imports pydantic): a bad file does not stop
    the help, and the commands still refuse it."""
    (tmp_path / "config.yaml").write_text("outptu: json\n")
    for args in (("-h",), ("place", "-h"), ("provision", "--help")):
        shown = run(*args, env=env)
        assert shown.returncode == 0 and "Usage" in shown.stdout, (args, shown.stderr)
    assert run("place", JOB, env=env).returncode == 2


def test_the_config_file_goes_through_the_input_gate(env: dict[str, str], tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "config.yaml")
    result = run("policies", env=env)
    assert result.returncode == 2 and "not a regular file (a FIFO)" in result.stderr


def test_config_show_says_where_each_value_came_from(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("weights: {cost: 0.3}\naws: {regions: [us-east-1, us-west-2]}\n")
    env["GEOSCHED_ADMIN_CIDRS"] = "198.51.100.0/24"
    result = run("config", "show", "-o", "json", "--home", tmp_path / "flagged", env=env)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["apiVersion"], doc["kind"], doc["config_file"]) == ("geosched.io/v1alpha1", "Settings",
                                                                    str(tmp_path / "config.yaml"))
    rows = {r["key"]: (r["variable"], r["value"], r["source"]) for r in doc["settings"]}
    assert set(rows) == {s.key for s in settings.SETTINGS}
    assert rows["home"] == ("GEOSCHED_HOME", str(tmp_path / "flagged"), "flag")
    assert rows["output"] == ("GEOSCHED_OUTPUT", "json", "flag")
    assert rows["weights.cost"] == ("GEOSCHED_COST_WEIGHT", 0.3, "file")
    assert rows["aws.regions"] == ("GEOSCHED_AWS_REGIONS", ["us-east-1", "us-west-2"], "file")
    assert rows["admin_cidrs"] == ("GEOSCHED_ADMIN_CIDRS", ["198.51.100.0/24"], "env")
    assert rows["weights.network"] == ("GEOSCHED_NETWORK_WEIGHT", 1.0, "default")
    table = run("config", "show", env=env)
    assert table.returncode == 0 and "weights.cost" in table.stdout and "file" in table.stdout


def test_the_provider_settings_read_the_config_file_for_unset_variables(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("admin_cidrs: 203.0.113.0/24\nssh: {user: ops}\ngcp: {project: p1}\n")
    monkeypatch.setenv(settings.CONFIG_ENV, str(tmp_path / "config.yaml"))
    monkeypatch.setenv(settings.of_cloud("gcp", "project").env, "p2")
    s = provider_config.from_env(settings.environ(), tmp_path)
    assert (s.admin_cidrs, s.ssh_user, s.gcp.project) == (("203.0.113.0/24",), "ops", "p2")


def test_home_and_input_limits_come_through_the_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(f"home: {tmp_path / 'state'}\ninput_limits: {{job: 1}}\n")
    for s in settings.SETTINGS:
        monkeypatch.delenv(s.env, raising=False)
    monkeypatch.setenv(settings.CONFIG_ENV, str(tmp_path / "config.yaml"))
    assert default_home() == tmp_path / "state"
    assert gate.limit_bytes(gate.Kind.JOB) == gate.MIB
    monkeypatch.setenv(settings.INPUT_LIMITS.env, "job=2")
    assert gate.limit_bytes(gate.Kind.JOB) == 2 * gate.MIB
    monkeypatch.setenv(settings.INPUT_LIMITS.env, "job=0")
    with pytest.raises(InputError, match="GEOSCHED_INPUT_LIMITS: job: expected a whole number"):
        gate.limit_bytes(gate.Kind.JOB)


def test_every_geosched_variable_the_code_reads_is_in_the_table() -> None:
    declared = {s.env for s in settings.SETTINGS} | {settings.CONFIG_ENV, gate.ENV_LIMITS}
    assert len(declared) == len(settings.SETTINGS) + 1
    # Variables geosched *sets* in the pods it renders (GEOSCHED_WORKERS, ...) are not settings.
    rendered = {"GEOSCHED_WORKERS", "GEOSCHED_GPUS_PER_WORKER", "GEOSCHED_COORDINATOR"}
    for source in (ROOT / "geosched").rglob("*.py"):
        for name in re.findall(r"\bGEOSCHED_[A-Z_]+\b", source.read_text(encoding="utf-8")):
            assert name in declared | rendered, f"{source}: {name} is not in geosched/settings/__init__.py"
    for source in (ROOT / "geosched").rglob("*.py"):
        if source.name != "settings.py":
            text = source.read_text(encoding="utf-8")
            assert not re.search(r"(environ(\.get)?\(|getenv\()\s*[\"']GEOSCHED_", text), source



def test_provider_settings_parse_their_variables_through_the_table(tmp_path: Path) -> None:
    s = provider_config.from_env({settings.of_cloud("aws", "regions").env: " us-east-1, eu-west-1 ",
                                  settings.SSH_USER.env: "ops"}, tmp_path)
    assert (s.aws.regions, s.ssh_user, s.gcp.project) == (("us-east-1", "eu-west-1"), "ops", None)
    with pytest.raises(InputError, match=r"^GEOSCHED_AWS_REGIONS: expected at least one name"):
        provider_config.from_env({settings.of_cloud("aws", "regions").env: ","}, tmp_path)


def test_the_names_and_the_declaration_agree() -> None:
    """The names (geosched/settings/__init__.py, bound on `-h` without pydantic) and the declaration (settings_model,
    pydantic-settings) hold the same settings: one field per key, read from the key's variable."""
    from geosched.settings import model as settings_model

    fields = settings_model.Values.model_fields
    assert set(fields) == {settings_model.field_name(s.key) for s in settings.SETTINGS}
    for s in settings.SETTINGS:
        info = settings_model.field(s.key)
        assert info.validation_alias == s.env and info.description, s.key
        # A list setting gives its default to an option of several values only (settings.supplies).
        assert s.many == ("tuple" in str(info.annotation) and s.option is not None), s.key


def test_the_declaration_reads_an_environment_mapping_blank_as_unset() -> None:
    from geosched.settings.model import from_variables

    values = from_variables({"GEOSCHED_COST_WEIGHT": "0.4", "GEOSCHED_GCP_PUBLIC_IPS": "no", "GEOSCHED_AWS_AMI": " ",
                             "GEOSCHED_REGIONS": "us-east-1, eu-west-1", "HOME": "/elsewhere"})
    assert (values.weights_cost, values.of_cloud("gcp")["public_ips"], values.of_cloud("aws")["ami"],
            values.regions) == (0.4, False, None, ("us-east-1", "eu-west-1"))
    assert from_variables({}).ssh_user == settings.default_of(settings.SSH_USER) == "geosched"
    with pytest.raises(InputError, match=r"^GEOSCHED_GCP_PUBLIC_IPS: expected yes or no, got a string \('maybe'\)$"):
        from_variables({"GEOSCHED_GCP_PUBLIC_IPS": "maybe"})
