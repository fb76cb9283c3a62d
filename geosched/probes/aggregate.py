"""A run's measurements -> store samples, and slow-node flags. Pure.

Per node pair: RTT p50/p95 from the echo run's round trips, loss as lost/sent, throughput from iperf3.
Per zone pair: the median of its node pairs' p50 and p95 (robust to one slow node, which the node
summaries show instead), loss weighted by packets, the median measured throughput.

A store sample carries all four measures, but a run measures throughput on a few representative pairs
only; a measure a pair did not get is filled from, in order: this run's zone pair, the prior view's
node pair, the prior view's zone pair, and finally a conservative unknown (1 Gbit/s, no loss).

Which node pairs become "node" samples: by default every measured pair (`NodeScope.ALL`); the core's
node summaries read only a node's intra-zone links, and inter-zone pairs also feed their zone pair.
`NodeScope.INTRA_ZONE` keeps the store smaller on large fleets.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from geosched.probes.results import RunReport, SlowNode

if TYPE_CHECKING:
    from geosched.core.models import LinkStats, NetworkView
    from geosched.probes.plan import Pair
    from geosched.store.db import Sample

UNKNOWN_THROUGHPUT_GBPS = 1.0
# Snapshots require throughput > 0; a stalled test is stored as "practically nothing", not as zero.
MIN_THROUGHPUT_GBPS = 1e-6


class NodeScope(StrEnum):
    INTRA_ZONE = "intra-zone"
    ALL = "all"


@dataclass(frozen=True, slots=True)
class _Partial:
    """What one run measured for one pair; None where it measured nothing."""

    rtt_p50_ms: float | None
    rtt_p95_ms: float | None
    sent: int
    lost: int
    throughput_gbps: float | None


def to_samples(report: RunReport, zone_of: Mapping[str, str], taken_at: float, *,
               prior: NetworkView | None = None, no_reply_rtt_ms: float = 1000.0,
               node_scope: NodeScope = NodeScope.ALL) -> tuple[list[Sample], list[Sample]]:
    """(node samples, zone samples) for `Store.add_samples`."""
    from geosched.core.models import pair_key
    from geosched.store.db import Sample
    partials = _partials(report, no_reply_rtt_ms)
    zone_links = _zone_links(partials, zone_of, prior, no_reply_rtt_ms)
    node_samples = []
    for (a, b), part in sorted(partials.items()):
        za, zb = zone_of[a], zone_of[b]
        if node_scope is NodeScope.INTRA_ZONE and za != zb:
            continue
        fallbacks = [zone_links.get(pair_key(za, zb))]
        if prior is not None:
            fallbacks += [prior.node_link(a, b), prior.zone_link(za, zb)]
        node_samples.append(Sample("node", a, b, taken_at, _complete(part, fallbacks)))
    zone_samples = [Sample("zone", a, b, taken_at, link) for (a, b), link in sorted(zone_links.items())]
    return node_samples, zone_samples


def node_pair_links(report: RunReport, no_reply_rtt_ms: float = 1000.0) -> dict[Pair, LinkStats]:
    """Every measured node pair of the run as a LinkStats (unmeasured measures left at unknown)."""
    return {pair: _complete(part, []) for pair, part in _partials(report, no_reply_rtt_ms).items()}


def slow_nodes(links: Mapping[Pair, LinkStats], zone_of: Mapping[str, str], *, ratio: float = 2.0,
               margin_ms: float = 0.5, loss_threshold: float = 0.05) -> list[SlowNode]:
    """Nodes slow among their zone peers, from intra-zone links only.

    A node's RTT is the lower median of its intra-zone links' p50: with two links (the sampled ring),
    that is the better one, so a healthy neighbour of a slow node is not blamed for it. The zone's RTT
    is the median over its nodes. Flagged: RTT > ratio x zone RTT and > zone RTT + margin, or loss at
    least `loss_threshold` and above ratio x the zone's. A zone of two nodes cannot say which is slow.
    """
    per_node: dict[str, list[LinkStats]] = {}
    for (a, b), link in links.items():
        if a in zone_of and b in zone_of and zone_of[a] == zone_of[b]:
            per_node.setdefault(a, []).append(link)
            per_node.setdefault(b, []).append(link)
    rtt = {n: statistics.median_low([x.rtt_p50_ms for x in ls]) for n, ls in per_node.items()}
    loss = {n: statistics.median_low([x.loss for x in ls]) for n, ls in per_node.items()}
    zones: dict[str, list[str]] = {}
    for n in per_node:
        zones.setdefault(zone_of[n], []).append(n)
    flagged = []
    for zone, members in sorted(zones.items()):
        zone_rtt = statistics.median(rtt[n] for n in members)
        zone_loss = statistics.median(loss[n] for n in members)
        for n in sorted(members):
            reasons = []
            if rtt[n] > ratio * zone_rtt and rtt[n] - zone_rtt > margin_ms:
                reasons.append(f"median RTT {rtt[n]:.2f} ms vs zone {zone_rtt:.2f} ms")
            if loss[n] >= loss_threshold and loss[n] > ratio * zone_loss:
                reasons.append(f"loss {loss[n]:.1%} vs zone {zone_loss:.1%}")
            if reasons:
                flagged.append(SlowNode(n, zone, rtt[n], zone_rtt, loss[n], "; ".join(reasons)))
    return flagged


def _partials(report: RunReport, no_reply_rtt_ms: float) -> dict[Pair, _Partial]:
    from geosched.core.models import pair_key
    out: dict[Pair, _Partial] = {}
    for r in report.echoes:
        key = pair_key(r.src, r.dst)
        if r.echo.received > 0:
            p50, p95 = r.echo.p50_ms, r.echo.p95_ms
        else:
            # Nothing came back: the round trip is at least the reply timeout, an honest lower bound.
            p50 = p95 = no_reply_rtt_ms
        out[key] = _merge(out.get(key), _Partial(p50, p95, r.echo.sent, r.echo.sent - r.echo.received, None))
    for t in report.throughputs:
        key = pair_key(t.src, t.dst)
        rtt = t.iperf.min_rtt_ms
        out[key] = _merge(out.get(key), _Partial(rtt, rtt, 0, 0, t.iperf.gbps))
    return out


def _merge(old: _Partial | None, new: _Partial) -> _Partial:
    if old is None:
        return new
    echo = old if old.sent else new  # an echo run's RTT beats TCP's min RTT under load
    return _Partial(
        rtt_p50_ms=echo.rtt_p50_ms if echo.rtt_p50_ms is not None else new.rtt_p50_ms,
        rtt_p95_ms=echo.rtt_p95_ms if echo.rtt_p95_ms is not None else new.rtt_p95_ms,
        sent=old.sent + new.sent,
        lost=old.lost + new.lost,
        throughput_gbps=_mean_opt(old.throughput_gbps, new.throughput_gbps),
    )


def _mean_opt(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return a if b is None else b
    return (a + b) / 2


def _zone_links(partials: Mapping[Pair, _Partial], zone_of: Mapping[str, str], prior: NetworkView | None,
                no_reply_rtt_ms: float) -> dict[Pair, LinkStats]:
    from geosched.core.models import pair_key
    groups: dict[Pair, list[_Partial]] = {}
    for (a, b), part in partials.items():
        groups.setdefault(pair_key(zone_of[a], zone_of[b]), []).append(part)
    out = {}
    for key, parts in groups.items():
        answered = [p for p in parts if p.sent and p.lost < p.sent]
        timed = answered or [p for p in parts if p.rtt_p50_ms is not None]
        sent = sum(p.sent for p in parts)
        tputs = [p.throughput_gbps for p in parts if p.throughput_gbps is not None]
        part = _Partial(
            rtt_p50_ms=_median_opt(p.rtt_p50_ms for p in timed),
            rtt_p95_ms=_median_opt(p.rtt_p95_ms for p in timed),
            sent=sent,
            lost=sum(p.lost for p in parts),
            throughput_gbps=statistics.median(tputs) if tputs else None,
        )
        if part.rtt_p50_ms is None and sent:
            part = _Partial(no_reply_rtt_ms, no_reply_rtt_ms, part.sent, part.lost, part.throughput_gbps)
        out[key] = _complete(part, [prior.zone_link(*key) if prior is not None else None])
    return out


def _median_opt(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _complete(part: _Partial, fallbacks: Iterable[LinkStats | None]) -> LinkStats:
    from geosched.core.models import LinkStats
    known = [f for f in fallbacks if f is not None]
    p50 = part.rtt_p50_ms if part.rtt_p50_ms is not None else next((f.rtt_p50_ms for f in known), None)
    p95 = part.rtt_p95_ms if part.rtt_p95_ms is not None else next((f.rtt_p95_ms for f in known), None)
    if p50 is None or p95 is None:
        raise ValueError("a pair with neither an echo run nor a throughput test cannot become a sample")
    loss = part.lost / part.sent if part.sent else next((f.loss for f in known), 0.0)
    tput = part.throughput_gbps if part.throughput_gbps is not None else next(
        (f.throughput_gbps for f in known), UNKNOWN_THROUGHPUT_GBPS)
    return LinkStats(rtt_p50_ms=p50, rtt_p95_ms=max(p50, p95), loss=loss,
                     throughput_gbps=max(tput, MIN_THROUGHPUT_GBPS),
                     samples=max(part.sent, 1))
