"""`geosched simulate --plot`: JCT and slowdown CDFs readable when policies overlap, from a replay of a shipped
Gavel trace on the embedded default fleet. The Figure is inspected (lines per policy, styles, scales, labels,
legend placement); the files through the command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from geosched.cli.simulate import run_simulate_command
from geosched.core.errors import InputError
from geosched.plots.simulation import job_slowdown, simulation_figure
from geosched.simulate import JobRecord, PolicyResult, read_trace
from tests.plot_support import png_summary, svg_root, svg_texts

GAVEL = Path(__file__).parent.parent / "geosched" / "data" / "gavel" / "seed0_103959.trace"
POLICIES = ["zone-first", "pack", "spread"]


@pytest.fixture(scope="module")
def results() -> list[PolicyResult]:
    return run_simulate_command(GAVEL, POLICIES, output="csv")


@pytest.fixture(scope="module")
def figure(results: list[PolicyResult]) -> Figure:
    return simulation_figure(results, "gavel on the embedded default")


def test_the_jct_and_slowdown_cdfs_have_one_line_per_policy_each_in_its_own_style(figure: Figure) -> None:
    jct_ax, slow_ax = figure.axes[:2]
    for ax in (jct_ax, slow_ax):
        lines = ax.get_lines()
        assert [line.get_label() for line in lines] == POLICIES
        assert len({str(line.get_linestyle()) for line in lines}) == len(POLICIES)
        assert len({str(line.get_marker()) for line in lines}) == len(POLICIES)
        # Markers staggered along the line: identical curves still show each policy's markers.
        assert len({str(line.get_markevery()) for line in lines}) == len(POLICIES)
        assert ax.get_xscale() == "log"
        assert ax.get_ylabel() == "fraction of jobs (CDF)"
        for line in lines:
            y = np.asarray(line.get_ydata(), dtype=float)
            assert y[-1] == 1.0 and np.all(np.diff(y) > 0)
    assert jct_ax.get_xlabel() == "job completion time (h, log scale)"
    assert slow_ax.get_xlabel().startswith("bounded slowdown (JCT / max(run time alone, 10 s)")


def test_the_cdfs_are_the_replays_jobs(results: list[PolicyResult], figure: Figure) -> None:
    jct_ax, slow_ax = figure.axes[:2]
    for result, jct_line, slow_line in zip(results, jct_ax.get_lines(), slow_ax.get_lines(), strict=True):
        assert len(result.records) == result.jobs > 900
        assert np.allclose(jct_line.get_xdata(), sorted(r.jct_s / 3600 for r in result.records))
        assert np.allclose(slow_line.get_xdata(), sorted(job_slowdown(r) for r in result.records))


def test_slowdown_is_jct_over_the_traces_run_time_bounded_below_by_10_s(results: list[PolicyResult]) -> None:
    durations = {job.id: job.duration_s for job in read_trace(GAVEL).jobs}
    for result in results:
        slowdowns = [job_slowdown(r) for r in result.records]
        assert slowdowns == pytest.approx([max(r.jct_s / max(durations[r.id], 10.0), 1.0) for r in result.records])
        assert min(slowdowns) == 1.0
    # Queueing and a slower network both count: 100 s queued, then 1.5 x a 200 s run.
    queued = JobRecord("j", submit_s=0.0, start_s=100.0, finish_s=400.0, gpus=8, workers=1, zones=("z",),
                       regions=("r",), slowdown=1.5, usd=0.0, kgco2e=0.0)
    assert job_slowdown(queued) == pytest.approx(400.0 / 200.0)
    # A job of 2 s that waited 98 s: bounded by 10 s, a slowdown of 10, not 50.
    short = JobRecord("s", submit_s=0.0, start_s=98.0, finish_s=100.0, gpus=8, workers=1, zones=("z",),
                      regions=("r",), slowdown=1.0, usd=0.0, kgco2e=0.0)
    assert job_slowdown(short) == pytest.approx(10.0)


def test_one_legend_outside_the_data(figure: Figure) -> None:
    assert [ax.get_legend() for ax in figure.axes] == [None] * len(figure.axes)
    assert len(figure.legends) == 1
    legend = figure.legends[0]
    assert [t.get_text() for t in legend.get_texts()] == POLICIES
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    box = legend.get_window_extent(canvas.get_renderer())
    for ax in figure.axes:
        assert not box.overlaps(ax.get_window_extent(canvas.get_renderer()))


def test_cost_and_emissions_bars_per_policy(results: list[PolicyResult], figure: Figure) -> None:
    cost_ax, carbon_ax = figure.axes[2:4]
    assert [p.get_height() for p in cost_ax.patches] == pytest.approx([r.cost_usd for r in results])
    assert [p.get_height() for p in carbon_ax.patches] == pytest.approx([r.kgco2e for r in results])
    assert [t.get_text() for t in cost_ax.get_xticklabels()] == POLICIES
    assert cost_ax.get_ylabel() == "cost (USD)" and carbon_ax.get_ylabel() == "emissions (kgCO2e)"
    assert len({p.get_hatch() for p in cost_ax.patches}) == len(POLICIES)


def test_simulate_plot_writes_svg_and_png_from_the_command(tmp_path: Path) -> None:
    env = {**os.environ, "GEOSCHED_HOME": str(tmp_path / "home")}
    for name in ("sim.svg", "sim.png"):
        out = tmp_path / name
        run = subprocess.run([sys.executable, "-m", "geosched", "simulate", "--trace", str(GAVEL), "--policy",
                              "zone-first", "--policy", "spread", "-o", "csv", "--plot", str(out)],
                             capture_output=True, text=True, env=env, timeout=300, check=False)
        assert run.returncode == 0, run.stderr
        assert f"wrote {out}" in run.stderr
    texts = svg_texts(svg_root((tmp_path / "sim.svg").read_bytes()))
    assert {"zone-first", "spread", "job completion time (h, log scale)", "Slowdown per job"} <= set(texts)
    (width, height), distinct, _ = png_summary(tmp_path / "sim.png")
    assert (width, height) == (13 * 110, int(8.5 * 110)) and distinct > 50


def test_an_unknown_plot_suffix_stops_before_the_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match=r"--plot: .*sim\.pdf: expected a \.png, \.svg or \.html file"):
        run_simulate_command(GAVEL, POLICIES, plot=tmp_path / "sim.pdf")
    assert capsys.readouterr() == ("", "")
