"""The aggregated network view as rows for `probe show`. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from geosched.core.models import LinkStats, NetworkView


def pair_records(view: NetworkView, zone_of: Mapping[str, str]) -> list[dict[str, Any]]:
    """One record per measured node pair: the store's aggregate (medians, packet-weighted loss)."""
    return [{"src": a, "dst": b, "src_zone": zone_of.get(a), "dst_zone": zone_of.get(b), **_measures(view, link)}
            for (a, b), link in sorted(view.node_links.items())]


def zone_records(view: NetworkView) -> list[dict[str, Any]]:
    return [{"src_zone": a, "dst_zone": b, **_measures(view, link)} for (a, b), link in sorted(view.zone_links.items())]


def _measures(view: NetworkView, link: LinkStats) -> dict[str, Any]:
    return {
        "rtt_ms": round(link.rtt_p50_ms, 3),
        "rtt_p95_ms": round(link.rtt_p95_ms, 3),
        "loss": round(link.loss, 6),
        "throughput_gbps": round(link.throughput_gbps, 4),
        "samples": link.samples,
        "age_s": round(link.age_s, 1),
        "stale": view.is_stale(link),
    }
