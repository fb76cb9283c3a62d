"""Grid carbon as users download it (issue 24 item 1): Electricity Maps portal CSVs of both header generations (the
shipped 2023 exports, a 2024 export's head), the API JSON of Electricity Maps and WattTime in their documented shapes
with real hours, the zone map, and the one-line errors for gaps, duplicates, DST, bases and granularity."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from geosched.core.errors import InputError
from geosched.core.models import HOUR_S, CarbonSignal
from geosched.grid.carbon import GridInput, grid_history, load_grid
from geosched.grid.forecast import (
    DEFAULT_FORECASTER,
    SEASONAL_NAIVE,
    Agg,
    Dense,
    Forecaster,
    GridHistory,
    Method,
    Scored,
    mape,
    run_means,
    scored,
    seasonal_naive,
)
from geosched.grid.formats import Basis, SeriesKind, parse_grid_file
from geosched.grid.shipped import shipped_series, shipped_text, shipped_zones
from geosched.grid.zones import shipped_zone_map
from tests.handmade import fleet, node

DATA = Path(__file__).parent / "data" / "carbon"
JAN1 = int(datetime(2023, 1, 1, tzinfo=UTC).timestamp() // HOUR_S)


def test_the_shipped_2023_exports_parse_whole_with_their_flags() -> None:
    assert shipped_zones() == ("DE", "FR", "US-CAL-CISO", "US-CENT-SWPP", "US-MIDA-PJM", "US-MIDW-MISO", "US-NW-BPAT",
                               "US-NW-PACW")
    pjm = shipped_series("US-MIDA-PJM")
    assert "\r\n" in shipped_text("US-MIDA-PJM") and "\r\n" not in shipped_text("DE")  # both line endings occur
    assert (pjm.first, pjm.last, len(pjm.hours), pjm.gaps) == (JAN1, JAN1 + 8759, 8760, 0)
    assert pjm.hours[JAN1] == 365.25 and pjm.estimated == 16  # the first row's LCA figure; the export's flags
    assert shipped_series("US-MIDA-PJM", Basis.DIRECT).hours[JAN1] == 299.98
    pacw = shipped_series("US-NW-PACW")  # the export leaves 24 hours of 2023-09-06 empty
    assert (pacw.gaps, pacw.empty, len(pacw.hours)) == (24, 24, 8736)
    assert pacw.first_gap() == int(datetime(2023, 9, 6, 7, tzinfo=UTC).timestamp() // HOUR_S)


def test_the_2024_header_generation_reads_the_same_way() -> None:
    text = (DATA / "US-CAL-CISO-2024-head.csv").read_text(encoding="utf-8")
    assert text.startswith("Datetime (UTC),Country,Zone name,Zone id,Carbon intensity gCO₂eq/kWh (direct),"
                           "Carbon intensity gCO₂eq/kWh (Life cycle),Carbon-free energy percentage (CFE%)")
    (lca,) = parse_grid_file(text, "ciso.csv", Basis.LIFECYCLE)
    (direct,) = parse_grid_file(text, "ciso.csv", Basis.DIRECT)
    first = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp() // HOUR_S)
    assert (lca.zone, len(lca.hours), lca.hours[first], direct.hours[first]) == ("US-CAL-CISO", 72, 337.22, 260.98)


def pjm_day() -> list[tuple[int, float]]:
    hours = shipped_series("US-MIDA-PJM").hours
    return [(h, hours[h]) for h in range(JAN1, JAN1 + 24)]


def iso(hour: int) -> str:
    return datetime.fromtimestamp(hour * HOUR_S, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_electricity_maps_api_history_and_forecast() -> None:
    history = {"zone": "US-MIDA-PJM", "history": [
        {"zone": "US-MIDA-PJM", "carbonIntensity": v, "datetime": iso(h), "updatedAt": iso(h), "createdAt": iso(h),
         "emissionFactorType": "lifecycle", "isEstimated": False, "estimationMethod": None} for h, v in pjm_day()]}
    history["history"][5]["carbonIntensity"] = None  # a missing hour, as the API answers it
    (s,) = parse_grid_file(json.dumps(history), "h.json", Basis.LIFECYCLE)
    assert (s.zone, s.kind, len(s.hours), s.gaps, s.empty) == ("US-MIDA-PJM", SeriesKind.HISTORY, 23, 1, 1)
    with pytest.raises(InputError, match=r"h.json: history\[0\].emissionFactorType: the file gives 'lifecycle' "
                       r"figures; --carbon-basis is direct"):
        parse_grid_file(json.dumps(history), "h.json", Basis.DIRECT)
    forecast = {"zone": "DE", "forecast": [{"carbonIntensity": v, "datetime": iso(h)} for h, v in pjm_day()],
                "updatedAt": iso(JAN1)}
    (f,) = parse_grid_file(json.dumps(forecast), "f.json", Basis.LIFECYCLE)
    assert (f.kind, f.issued_hour, len(f.hours)) == (SeriesKind.FORECAST, JAN1, 24)


def watttime(signal: str = "co2_moer", generated: bool = False) -> str:
    # docs.watttime.org /v3/historical: 5-minute points; meta as the carbon-aware-sdk's WattTime test data.
    points = [{"point_time": datetime.fromtimestamp(h * HOUR_S + 300 * k, UTC).isoformat(), "value": v / 0.45359237}
              for h, v in pjm_day()[:3] for k in range(12)]
    meta = {"region": "PJM_DC", "signal_type": signal, "units": "lbs_co2_per_mwh", "data_point_period_seconds": 300,
            "model": {"date": "2023-03-01", "type": "binned_regression"}, "warnings": []}
    if generated:
        meta["generated_at"] = iso(JAN1)
    return json.dumps({"data": points, "meta": meta})


def test_watttime_five_minute_points_become_hourly_grams() -> None:
    (s,) = parse_grid_file(watttime(), "wt.json", Basis.MARGINAL)
    assert s.zone == "PJM_DC" and len(s.hours) == 3
    assert s.hours[JAN1] == pytest.approx(365.25)  # lbs/MWh back to g/kWh, twelve points averaged
    assert parse_grid_file(watttime(generated=True), "wt.json", Basis.MARGINAL)[0].kind is SeriesKind.FORECAST
    with pytest.raises(InputError, match=r"signal_type: co2_moer is a marginal rate; --carbon-basis is lifecycle"):
        parse_grid_file(watttime(), "wt.json", Basis.LIFECYCLE)
    assert parse_grid_file(watttime("co2_aoer"), "wt.json", Basis.DIRECT)[0].basis is Basis.DIRECT


HEADER = shipped_text("DE").split("\n", 1)[0]
ROW = "2023-01-01 {}:00:00,Germany,Germany,DE,152.03,199.59,82.97,77.71,entsoe.eu,false,"


@pytest.mark.parametrize(("rows", "basis", "reason"), [
    ([ROW.format("00"), ROW.format("00")], Basis.LIFECYCLE,
     "line 3: 2023-01-01T00:00:00Z is given twice \\(also line 2\\); a file in local time repeats an hour when "
     "daylight saving ends: export it in UTC"),
    ([ROW.format("00").replace("199.59", "-1")], Basis.LIFECYCLE, "line 2: the intensity must be a finite number"),
    ([ROW.format("00").replace("199.59", "abc")], Basis.LIFECYCLE, "line 2: the intensity must be a number"),
    ([ROW.format("00")], Basis.MARGINAL, "not marginal ones; choose --carbon-basis direct or lifecycle"),
    ([ROW.format("noon")], Basis.LIFECYCLE, "line 2: Datetime \\(UTC\\) must be like 2023-01-01 00:00:00"),
    ([ROW.format("00")[:40]], Basis.LIFECYCLE, "line 2: expected 11 columns as in the header, got 5"),
    ([ROW.replace("2023-01-01 {}", f"2023-01-{d:02d} 00") for d in range(1, 6)], Basis.LIFECYCLE,
     "DE: one value every 24 h \\(a daily, monthly or yearly export\\?\\); download the hourly one"),
])
def test_bad_portal_rows_are_one_line_errors(rows: list[str], basis: Basis, reason: str) -> None:
    with pytest.raises(InputError, match=reason):
        parse_grid_file("\n".join([HEADER, *rows]) + "\n", "de.csv", basis)


def test_zones_become_the_regions_they_power_and_unknown_zones_are_labelled(tmp_path: Path) -> None:
    zones = shipped_zone_map()
    assert zones.regions_of("US-MIDA-PJM") == ("aws:us-east-1", "aws:us-east-2", "gcp:us-east4", "gcp:us-east5")
    assert zones.zone_of["gcp:us-central1"] == "US-CENT-SWPP" and zones.zone_of["aws:us-west-2"] == "US-NW-PACW"
    (tmp_path / "pjm.csv").write_text(shipped_text("US-MIDA-PJM"), encoding="utf-8")
    (tmp_path / "wt.json").write_text(watttime(), encoding="utf-8")
    grid = load_grid([tmp_path / "pjm.csv"])
    assert grid.signal is not None and sorted(grid.signal.hourly) == list(zones.regions_of("US-MIDA-PJM"))
    assert grid.notes[0].startswith("carbon US-MIDA-PJM (") and "-> aws:us-east-1, aws:us-east-2" in grid.notes[0]
    wt = load_grid([tmp_path / "wt.json"], Basis.MARGINAL)
    assert wt.signal is not None and wt.signal.hourly == {}
    assert "no region of the zone map" in wt.notes[0] and "--grid-zones FILE" in wt.notes[0]
    (tmp_path / "zones.csv").write_text("provider,region,zone\naws,us-east-1,PJM_DC\n", encoding="utf-8")
    mapped = load_grid([tmp_path / "wt.json"], Basis.MARGINAL, zone_map=tmp_path / "zones.csv")
    assert mapped.signal is not None and list(mapped.signal.hourly) == ["aws:us-east-1"]


def test_two_downloads_of_one_zone_join_and_a_conflict_names_both(tmp_path: Path) -> None:
    lines = shipped_text("DE").split("\n")
    (tmp_path / "a.csv").write_text("\n".join(lines[:25]) + "\n", encoding="utf-8")
    (tmp_path / "b.csv").write_text("\n".join([lines[0], *lines[20:49]]) + "\n", encoding="utf-8")
    grid = load_grid([tmp_path / "a.csv", tmp_path / "b.csv"])
    assert grid.signal is not None and len(grid.signal.hourly["aws:eu-central-1"]) == 48
    cells = lines[3].split(",")
    cells[5] = "999"  # the hour's life-cycle figure, changed
    (tmp_path / "c.csv").write_text("\n".join([lines[0], ",".join(cells)]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"c.csv: DE: 2023-01-01T02:00Z is .* here and .* in .*a.csv"):
        load_grid([tmp_path / "a.csv", tmp_path / "c.csv"])


def test_seasonal_naive_reads_the_last_day_known_and_its_error_is_measured() -> None:
    series = Dense.of(shipped_series("US-CAL-CISO").hours)
    at = JAN1 + 24 * 40 + 10
    hours = np.arange(at, at + 48)
    guess = seasonal_naive(series, hours, at)
    assert guess[0] == series.at(hours[:1] - 24)[0] and guess[14] == series.at(hours[14:15] - 24)[0]
    assert guess[47] == series.at(hours[47:48] - 48)[0]  # 47 h ahead: two days back
    error = mape(series, forecaster=SEASONAL_NAIVE)
    assert error is not None and 0.05 < error.day_ahead < error.two_days_ahead < 0.2  # solar days repeat


def day_of_month(hours: np.ndarray) -> np.ndarray:
    days = (hours * HOUR_S).astype("datetime64[s]").astype("datetime64[D]")
    out: np.ndarray = (days - days.astype("datetime64[M]")).astype(np.int64) + 1
    return out


def test_the_default_forecaster_beats_seasonal_naive_on_held_out_days() -> None:
    """Its parameters were tuned on days 1-9 of each month; on days 10-31, which no choice looked at, its day-ahead
    error is lower than seasonal naive's pooled over the shipped zones and on the two wind grids (grid/README.md)."""
    def held(f: Forecaster, zones: tuple[str, ...]) -> Scored:
        total = Scored((0.0, 0.0), (0, 0))
        for zone in zones:
            total += scored(Dense.of(shipped_series(zone).hours), f, days=lambda h: day_of_month(h) >= 10)
        return total

    everywhere = tuple(shipped_zones())
    naive, best = held(SEASONAL_NAIVE, everywhere).error(), held(DEFAULT_FORECASTER, everywhere).error()
    assert best.day_ahead < 0.85 * naive.day_ahead and best.two_days_ahead < naive.two_days_ahead
    for wind in ("US-CENT-SWPP", "US-NW-PACW"):
        assert held(DEFAULT_FORECASTER, (wind,)).error().day_ahead < held(SEASONAL_NAIVE, (wind,)).error().day_ahead


def test_the_forecaster_blends_the_days_profile_with_the_last_hours_departure() -> None:
    # A flat profile of 100 for 7 days, then the last known hour at 160: an hour ahead is 100 + 60 x 0.97, a day
    # ahead 100 + 60 x 0.97^24; the median ignores a missing day and a spike the mean feels.
    first = JAN1
    values = {first + h: 100.0 for h in range(24 * 8)}
    last = first + 24 * 8 - 1
    values[last] = 160.0
    series = Dense.of(values)
    f = Forecaster(days=7, decay=0.97)
    guess = f.predict(series.at, np.array([last + 1, last + 24]), last)
    # A day ahead, the profile's own 7 days include the last hour: (160 + 6 x 100) / 7.
    assert guess == pytest.approx([100 + 60 * 0.97, (160 + 600) / 7 + 60 * 0.97**24])
    assert SEASONAL_NAIVE.predict(series.at, np.array([last + 24]), last)[0] == 160.0  # the same hour a day back
    spiky = {**values, last + 1 - 24: 800.0}
    del spiky[last + 1 - 48]
    at = Dense.of(spiky).at
    assert Forecaster(days=3, agg=Agg.MEDIAN).predict(at, np.array([last + 1]), last)[0] == 450.0  # (100+800)/2
    assert Forecaster(days=4, agg=Agg.MEDIAN).predict(at, np.array([last + 1]), last)[0] == 100.0
    assert Forecaster(days=3).predict(at, np.array([last + 1]), last)[0] == 450.0


def test_a_given_forecast_wins_over_the_forecaster_for_the_hours_it_covers() -> None:
    pjm = Dense.of(shipped_series("US-MIDA-PJM").hours)
    at = JAN1 + 24 * 50 + 6
    given = Dense.of({at + h: 1000.0 + h for h in range(10)})  # an Electricity Maps forecast's 10 hours
    history = GridHistory({"r:pjm": pjm}, {"r:pjm": 1.0}, {"r:pjm": given})
    look = history.outlook(["r:pjm"], at, 30, Method.FORECAST)
    assert list(look.values[0, :10]) == [1000.0 + h for h in range(10)]
    expected = DEFAULT_FORECASTER.predict(pjm.at, np.arange(at + 10, at + 30), at - 1)
    assert np.allclose(look.values[0, 10:], expected)
    assert look.sources == (f"forecast file, then {DEFAULT_FORECASTER.label}",)
    assert GridHistory({"r:pjm": pjm}, {"r:pjm": 1.0}).outlook(["r:pjm"], at, 30).values[0, 0] != 1000.0


def test_a_missing_region_falls_back_to_its_mean_labelled() -> None:
    f = fleet([node("a0", "use1-az1", "us-east-1", provider="aws"), node("b0", "x-a", "lab")])
    pjm = shipped_series("US-MIDA-PJM").hours
    history = grid_history(f, GridInput(CarbonSignal({}, {"aws:us-east-1": dict(pjm)}), None, Basis.LIFECYCLE))
    look = history.outlook(["aws:us-east-1", "lab:lab"], JAN1 + 100, 30, Method.FORECAST)
    assert look.sources == (DEFAULT_FORECASTER.label, "mean")
    assert (look.values[1] == f.regions["lab:lab"].grid_gco2e_per_kwh).all()
    means = run_means(look, np.array([(JAN1 + 100) * HOUR_S + 1800.0]), 3600.0)
    assert means[0, 0] == pytest.approx((look.values[0, 0] + look.values[0, 1]) / 2)  # half of two hours each


@pytest.mark.parametrize("method", [Method.FORECAST, Method.ORACLE])
def test_the_stacked_outlook_is_the_per_region_outlook(method: Method) -> None:
    """GridHistory's fast path (all regions on one hour axis) gives exactly the figures and labels of `outlook`,
    around PacifiCorp West's empty day and at the edges of the series."""
    from geosched.grid.forecast import GridHistory, outlook

    series = {f"r:{z}": Dense.of(shipped_series(z).hours) for z in ("US-NW-PACW", "US-CAL-CISO", "DE")}
    means = {**{k: 123.0 for k in series}, "r:none": 77.0}
    history = GridHistory(series, means)
    regions = ["r:US-NW-PACW", "r:none", "r:DE", "r:US-CAL-CISO"]
    gap = int(datetime(2023, 9, 6, 7, tzinfo=UTC).timestamp() // HOUR_S)
    for at in (gap - 30, gap + 3, JAN1 + 2, JAN1 + 8755, JAN1 - 50):
        fast = history.outlook(regions, at, 60, method)
        slow = outlook(regions, series, means, at, 60, method)
        assert np.array_equal(fast.values, slow.values, equal_nan=True) and fast.sources == slow.sources
