"""The network view as a square grid for a heatmap, at node or zone scope. Pure: view and nodes in, values out.

Node scope: every node pair's link as the view knows it (measured, else estimated from its zone pair and the two
nodes' summaries, as `NetworkView.link`), nodes ordered by region, zone and name.

Zone scope: the node pairs aggregated to zone pairs, zones ordered by region and name:
- RTT: the **median** over the pair's node pairs of their RTT p50, so one slow NIC does not paint a whole zone
  pair (the slow-node table names it);
- loss: the **worst** node pair, since one lossy pair is enough to slow a ring that crosses it;
- a zone pair with no node pair (a zone of one node, on the diagonal) takes the view's zone link, if any.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import median

from geosched.core.models import LinkStats, NetworkView, Node

Cells = tuple[tuple[float | None, ...], ...]


@dataclass(frozen=True)
class LinkGrid:
    scope: str  # "node" or "zone"
    labels: tuple[str, ...]  # one per row and column
    groups: tuple[str, ...]  # each row's group: its zone (node scope) or its region (zone scope)
    rtt_ms: Cells
    loss: Cells
    title: str


def ordered(nodes: Sequence[Node]) -> list[Node]:
    return sorted(nodes, key=lambda n: (n.region_key, n.zone, n.name))


def node_links(view: NetworkView, nodes: Sequence[Node]) -> list[list[LinkStats | None]]:
    """Every pair's link (None on the diagonal and where nothing is known), in the order of `nodes`."""
    summaries = view.node_summaries({n.name: n.zone for n in nodes})
    links: list[list[LinkStats | None]] = [[None] * len(nodes) for _ in nodes]
    for i, a in enumerate(nodes):
        for j in range(i + 1, len(nodes)):  # links are undirected: each pair once
            links[i][j] = links[j][i] = view.link(a, nodes[j], summaries)
    return links


def node_grid(view: NetworkView, nodes: Sequence[Node]) -> LinkGrid:
    order = ordered(nodes)
    links = node_links(view, order)
    return LinkGrid("node", tuple(n.name for n in order), tuple(n.zone for n in order),
                    _cells(links, lambda x: x.rtt_p50_ms), _cells(links, lambda x: x.loss),
                    "RTT p50 between nodes (ms; measured, else estimated), grouped by zone")


def zone_grid(view: NetworkView, nodes: Sequence[Node]) -> LinkGrid:
    order = ordered(nodes)
    links = node_links(view, order)
    zones: list[Node] = []  # one node per zone, for its names
    for n in order:
        if not zones or zones[-1].zone != n.zone:
            zones.append(n)
    index = {z.zone: i for i, z in enumerate(zones)}
    pairs: dict[tuple[int, int], list[LinkStats]] = {}
    for i, a in enumerate(order):
        for j, b in enumerate(order):
            link = links[i][j]
            if link is not None:
                pairs.setdefault((index[a.zone], index[b.zone]), []).append(link)
    rtt: list[list[float | None]] = []
    loss: list[list[float | None]] = []
    for i, za in enumerate(zones):
        rtt.append([])
        loss.append([])
        for j, zb in enumerate(zones):
            found = pairs.get((i, j))
            if not found:
                zone_link = view.zone_link(za.zone, zb.zone)
                found = [zone_link] if zone_link is not None else []
            rtt[i].append(median(x.rtt_p50_ms for x in found) if found else None)
            loss[i].append(max(x.loss for x in found) if found else None)
    return LinkGrid("zone", tuple(f"{z.zone} ({z.provider}:{z.region})" for z in zones),
                    tuple(z.region_key for z in zones), tuple(map(tuple, rtt)), tuple(map(tuple, loss)),
                    "RTT p50 between zones: median over node pairs (ms); loss: worst node pair")


def _cells(links: list[list[LinkStats | None]], value: Callable[[LinkStats], float]) -> Cells:
    return tuple(tuple(None if x is None else float(value(x)) for x in row) for row in links)
