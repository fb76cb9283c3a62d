"""`geosched probe` commands without a testbed: show and export from a filled store, input errors."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from probe_support import validate_configmap, validate_crd_object
from typer.testing import CliRunner

from geosched.cli.probetargets import store_targets
from geosched.core.errors import InputError
from geosched.core.models import LinkStats
from geosched.files.inventory import load_inventory
from geosched.plots.grid import zone_grid
from geosched.probes.cli import make_app
from geosched.probes.service import inventory_nodes
from geosched.store.db import Sample, Store
from tests.output_support import valid
from tests.plot_support import png_summary, svg_ids, svg_root, svg_texts

INVENTORY = """
regions: [{provider: onprem, name: lab, grid_gco2e_per_kwh: 50, pue: 1.2}]
nodes:
  - {name: a-1, address: 198.18.0.2, zone: a, region: lab, gpu: A100, gpus: 8}
  - {name: a-2, address: 198.18.0.6, zone: a, region: lab, gpu: A100, gpus: 8}
  - {name: a-3, address: 198.18.0.10, zone: a, region: lab, gpu: A100, gpus: 8}
  - {name: b-1, address: 198.18.1.2, zone: b, region: lab}
"""


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path]:
    home, inv = tmp_path / "home", tmp_path / "inv.yaml"
    inv.write_text(INVENTORY)
    with Store(home) as store:
        now = time.time() - 7200  # inside the view's 24 h window, older than its 1 h staleness
        store.add_samples([
            Sample("node", "a-1", "a-2", now, LinkStats(0.3, 0.4, 0.0, 9.0, samples=20)),
            Sample("node", "a-2", "a-3", now, LinkStats(3.0, 3.5, 0.0, 9.0, samples=20)),
            Sample("node", "a-1", "a-3", now, LinkStats(3.1, 3.6, 0.0, 9.0, samples=20)),
            Sample("zone", "a", "a", now, LinkStats(0.4, 0.5, 0.0, 9.0, samples=60)),
            Sample("zone", "a", "b", now, LinkStats(20.0, 21.0, 0.01, 0.1, samples=40)),
        ])
    return home, inv


def test_show_json_records_and_table(setup: tuple[Path, Path], tmp_path: Path) -> None:
    home, inv = setup
    app = make_app(lambda: Store(home), store_targets)
    result = CliRunner().invoke(app, ["show", "--inventory", str(inv), "--output", "json"])
    assert result.exit_code == 0, result.output
    rows = valid(json.loads(result.stdout))["items"]
    assert [(r["src"], r["dst"], r["src_zone"], r["dst_zone"]) for r in rows] == [
        ("a-1", "a-2", "a", "a"), ("a-1", "a-3", "a", "a"), ("a-2", "a-3", "a", "a")]
    assert rows[0]["rtt_ms"] == 0.3 and rows[0]["samples"] == 20 and rows[0]["stale"] is True
    zones = valid(json.loads(CliRunner().invoke(app, ["show", "--scope", "zone", "--output", "json"]).stdout))["items"]
    assert [(r["src_zone"], r["dst_zone"]) for r in zones] == [("a", "a"), ("a", "b")]
    table = CliRunner().invoke(app, ["show", "--inventory", str(inv), "--heatmap", str(tmp_path / "h.png")])
    assert table.exit_code == 0, table.output
    assert "slow among zone peers" in table.stdout and "a-3" in table.stdout
    assert (tmp_path / "h.png").stat().st_size > 1000


def test_export_all_three(setup: tuple[Path, Path], tmp_path: Path) -> None:
    home, inv = setup
    app = make_app(lambda: Store(home), store_targets)
    nt, cm, snap = tmp_path / "nt.yaml", tmp_path / "cm.json", tmp_path / "net.yaml"
    result = CliRunner().invoke(app, ["export", "--inventory", str(inv), "--networktopology", str(nt),
                                      "--configmap", str(cm), "--snapshot", str(snap), "--namespace", "sched"])
    assert result.exit_code == 0, result.output
    validate_crd_object(yaml.safe_load(nt.read_text()))
    doc = json.loads(cm.read_text())
    validate_configmap(doc)
    assert doc["metadata"]["namespace"] == "sched" and len(doc["data"]) == 12
    assert yaml.safe_load(snap.read_text())["kind"] == "NetworkView"


@pytest.mark.parametrize(("args", "message"), [
    (["run"], "the store knows no machines: pass --inventory, or provision first"),
    (["run", "--inventory", "INV", "--gang", "g"], "give either --inventory or --gang"),
    (["run", "--inventory", "INV", "--kinds", "rtt,bogus"], "unknown kind(s) bogus"),
    (["export"], "nothing to write"),
    (["export", "--inventory", "INV", "--networktopology", "OUT", "--name", "Bad_Name"], "not a Kubernetes object"),
])
def test_input_errors(setup: tuple[Path, Path], tmp_path: Path, args: list[str], message: str) -> None:
    from geosched.core.errors import InputError

    home, inv = setup
    args = [str(inv) if a == "INV" else str(tmp_path / "out.yaml") if a == "OUT" else a for a in args]
    result = CliRunner().invoke(make_app(lambda: Store(home), store_targets), args)
    assert isinstance(result.exception, InputError), result.output
    assert message in str(result.exception)
    assert not (tmp_path / "out.yaml").exists()


def test_zone_grid_aggregates_node_pairs_to_zone_pairs(setup: tuple[Path, Path]) -> None:
    home, inv = setup
    with Store(home) as store:
        view = store.network_view()
    grid = zone_grid(view, inventory_nodes(load_inventory(inv)))
    assert grid.labels == ("a (onprem:lab)", "b (onprem:lab)") and grid.groups == ("onprem:lab", "onprem:lab")
    # a-a: the median of its three measured node pairs (0.3, 3.0, 3.1 ms), not their mean or the zone sample.
    assert grid.rtt_ms[0][0] == 3.0 and grid.loss[0][0] == 0.0
    # a-b: no node pair measured; each is estimated from the zone pair (20 ms, 1% loss) and the a-nodes' summaries.
    assert grid.rtt_ms[0][1] == grid.rtt_ms[1][0] == 20.0 and grid.loss[0][1] == 0.01
    assert grid.rtt_ms[1][1] is None  # b has one node and no b-b zone sample: unknown, drawn blank
    assert "median over node pairs" in grid.title and "worst node pair" in grid.title


def test_show_heatmap_at_zone_scope_labels_both_axes_and_writes_the_values(setup: tuple[Path, Path],
                                                                            tmp_path: Path) -> None:
    home, inv = setup
    out = tmp_path / "zones.svg"
    result = CliRunner().invoke(make_app(lambda: Store(home), store_targets),
                                ["show", "--inventory", str(inv), "--scope", "zone", "--heatmap", str(out)])
    assert result.exit_code == 0, result.output
    root = svg_root(out.read_bytes())
    texts = svg_texts(root)
    assert texts.count("a (onprem:lab)") == 2 and texts.count("b (onprem:lab)") == 2  # x and y axis
    assert texts.count("zone (provider:region)") == 2
    assert {"3", "20", "1.0% loss"} <= set(texts)  # values in the cells (multi-line cells are one text per line)
    assert any("median over node pairs" in t for t in texts)
    assert len(svg_ids(root, r"cell-\d-\d")) == 3  # b-b is unknown: no value written


def test_show_heatmap_defaults_to_nodes_for_a_few_and_zones_for_many(setup: tuple[Path, Path], tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    home, inv = setup
    app = make_app(lambda: Store(home), store_targets)
    few = tmp_path / "few.svg"
    assert CliRunner().invoke(app, ["show", "--inventory", str(inv), "--heatmap", str(few)]).exit_code == 0
    texts = svg_texts(svg_root(few.read_bytes()))
    assert texts.count("a-3") == 2 and "a (onprem:lab)" not in texts
    monkeypatch.setattr("geosched.probes.cli.HEATMAP_NODES", 3)
    many = tmp_path / "many.html"
    result = CliRunner().invoke(app, ["show", "--inventory", str(inv), "--heatmap", str(many)])
    assert result.exit_code == 0, result.output
    page = many.read_text(encoding="utf-8")
    assert "<script" not in page and svg_texts(svg_root(page)).count("a (onprem:lab)") == 2
    assert "measured node pairs" in result.stdout  # the table keeps its node scope


def test_show_heatmap_png_is_drawn_and_an_unknown_suffix_is_refused(setup: tuple[Path, Path],
                                                                    tmp_path: Path) -> None:
    home, inv = setup
    app = make_app(lambda: Store(home), store_targets)
    out = tmp_path / "zones.png"
    result = CliRunner().invoke(app, ["show", "--inventory", str(inv), "--scope", "zone", "--heatmap", str(out)])
    assert result.exit_code == 0, result.output
    (width, height), distinct, _ = png_summary(out)
    assert width > height >= 5 * 110 and distinct > 20
    result = CliRunner().invoke(app, ["show", "--inventory", str(inv), "--heatmap", str(tmp_path / "h.jpg")])
    assert isinstance(result.exception, InputError) and "--heatmap" in str(result.exception)
    assert not (tmp_path / "h.jpg").exists()
