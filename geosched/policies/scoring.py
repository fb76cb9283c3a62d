"""The score every policy is judged by: one function, so every comparison is side by side.

The network term is the step time over the step time on the best link in the fleet. The step is compute plus
`geosched.core.comm`'s ring all-reduce, bounded by the slowest hop of the ring the gang's nodes form (`ring`):

- the ring runs zone by zone, region by region (each zone and region boundary is crossed once each way);
  inside a zone the two best-linked nodes sit at its ends, the others in between, so a degraded node's two
  hops stay inside its zone;
- each hop's RTT, loss and throughput come from one pair (`PlacementContext.hop_links`): the measured node
  pair, else the zone pair combined with the two nodes' own summaries. RTT p95 for latency-sensitive jobs;
- workers sharing a node talk over NVLink: no network hop; a gang on one node has no network step.

The three normalised terms (see `Score`) are weighted and summed:

    total = w_network * t_step / t_ideal + w_cost * usd_h / (gpus * median usd_gpu_h)
            + w_carbon * gco2e_h / (gpus * median gco2e_gpu_h)

(medians of the eligible nodes' positive values: a free pool cannot make the reference 0; context._counted)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geosched.core.comm import comm_ms
from geosched.core.models import Score
from geosched.policies.context import FloatArray, IntArray, JobView


@dataclass(frozen=True)
class Rings:
    """The bounding hop of each of a batch of rings: communication ms, its link, and its two nodes (-1, -1
    for a ring of one node)."""

    comm: FloatArray
    rtt: FloatArray
    loss: FloatArray
    tput: FloatArray
    a: IntArray
    b: IntArray


# These three run on every decision, several times: written with the fewest numpy calls (np.append, np.diff and
# np.concatenate cost more in call overhead than their work on a few hundred elements).
def run_starts(values: IntArray) -> IntArray:
    """Where each run of equal values starts in a sorted array."""
    change = np.empty(values.size, dtype=bool)
    change[:1] = True
    np.not_equal(values[1:], values[:-1], out=change[1:])
    return np.flatnonzero(change).astype(np.int64, copy=False)


def run_sizes(starts: IntArray, size: int) -> IntArray:
    """How many elements each run holds, from the runs' starts and the array's size."""
    sizes = np.empty(starts.size, dtype=np.int64)
    sizes[:-1] = starts[1:] - starts[:-1]
    sizes[-1:] = size - starts[-1:]
    return sizes


def run_ids(starts: IntArray, size: int) -> IntArray:
    """The run number of every element, from the runs' starts."""
    return np.repeat(np.arange(starts.size), run_sizes(starts, size))


def ring(view: JobView, nodes: IntArray, starts: IntArray) -> Rings:
    """Bounding hops of a batch of rings: ring k is the distinct nodes nodes[starts[k]:starts[k+1]]."""
    ctx, job = view.ctx, view.job
    size = nodes.size
    if size == starts.size:
        # Every ring is one node (no network step), as for every gang of up to 8 GPUs: the answer the general
        # path below reaches, without its sorting and link look-ups (the bulk of a replay's decisions).
        # One array for the equal fields: nothing writes into a batch's rings once made.
        zero, none = np.zeros(size), np.full(size, -1, dtype=np.int64)
        return Rings(comm=zero, rtt=zero, loss=zero, tput=np.full(size, math.inf), a=none, b=none)
    rid = run_ids(starts, size)
    # One key per (ring, region, zone) segment, in ring order.
    segment = (rid * len(ctx.region_keys) + ctx.region_of[nodes]) * len(ctx.zone_names) + ctx.zone_of[nodes]
    own = comm_ms(job.workers, job.profile.message_mb, view.node_rtt[nodes], ctx.node_loss[nodes],
                  ctx.node_tput[nodes])
    # Rank inside each segment by own link, best first; then lay the segment out as best, 3rd, ..., 2nd.
    by_quality = np.lexsort((nodes, own, segment))
    seg = run_starts(segment[by_quality])
    rank = np.empty(size, dtype=np.int64)
    rank[by_quality] = np.arange(size) - np.repeat(seg, np.diff(np.append(seg, size)))
    position = np.where(rank == 1, size, rank)
    order = nodes[np.argsort(segment * (size + 1) + position, kind="stable")]
    nxt = np.roll(order, -1)
    ends = np.append(starts[1:], size) - 1
    nxt[ends] = order[starts]
    rtt, loss, tput = ctx.hop_links(order, nxt, view.p95)
    hop = comm_ms(job.workers, job.profile.message_mb, rtt, loss, tput)
    hop[order == nxt] = -1.0
    # The first hop of each ring that takes as long as the ring's slowest.
    slowest = np.maximum.reduceat(hop, starts)
    worst = np.minimum.reduceat(np.where(hop == slowest[rid], np.arange(size), size), starts)
    single = slowest < 0
    return Rings(
        comm=np.where(single, 0.0, slowest),
        rtt=np.where(single, 0.0, rtt[worst]),
        loss=np.where(single, 0.0, loss[worst]),
        tput=np.where(single, math.inf, tput[worst]),
        a=np.where(single, -1, order[worst]),
        b=np.where(single, -1, nxt[worst]),
    )


def scores(view: JobView, rings: Rings, usd: FloatArray, gco2e: FloatArray) -> tuple[FloatArray, ...]:
    """(total, network, cost, carbon, step) of a batch, from its rings and the $ per hour its cost term charges
    (the risk-adjusted one for a spot job) and gCO2e per hour."""
    job, w = view.job, view.weights
    step = job.profile.compute_ms + rings.comm
    network = step / view.ideal_step_ms
    cost = usd / (job.gpus * view.price_ref)
    carbon = gco2e / (job.gpus * view.carbon_ref)
    return w.network * network + w.cost * cost + w.carbon * carbon, network, cost, carbon, step


def scores_of(view: JobView, rings: Rings, terms: tuple[FloatArray, ...], usd: FloatArray, gco2e: FloatArray,
              ks: list[int]) -> list[Score]:
    """The `Score`s of members `ks` of a batch whose `scores` are `terms`."""
    names = view.ctx.names
    arrays = (*terms, rings.comm, usd, gco2e, rings.rtt, rings.loss, rings.tput, rings.a, rings.b)
    rows: Iterable[Sequence[Any]]
    if len(ks) == 1:  # a replay's one Score per decision: `item` gives what `tolist` does, without the copies
        rows = [[x.item(ks[0]) for x in arrays]]
    else:
        at = np.array(ks, dtype=np.int64)
        rows = zip(*[x[at].tolist() for x in arrays], strict=True)
    out = []
    for total, network, cost, carbon, step, comm, u, g, rtt, loss, tput, a, b in rows:
        hop = None if a < 0 else (names[a], names[b])
        out.append(Score(total, network, cost, carbon, step, comm, u, g, rtt, loss, tput, hop))
    return out


@dataclass(frozen=True)
class Scored:
    """A batch of assignments scored at once: option k is workers[j] on nodes[j] for j in its run."""

    nodes: IntArray
    workers: IntArray
    starts: IntArray
    terms: tuple[FloatArray, ...]
    usd: FloatArray
    gco2e: FloatArray
    rings: Rings

    @staticmethod
    def of(view: JobView, nodes: IntArray, workers: IntArray, starts: IntArray) -> Scored:
        rings = ring(view, nodes, starts)
        gpus = workers * view.job.gpus_per_worker
        # The cost term charges the risk-adjusted $/h of a spot job; the Score reports the price itself.
        spot = view.cost_gpu is not view.price_gpu
        per_gpu = (view.price_gpu, view.carbon_gpu, view.cost_gpu) if spot else (view.price_gpu, view.carbon_gpu)
        sums = [gpus * x[nodes] for x in per_gpu]
        if nodes.size != starts.size:  # else one node per option (every gang of up to 8 GPUs): a sum of one term
            sums = [np.add.reduceat(x, starts) for x in sums]
        usd: FloatArray = sums[0]
        gco2e: FloatArray = sums[1]
        charged = sums[2] if spot else usd
        return Scored(nodes, workers, starts, scores(view, rings, charged, gco2e), usd, gco2e, rings)

    @property
    def total(self) -> FloatArray:
        return self.terms[0]

    @property
    def best(self) -> float:
        return float(self.terms[0].min())

    def members(self, k: int) -> tuple[IntArray, IntArray]:
        end = self.starts[k + 1] if k + 1 < self.starts.size else self.nodes.size
        return self.nodes[self.starts[k]:end], self.workers[self.starts[k]:end]

    def scores(self, view: JobView, ks: list[int]) -> list[Score]:
        return scores_of(view, self.rings, self.terms, self.usd, self.gco2e, ks)


def evaluate(view: JobView, nodes: IntArray, workers: IntArray) -> Score:
    """Score a concrete assignment: `workers[k]` workers on node `nodes[k]`."""
    keep = workers > 0
    return Scored.of(view, nodes[keep], workers[keep], np.zeros(1, dtype=np.int64)).scores(view, [0])[0]
