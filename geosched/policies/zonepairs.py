"""The link between any two zones of a fleet, without a zones x zones matrix.

A fleet of 10,000 one-node zones made four 10,000 x 10,000 matrices (3.2 GB) before the first decision (issue 19
item 5). A zone pair's link is, in order: the network's explicit link for it (measured, or written in a network
file), else the shipped model's (`geosched.core.netmodel`: same zone, same region, else the two zones' measurement
endpoints), else the unknown link (UNKNOWN_*: a bad intercontinental link). So the pairs are held as the explicit
links (sorted keys, one searchsorted per batch of lookups) plus the model's rules (per zone: region and endpoint;
per endpoint pair: a small table), and the minima and maxima over sets of pairs that zone-first's bounds need are
counted class by class instead of enumerated. The values are those the matrices held, so decisions are unchanged.

Memory is linear in zones and explicit links; only the endpoint table is quadratic, in the model's measurement
endpoints (a few hundred at most), not in the fleet.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from geosched.core import netmodel
from geosched.core.models import LinkStats, pair_key

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

# A zone pair nobody measured or modelled is assumed to be a bad intercontinental link, so a gang is
# never split across it blindly; `--explain` shows the assumption through the worst-link figures.
UNKNOWN_RTT_MS = 300.0
UNKNOWN_THROUGHPUT_GBPS = 1.0
MEASURES = ("rtt", "rtt95", "loss", "tput")
UNKNOWN = {"rtt": UNKNOWN_RTT_MS, "rtt95": UNKNOWN_RTT_MS, "loss": 0.0, "tput": UNKNOWN_THROUGHPUT_GBPS}
# Lower is better for every measure but throughput.
HIGHER_IS_BETTER = {"rtt": False, "rtt95": False, "loss": False, "tput": True}


def _value(link: LinkStats, measure: str) -> float:
    return {"rtt": link.rtt_p50_ms, "rtt95": link.rtt_p95_ms, "loss": link.loss,
            "tput": link.throughput_gbps}[measure]


class ZonePairs:
    """Links between the zones `zone_names` (indexed as given) from a NetworkView's `zone_links`."""

    def __init__(self, zone_names: Sequence[str], region_of_zone: IntArray,
                 zone_links: Mapping[tuple[str, str], LinkStats]) -> None:
        self.z = z = len(zone_names)
        self.region_of_zone = region_of_zone
        index = {name: i for i, name in enumerate(zone_names)}
        model: netmodel.ModelLinks | None = None
        explicit: Mapping[tuple[str, str], LinkStats] = zone_links
        if isinstance(zone_links, netmodel.LayeredLinks):
            explicit, model = zone_links.over, zone_links.under
        elif isinstance(zone_links, netmodel.ModelLinks):
            explicit, model = {}, zone_links

        # Explicit links, both directions, keyed i * z + j and sorted.
        entries: dict[int, LinkStats] = {}
        for (a, b), link in explicit.items():
            i, j = index.get(a), index.get(b)
            if i is not None and j is not None:
                entries[i * z + j] = link
                entries[j * z + i] = link
        keys = sorted(entries)
        self.keys: IntArray = np.array(keys, dtype=np.int64)
        self.values = {m: np.array([_value(entries[k], m) for k in keys], dtype=np.float64) for m in MEASURES}

        # The model's rules, per zone: whether the model covers it (a zone it was not built with has no model
        # link) and its endpoint (-1: none); per endpoint pair, the endpoint link's measures (NaN: none).
        self.modelled: BoolArray = np.zeros(z, dtype=bool)
        self.endpoint: IntArray = np.full(z, -1, dtype=np.int64)
        self.model_region: IntArray = np.full(z, -1, dtype=np.int64)
        names: dict[str, int] = {}
        regions: dict[str, int] = {}
        if model is not None:
            for name, i in index.items():
                zone = model.zones.get(name)
                if zone is None:
                    continue
                self.modelled[i] = True
                self.model_region[i] = regions.setdefault(zone.region_key, len(regions))
                point = netmodel.endpoint(zone)
                if point is not None:
                    self.endpoint[i] = names.setdefault(point, len(names))
        points = list(names)
        e = len(points)
        self.table = {m: np.full((e, e), np.nan) for m in MEASURES}
        links = netmodel.endpoint_links()
        for p, a in enumerate(points):
            for q, b in enumerate(points):
                known = links.get(pair_key(a, b)) if a != b else None
                if known is not None:
                    for m in MEASURES:
                        self.table[m][p, q] = _value(known, m)
        self.endpoints = e

    # --- single pairs -----------------------------------------------------------------------------------

    def get(self, measure: str, za: IntArray, zb: IntArray) -> FloatArray:
        """The links of the zone pairs (za[k], zb[k]), one measure."""
        return self.get_many((measure,), za, zb)[0]

    def get_many(self, measures: tuple[str, ...], za: IntArray, zb: IntArray) -> list[FloatArray]:
        """`get` of several measures of the same pairs: which rule and which explicit link applies to a pair is
        found once for all of them (a ring's hops ask for three measures on every multi-node decision)."""
        za, zb = np.asarray(za, dtype=np.int64), np.asarray(zb, dtype=np.int64)
        rules = self._model_rules(za, zb)
        found = at = None
        if self.keys.size:
            key = za * self.z + zb
            at = np.minimum(np.searchsorted(self.keys, key), self.keys.size - 1)
            found = self.keys[at] == key
            at = at[found]
        outs = []
        for measure in measures:
            model = self._model_values(measure, za.shape, rules)
            out = np.where(np.isnan(model), UNKNOWN[measure], model)
            if found is not None:
                out[found] = self.values[measure][at]
            outs.append(out)
        return outs

    def diagonal(self, measure: str) -> FloatArray:
        """Each zone's link with itself (its intra-zone link)."""
        every = np.arange(self.z, dtype=np.int64)
        return self.get(measure, every, every)

    def _model_rules(self, za: IntArray, zb: IntArray) -> tuple[BoolArray, BoolArray, BoolArray, IntArray, IntArray]:
        """Which of the model's rules (`netmodel.zone_link`) covers each pair: (across endpoints, same region,
        same zone) and the endpoints of each side, the same whatever the measure."""
        both = self.modelled[za] & self.modelled[zb]
        same_region = both & (self.model_region[za] == self.model_region[zb])
        ea, eb = self.endpoint[za], self.endpoint[zb]
        cross = both & ~same_region & (ea >= 0) & (eb >= 0) & (ea != eb)
        return cross, same_region, both & (za == zb), ea[cross], eb[cross]

    def _model_values(self, measure: str, shape: tuple[int, ...],
                      rules: tuple[BoolArray, BoolArray, BoolArray, IntArray, IntArray]) -> FloatArray:
        """The model's link (NaN where it has none), as `netmodel.zone_link` rules it."""
        cross, same_region, same_zone, ea, eb = rules
        out = np.full(shape, np.nan)
        if ea.size:
            out[cross] = self.table[measure][ea, eb]
        out[same_region] = _value(netmodel.SAME_REGION, measure)
        out[same_zone] = _value(netmodel.SAME_ZONE, measure)
        return out

    # --- the best link over sets of pairs ---------------------------------------------------------------

    def region_best(self, measure: str, regions: int) -> FloatArray:
        """Per region (as `region_of_zone` numbers them), the best link between two distinct zones of it
        (+-inf where it has fewer than two zones)."""
        higher = HIGHER_IS_BETTER[measure]
        pick = np.maximum if higher else np.minimum
        out = np.full(regions, -np.inf if higher else np.inf)
        region = self.region_of_zone
        if self.keys.size:
            i, j = np.divmod(self.keys, self.z)
            inside = (i != j) & (region[i] == region[j])
            pick.at(out, region[i[inside]], self.values[measure][inside])
            explicit = np.bincount(region[i[inside]], minlength=regions)
        else:
            explicit = np.zeros(regions, dtype=np.int64)
        # The pairs no explicit link covers take the model's same-region link when it covers both zones (the
        # model's regions are the fleet's), else the unknown link.
        modelled = np.bincount(region[self.modelled], minlength=regions)
        total = np.bincount(region, minlength=regions)
        pairs = total * (total - 1)
        model_pairs = modelled * (modelled - 1)
        if self.keys.size:
            i, j = np.divmod(self.keys, self.z)
            inside = (i != j) & (region[i] == region[j])
            both = inside & self.modelled[i] & self.modelled[j]
            explicit_model = np.bincount(region[i[both]], minlength=regions)
        else:
            explicit_model = np.zeros(regions, dtype=np.int64)
        same = _value(netmodel.SAME_REGION, measure)
        with_model = model_pairs > explicit_model
        out[with_model] = pick(out[with_model], same)
        without = (pairs - model_pairs) > (explicit - explicit_model)
        out[without] = pick(out[without], UNKNOWN[measure])
        return out

    def cross_best(self, measure: str) -> float:
        """The best link between two zones of different regions (+-inf when there are none)."""
        every = np.ones(self.z, dtype=bool)
        return self.best(measure, every, every, same_region=False)

    def best(self, measure: str, a: BoolArray | IntArray, b: BoolArray | IntArray, *,
             same_region: bool = True) -> float:
        """The best link over the ordered zone pairs (i in a, j in b), a zone with itself included when it is
        in both, what `pick(matrix[np.ix_(a, b)])` gave; with `same_region=False`, over the pairs of zones in
        different regions only. +-inf when there is no pair."""
        higher = HIGHER_IS_BETTER[measure]
        pick = max if higher else min
        result = -np.inf if higher else np.inf
        # Zone numbers, each once (a zone given twice adds pairs of the same links: the best is the same).
        zones_a, zones_b = _unique(a), _unique(b)
        region = self.region_of_zone
        # Classes of zones the model treats alike: its endpoint (+1; 0 for none), or one class for the zones it
        # does not cover. Pairs are counted per (class, class) and per kind: a zone with itself, two zones of one
        # region, two regions.
        classes = self.endpoints + 2
        uncovered = classes - 1
        cls = np.where(self.modelled, self.endpoint + 1, uncovered)
        count_a = np.bincount(cls[zones_a], minlength=classes)
        count_b = np.bincount(cls[zones_b], minlength=classes)
        self_pairs = np.bincount(cls[np.intersect1d(zones_a, zones_b, assume_unique=True)], minlength=classes)
        within = np.zeros((classes, classes), dtype=np.int64)  # ordered pairs in one region, selves included
        per_region_a: dict[int, dict[int, int]] = defaultdict(dict)
        for (r, c), n in _groups(region[zones_a], cls[zones_a]).items():
            per_region_a[r][c] = n
        for (r, c), n in _groups(region[zones_b], cls[zones_b]).items():
            for ca, na in per_region_a.get(r, {}).items():
                within[ca, c] += na * n
        across = np.outer(count_a, count_b) - within
        same_pairs = within - np.diag(self_pairs)
        # Explicit links inside the set replace the pairs they cover.
        taken_self = np.zeros(classes, dtype=np.int64)
        taken_same = np.zeros((classes, classes), dtype=np.int64)
        taken_across = np.zeros((classes, classes), dtype=np.int64)
        if self.keys.size:
            i, j = np.divmod(self.keys, self.z)
            inside = _mask(zones_a, self.z)[i] & _mask(zones_b, self.z)[j]
            one = region[i] == region[j]
            if not same_region:
                inside &= ~one
            if inside.any():
                values = self.values[measure][inside]
                result = pick(result, float(values.max() if higher else values.min()))
                ii, jj, kind = i[inside], j[inside], one[inside]
                selves = ii == jj
                np.add.at(taken_self, cls[ii[selves]], 1)
                same = kind & ~selves
                np.add.at(taken_same, (cls[ii[same]], cls[jj[same]]), 1)
                np.add.at(taken_across, (cls[ii[~kind]], cls[jj[~kind]]), 1)
        # The rest take the model's link for their class, or the unknown link.
        unknown = UNKNOWN[measure]
        if same_region:
            left = self_pairs > taken_self
            if left[:uncovered].any():
                result = pick(result, _value(netmodel.SAME_ZONE, measure))
            if left[uncovered]:
                result = pick(result, unknown)
            left2 = same_pairs > taken_same
            if left2[:uncovered, :uncovered].any():
                result = pick(result, _value(netmodel.SAME_REGION, measure))
            if left2[uncovered, :].any() or left2[:, uncovered].any():
                result = pick(result, unknown)
        left3 = across > taken_across
        if left3.any():
            rows, cols = np.nonzero(left3)
            table = self.table[measure]
            for p, q in zip(rows.tolist(), cols.tolist(), strict=True):
                known = 0 < p < uncovered and 0 < q < uncovered and p != q and not np.isnan(table[p - 1, q - 1])
                result = pick(result, float(table[p - 1, q - 1]) if known else unknown)
        return float(result)


def _unique(zones: BoolArray | IntArray) -> IntArray:
    array = np.asarray(zones)
    return np.flatnonzero(array) if array.dtype == np.bool_ else np.unique(array.astype(np.int64))


def _mask(zones: IntArray, z: int) -> BoolArray:
    mask = np.zeros(z, dtype=bool)
    mask[zones] = True
    return mask


def _groups(region: IntArray, cls: IntArray) -> dict[tuple[int, int], int]:
    """How many zones there are per (region, class)."""
    if not region.size:
        return {}
    width = int(cls.max()) + 1
    keys, counts = np.unique(region * width + cls, return_counts=True)
    return {(int(k) // width, int(k) % width): int(n) for k, n in zip(keys.tolist(), counts.tolist(), strict=True)}
