"""What one pod template says about the gang: pods, GPUs per pod, image, the GPU product, zones and regions it
allows, the tolerations it carries. Pure; shared by every job kind's reader (`kinds/<kind>.py`) and by
`jobinput` (the gang of a Kueue Workload's podSets)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from geosched.files.fields import describe
from geosched.kube import keys, resources
from geosched.kube import tolerations as toleration_rules
from geosched.kube.objpath import At
from geosched.kube.quantity import whole_count

PathKey = str | int


def at_path(obj: Mapping[str, Any], path: Sequence[PathKey]) -> dict[str, Any]:
    """The pod template at `path` (a `Template.path`) in the object `read` checked: every step is there."""
    here: Any = obj
    for step in path:
        here = here[step]
    assert isinstance(here, dict)
    return here


@dataclass(frozen=True, slots=True)
class Template:
    """One pod set as read: `path` leads from the object's root to its pod template (None: the kind has no
    template of its own, e.g. a TrainJob's lives in its runtime)."""

    path: tuple[PathKey, ...] | None
    pods: int
    gpus: int
    image: str | None
    products: frozenset[str] | None
    zones: frozenset[str] | None
    regions: frozenset[str] | None
    where: At
    tolerations: tuple[toleration_rules.Toleration, ...] = ()
    # What one of its pods asks of a node (geosched.kube.resources.pod_requests), as sorted pairs.
    requests: tuple[tuple[str, int], ...] = ()


def read(tmpl: At, path: tuple[PathKey, ...], pods: int) -> Template:
    """A PodTemplateSpec at `tmpl` (the object's `path`) that makes `pods` pods."""
    tmpl.mapping(required=True)
    pod = tmpl.key("spec")
    pod.mapping(required=True)
    containers = pod.key("containers").items(required=True)
    if not containers:
        raise pod.key("containers").error("must list at least one container")
    # A pod holds the larger of its app containers' sum and its largest init container (init runs alone).
    app = sum(gpu_limit(c.key("resources")) for c in containers)
    init = max((gpu_limit(c.key("resources")) for c in pod.key("initContainers").items()), default=0)
    image = next((c.key("image").value for c in containers if gpu_limit(c.key("resources")) > 0), None)
    chosen = selector(pod.key("nodeSelector"))
    terms = _required_terms(pod)
    return Template(
        path=path, pods=pods, gpus=max(app, init), image=image if isinstance(image, str) else None,
        products=meet(chosen.get(keys.GPU_PRODUCT), _allowed(terms, keys.GPU_PRODUCT)),
        zones=meet(chosen.get(keys.ZONE), _allowed(terms, keys.ZONE)),
        regions=meet(chosen.get(keys.REGION), _allowed(terms, keys.REGION)),
        where=tmpl,
        tolerations=toleration_rules.of_pod_spec(pod),
        requests=tuple(sorted(resources.pod_requests(pod).items())),
    )


def indexed_pods(spec: At, *, default_mode: str = "NonIndexed") -> int:
    """A batch Job spec's gang size: all its pods run at once, each with its own index. `default_mode` is what the
    object's defaulting gives a missing `completionMode` (batch/v1 Job's own: NonIndexed)."""
    parallelism = spec.key("parallelism").integer(minimum=1, default=1)
    mode = spec.key("completionMode").string(default=default_mode)
    if parallelism > 1 and mode != "Indexed":
        raise spec.key("completionMode").error(
            f"a gang of {parallelism} workers needs completionMode: Indexed (each worker its own rank), got {mode}")
    completions = spec.key("completions")
    if completions.present and completions.integer(minimum=1) != parallelism:
        raise completions.error(f"a gang runs all its workers at once: completions ({completions.value}) must "
                                f"equal parallelism ({parallelism})")
    # Neither field set is a one-pod Job: batch/v1 defaults both to 1 (SetDefaults_Job) before the Indexed rule
    # is checked, as in JobSet's own examples (a launcher, an initializer). Parallelism alone is refused there.
    if mode == "Indexed" and not completions.present and spec.key("parallelism").present:
        raise completions.error("required with completionMode: Indexed")
    return parallelism


def gpu_limit(resources: At, *, required: bool = False) -> int:
    limit = resources.dig("limits", keys.GPU)
    request = resources.dig("requests", keys.GPU)
    if not limit.present:
        if request.present:
            raise limit.error(f"{keys.GPU} is requested but has no limit (Kubernetes takes extended resources "
                              "from limits; set the limit, or both equal)")
        if required:
            raise limit.error("required: the GPUs each node gets")
        return 0
    count = whole_count(limit.value)
    if count is None:
        raise limit.error(f"expected a whole number of GPUs, got {describe(limit.value)}")
    if request.present and whole_count(request.value) != count:
        raise request.error(f"must equal the limit ({count}) for an extended resource")
    return count


def selector(at: At) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for key, value in at.entries():
        out[key] = frozenset({value.string()})
    return out


def _required_terms(pod: At) -> list[At]:
    return pod.dig("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                   "nodeSelectorTerms").items()


def _allowed(terms: Sequence[At], key: str) -> frozenset[str] | None:
    """Values of `key` a node may have under required node affinity, or None when unconstrained.

    Terms are ORed and expressions within a term ANDed, so a key is constrained only if every term constrains it.
    Only `In` narrows here; other operators stay in the object for the scheduler to enforce.
    """
    allowed: set[str] = set()
    for term in terms:
        within: frozenset[str] | None = None
        for expr in term.key("matchExpressions").items():
            if expr.key("key").string() != key or expr.key("operator").string() != "In":
                continue
            values = frozenset(v.string() for v in expr.key("values").items(required=True))
            within = meet(within, values)
        if within is None:
            return None
        allowed |= within
    return frozenset(allowed) if terms else None


def meet(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b
