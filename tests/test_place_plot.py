"""`geosched place --plot`: the candidates ranked as stacked bars of their weighted terms (chosen first, marked)
and the gang's zones with the ring's hops, from real placements on the embedded default fleet, checked for what
they show: the pure pieces (ranking, gang map, Figure) directly, the files through the command."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from geosched import policies
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import Placement, Weights
from geosched.kube.jobinput import load_job
from geosched.plots.candidates import SHOWN, ranked
from geosched.plots.files import DPI, figure_bytes
from geosched.plots.gang import gang_map
from geosched.plots.placement import BOUNDING, COLOURS, placement_figure
from tests.chromium_support import chromium, need_chromium
from tests.plot_support import near, png_summary, svg_ids, svg_root, svg_texts

JOBS = Path(__file__).parent.parent / "examples" / "jobs"
FLEET, NETWORK = default_fleet(), default_network()


def placed(name: str, weights: Weights | None = None) -> Placement:
    job = load_job(JOBS / f"{name}.yaml", {n.gpu for n in FLEET.nodes})
    result = policies.place(job, policies.PlacementContext(FLEET, NETWORK), policies.DEFAULT_POLICY,
                            weights or Weights())
    assert isinstance(result, Placement)
    return result


def geosched(*args: str | Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GEOSCHED_HOME": str(home), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "geosched", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=180, check=False)


def test_candidates_are_the_chosen_first_then_the_others_by_total_with_terms_that_sum_to_it() -> None:
    p = placed("train-64", Weights(carbon=0.5))
    shown, total = ranked(p, shown=0)
    assert total == len(shown) == 1 + len(p.alternatives) > 2
    assert shown[0].chosen and shown[0].zones == p.zones and shown[0].total == p.score.total
    assert not any(c.chosen for c in shown[1:])
    assert [c.total for c in shown[1:]] == sorted(c.score.total for c in p.alternatives)
    for c in shown:
        assert sum(c.terms) == pytest.approx(c.total)
    assert shown[0].terms[2] == pytest.approx(0.5 * p.score.carbon) and shown[0].terms[2] > 0
    assert len(ranked(p, shown=3)[0]) == 3 and ranked(p, shown=3)[1] == total


def test_gang_map_of_a_gang_across_three_zones_marks_the_hop_that_bounds_the_step() -> None:
    p = placed("train-512")
    gang = gang_map(p, FLEET, NETWORK)
    assert [z.zone for z in gang.zones] == sorted(p.zones) and len(p.zones) == 3
    per_zone = {z: sum(a.workers for a in p.assignments if a.zone == z) for z in p.zones}
    assert {z.zone: z.workers for z in gang.zones} == per_zone and sum(per_zone.values()) == p.job.workers
    assert len(gang.hops) == 3 and {frozenset((h.a, h.b)) for h in gang.hops} == {
        frozenset(pair) for pair in ((p.zones[0], p.zones[1]), (p.zones[1], p.zones[2]), (p.zones[0], p.zones[2]))}
    assert p.score.hop is not None
    hop_zones = {FLEET.by_name[n].zone for n in p.score.hop}
    assert [{h.a, h.b} for h in gang.hops if h.bounding] == [hop_zones]
    for h in gang.hops:
        link = NETWORK.zone_link(h.a, h.b)
        assert link is not None and h.rtt_ms == link.rtt_p50_ms
    assert gang.bounding_zone is None and p.score.hop[0] in gang.bound


def test_gang_map_of_a_gang_in_one_zone_has_no_zone_hops_and_marks_the_zone() -> None:
    p = placed("train-64")
    gang = gang_map(p, FLEET, NETWORK)
    assert [z.zone for z in gang.zones] == list(p.zones) and gang.hops == ()
    assert gang.bounding_zone == p.zones[0]


def test_the_figure_has_three_stacked_segments_per_candidate_and_marks_the_chosen_one() -> None:
    p = placed("train-512")
    shown, total = ranked(p)
    fig = placement_figure(p, shown, total, gang_map(p, FLEET, NETWORK))
    assert isinstance(fig, Figure)
    bars_ax, map_ax = fig.axes[:2]
    gids = [patch.get_gid() for patch in bars_ax.patches]
    assert sorted(g for g in gids if g and g.startswith("bar-")) == sorted(
        f"bar-{c.rank}-{t}" for c in shown for t in ("network", "cost", "carbon"))
    assert gids.count("chosen-marker") == 1
    labels = [t.get_text() for t in bars_ax.get_yticklabels()]
    assert labels[0] == f"▶ chosen: 1. {', '.join(p.zones)} · {p.cluster}"
    assert bars_ax.get_yticklabels()[0].get_fontweight() == "bold"
    assert bars_ax.yaxis_inverted() and "lower is better" in bars_ax.get_xlabel()
    assert "lost by" not in bars_ax.get_title()  # train-512: the chosen one has the lowest total
    assert {patch.get_gid() for patch in map_ax.patches} == {f"zone-{z}" for z in p.zones}
    assert [line.get_gid() for line in map_ax.lines].count("bounding-hop") == 1


def test_the_figure_says_why_a_lower_total_lost() -> None:
    p = placed("train-64")  # zone-first's best fit takes us-central1-a over two lower totals
    shown, total = ranked(p)
    lower = [c for c in shown if c.total < p.score.total]
    assert len(lower) == 2
    bars_ax = placement_figure(p, shown, total, gang_map(p, FLEET, NETWORK)).axes[0]
    assert "2 with a lower total lost by zone-first's rules" in bars_ax.get_title()


def test_place_plot_svg_shows_every_candidate_the_chosen_label_and_the_zones(tmp_path: Path) -> None:
    out = tmp_path / "plots" / "decision.svg"
    run = geosched("place", JOBS / "train-512.yaml", "-o", "json", "--plot", out, home=tmp_path / "home")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert f"wrote {out}" in run.stderr
    root = svg_root(out.read_bytes())
    candidates = min(SHOWN, 1 + len(doc["alternatives"]))
    ranks = {int(i.split("-")[1]) for i in svg_ids(root, r"bar-\d+-(network|cost|carbon)")}
    assert ranks == set(range(1, candidates + 1))
    assert svg_ids(root, "chosen-marker") == ["chosen-marker"]
    texts = svg_texts(root)
    assert f"▶ chosen: 1. {', '.join(doc['zones'])} · {doc['cluster']}" in texts
    assert svg_ids(root, "zone-.*") == [f"zone-{z}" for z in sorted(doc["zones"])]
    assert svg_ids(root, "bounding-hop") == ["bounding-hop"]
    assert set(doc["zones"]) <= set(texts)  # each zone's circle is labelled with its name
    workers = [int(t.split()[0]) for t in texts if re.fullmatch(r"\d+ workers, \d+ nodes", t)]
    assert len(workers) == len(doc["zones"]) and sum(workers) == 64  # train-512: 64 workers x 8 GPUs
    assert any(t.endswith("ms - bounding") for t in texts)


def test_place_plot_png_is_the_figure_drawn(tmp_path: Path) -> None:
    out = tmp_path / "decision.png"
    run = geosched("place", JOBS / "train-512.yaml", "--plot", out, home=tmp_path / "home")
    assert run.returncode == 0, run.stderr
    (width, height), distinct, colours = png_summary(out)
    assert width == 15 * DPI and height >= 5 * DPI
    assert distinct > 50  # text antialiasing, bars, circles: far from a blank page
    network = tuple(int(COLOURS["network"][i:i + 2], 16) for i in (1, 3, 5))
    bounding = tuple(int(BOUNDING[i:i + 2], 16) for i in (1, 3, 5))
    assert sum(n for c, n in colours.items() if near(c, network)) > 1000
    assert sum(n for c, n in colours.items() if near(c, bounding)) > 100


def test_place_plot_html_is_self_contained_with_the_svg_inline(tmp_path: Path) -> None:
    out = tmp_path / "decision.html"
    run = geosched("place", JOBS / "train-64.yaml", "--plot", out, home=tmp_path / "home")
    assert run.returncode == 0, run.stderr
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in page
    assert "<script" not in page and "<link" not in page and " src=" not in page
    assert all(ref.startswith("#") for ref in _attributes(page, "href"))
    root = svg_root(page)
    assert svg_ids(root, "chosen-marker") == ["chosen-marker"]
    assert "<title>geosched place: pretrain-64</title>" in page


def _attributes(page: str, name: str) -> list[str]:
    return re.findall(rf'\b{name}="([^"]*)"', page)


def test_names_are_escaped_in_html_and_svg() -> None:
    fig = Figure()
    fig.add_subplot().set_title("<b>&zone</b>")
    page = figure_bytes(fig, "html", title="<script>alert(1)</script>", notes=["a & <i>b</i>"]).decode()
    assert "<script" not in page and "&lt;script&gt;" in page and "a &amp; &lt;i&gt;b&lt;/i&gt;" in page
    assert "<b>&zone</b>" in svg_texts(svg_root(page))


def test_an_unknown_suffix_is_one_line_and_exit_2_before_placing(tmp_path: Path) -> None:
    out = tmp_path / "decision.gif"
    run = geosched("place", JOBS / "train-64.yaml", "--plot", out, home=tmp_path / "home")
    assert run.returncode == 2
    assert run.stderr == f"error: --plot: {out}: expected a .png, .svg or .html file, got '.gif'\n"
    assert run.stdout == "" and not out.exists()


@pytest.mark.integration
def test_place_plot_html_renders_in_chromium(tmp_path: Path) -> None:
    binary = need_chromium()
    out = tmp_path / "decision.html"
    run = geosched("place", JOBS / "train-512.yaml", "--plot", out, home=tmp_path / "home")
    assert run.returncode == 0, run.stderr
    dom = chromium(binary, tmp_path, "dom", "--dump-dom", out.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    root = svg_root(dom.stdout)
    assert svg_ids(root, "chosen-marker") == ["chosen-marker"]
    assert any(t.startswith("▶ chosen: 1. use1-az1") for t in svg_texts(root))
    shot = tmp_path / "shot.png"
    shown = chromium(binary, tmp_path, "shot", f"--screenshot={shot}", "--window-size=1500,900", out.as_uri())
    assert shown.returncode == 0 and shot.exists(), shown.stderr[-2000:]
    network = tuple(int(COLOURS["network"][i:i + 2], 16) for i in (1, 3, 5))
    _, _, colours = png_summary(shot)
    assert sum(n for c, n in colours.items() if near(c, network)) > 1000  # the inline SVG's bars are on screen


def test_a_gang_on_one_node_has_no_hop_to_mark() -> None:
    p = placed("train-8")
    gang = gang_map(p, FLEET, NETWORK)
    assert p.score.hop is None and [(z.zone, z.workers, z.nodes) for z in gang.zones] == [(p.zones[0], 1, 1)]
    assert gang.hops == () and gang.bounding_zone is None and gang.bound == "one node: no network hop"


def test_no_fit_draws_nothing_and_exits_3(tmp_path: Path) -> None:
    job = tmp_path / "huge.yaml"
    job.write_text((JOBS / "train-8.yaml").read_text().replace("workers: 1", "workers: 5000"))
    out = tmp_path / "decision.svg"
    run = geosched("place", job, "--plot", out, home=tmp_path / "home")
    assert run.returncode == 3 and "no fit" in run.stderr
    assert not out.exists()


def test_the_commands_load_matplotlib_only_when_a_picture_is_asked_for() -> None:
    code = ("import sys, geosched.cli.main, geosched.probes.cli, geosched.cli.simulate; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "[]\n"
