"""The score every policy is judged by: one function, so every comparison is side by side.

The network term is the step time (compute plus `geosched.comm`'s ring all-reduce over the gang's worst
link) over the step time on the best link in the fleet. The worst link of a set of nodes is built from the
worst RTT, the highest loss and the lowest throughput among the zone pairs it spans and the nodes' own
intra-zone summaries; a gang on one node has no network step. The three normalised terms (see `Score`)
are weighted and summed:

    total = w_network * t_step / t_ideal + w_cost * usd_h / (gpus * median usd_gpu_h)
            + w_carbon * gco2e_h / (gpus * median gco2e_gpu_h)
"""

from __future__ import annotations

import math

import numpy as np

from geosched.comm import comm_ms
from geosched.models import Score
from geosched.policies.context import IntArray, JobView


def evaluate(view: JobView, nodes: IntArray, workers: IntArray) -> Score:
    """Score a concrete assignment: `workers[k]` workers on node `nodes[k]`."""
    ctx, job, w = view.ctx, view.job, view.weights
    used = nodes[workers > 0]
    taken = workers[workers > 0]
    if used.size > 1:
        zones = np.unique(ctx.zone_of[used])
        rtt = max(float(ctx.zz_rtt[np.ix_(zones, zones)].max()), float(ctx.node_rtt[used].max()))
        loss = max(float(ctx.zz_loss[np.ix_(zones, zones)].max()), float(ctx.node_loss[used].max()))
        tput = min(float(ctx.zz_tput[np.ix_(zones, zones)].min()), float(ctx.node_tput[used].min()))
        comm = comm_ms(job.workers, job.profile.message_mb, rtt, loss, tput)
    else:
        rtt, loss, tput, comm = 0.0, 0.0, math.inf, 0.0
    gpus = taken * job.gpus_per_worker
    usd = float((gpus * view.price_gpu[used]).sum())
    gco2e = float((gpus * view.carbon_gpu[used]).sum())
    step = job.profile.compute_ms + comm
    network = step / view.ideal_step_ms
    cost = usd / (job.gpus * view.price_ref)
    carbon = gco2e / (job.gpus * view.carbon_ref)
    return Score(
        total=w.network * network + w.cost * cost + w.carbon * carbon,
        network=network,
        cost=cost,
        carbon=carbon,
        step_ms=step,
        comm_ms=comm,
        usd_per_hour=usd,
        gco2e_per_hour=gco2e,
        worst_rtt_ms=rtt,
        worst_loss=loss,
        min_throughput_gbps=tput,
    )
