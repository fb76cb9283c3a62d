"""A synthetic trace of any length, for replay-speed benchmarks and load sweeps. Seeded: reproducible.

Shaped like Gavel's own job generator (scheduler/utils.py): GPUs 1/2/4/8 with probability 0.70/0.10/0.15/
0.05 (Gavel's sample of the Philly distribution), run time 10^U(1.5, 3) minutes for 80% of jobs and
10^U(3, 4) minutes for the rest, a model drawn uniformly from the Gavel job types measured at that scale
factor, Poisson arrivals. `multi_node` of the jobs are made 16- or 32-GPU gangs so the network matters.
The arrival rate is set so the offered load (GPU-seconds asked per second) is `load` x `capacity_gpus`.
"""

from __future__ import annotations

import numpy as np

from geosched.simulate.gavel import Throughputs
from geosched.simulate.traces.model import TraceJob

SCALE_FACTORS = (1, 2, 4, 8)
SCALE_WEIGHTS = (0.70, 0.10, 0.15, 0.05)
SHORT_FRACTION = 0.8


def synthetic_trace(n: int, throughputs: Throughputs, *, capacity_gpus: int, load: float = 0.5,
                    multi_node: float = 0.02, seed: int = 0) -> list[TraceJob]:
    rng = np.random.default_rng(seed)
    gpus = rng.choice(SCALE_FACTORS, size=n, p=SCALE_WEIGHTS)
    big = rng.random(n) < multi_node
    gpus = np.where(big, rng.choice((16, 32), size=n), gpus)
    short = rng.random(n) < SHORT_FRACTION
    exponent = np.where(short, rng.uniform(1.5, 3.0, n), rng.uniform(3.0, 4.0, n))
    duration = 60.0 * 10.0**exponent
    mean_work = float((gpus * duration).mean()) if n else 0.0
    rate = load * capacity_gpus / mean_work if mean_work > 0 else 1.0
    submit = np.cumsum(rng.exponential(1.0 / rate, n))
    submit -= submit[0] if n else 0.0
    models = _models_by_scale(throughputs)
    picks = rng.random(n)
    jobs = []
    for i in range(n):
        options = models[min(int(gpus[i]), 8)]
        jobs.append(TraceJob(
            id=f"syn-{i}",
            submit_time_s=round(float(submit[i]), 3),
            gpus=int(gpus[i]),
            duration_s=round(float(duration[i]), 3),
            model=options[int(picks[i] * len(options))],
            line=i + 1,
        ))
    return jobs


def _models_by_scale(throughputs: Throughputs) -> dict[int, list[str]]:
    """Job types Gavel measured at each scale factor (multi-GPU ones can run distributed)."""
    out: dict[int, list[str]] = {}
    for sf in SCALE_FACTORS:
        names = sorted(name for name, m in throughputs.models.items() if m.consolidated.get(sf, 0.0) > 0)
        out[sf] = names or sorted(throughputs.models)
    return out
