"""Hourly carbon at decision time (issue 11): the CSV series (Electricity Maps' history shape), the one resolver
(`CarbonSignal.lookup` via `geosched.grid.carbon.decision_signal`), and `geosched place --carbon-hourly --at`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from geosched.core.errors import InputError
from geosched.core.models import HOUR_S
from geosched.grid.carbon import decision_signal, parse_carbon_csv
from geosched.store.db import write_snapshot
from tests.handmade import fleet, network, node

NOON = datetime(2025, 3, 1, 12, tzinfo=UTC)
# r1 is the cleaner grid on the year (100 vs 200 gCO2e/kWh); at noon on 2025-03-01 the wind blows in r2.
SERIES = """\
region,datetime,gco2e_per_kwh
lab:r1,2025-03-01T11:00:00Z,120
lab:r1,2025-03-01T12:00:00Z,480
lab:r2,2025-03-01T11:00:00Z,210
lab:r2,2025-03-01T12:00:00+00:00,40
"""
JOB = "name: j\nworkers: 1\ngpus_per_worker: 8\ngpu: A100\n"


def lab_fleet():  # type: ignore[no-untyped-def]
    return fleet([node("a0", "r1-a", "r1", cluster="c1"), node("b0", "r2-a", "r2", cluster="c2")],
                 carbon={"r1": 100.0, "r2": 200.0})


def test_the_series_is_keyed_by_utc_hour_and_falls_back_to_the_yearly_mean() -> None:
    signal = parse_carbon_csv(SERIES, "c.csv")
    noon = int(NOON.timestamp() // HOUR_S)
    assert signal.hourly == {"lab:r1": {noon - 1: 120.0, noon: 480.0}, "lab:r2": {noon - 1: 210.0, noon: 40.0}}
    # Any instant of the hour reads that hour.
    assert signal.lookup("lab:r2", NOON.timestamp() + 3599) == (40.0, "hour")
    f = lab_fleet()
    at_noon = decision_signal(f, signal, NOON)
    assert at_noon.signal.intensity == {"lab:r1": 480.0, "lab:r2": 40.0} and at_noon.notes == ()
    later = decision_signal(f, signal, datetime(2025, 3, 2, 9, 30, tzinfo=UTC))
    assert later.signal.intensity == {"lab:r1": 100.0, "lab:r2": 200.0}
    assert later.notes == ("carbon lab:r1: yearly mean 100 gCO2e/kWh; 2025-03-02T09:00Z is outside its hourly series "
                           "(2025-03-01T11:00Z..2025-03-01T12:00Z)",
                           "carbon lab:r2: yearly mean 200 gCO2e/kWh; 2025-03-02T09:00Z is outside its hourly series "
                           "(2025-03-01T11:00Z..2025-03-01T12:00Z)")
    assert decision_signal(f, None, NOON).signal.intensity == {"lab:r1": 100.0, "lab:r2": 200.0}


def test_an_hour_missing_inside_the_series_is_called_a_gap_not_outside() -> None:
    gappy = parse_carbon_csv("region,datetime,gco2e_per_kwh\nlab:r1,2025-03-01T10:00:00Z,120\n"
                             "lab:r1,2025-03-01T13:00:00Z,130\n", "c.csv")
    resolved = decision_signal(lab_fleet(), gappy, NOON)
    assert resolved.notes[0] == ("carbon lab:r1: yearly mean 100 gCO2e/kWh; 2025-03-01T12:00Z is a gap in its hourly "
                                 "series (2025-03-01T10:00Z..2025-03-01T13:00Z)")


@pytest.mark.parametrize(("text", "reason"), [
    ("region,gco2e_per_kwh\n", "line 1: expected the columns"),
    ("region,datetime,gco2e_per_kwh\nlab:r1,2025-03-01T12:30:00Z,1\n", "line 2: datetime must be on the hour"),
    ("region,datetime,gco2e_per_kwh\nlab:r1,2025-03-01T12:00:00,1\n", "line 2: datetime needs an offset"),
    ("region,datetime,gco2e_per_kwh\nlab:r1,noon,1\n", "line 2: datetime must be RFC 3339"),
    ("region,datetime,gco2e_per_kwh\nlab:r1,2025-03-01T12:00:00Z,1\nlab:r1,2025-03-01T13:00:00+01:00,2\n",
     "line 3: 2025-03-01T13:00:00\\+01:00 of lab:r1 given twice"),
    ("region,datetime,hour,gco2e_per_kwh\nlab:r1,2025-03-01T12:00:00Z,3,1\n", "line 2: give datetime or hour"),
    ("region,datetime,gco2e_per_kwh\nr1,2025-03-01T12:00:00Z,1\n", "line 2: region must be provider:region"),
])
def test_bad_series_rows_name_the_line_and_the_reason(text: str, reason: str) -> None:
    with pytest.raises(InputError, match=reason):
        parse_carbon_csv(text, "c.csv")


def geosched(*args: str | Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GEOSCHED_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "geosched", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


def test_place_uses_the_hour_the_job_starts(tmp_path: Path) -> None:
    f = lab_fleet()
    write_snapshot(tmp_path / "snap", f, network(f))
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "carbon.csv").write_text(SERIES)
    base = ("place", tmp_path / "job.yaml", "--snapshot", tmp_path / "snap", "--carbon-weight", "1",
            "--cost-weight", "0")

    def zones(*extra: str) -> list[str]:
        run = geosched(*base, "-o", "json", *extra, home=tmp_path)
        assert run.returncode == 0, run.stderr
        return list(json.loads(run.stdout)["zones"])

    assert zones() == ["r1-a"]  # yearly means
    assert zones("--carbon-hourly", str(tmp_path / "carbon.csv"), "--at", "2025-03-01T12:20:00Z") == ["r2-a"]
    assert zones("--carbon-hourly", str(tmp_path / "carbon.csv"), "--at", "2025-03-01T13:20:00+02:00") == ["r1-a"]
    explained = geosched(*base, "--explain", "--carbon-hourly", tmp_path / "carbon.csv", "--at",
                         "2025-03-05T00:00:00Z", home=tmp_path)
    assert explained.returncode == 0, explained.stderr
    assert "carbon lab:r2: yearly mean 200 gCO2e/kWh; 2025-03-05T00:00Z is outside its hourly series" \
        in explained.stdout
    bad = geosched(*base, "--carbon-hourly", tmp_path / "carbon.csv", "--at", "noon", home=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--at" in bad.stderr
    (tmp_path / "bad.csv").write_text("region,datetime,gco2e_per_kwh\nlab:r1,2025-03-01T12:00:00Z,x\n")
    bad = geosched(*base, "--carbon-hourly", tmp_path / "bad.csv", home=tmp_path)
    assert bad.returncode == 2 and "bad.csv: line 2: gco2e_per_kwh must be a number" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_simulate_places_and_counts_each_job_at_the_hour_it_starts(tmp_path: Path) -> None:
    from geosched.core.models import Weights
    from geosched.policies import PlacementContext
    from geosched.simulate.engine import contexts_by_hour, simulate
    from geosched.simulate.traces.model import TraceJob

    f = lab_fleet()
    net = network(f)
    signal = parse_carbon_csv(SERIES, "c.csv")
    # Trace time 0 = 11:00 (r1 cleaner), the second job arrives at 12:10 (r2 far cleaner).
    trace = [TraceJob("early", 0.0, 8, 1800.0), TraceJob("noon", 4200.0, 8, 1800.0)]
    at = contexts_by_hour(f, net, signal, datetime(2025, 3, 1, 11, tzinfo=UTC))
    green = Weights(network=1.0, cost=0.0, carbon=1.0)
    [hourly] = simulate(trace, PlacementContext(f, net), ["zone-first"], green, context_at=at)
    [yearly] = simulate(trace, PlacementContext(f, net), ["zone-first"], green)
    assert [r.zones for r in hourly.records] == [("r1-a",), ("r2-a",)]
    assert [r.zones for r in yearly.records] == [("r1-a",), ("r1-a",)]
    # Emissions at the hour's intensity: 120 then 40 g/kWh, against 100 and 100 on the yearly means.
    per_kwh = yearly.records[0].kgco2e / 100.0
    assert hourly.records[0].kgco2e == pytest.approx(per_kwh * 120.0)
    assert hourly.records[1].kgco2e == pytest.approx(per_kwh * 40.0)

    (tmp_path / "trace.csv").write_text("submit_time,gpus,duration\n0,8,1800\n4200,8,1800\n")
    (tmp_path / "carbon.csv").write_text(SERIES)
    write_snapshot(tmp_path / "snap", f, net)
    run = geosched("simulate", "--trace", tmp_path / "trace.csv", "--snapshot", tmp_path / "snap", "-o", "json",
                   "--carbon-weight", "1", "--cost-weight", "0", "--carbon-hourly", tmp_path / "carbon.csv",
                   home=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "trace time 0 = 2025-03-01T11:00:00Z" in run.stderr
    kg = json.loads(run.stdout)["results"][0]["kgco2e"]
    assert kg == pytest.approx(hourly.kgco2e)
