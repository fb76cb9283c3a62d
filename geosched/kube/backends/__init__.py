"""Gang handoff per in-cluster scheduler: what each one needs on the job, its pods and beside them.

A backend gets the gang's shape and the cluster's settings and returns a `Handoff`; the renderer applies
it to whichever pod templates the job kind has. Backends never see the user's object, and never branch on a
kind by name: they ask what it can do (`JobKind.scheduling_policy_path`), and a kind refuses a backend itself
(`JobKind.refusal`).
"""

from __future__ import annotations

from collections.abc import Callable

from geosched.kube.backends import coscheduling, kueue, volcano, workload_api
from geosched.kube.backends.base import Gang, Handoff
from geosched.kube.config import Backend, ClusterConfig


def _none(_gang: Gang, cluster: ClusterConfig) -> Handoff:
    # No gang handoff; the pods still go to the scheduler the cluster config names (a TrainJob, whose pods geosched
    # cannot reach, is refused rather than sent to the default scheduler).
    return Handoff(scheduler_name=cluster.scheduler_name, pod_level_required=cluster.scheduler_name is not None)


HANDOFFS: dict[Backend, Callable[[Gang, ClusterConfig], Handoff]] = {
    Backend.KUEUE: kueue.handoff,
    Backend.COSCHEDULING: coscheduling.handoff,
    Backend.VOLCANO: volcano.handoff,
    Backend.WORKLOAD_API: workload_api.handoff,
    Backend.NONE: _none,
}


def handoff(gang: Gang, cluster: ClusterConfig) -> Handoff:
    refused = gang.kind.refusal(cluster.backend)  # a kind may not be one a backend can hold (kube/kinds/)
    if refused is not None:
        return Handoff(refused=refused)
    return HANDOFFS[cluster.backend](gang, cluster)
