"""Flags mean one thing on every verb (issue 14): one default per weight, `--tf-output` for the Terraform output and
`--trace-format` for simulate's input (their old names deprecated for one release), and a usage error is one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from geosched.cli import clidoc
from geosched.core.models import Weights
from tests.test_cli import DATA, JOBS

WEIGHTS = {"network_weight": Weights().network, "cost_weight": Weights().cost, "carbon_weight": Weights().carbon,
           "zone_tolerance": Weights().zone_tolerance}


def run(*args: str | Path, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GEOSCHED_")}
    config = home / "config.yaml"  # empty: no user's settings
    config.touch()
    return subprocess.run([sys.executable, "-m", "geosched", *map(str, args)], capture_output=True, text=True,
                          env={**clean, "GEOSCHED_HOME": str(home), "GEOSCHED_CONFIG": str(config), "COLUMNS": "200",
                               **env}, timeout=120)


def test_every_weight_has_one_default_on_every_verb() -> None:
    # Before: provision ranked with --cost-weight 1.0, place/submit/simulate with 0.1; the dispatcher had none.
    seen: dict[str, set[tuple[str, float]]] = {name: set() for name in WEIGHTS}
    for path, command, ctx in clidoc.commands():
        for param in command.params:
            if param.name in WEIGHTS:
                seen[param.name].add((path, param.get_default(ctx, call=False)))
                assert param.opts == [f"--{param.name.replace('_', '-')}"] and param.callback is not None, path
    for name, found in seen.items():
        assert {default for _, default in found} == {WEIGHTS[name]}, (name, found)
    verbs = {path for path, _ in seen["cost_weight"]}
    assert verbs == {"geosched place", "geosched submit", "geosched simulate", "geosched provision",
                     "geosched multikueue dispatch", "geosched up"}


def test_tf_output_and_its_deprecated_name(tmp_path: Path) -> None:
    tf = DATA / "terraform" / "output.json"
    new = run("check", "--provider", "ssh", "--tf-output", tf, home=tmp_path)
    old = run("check", "--provider", "ssh", "--network", tf, home=tmp_path)
    assert new.stdout == old.stdout and new.returncode == old.returncode == 1  # (no inventory: a failed check)
    assert "deprecated" not in new.stderr
    assert old.stderr.splitlines() == ["warning: --network is deprecated and goes away in the next release; use "
                                       "--tf-output"]
    both = run("check", "--provider", "ssh", "--tf-output", tf, "--network", tf, home=tmp_path)
    assert both.returncode == 2 and "give --tf-output only" in both.stderr


def test_trace_format_and_its_deprecated_name(tmp_path: Path) -> None:
    trace = DATA / "traces" / "plain.csv"
    new = run("simulate", "--trace", trace, "--trace-format", "csv", "-o", "json", home=tmp_path)
    old = run("simulate", "--trace", trace, "--format", "csv", "-o", "json", home=tmp_path)
    assert new.returncode == old.returncode == 0, new.stderr + old.stderr
    assert new.stdout == old.stdout and "deprecated" not in new.stderr
    assert "warning: --format is deprecated and goes away in the next release; use --trace-format" in old.stderr
    wrong = run("simulate", "--trace", trace, "--trace-format", "gavel", home=tmp_path)
    assert wrong.returncode == 2


@pytest.mark.parametrize(("args", "env", "names"), [
    (("place", JOBS / "train-8.yaml", "--cost-weight", "-1"), {}, "--cost-weight"),
    (("place", JOBS / "train-8.yaml", "--zone-tolerance", "nan"), {}, "--zone-tolerance"),
    (("provision", "--gpu", "A100:8", "--nodes", "2", "--carbon-weight", "-0.5", "--dry-run"), {}, "--carbon-weight"),
    # Issue 23 item 5: "within 200%" and weights that rank nothing were accepted silently.
    (("place", JOBS / "train-8.yaml", "--zone-tolerance", "2"), {}, "--zone-tolerance"),
    (("place", JOBS / "train-8.yaml", "--network-weight", "0", "--cost-weight", "0"), {}, "all three are 0"),
    (("simulate", "--workload", "llm", "--network-weight", "0", "--cost-weight", "0"), {}, "all three are 0"),
    (("place", JOBS / "train-8.yaml", "--no-such-flag"), {}, "--no-such-flag"),
    (("place",), {}, "JOB"),
    (("catalog", "refresh"), {}, "--provider"),
    (("simulate", "--jobs", "many"), {}, "--jobs"),
    (("plase",), {}, "place"),
    (("place", JOBS / "train-8.yaml"), {"GEOSCHED_COST_WEIGHT": "-2"}, "--cost-weight (from $GEOSCHED_COST_WEIGHT)"),
    (("place", JOBS / "train-8.yaml"), {"GEOSCHED_COST_WEIGHT": "inf"}, "--cost-weight (from $GEOSCHED_COST_WEIGHT)"),
    (("place", JOBS / "train-8.yaml", "--policy", "fastest"), {}, "--policy: unknown policy 'fastest'"),
    (("place", JOBS / "train-8.yaml"), {"GEOSCHED_POLICY": "fastest"}, "--policy (from $GEOSCHED_POLICY)"),
    (("simulate", "--workload", "llm", "--policy", "pack", "--policy", "nope"), {}, "unknown policy 'nope'"),
    (("submit", JOBS / "train-8.yaml", "--policy", "nope"), {}, "--policy: unknown policy 'nope'"),
])
def test_a_usage_error_is_one_line_naming_the_option(tmp_path: Path, args: tuple[str | Path, ...],
                                                     env: dict[str, str], names: str) -> None:
    # Before: click's usage line, a "Try ... -h" line and a boxed error panel.
    result = run(*args, home=tmp_path, **env)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and names in lines[0], result.stderr
    assert not set("╭╰│") & set(result.stderr) and "Traceback" not in result.stderr


def float_settings() -> list[tuple[str, str]]:
    """Every setting that gives a float option its default: (variable, option)."""
    from geosched.settings import BY_KEY
    from geosched.settings import model as settings_model

    return [(s.env, "--" + s.option.replace("_", "-")) for key, s in BY_KEY.items()
            if s.option is not None and settings_model.field(key).annotation is float]


def test_every_float_setting_is_a_float_option_of_place() -> None:
    assert sorted(o for _, o in float_settings()) == ["--carbon-weight", "--cost-weight", "--network-weight",
                                                      "--risk-weight", "--zone-tolerance"]


@pytest.mark.parametrize("value", ["nan", "-inf"])
def test_a_float_setting_that_is_not_finite_says_so(tmp_path: Path, value: str) -> None:
    """The attack lane's N3: GEOSCHED_COST_WEIGHT=nan was told pydantic's "Input should be greater than or equal to
    0" (typer checks an option's bounds before its callback, and NaN fails every bound). Every float setting, from
    its variable and as its flag."""
    for variable, option in float_settings():
        for args, env in (((option, value), {}), ((), {variable: value})):
            result = run("place", JOBS / "train-8.yaml", *args, home=tmp_path, **env)
            source = f" (from ${variable})" if env else ""
            assert result.returncode == 2 and result.stderr == \
                f"error: {option}{source}: expected a finite number, got {value} (geosched place -h)\n", result.stderr


def test_the_dispatchers_own_config_keeps_its_weights_unless_a_flag_or_variable_says_otherwise() -> None:
    from geosched.kube.multikueue.cli import dispatcher_weights

    configured = Weights(network=2.0, cost=0.5, carbon=0.3)
    flags = {"network": 1.0, "cost": 0.1, "carbon": 0.0}  # the options' defaults (or the user's config file)
    assert dispatcher_weights(configured, flags, set()) == configured
    assert dispatcher_weights(configured, {**flags, "cost": 0.9}, {"cost"}) == Weights(2.0, 0.9, 0.3)
    assert dispatcher_weights(None, {**flags, "carbon": 0.4}, set()) == Weights(1.0, 0.1, 0.4)
