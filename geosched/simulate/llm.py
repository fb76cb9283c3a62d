"""A synthetic LLM-cluster workload whose job sizes, run times and arrivals follow published statistics.

Source: the Acme trace of Shanghai AI Lab (Hu et al., "Characterization of Large Language Model Development in
the Datacenter", NSDI'24), its `data/cluster_summary.csv` (InternLM/AcmeTrace), which also summarises the
Philly (Jeon et al., ATC'19), Helios (Hu et al., SC'21) and Alibaba PAI (Weng et al., "MLaaS in the Wild",
NSDI'22) traces the paper compares with. The figures used, over each trace's GPU jobs:

| cluster | GPU jobs | mean GPUs | median GPUs | max GPUs | mean run s | median run s | max run s |
|---------|---------:|----------:|------------:|---------:|-----------:|-------------:|----------:|
| kalos   | 19,907   | 26.77     | 1           | 1,024    | 1,259.689  | 124          | 625,740   |
| seren   | 663,813  | 5.68      | 1           | 1,024    | 1,414.335  | 122          | 1,209,604 |
| philly  | 112,956  | 1.928     | 1           | 128      | 18,006.055 | 874          | 4,240,676 |
| helios  | 1,580,464| 3.716     | 1           | 2,048    | 6,651.681  | 206          | 4,320,009 |

Kalos, Acme's cluster of LLM pretraining and evaluation, is the default.

- Size. GPUs are powers of two up to the cluster's maximum. Half the jobs take one GPU (the median is 1, so
  at least half do; we take the least the median allows) and the other powers of two have probabilities
  proportional to 2^(-a k), with `a` solved so the mean is the published mean. `min_gpus` keeps the jobs of
  at least that many GPUs (16 for multi-node gangs of 8-GPU nodes): the tail of the same distribution.
- Run time. Log-normal with the published median and mean (mu = ln median, sigma = sqrt(2 ln(mean/median))),
  capped at the published maximum; independent of size (an assumption: the summary gives no joint figures).
- Arrivals. Poisson, at the rate that offers `load` x the fleet's GPUs of work (GPU-seconds per second).
- Communication. geosched's documented default profile (`CommProfile()`: a 1 GB all-reduce per 1 s of
  compute), for every job: the summary says nothing of models.

Seeded: the same arguments give the same trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from geosched.simulate.traces.model import TraceJob

SINGLE_GPU_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class ClusterStats:
    mean_gpus: float
    max_gpus: int
    mean_run_s: float
    median_run_s: float
    max_run_s: float


# InternLM/AcmeTrace data/cluster_summary.csv (avg_gpu_num, max_gpu, avg/med/max_run_time_gpu).
CLUSTERS: dict[str, ClusterStats] = {
    "kalos": ClusterStats(26.77, 1024, 1259.689, 124.0, 625740.0),
    "seren": ClusterStats(5.68, 1024, 1414.335, 122.0, 1209604.0),
    "philly": ClusterStats(1.928, 128, 18006.055, 874.0, 4240676.0),
    "helios": ClusterStats(3.716, 2048, 6651.681, 206.0, 4320009.0),
}
DEFAULT_CLUSTER = "kalos"


def size_distribution(stats: ClusterStats) -> tuple[np.ndarray, np.ndarray]:
    """(GPU counts, probabilities): half at 1 GPU, the rest 2^(-a k) with the published mean."""
    k = np.arange(1, int(math.log2(stats.max_gpus)) + 1)
    sizes = 2.0**k
    tail_mean = (stats.mean_gpus - SINGLE_GPU_SHARE) / (1 - SINGLE_GPU_SHARE)

    def mean_at(a: float) -> float:
        w = sizes**-a
        return float((w * sizes).sum() / w.sum())

    lo, hi = -4.0, 8.0  # mean_at falls as a grows: bisect
    if not mean_at(hi) <= tail_mean <= mean_at(lo):
        raise ValueError(f"no power law over 2..{stats.max_gpus} GPUs has mean {tail_mean:.2f}")
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_at(mid) > tail_mean else (lo, mid)
    w = sizes**-lo
    probs = np.concatenate(([SINGLE_GPU_SHARE], (1 - SINGLE_GPU_SHARE) * w / w.sum()))
    return np.concatenate(([1.0], sizes)).astype(np.int64), probs


def llm_trace(n: int, *, capacity_gpus: int, load: float = 0.8, min_gpus: int = 16,
              cluster: str = DEFAULT_CLUSTER, seed: int = 0) -> list[TraceJob]:
    """`n` jobs of at least `min_gpus` GPUs shaped like `cluster`'s published statistics (see above)."""
    if cluster not in CLUSTERS:
        raise ValueError(f"unknown cluster {cluster!r}; known: {', '.join(sorted(CLUSTERS))}")
    if n < 1 or capacity_gpus < 1 or load <= 0:
        raise ValueError("need n >= 1, capacity_gpus >= 1 and load > 0")
    stats = CLUSTERS[cluster]
    sizes, probs = size_distribution(stats)
    keep = sizes >= min_gpus
    if not keep.any():
        raise ValueError(f"{cluster} has no jobs of {min_gpus} GPUs or more")
    sizes, probs = sizes[keep], probs[keep] / probs[keep].sum()
    rng = np.random.default_rng(seed)
    gpus = rng.choice(sizes, size=n, p=probs)
    mu = math.log(stats.median_run_s)
    sigma = math.sqrt(2 * math.log(stats.mean_run_s / stats.median_run_s))
    duration = np.minimum(rng.lognormal(mu, sigma, n), stats.max_run_s)
    rate = load * capacity_gpus / float((gpus * duration).mean())
    submit = np.cumsum(rng.exponential(1.0 / rate, n))
    submit -= submit[0]
    return [TraceJob(id=f"llm-{i}", submit_time_s=round(float(submit[i]), 3), gpus=int(gpus[i]),
                     duration_s=round(float(duration[i]), 3), line=i + 1) for i in range(n)]
