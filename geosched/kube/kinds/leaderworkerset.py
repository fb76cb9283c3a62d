"""leaderworkerset.x-k8s.io/v1 LeaderWorkerSet (kubernetes-sigs/lws): `spec.replicas` groups of
`leaderWorkerTemplate.size` pods, each a leader and size-1 workers.

Pod sets, as Kueue's LWS integration counts them per group (kubernetes-sigs/kueue v0.17.0,
pkg/controller/jobs/leaderworkerset/leaderworkerset_reconciler.go `podSets`), times the groups: with a
`leaderTemplate`, the leaders (one per group) and the workers (size-1 per group, `workerTemplate`); without one,
every pod of every group from `workerTemplate`. geosched places the whole set as one gang: every group in the
placement's zones. Fields and defaults (`replicas` 1, `size` 1) from the CRD of kubernetes-sigs/lws v0.10.0
(2161f38ff333, config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml).

Suspend: v1 has no suspend field (the CRD's spec has leaderWorkerTemplate, networkConfig, replicas,
rolloutStrategy, startupPolicy). Kueue holds an LWS by gating its pods instead: its webhook marks both pod
templates `kueue.x-k8s.io/pod-suspending-parent: leaderworkerset.x-k8s.io/leaderworkerset` and admits each group as
one pod-group Workload (leaderworkerset_webhook.go). geosched does the same where it decides: in scheduler mode and
through the MultiKueue dispatcher its pods (Workloads) are not bound (nominated) before their hour; in a manifest
it cannot hold one, and `flex.hold` refuses a flexible LWS in one line rather than render it running.

Backends: its pod templates carry every handoff (Kueue's queue label on the object, as Kueue reads it; the
coscheduling and Volcano group on the pods; the v0.10.0 CRD's pod templates have `spec.schedulingGroup`, so the
Workload API's too). With LWS's own Volcano gang scheduling on (`gangSchedulingManagement`, off by default), LWS
names a PodGroup per group on the pods over geosched's one for the whole set (pkg/schedulerprovider).

Scheduler mode: its pods are owned by StatefulSets, not by the LWS, so their gang is the pods that exist.
`geosched jobs`: its Available condition means it runs; no start time in its status, so its creation once a
replica was ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from geosched.kube.kinds import template
from geosched.kube.kinds.base import JobKind
from geosched.kube.objpath import At

TEMPLATE = ("spec", "leaderWorkerTemplate")


class LeaderWorkerSet(JobKind):
    api_version = "leaderworkerset.x-k8s.io/v1"
    kind = "LeaderWorkerSet"
    plural = "leaderworkersets"
    suspend_path = None
    state_conditions = (("Available", "Running"), ("Progressing", "Pending"))

    def pod_sets(self, spec: At) -> list[template.Template]:
        groups = spec.key("replicas").integer(minimum=0, default=1)
        lwt = spec.key("leaderWorkerTemplate")
        lwt.mapping(required=True)
        size = lwt.key("size").integer(minimum=1, default=1)
        workers = (*TEMPLATE, "workerTemplate")
        leader = lwt.key("leaderTemplate")
        if not leader.present:
            return [template.read(lwt.key("workerTemplate"), workers, groups * size)]
        return [template.read(leader, (*TEMPLATE, "leaderTemplate"), groups),
                template.read(lwt.key("workerTemplate"), workers, groups * (size - 1))]

    def run_began(self, status: Mapping[str, Any]) -> bool:
        return int(status.get("readyReplicas") or 0) > 0


KIND = LeaderWorkerSet()
