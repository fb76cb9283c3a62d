"""The HTML report, written to a file and opened in headless Chromium: it renders, with its charts."""

from __future__ import annotations

import base64
import io
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image
from report_support import T0, H, used

from geosched import policies
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import Placement
from geosched.demo import demo_jobs
from geosched.report.report import report
from geosched.store.db import Store
from tests.chromium_support import chromium, need_chromium

HEADINGS = ["Summary", "Cost by region", "Emissions by region over time", "Cost and carbon per placement",
            "Savings against baselines", "By job", "By cluster", "By region", "By provider", "By day", "Method"]
CHARTS = 4
COST_BAR = (0x3B, 0x6E, 0xA8)  # charts.cost_by_region's bar colour: only a decoded chart can put it on screen


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.images: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h1", "h2", "h3"):
            self._in = tag
            self.headings.append("")
        if tag == "img":
            self.images.append(dict(attrs).get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in:
            self.headings[-1] += data


@pytest.fixture
def report_file(tmp_path: Path) -> Path:
    """The demo jobs placed on the embedded fleet and run as kube jobs over three days, as an HTML report."""
    store = Store(tmp_path / "home")
    fleet = default_fleet()
    ctx = policies.PlacementContext(fleet, default_network())
    for k, job in enumerate(demo_jobs()):
        placement = policies.place(job, ctx)
        assert isinstance(placement, Placement)
        store.record_placement(placement)
        for a in placement.assignments:
            node = fleet.by_name[a.node]
            used(store, f"{job.name}-{a.node}", T0 + k * 5 * H, T0 + (k + 1) * 20 * H, kind="job", job=job.name,
                 provider=node.provider, region=node.region, zone=node.zone, cluster=node.cluster,
                 instance_type=node.instance_type, gpu=node.gpu, gpus=a.workers * job.gpus_per_worker, source="kube")
    out = tmp_path / "site" / "report.html"
    result = report(store, "cost", "region", T0, T0 + 4 * 24 * H, "html", out, now=T0 + 4 * 24 * H)
    assert result.path == out and out.read_text() == result.text
    return out


@pytest.mark.integration
def test_html_report_renders_with_its_charts_in_chromium(report_file: Path, tmp_path: Path) -> None:
    binary = need_chromium()
    dom = chromium(binary, tmp_path, "dom", "--dump-dom", report_file.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = _Dom()
    parsed.feed(dom.stdout)
    assert parsed.headings[0] == "geosched cost report"
    for heading in HEADINGS:
        assert heading in parsed.headings, (heading, parsed.headings)
    assert len(parsed.images) == CHARTS
    for src in parsed.images:
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
        with Image.open(io.BytesIO(png)) as chart:
            assert chart.width >= 600 and chart.height >= 200

    shot = tmp_path / "shot.png"
    run = chromium(binary, tmp_path, "shot", f"--screenshot={shot}", "--window-size=1280,2000",
                    "--hide-scrollbars", report_file.as_uri())
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    with Image.open(shot) as image:
        rgb = image.convert("RGB")
        assert rgb.size == (1280, 2000)
        colours = rgb.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 20, "the screenshot is (nearly) one colour: nothing rendered"
    bar = sum(count for count, colour in colours if _near(colour, COST_BAR))
    assert bar > 2000, "the cost-by-region chart's bars are not on screen: its image did not decode"


def _near(colour: object, target: tuple[int, int, int]) -> bool:
    return isinstance(colour, tuple) and all(abs(int(c) - t) <= 3 for c, t in zip(colour, target, strict=True))


def test_html_is_self_contained(report_file: Path) -> None:
    text = report_file.read_text()
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    assert "<script" not in text and "http://" not in text.split("<h2>Method</h2>")[0]
    assert text.count("<img ") == CHARTS
