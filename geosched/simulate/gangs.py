"""A trace job becomes a geosched gang: its shape, and how it talks.

Shape. When the trace says how the job was laid out (`gpus_per_worker`: Philly's per-machine GPUs, an
Alibaba pod's GPUs) that layout is kept. Otherwise a job of up to `max_per_worker` GPUs (8, the largest
node of the default fleet) is one worker holding them all, and a larger job is workers of the largest
divisor of its GPUs not above `max_per_worker` (16 -> 2 x 8, 32 -> 4 x 8, 20 -> 4 x 5): whole nodes where
the count allows it, since that is how data-parallel jobs are launched (one process group per node).
A single worker never crosses the network; a gang of several does, once per iteration.

GPU model. Traces name no GPU a cloud sells, and the simulator has no per-GPU speed model: a job runs as
long on an L4 as on an H100. `gpu` pins every gang to one model, which removes that bias from comparisons
(a policy cannot look fast or green by picking small, slow GPUs).

Profile. A job whose model is a Gavel job type gets the communication profile derived from Gavel's
measurements (geosched/simulate/gavel.py); any other job gets `CommProfile()`, geosched's documented default.
"""

from __future__ import annotations

from collections.abc import Callable

from geosched.core.models import CommProfile, Job
from geosched.simulate.gavel import Throughputs
from geosched.simulate.traces.model import TraceJob

MAX_GPUS_PER_WORKER = 8

ProfileFor = Callable[[TraceJob], CommProfile]
DEFAULT_PROFILE = CommProfile()


def gang_shape(job: TraceJob, max_per_worker: int = MAX_GPUS_PER_WORKER) -> tuple[int, int]:
    """(workers, gpus_per_worker)."""
    if job.gpus < 1:
        raise ValueError(f"job {job.id!r} asks for {job.gpus} GPUs")
    if job.gpus_per_worker and job.gpus % job.gpus_per_worker == 0:
        return job.gpus // job.gpus_per_worker, job.gpus_per_worker
    if job.gpus <= max_per_worker:
        return 1, job.gpus
    per_worker = max(d for d in range(1, max_per_worker + 1) if job.gpus % d == 0)
    return job.gpus // per_worker, per_worker


def gavel_profiles(throughputs: Throughputs, default: CommProfile = DEFAULT_PROFILE) -> ProfileFor:
    def profile_for(job: TraceJob) -> CommProfile:
        model = throughputs.models.get(job.model) if job.model else None
        if model is None:
            return default
        try:
            return model.profile(job.gpus)
        except KeyError:
            return default

    return profile_for


def to_job(job: TraceJob, profile: CommProfile, max_per_worker: int = MAX_GPUS_PER_WORKER,
           gpu: str | None = None) -> Job:
    workers, per_worker = gang_shape(job, max_per_worker)
    return Job(name=job.id, workers=workers, gpus_per_worker=per_worker, gpu=gpu, profile=profile)
