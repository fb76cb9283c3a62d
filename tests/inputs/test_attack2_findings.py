"""The adversarial tester's findings of 2026-12-07, second round (/work/lanes/attack2/REPORT.md), each reproduced
through the command a user runs, or the function it calls where reaching it needs a cloud's credentials."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.inputs.inputs_support import ROOT, in_process

JOB = ROOT / "examples" / "jobs" / "train-8.yaml"


# --- a carbon series of three rows 7,000 years apart --------------------------------------------------------------

# Each shape as geosched/grid/formats.py cites it: geosched's region CSV, Electricity Maps' API history.
def _own_csv(regions: list[str]) -> str:
    rows = ["region,datetime,gco2e_per_kwh"]
    for region in regions:
        rows += [f"{region},1900-01-01T00:00:00Z,400", f"{region},1900-01-01T01:00:00Z,410",
                 f"{region},8999-12-31T00:00:00Z,300"]
    return "\n".join(rows) + "\n"


def _em_history(zone: str, stamps: list[str]) -> str:
    return json.dumps({"zone": zone, "history": [
        {"zone": zone, "carbonIntensity": 300 + i, "datetime": s, "emissionFactorType": "lifecycle"}
        for i, s in enumerate(stamps)]})


def test_a_carbon_series_spanning_millennia_is_refused_before_it_is_made_dense(tmp_path: Path) -> None:
    # Six regions of three rows each made 2.5 GB and 21 s of `place` before: each became an array over its span.
    path = tmp_path / "grid.csv"
    path.write_text(_own_csv(["aws:us-east-1", "aws:us-west-2", "gcp:europe-west4"]), encoding="utf-8")
    run = in_process(["place", JOB, "--carbon-hourly", path], home=tmp_path / "home")
    assert run.one_line_error, (run.code, run.stderr)
    assert (f"{path}: aws:us-east-1: the series runs from 1900-01-01T00:00Z to 8999-12-31T00:00Z: at most 20 years "
            "of hours are read") in run.stderr


def test_two_downloads_decades_apart_are_refused_as_one_series(tmp_path: Path) -> None:
    # Each file alone is fine; joined (one zone, two files) the series spans 31 years.
    old, new = tmp_path / "1995.json", tmp_path / "2026.json"
    old.write_text(_em_history("US-CAL-CISO", ["1995-01-01T00:00:00Z", "1995-01-01T01:00:00Z"]), encoding="utf-8")
    new.write_text(_em_history("US-CAL-CISO", ["2026-01-01T00:00:00Z", "2026-01-01T01:00:00Z"]), encoding="utf-8")
    run = in_process(["place", JOB, "--carbon-hourly", old, "--carbon-hourly", new], home=tmp_path / "home")
    assert run.one_line_error, (run.code, run.stderr)
    assert f"{old}, {new}: US-CAL-CISO: the series runs from 1995-01-01T00:00Z to 2026-01-01T01:00Z" in run.stderr
    # One of them is used as it always was.
    alone = in_process(["place", JOB, "--carbon-hourly", new, "-o", "json"], home=tmp_path / "home")
    assert alone.code == 0, alone.stderr


def test_a_forecast_of_regions_outside_the_fleet_makes_no_array_of_them(tmp_path: Path) -> None:
    from geosched.core.testing import fleet, node
    from geosched.grid.carbon import grid_history, load_grid

    the_fleet = fleet([node("a", "us-east-1a", region="us-east-1")])
    (own,) = the_fleet.regions
    path = tmp_path / "forecast.csv"
    rows = ["region,datetime,gco2e_per_kwh"] + [f"{region},2026-01-0{d}T00:00:00Z,{d}" for region in
                                               [own, *(f"aws:fake-{i}" for i in range(500))] for d in (1, 2)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    history = grid_history(the_fleet, load_grid([], forecasts=[path]))
    assert history.forecast is not None and set(history.forecast) == {own}


def test_a_years_span_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "grid.csv"
    path.write_text("region,datetime,gco2e_per_kwh\naws:us-east-1,2024-01-01T00:00:00Z,400\n"
                    "aws:us-east-1,2024-01-01T01:00:00Z,410\naws:us-east-1,2025-12-31T23:00:00Z,300\n",
                    encoding="utf-8")
    run = in_process(["place", JOB, "--carbon-hourly", path, "-o", "json"], home=tmp_path / "home")
    assert run.code == 0, run.stderr


# --- carbon files: a value a float cannot hold, a secret where a number goes, a zone that drives the terminal -----

SECRET = "SUPERSECRETtok-51e0"
# WattTime API v3 /v3/historical's shape (docs.watttime.org; geosched/grid/formats.py).
WATTTIME_META = {"region": "CAISO_NORTH", "signal_type": "co2_moer", "units": "lbs_co2_per_mwh"}


@pytest.mark.parametrize(("document", "basis", "needle"), [
    # A JSON integer of 400 digits: float() raised OverflowError, a traceback.
    ('{"data": [{"point_time": "2024-01-01T00:00:00Z", "value": ' + "9" * 400 + "}], \"meta\": "
     + json.dumps(WATTTIME_META) + "}", "marginal", "data[0].value: expected a number up to 1e+12, got a very "
     "large number"),
    (json.dumps({"zone": "US-CAL-CISO", "history": [{"datetime": "2024-01-01T00:00:00Z",
                                                      "carbonIntensity": {"token": SECRET}}]}),
     "lifecycle", "history[0].carbonIntensity: expected a number up to 1e+12 or null, got a mapping"),
    (json.dumps({"zone": "US-CAL-CISO", "history": [{"datetime": "2024-01-01T00:00:00Z", "carbonIntensity": 1,
                                                      "emissionFactorType": {"token": SECRET}}]}),
     "lifecycle", "history[0].emissionFactorType: expected a string, got a mapping"),
    (json.dumps({"zone": "US-CAL-CISO", "history": [{"datetime": [SECRET], "carbonIntensity": 1}]}),
     "lifecycle", "history[0].datetime: expected an ISO 8601 time, got a list"),
    (json.dumps({"data": [], "meta": {**WATTTIME_META, "units": {"k": SECRET}}}), "marginal",
     "meta.units: expected one of lbs_co2_per_mwh, g_co2_per_kwh, got a mapping"),
    # The zone is printed in --explain's notes: an OSC sequence would retitle the terminal.
    (json.dumps({"zone": "US-\x1b]0;owned\x07CAL", "history": [
        {"datetime": "2024-01-01T00:00:00Z", "carbonIntensity": 1}]}),
     "lifecycle", "zone: the zone id 'US-\\x1b]0;owned\\x07CAL' holds a control character"),
], ids=["overflow", "intensity", "factor", "datetime", "units", "escape"])
def test_a_carbon_files_bad_value_is_one_line_that_describes_it(
        tmp_path: Path, document: str, basis: str, needle: str) -> None:
    path = tmp_path / "grid.json"
    path.write_text(document, encoding="utf-8")
    run = in_process(["place", JOB, "--carbon-hourly", path, "--carbon-basis", basis, "--explain"],
                     home=tmp_path / "home")
    assert run.one_line_error, (run.code, run.stderr)
    assert f"{path}: {needle}" in run.stderr
    assert SECRET not in run.stderr + run.stdout and "\x1b" not in run.stderr + run.stdout


# --- ssh.user: a line break started a second entry of GCP's ssh-keys metadata -------------------------------------

# GCP's instance metadata `ssh-keys` holds one `user:key` per line (cloud.google.com/compute/docs/connect/
# add-ssh-keys#metadata): a user name "root\nevil:ssh-ed25519 ..." adds evil's key to the machine.
INJECTED = "root\nevil:ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample evil@example"


@pytest.mark.parametrize("where", ["variable", "file"])
@pytest.mark.parametrize("user", [INJECTED, "Root", "a" * 33, "ml;rm"], ids=["newline", "upper", "long", "semicolon"])
def test_an_ssh_user_that_is_no_linux_user_name_is_refused_when_read(tmp_path: Path, where: str, user: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"ssh:\n  user: {json.dumps(user)}\n" if where == "file" else "{}\n", encoding="utf-8")
    env = {"GEOSCHED_CONFIG": str(config), **({"GEOSCHED_SSH_USER": user} if where == "variable" else {})}
    run = in_process(["config", "show"], home=tmp_path / "home", env=env)
    assert run.one_line_error, (run.code, run.stderr)
    field = "GEOSCHED_SSH_USER" if where == "variable" else f"{config}: ssh.user"
    assert f"{field}: expected a Linux user name" in run.stderr


def test_a_linux_user_name_is_still_taken(tmp_path: Path) -> None:
    from geosched.providers import config

    assert config.SSH_USER_RE.match("ml_ops-2") and config.SSH_USER_RE.match("_svc")
    run = in_process(["config", "show", "-o", "json"], home=tmp_path / "home", env={"GEOSCHED_SSH_USER": "ml_ops-2"})
    assert run.code == 0 and "ml_ops-2" in run.stdout, run.stderr
