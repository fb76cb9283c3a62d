"""Standard Kubernetes job objects (and geosched's compact job file) read into the geosched `Job` model.

Supported, detected by apiVersion and kind: every kind in `geosched.kube.kinds` (one module each, saying how its
pod sets are read), and geosched.io/v1alpha1 Job, the compact file, parsed by `geosched.files.documents.parse_job`.

GPUs per pod come from `resources.limits["nvidia.com/gpu"]`; the GPU model from `nvidia.com/gpu.product` in
a nodeSelector or a required node affinity (`In`); zone and region limits from `topology.kubernetes.io/zone`
and `/region` the same way. Pods that ask for no GPU (a launcher, a coordinator) belong to the gang but are
not workers. The object read is kept as it was, so rendering returns the user's object with placement added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from geosched.core import catalog, room
from geosched.core.errors import InputError
from geosched.core.gpus import model_from_product, other_form_factor
from geosched.core.models import Job, Schedule
from geosched.files.documents import parse_job
from geosched.files.fields import DNS1123_LABEL_RULE, describe, is_dns1123_label
from geosched.files.gate import STDIN, Kind, parse_yaml, read_stdin_text, read_text
from geosched.kube import flex, keys, kinds, podoptions
from geosched.kube import tolerations as toleration_rules
from geosched.kube.kinds.base import JobKind
from geosched.kube.kinds.template import PathKey, meet
from geosched.kube.kinds.template import Template as _Template
from geosched.kube.kinds.template import read as _template
from geosched.kube.objpath import At
from geosched.kube.resources import amount

__all__ = ["JobInput", "JobKind", "PathKey", "PodSet", "load_job", "parse_job_object", "parse_job_text",
           "pod_templates_gang", "read_job_file"]


def _kind_labels() -> str:
    return ", ".join(sorted(k.label for k in kinds.registered()))


@dataclass(frozen=True, slots=True)
class PodSet:
    """Pods sharing one pod template. `path` leads from the object's root to that template; a TrainJob has
    no template of its own (its runtime holds it), so its one pod set has no path."""

    path: tuple[PathKey, ...] | None
    pods: int
    gpus_per_pod: int


@dataclass(frozen=True)
class JobInput:
    kind: JobKind
    job: Job
    source: str
    original: Mapping[str, Any] | None
    pod_sets: tuple[PodSet, ...]
    namespace: str | None = None
    extras: tuple[Mapping[str, Any], ...] = field(default=())
    # A compact job's own `pods:` options (geosched.kube.podoptions), over its cluster's; checked when read.
    pod_options: Mapping[str, Any] | None = None
    # What the job's GPU pods tolerate: a compact job's declared `tolerations:` (rendered on its pods), or those
    # every GPU pod template of a manifest carries (already on them). Its cluster config's come on top.
    tolerations: tuple[toleration_rules.Toleration, ...] = ()

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def pods(self) -> int:
        """Every pod of the gang, workers and helpers alike: what a PodGroup's minMember must be."""
        return sum(p.pods for p in self.pod_sets) if self.pod_sets else self.job.workers


# --- reading files --------------------------------------------------------------------------------

def read_job_file(path: Path, gpu_models: set[str] | None = None) -> JobInput:
    """The one reader of job files: `place`, `submit`, `gitops` and the Python API all read through it, so a
    manifest one command accepts is accepted by every other. A path of `-` is standard input."""
    if str(path) == "-":
        return parse_job_text(read_stdin_text(Kind.JOB), STDIN, gpu_models)
    return parse_job_text(read_text(path, Kind.JOB), str(path), gpu_models)


def load_job(path: Path, gpu_models: set[str] | None = None) -> Job:
    """The gang a job file describes (any supported kind), for commands that place without rendering."""
    return read_job_file(path, gpu_models).job


def parse_job_text(text: str, source: str, gpu_models: set[str] | None = None) -> JobInput:
    """A YAML stream holding exactly one job object; other documents ride along unchanged as extras."""
    documents = parse_yaml(text, source, stream=True)
    if not documents:
        raise InputError(source, "", "no document in the file")
    if len(documents) == 1:  # a lone document is the job, and its own error says what is wrong with it
        _is_job(documents[0], source)  # a job kind at a version geosched does not read: said of apiVersion
        return parse_job_object(documents[0], source, gpu_models)
    sources = [f"{source} (document {i + 1})" for i in range(len(documents))]
    jobs = [i for i, d in enumerate(documents) if _is_job(d, sources[i])]
    if len(jobs) != 1:
        found = f"{len(jobs)} job objects" if jobs else "no job object"
        raise InputError(source, "", f"expected exactly one job ({_kind_labels()}), found {found}")
    index = jobs[0]
    parsed = parse_job_object(documents[index], sources[index], gpu_models)
    extras = tuple(d for i, d in enumerate(documents) if i != index)
    return replace(parsed, extras=extras)


def _is_job(data: Any, source: str) -> bool:
    root = At(data, source)
    api, kind = _header(root)
    if api is None and kind in (None, "Job"):
        return True  # a compact job file may leave out its header
    if isinstance(api, str) and kinds.lookup(api, kind or "") is not None:
        return True
    # A known kind of a known group at another version: said of apiVersion, not passed over as a companion.
    same = [k for k in kinds.registered() if k.kind == kind and k.group.split("/")[0] == api_group(api)]
    if same:
        supported = ", ".join(k.label for k in same)
        raise root.key("apiVersion").error(f"{kind} {api} is not supported (supported: {supported})")
    return False


def api_group(api: str | None) -> str | None:
    """The group of an apiVersion (`batch/v1`: batch); a group's own name for geosched's compact `geosched.io`."""
    return api.split("/")[0] if isinstance(api, str) else None


def _header(root: At) -> tuple[str | None, str | None]:
    """apiVersion and kind, each absent or a string (`kind: [Job]` must not reach a lookup by value)."""
    root.mapping(required=True)
    values: list[str | None] = []
    for key in ("apiVersion", "kind"):
        at = root.key(key)
        if at.value is not None and not isinstance(at.value, str):
            raise at.error(f"expected a string, got {describe(at.value)}")
        values.append(at.value)
    return values[0], values[1]


def parse_job_object(data: Any, source: str, gpu_models: set[str] | None = None) -> JobInput:
    root = At(data, source)
    api, kind_name = _header(root)
    kind = kinds.lookup(api, kind_name or "") if api is not None else kinds.compact()
    if kind is None:
        raise root.key("kind").error(f"unsupported object {api} {kind_name} (supported: {_kind_labels()})")
    known = gpu_models if gpu_models is not None else catalog.gpu_models()
    if not kind.served:
        pods = None
        declared: tuple[toleration_rules.Toleration, ...] = ()
        # Kubernetes-only options, read here, not by the core.
        if isinstance(data, Mapping) and "pods" in data:
            pods = data["pods"]
            podoptions.parse(pods, source, "pods")
        if isinstance(data, Mapping) and "tolerations" in data:
            declared = toleration_rules.parse(data["tolerations"], source, "tolerations")
        if isinstance(data, Mapping):
            data = {k: v for k, v in data.items() if k not in ("pods", "tolerations")}
        job = parse_job(data, source, known)
        if pods is not None:
            job = replace(job, worker_requests=_option_requests(podoptions.parse(pods, source, "pods")))
        explicit = data.get("namespace") if isinstance(data, Mapping) else None
        return JobInput(kind, job, source, None, (), explicit if isinstance(explicit, str) else None,
                        pod_options=pods, tolerations=declared)
    return _parse_kube(root, kind, known)


# --- Kubernetes objects ---------------------------------------------------------------------------

def _parse_kube(root: At, kind: JobKind, known: set[str]) -> JobInput:
    meta = root.key("metadata")
    meta.mapping(required=True)
    if not meta.key("name").present and meta.key("generateName").present:
        raise meta.key("name").error("required (generateName cannot be placed: the name must be known to "
                                     "render the gang's PodGroup and policies)")
    name = meta.key("name").string()
    if not is_dns1123_label(name):
        raise meta.key("name").error(DNS1123_LABEL_RULE)
    namespace = meta.key("namespace").opt_string()
    if namespace is not None and not is_dns1123_label(namespace):
        raise meta.key("namespace").error(DNS1123_LABEL_RULE)
    spec = root.key("spec")
    spec.mapping(required=True)
    templates = kind.pod_sets(spec)
    job = replace(_gang(name, namespace or "default", templates, spec, known), schedule=_schedule(meta, templates))
    pod_sets = tuple(PodSet(t.path, t.pods, t.gpus) for t in templates)
    assert isinstance(root.value, Mapping)
    tolerated = toleration_rules.common(t.tolerations for t in templates if t.gpus > 0)
    return JobInput(kind, job, root.source, root.value, pod_sets, namespace, tolerations=tolerated)


def _option_requests(options: podoptions.PodOptions) -> tuple[tuple[str, int], ...]:
    """What a compact job's own `pods:` options make each worker request (`podoptions.apply` renders them)."""
    asked: dict[str, int] = {}
    for resource, value in (("cpu", options.cpu), ("memory", options.memory),
                            (podoptions.HUGEPAGES_2MI, options.hugepages_2mi)):
        if value is not None and (n := amount(resource, value)):
            asked[resource] = n
    return room.worker_requests([asked])


def _schedule(meta: At, templates: Sequence[_Template]) -> Schedule | None:
    """The slack the object's annotations declare, else its GPU pods' template's (`geosched.kube.flex`)."""
    for at in (meta, *(t.where.key("metadata") for t in templates if t.gpus > 0)):
        notes = at.key("annotations").value if isinstance(at.value, Mapping) else None
        if isinstance(notes, Mapping):
            found = flex.schedule_of(notes, at.source, f"{at.path}.annotations" if at.path else "annotations")
            if found is not None:
                return found
    return None


def pod_templates_gang(name: str, namespace: str, templates: Sequence[tuple[At, int]], where: At,
                       known: set[str] | None = None) -> Job:
    """The gang of `(pod template, pods)` pairs, by the same rules as a job object's templates (a Kueue
    Workload's podSets, for the MultiKueue dispatcher). `where` is named when no template asks for GPUs."""
    known = known if known is not None else catalog.gpu_models()
    read = [_template(t, (), pods) for t, pods in templates]
    gang = _gang(name, namespace, read, where, known)
    return replace(gang, schedule=_schedule(At({}, where.source), read))


def _gang(name: str, namespace: str, templates: Sequence[_Template], spec: At, known: set[str]) -> Job:
    workers = [t for t in templates if t.gpus > 0]
    if not workers:
        raise spec.error(f"no pod asks for GPUs (set resources.limits[\"{keys.GPU}\"] on the workers)")
    if sum(t.pods for t in workers) == 0:
        raise spec.error("the GPU pods have zero replicas: a gang needs at least one worker")
    sizes = {t.gpus for t in workers}
    if len(sizes) > 1:
        detail = ", ".join(f"{t.where.path}: {t.gpus}" for t in workers)
        raise workers[-1].where.error(f"all GPU pods of a gang must ask for the same number of GPUs ({detail})")
    return Job(
        name=name,
        namespace=namespace,
        image=next((t.image for t in workers if t.image), None),
        workers=sum(t.pods for t in workers),
        gpus_per_worker=sizes.pop(),
        gpu=_gpu_model(workers, known),
        zones=_common(templates, "zones"),
        regions=_common(templates, "regions"),
        worker_requests=room.worker_requests(dict(t.requests) for t in workers),
    )


def _gpu_model(workers: Sequence[_Template], known: set[str]) -> str | None:
    models: set[str] = set()
    for t in workers:
        if t.products is None:
            continue
        if not t.products:
            raise t.where.error(f"the {keys.GPU_PRODUCT} constraints allow no product at all")
        # A real part the catalog sells in another form factor only (an A100 80GB PCIe beside the SXM one a job
        # also allows) is left to the cluster; a job that allows nothing else names no model geosched can place.
        others = [p for p in sorted(t.products) if other_form_factor(p) in known]
        for product in sorted(t.products):
            if product in others:
                continue
            model = model_from_product(product)
            if model is None or model not in known:
                raise t.where.error(f"unknown GPU product {product!r} in {keys.GPU_PRODUCT} (known models: "
                                    f"{', '.join(sorted(known))})")
            models.add(model)
        if others and len(others) == len(t.products):
            raise t.where.error(f"{keys.GPU_PRODUCT} allows only {', '.join(others)}: not the catalog's "
                                f"{', '.join(sorted({str(other_form_factor(p)) for p in others}))} (another form "
                                "factor, which no catalog offering has)")
    if len(models) > 1:
        raise workers[0].where.error(f"a gang runs on one GPU model; {keys.GPU_PRODUCT} allows "
                                     f"{', '.join(sorted(models))}")
    return models.pop() if models else None


def _common(templates: Sequence[_Template], attr: str) -> tuple[str, ...]:
    allowed: frozenset[str] | None = None
    for t in templates:
        allowed = meet(allowed, getattr(t, attr))
    if allowed is not None and not allowed:
        label = keys.ZONE if attr == "zones" else keys.REGION
        raise templates[0].where.error(f"the pod templates' {label} constraints leave no {attr[:-1]} in common")
    return tuple(sorted(allowed)) if allowed else ()
