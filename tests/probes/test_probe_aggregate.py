"""A run's measurements -> node and zone samples, filled-in measures, slow-node flags."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from geosched.console.output import rfc3339
from geosched.core.models import LinkStats, NetworkView
from geosched.files.formats import API_VERSION
from geosched.probes.aggregate import (
    UNKNOWN_THROUGHPUT_GBPS,
    NodeScope,
    node_pair_links,
    slow_nodes,
    to_samples,
)
from geosched.probes.parsers import EchoRun, IperfRun
from geosched.probes.plan import Plan
from geosched.probes.results import EchoResult, RunReport, SlowNode, ThroughputResult, run_doc
from geosched.probes.settings import PlanKind
from geosched.store.db import Store
from tests.output_support import valid

ZONE = {"a1": "a", "a2": "a", "a3": "a", "b1": "b", "b2": "b"}


def echo(src: str, dst: str, rtts: list[float], sent: int | None = None) -> EchoResult:
    return EchoResult(src, dst, EchoRun("icmp", sent or len(rtts), len(rtts), tuple(rtts)))


def report(echoes: Sequence[EchoResult], tputs: Sequence[ThroughputResult] = ()) -> RunReport:
    plan = Plan(PlanKind.FULL, 0, tuple((e.src, e.dst) for e in echoes), tuple((t.src, t.dst) for t in tputs))
    return RunReport(plan, 1000.0, 1.0, tuple(echoes), tuple(tputs), ())


def tput(src: str, dst: str, gbps: float, min_rtt: float | None = None) -> ThroughputResult:
    return ThroughputResult(src, dst, IperfRun(gbps * 1e9, gbps * 1e9, 0, min_rtt))


RUN = report(
    [echo("a1", "a2", [0.4, 0.5, 0.6]), echo("a2", "a3", [0.5] * 4), echo("a3", "a1", [0.45] * 4),
     echo("b1", "b2", [0.3] * 2, sent=4), echo("a1", "b1", [20.0, 21.0]), echo("b2", "a2", [22.0] * 3)],
    [tput("a1", "b1", 0.2), tput("a1", "a2", 0.9)],
)


def test_zone_samples_are_medians_and_packet_weighted_loss() -> None:
    _, zones = to_samples(RUN, ZONE, 1000.0)
    by_pair = {(s.a, s.b): s.link for s in zones}
    assert set(by_pair) == {("a", "a"), ("b", "b"), ("a", "b")}
    ab = by_pair[("a", "b")]
    assert ab.rtt_p50_ms == pytest.approx((20.5 + 22.0) / 2)
    assert ab.throughput_gbps == 0.2 and ab.loss == 0.0 and ab.samples == 5
    bb = by_pair[("b", "b")]
    assert bb.loss == 0.5 and bb.throughput_gbps == UNKNOWN_THROUGHPUT_GBPS  # nothing measured, nothing known
    aa = by_pair[("a", "a")]
    assert aa.rtt_p50_ms == 0.5 and aa.throughput_gbps == 0.9
    assert all(s.scope == "zone" and s.taken_at == 1000.0 for s in zones)


def test_node_samples_cover_every_pair_by_default_and_fill_from_the_zone_pair() -> None:
    intra, _ = to_samples(RUN, ZONE, 1000.0, node_scope=NodeScope.INTRA_ZONE)
    by_pair = {(s.a, s.b): s.link for s in intra}
    assert set(by_pair) == {("a1", "a2"), ("a2", "a3"), ("a1", "a3"), ("b1", "b2")}
    assert by_pair[("a1", "a2")].throughput_gbps == 0.9  # measured
    assert by_pair[("a2", "a3")].throughput_gbps == 0.9  # its zone pair's
    assert by_pair[("a1", "a2")].samples == 3
    everything, _ = to_samples(RUN, ZONE, 1000.0)
    assert {(s.a, s.b) for s in everything} >= set(by_pair) | {("a1", "b1"), ("a2", "b2")}


def test_prior_view_fills_what_this_run_did_not_measure() -> None:
    prior = NetworkView(zone_links={("b", "b"): LinkStats(0.3, 0.4, 0.0, 7.0)},
                        node_links={("b1", "b2"): LinkStats(0.3, 0.4, 0.0, 5.0)})
    nodes, zones = to_samples(RUN, ZONE, 1000.0, prior=prior)
    assert {(s.a, s.b): s.link for s in zones}[("b", "b")].throughput_gbps == 7.0
    # The zone pair of this run comes first, and it took its value from the prior zone link.
    assert {(s.a, s.b): s.link for s in nodes}[("b1", "b2")].throughput_gbps == 7.0


def test_all_lost_pair_keeps_the_reply_timeout_as_its_rtt_bound() -> None:
    run = report([EchoResult("a1", "b1", EchoRun("icmp", 10, 0, ()))])
    _, zones = to_samples(run, ZONE, 1.0, no_reply_rtt_ms=1000.0)
    assert zones[0].link.loss == 1.0 and zones[0].link.rtt_p50_ms == 1000.0


def test_throughput_only_pair_uses_tcp_min_rtt() -> None:
    run = report([], [tput("a1", "b1", 0.1, min_rtt=20.3)])
    links = node_pair_links(run)
    assert links[("a1", "b1")].rtt_p50_ms == 20.3 and links[("a1", "b1")].throughput_gbps == pytest.approx(0.1)


def test_samples_round_trip_through_the_store(tmp_path: Path) -> None:
    nodes, zones = to_samples(RUN, ZONE, 1000.0)
    with Store(tmp_path / "home") as store:
        store.add_samples([*nodes, *zones])
        store.add_samples(to_samples(RUN, ZONE, 1100.0)[0])
        view = store.network_view(now=1200.0)
    ab, a1a2 = view.zone_link("a", "b"), view.node_link("a1", "a2")
    assert ab is not None and ab.age_s == 200.0
    assert a1a2 is not None and a1a2.samples == 6
    across = view.node_link("a1", "b1")
    assert across is not None and across.rtt_p50_ms > 10  # stored, but no node's own summary reads it


def test_slow_node_flagged_against_its_zone_peers_not_its_neighbours() -> None:
    fast, slow = LinkStats(0.4, 0.5, 0.0, 10.0), LinkStats(3.0, 3.5, 0.0, 10.0)
    names = ["n1", "n2", "n3", "n4", "n5"]
    zone = dict.fromkeys(names, "z") | {"x1": "x"}
    # A ring n1-n2-n3-n4-n5-n1 where n3 is slow: n2 and n4 each have one slow link.
    ring = {("n1", "n2"): fast, ("n2", "n3"): slow, ("n3", "n4"): slow, ("n4", "n5"): fast, ("n1", "n5"): fast,
            ("n1", "x1"): LinkStats(30.0, 31.0, 0.0, 1.0)}
    flagged = slow_nodes(ring, zone)
    assert [s.name for s in flagged] == ["n3"]
    assert "median RTT 3.00 ms vs zone 0.40 ms" in flagged[0].reason
    lossy = dict(ring) | {("n2", "n3"): LinkStats(0.4, 0.5, 0.2, 10.0), ("n3", "n4"): LinkStats(0.4, 0.5, 0.1, 10.0)}
    assert [(s.name, "loss" in s.reason) for s in slow_nodes(lossy, zone)] == [("n3", True)]
    # Slower but within the margin: not flagged.
    small = {k: LinkStats(0.1, 0.1, 0.0, 1.0) if v is fast else LinkStats(0.5, 0.5, 0.0, 1.0) for k, v in ring.items()}
    assert slow_nodes(small, zone) == []


def test_report_document() -> None:
    slow = [SlowNode("a2", "a", 3.0, 0.4, 0.0, "slow")]
    doc = run_doc(RUN, 6, 3, slow).dump()
    # The whole ProbeRun as `probe run -o json` prints it (geosched/probes/cli.py) is valid against the schema its
    # declaration writes (geosched/files/decl/probe.py): the testbed checks a real run, this one runs everywhere.
    printed = {"apiVersion": API_VERSION, "kind": "ProbeRun", **doc}
    valid(printed)
    with pytest.raises(AssertionError, match="ProbeRun: echo/0"):
        valid({**printed, "echo": [{**doc["echo"][0], "rtt_ms": 1.0}]})
    assert doc["started_at"] == rfc3339(RUN.started_at)
    assert doc["stored"] == {"node_samples": 6, "zone_samples": 3}
    assert doc["slow_nodes"] == [{"node": "a2", "zone": "a", "reason": "slow"}]
    assert doc["planned"] == {"echo_pairs": 6, "throughput_pairs": 2}
    assert doc["echo"][3] == {"src": "b1", "dst": "b2", "method": "icmp", "sent": 4, "received": 2,
                                   "loss": 0.5, "rtt_p50_ms": 0.3, "rtt_p95_ms": 0.3, "jitter_ms": 0.0}
