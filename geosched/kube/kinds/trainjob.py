"""trainer.kubeflow.org/v1alpha1 TrainJob: one pod set of `spec.trainer.numNodes` pods, GPUs from
`spec.trainer.resourcesPerNode`. Its pod template lives in its runtime, so the set has no path: the TrainJob can
only add a nodeSelector and tolerations for the runtime's `node` job through `spec.podSpecOverrides`, and what
needs affinity with several values or pod metadata is refused, not dropped. Suspended by `spec.suspend`."""

from __future__ import annotations

from typing import Any

from geosched.core.errors import InputError
from geosched.kube import affinity, keys
from geosched.kube import tolerations as toleration_rules
from geosched.kube.kinds import template
from geosched.kube.kinds.base import JobKind, PinRequest
from geosched.kube.objpath import At

# The replicated job of Trainer v2's runtimes that runs the training nodes (initializers are separate jobs).
NODE_JOB = "node"


class TrainJob(JobKind):
    api_version = "trainer.kubeflow.org/v1alpha1"
    kind = "TrainJob"
    plural = "trainjobs"

    def pod_sets(self, spec: At) -> list[template.Template]:
        trainer = spec.key("trainer")
        nodes = trainer.key("numNodes")
        if not nodes.present:
            raise nodes.error("required (the runtime's default node count is not visible in the TrainJob)")
        count = nodes.integer(minimum=1)
        gpus = template.gpu_limit(trainer.key("resourcesPerNode"), required=True)
        products: frozenset[str] | None = None
        zones: frozenset[str] | None = None
        regions: frozenset[str] | None = None
        # The runtime's own tolerations are not visible here, only what the TrainJob adds for its node job.
        tolerated: list[toleration_rules.Toleration] = []
        for override in spec.key("podSpecOverrides").items():
            targets = {t.key("name").value for t in override.key("targetJobs").items()}
            if NODE_JOB not in targets:
                continue
            tolerated += toleration_rules.of_pod_spec(override)
            selector = template.selector(override.key("nodeSelector"))
            products = template.meet(products, selector.get(keys.GPU_PRODUCT))
            zones = template.meet(zones, selector.get(keys.ZONE))
            regions = template.meet(regions, selector.get(keys.REGION))
        return [template.Template(None, count, gpus, trainer.key("image").opt_string(), products, zones, regions,
                                  trainer, tuple(tolerated))]

    def pin_untemplated(self, obj: dict[str, Any], request: PinRequest) -> None:
        if request.pod_level_required:
            raise InputError(request.source, "spec", f"backend {request.backend} needs labels or a scheduler on the "
                             "pods, which a TrainJob cannot set; its runtime's podGroupPolicy does gang scheduling")
        # Kueue's topology annotation is dropped here: the nodeSelector below already holds the gang in one zone.
        override: dict[str, Any] = {"targetJobs": [{"name": NODE_JOB}], "nodeSelector": {}}
        reason = affinity.select_exactly(override["nodeSelector"], request.requirements)
        if reason is not None:
            raise InputError(request.source, "spec.podSpecOverrides", f"cannot place a TrainJob here: {reason}")
        # The runtime's pod template is not ours to change: the tolerations reach the node job's pods by the
        # override. It repeats those the TrainJob's own overrides give, so they hold whether Trainer merges
        # overrides or lets the last one win.
        if request.cluster_tolerations:
            toleration_rules.add_to(override, request.tolerations)
        obj["spec"].setdefault("podSpecOverrides", []).append(override)


KIND = TrainJob()
