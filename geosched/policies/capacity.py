"""Capacity-aware choice (issue 22): among placements the objective finds near-equal, the one that leaves the fleet
best able to serve the gangs that follow.

One rule, one function (`keep_room`), used by `zone_first.rank` (so by `place`, `simulate`, `submit`, GitOps,
scheduler mode and the exact solver, which all decide through `policies.place`) and by the MultiKueue dispatcher's
worker ranking (`geosched.kube.multikueue.rank`), so a gang goes to the same cluster whichever path decides.

**Rule.** Take the winner by the objective and its band (fewest regions, fewest zones, ...). Among the options with as
many regions and zones whose total is within `CAPACITY_TOLERANCE` of the winner's, if some (cluster, GPU) pool keeps
fewer free workers once the gang is in it than the winner's pool does, the tightest such pool wins instead (within
it, the first option of the objective's own order). BestFit one level up: the roomiest pools stay whole for the
largest gangs. Sources: Kueue Topology-Aware Scheduling's BestFit (kubernetes-sigs/kueue
`pkg/cache/scheduler/tas_flavor_snapshot.go`, `findBestFitDomain`: the domain with the smallest count that holds
the gang), and the fragmentation results of Gandiva (Xiao et al., OSDI'18), Tiresias (Gu et al., NSDI'19) and
Lucid (Hu et al., ASPLOS'23): large gangs queue on fragmented capacity, so placement should consolidate.

**Why a band of its own, wider than the zone tolerance.** What pushed gangs out of the tight pool on the traces
measured (policies/README.md, issue 22) was price, not the network: a GCP a3-highgpu-8g node costs $43/h beside
a p5.48xlarge's $98, which at the default cost weight 0.1 makes the same ring 9% dearer in total, outside the 5%
zone band (11.6% for a one-node gang). Every placement then went to the cheapest cluster until it was cut up, and
the 512- and 1,024-GPU gangs queued. A degraded node (3.6-7x slower) or an extra zone boundary (22%) stays outside
12%, so the override never trades the network for room; it trades up to 12% of the total (in practice: price) for
it. A free winner ($0/h) is never given up for room. 12% is also what the replays chose, and they are chaotic:
policies/README.md gives the figures at 7-15%.
"""

from __future__ import annotations

import numpy as np

from geosched.policies.context import FloatArray, IntArray

# Assumption, measured (policies/README.md, issue 22): wide enough for the price gap between the clouds of the geo
# fleet at cost weight 0.1 (11.6%), narrow enough never to take a degraded node or one more zone boundary.
CAPACITY_TOLERANCE = 0.12


def keep_room(
    order: IntArray,
    total: FloatArray,
    zones: IntArray,
    regions: IntArray,
    pool_left: FloatArray,
    usd: FloatArray,
    tolerance: float = CAPACITY_TOLERANCE,
) -> IntArray:
    """`order` (options best first by the objective's rule) with the capacity-aware winner moved to the front.

    `pool_left[k]`: free workers option k's pool keeps once the gang is in it; `usd[k]`: its $/h. A free winner
    ($0/h: machines written off) is kept: room is bought with a price gap, never with money where none is paid
    (`tests/test_free_pool.py`). O(options): no work per node or per queued job, so `place` keeps its speed."""
    if order.size < 2:
        return order
    w = int(order[0])
    if usd[w] <= 0:
        return order
    tighter = pool_left < pool_left[w]
    if not tighter.any():  # the winner's pool is the tightest already: 82% of a replay's decisions stop here
        return order
    near = (
        (total <= total[w] * (1 + tolerance) + 1e-12)
        & (zones == zones[w])
        & (regions == regions[w])
        & tighter
    )
    if not near.any():
        return order
    pick = near & (pool_left == pool_left[near].min())
    pos = int(np.flatnonzero(pick[order])[0])
    out: IntArray = np.concatenate((order[pos : pos + 1], order[:pos], order[pos + 1 :]))
    return out
