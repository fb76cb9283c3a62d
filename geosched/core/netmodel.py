"""The shipped network model: measured inter-region RTT and throughput, plus documented intra-region values.

The shipped measurements (Skyplane, 2022) are per AWS region and per GCP zone. Links inside a region are
not in them, so we use these documented modelling values:

- same zone: 0.2 ms RTT p50 (0.4 ms p95), 50 Gbit/s, no loss. A same-AZ round trip on a cloud VPC is
  typically 0.1-0.3 ms; 50 Gbit/s is what NCCL over TCP sustains on a 100 Gbit/s NIC.
- other zone, same region: 1.0 ms RTT p50 (1.6 ms p95), 25 Gbit/s, no loss. AWS states "single-digit
  millisecond" latency between zones of a region; measured values are mostly 0.5-1.5 ms.
- other region: the measured average RTT as p50, the measured maximum as p95, and the lower of the two
  directions' iperf3 throughput (64 streams).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from importlib import resources

from geosched import clouds
from geosched.core.models import LinkStats, Zone, pair_key

SAME_ZONE = LinkStats(rtt_p50_ms=0.2, rtt_p95_ms=0.4, loss=0.0, throughput_gbps=50.0, samples=0)
SAME_REGION = LinkStats(rtt_p50_ms=1.0, rtt_p95_ms=1.6, loss=0.0, throughput_gbps=25.0, samples=0)


def _read(name: str) -> list[dict[str, str]]:
    with resources.files("geosched.data").joinpath(name).open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@cache
def endpoint_links() -> dict[tuple[str, str], LinkStats]:
    """Undirected links between measurement endpoints (`aws:<region>`, `gcp:<zone>`)."""
    rtt: dict[tuple[str, str], tuple[float, float]] = {}
    for row in _read("region_rtt_ms.csv"):
        key = pair_key(row["src"], row["dst"])
        avg, peak = float(row["avg_rtt_ms"]), float(row["max_rtt_ms"])
        old = rtt.get(key)
        rtt[key] = (avg, peak) if old is None else ((old[0] + avg) / 2, max(old[1], peak))
    tput: dict[tuple[str, str], float] = {}
    for row in _read("region_throughput_gbps.csv"):
        key = pair_key(row["src"], row["dst"])
        tput[key] = min(tput.get(key, float("inf")), float(row["throughput_gbps"]))
    return {
        key: LinkStats(rtt_p50_ms=avg, rtt_p95_ms=peak, loss=0.0, throughput_gbps=tput[key], samples=0)
        for key, (avg, peak) in rtt.items()
        if key in tput
    }


@cache
def _endpoints() -> frozenset[str]:
    return frozenset(e for key in endpoint_links() for e in key)


def endpoint(zone: Zone) -> str | None:
    """The measurement endpoint standing for a zone, as its cloud's spec says the model measured it: its region
    (`aws:<region>`), or the zone or else a sibling zone (`gcp:<zone>`); None for a cloud the model did not
    measure."""
    spec = clouds.get(zone.provider)
    scope = spec.network_endpoint if spec is not None else None
    if scope == "region":
        name = f"{zone.provider}:{zone.region}"
        return name if name in _endpoints() else None
    if scope == "zone":
        exact = f"{zone.provider}:{zone.name}"
        if exact in _endpoints():
            return exact
        siblings = sorted(e for e in _endpoints() if e.startswith(f"{zone.provider}:{zone.region}-"))
        return siblings[0] if siblings else None
    return None


def zone_link(a: Zone, b: Zone) -> LinkStats | None:
    if a.name == b.name:
        return SAME_ZONE
    if a.region_key == b.region_key:
        return SAME_REGION
    ea, eb = endpoint(a), endpoint(b)
    if ea is None or eb is None or ea == eb:
        return None
    return endpoint_links().get(pair_key(ea, eb))


def zone_links(zones: Iterable[Zone]) -> ModelLinks:
    """Every zone pair (including each zone with itself) that the model knows, as a mapping computed on
    demand: a fleet of 10,000 zones in one region has 50 million modelled pairs, which a dict would hold
    (gigabytes) and build (a minute) before the first decision (issue 19 item 5)."""
    return ModelLinks(zones)


class ModelLinks(Mapping[tuple[str, str], LinkStats]):
    """The model's links between the given zones, keyed by `pair_key`, as `zone_link` gives them: the pairs it
    knows, in the order a dict built zone by zone (by name, each with itself and those after it) had them.
    Lookups are constant time; iterating and `len` visit every pair (for exports of small fleets)."""

    def __init__(self, zones: Iterable[Zone]) -> None:
        self.zones: dict[str, Zone] = {z.name: z for z in sorted(zones, key=lambda z: z.name)}

    def __getitem__(self, key: tuple[str, str]) -> LinkStats:
        a, b = key
        za, zb = self.zones.get(a), self.zones.get(b)
        if za is None or zb is None or a > b:  # keys are pair_key()s, as in the dict this replaces
            raise KeyError(key)
        link = zone_link(za, zb)
        if link is None:
            raise KeyError(key)
        return link

    def __iter__(self) -> Iterator[tuple[str, str]]:
        items = list(self.zones.values())
        for i, a in enumerate(items):
            for b in items[i:]:
                if zone_link(a, b) is not None:
                    yield pair_key(a.name, b.name)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class LayeredLinks(Mapping[tuple[str, str], LinkStats]):
    """Links in `over` (measured), else in `under` (the model): `{**under, **over}` without building it.
    Iterates in that dict's order: `under`'s pairs (with `over`'s link where it has one), then `over`'s others."""

    def __init__(self, over: Mapping[tuple[str, str], LinkStats], under: ModelLinks) -> None:
        self.over = over
        self.under = under

    def __getitem__(self, key: tuple[str, str]) -> LinkStats:
        link = self.over.get(key)
        return link if link is not None else self.under[key]

    def __contains__(self, key: object) -> bool:
        return key in self.over or key in self.under

    def __iter__(self) -> Iterator[tuple[str, str]]:
        yield from self.under
        yield from (key for key in self.over if key not in self.under)

    def __len__(self) -> int:
        return sum(1 for _ in self)
