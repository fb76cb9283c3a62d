"""Standard Kubernetes job objects (and geosched's compact job file) read into the geosched `Job` model.

Supported, detected by apiVersion and kind:

- batch/v1 Job: workers = parallelism (Indexed when more than one; completions must equal parallelism);
- jobset.x-k8s.io/v1alpha2 JobSet: pods = sum over replicatedJobs of replicas x parallelism;
- kubeflow.org/v1 PyTorchJob: Master + Worker replicas;
- trainer.kubeflow.org/v1alpha1 TrainJob: spec.trainer.numNodes, GPUs from spec.trainer.resourcesPerNode;
- geosched.io/v1alpha1 Job: the compact file, parsed by `geosched.documents.parse_job`.

GPUs per pod come from `resources.limits["nvidia.com/gpu"]`; the GPU model from `nvidia.com/gpu.product` in
a nodeSelector or a required node affinity (`In`); zone and region limits from `topology.kubernetes.io/zone`
and `/region` the same way. Pods that ask for no GPU (a launcher, a coordinator) belong to the gang but are
not workers. The object read is kept as it was, so rendering returns the user's object with placement added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from geosched import catalog
from geosched.documents import API_VERSION, NAME_RE, parse_job
from geosched.errors import InputError
from geosched.fields import describe
from geosched.gate import STDIN, Kind, parse_yaml, read_stdin_text, read_text
from geosched.gpus import model_from_product
from geosched.kube import flex, keys, podoptions
from geosched.kube import tolerations as toleration_rules
from geosched.kube.objpath import At
from geosched.kube.quantity import whole_count
from geosched.models import Job, Schedule

PathKey = str | int


class JobKind(StrEnum):
    BATCH_JOB = "batch/v1 Job"
    JOBSET = "jobset.x-k8s.io/v1alpha2 JobSet"
    PYTORCHJOB = "kubeflow.org/v1 PyTorchJob"
    TRAINJOB = "trainer.kubeflow.org/v1alpha1 TrainJob"
    COMPACT = f"{API_VERSION} Job"


KINDS: dict[tuple[str, str], JobKind] = {
    ("batch/v1", "Job"): JobKind.BATCH_JOB,
    ("jobset.x-k8s.io/v1alpha2", "JobSet"): JobKind.JOBSET,
    ("kubeflow.org/v1", "PyTorchJob"): JobKind.PYTORCHJOB,
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): JobKind.TRAINJOB,
    (API_VERSION, "Job"): JobKind.COMPACT,
}
JOB_KIND_NAMES = {kind for _, kind in KINDS}
PYTORCH_ROLES = ("Master", "Worker")
# The replicated job of Trainer v2's runtimes that runs the training nodes (initializers are separate jobs).
TRAINJOB_NODE_JOB = "node"


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
        raise InputError(source, "", f"expected exactly one job ({', '.join(sorted(JobKind))}), found {found}")
    index = jobs[0]
    parsed = parse_job_object(documents[index], sources[index], gpu_models)
    extras = tuple(d for i, d in enumerate(documents) if i != index)
    return replace(parsed, extras=extras)


def _is_job(data: Any, source: str) -> bool:
    root = At(data, source)
    api, kind = _header(root)
    if api is None and kind in (None, "Job"):
        return True  # a compact job file may leave out its header
    if (api, kind) in KINDS:
        return True
    if kind in JOB_KIND_NAMES and isinstance(api, str) and api.split("/")[0] in _GROUPS.get(str(kind), ()):
        supported = ", ".join(f"{a} {k}" for a, k in KINDS if k == kind)
        raise root.key("apiVersion").error(f"{kind} {api} is not supported (supported: {supported})")
    return False


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


_GROUPS = {"Job": ("batch", "geosched.io"), "JobSet": ("jobset.x-k8s.io",), "PyTorchJob": ("kubeflow.org",),
           "TrainJob": ("trainer.kubeflow.org",)}


def parse_job_object(data: Any, source: str, gpu_models: set[str] | None = None) -> JobInput:
    root = At(data, source)
    api, kind_name = _header(root)
    kind = KINDS.get((api, kind_name or "")) if api is not None else JobKind.COMPACT
    if kind is None:
        raise root.key("kind").error(f"unsupported object {api} {kind_name} (supported: "
                                     f"{', '.join(sorted(JobKind))})")
    known = gpu_models if gpu_models is not None else catalog.gpu_models()
    if kind is JobKind.COMPACT:
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
        explicit = data.get("namespace") if isinstance(data, Mapping) else None
        return JobInput(kind, job, source, None, (), explicit if isinstance(explicit, str) else None,
                        pod_options=pods, tolerations=declared)
    return _parse_kube(root, kind, known)


# --- Kubernetes objects ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Template:
    """What one pod template says about the gang."""

    path: tuple[PathKey, ...] | None
    pods: int
    gpus: int
    image: str | None
    products: frozenset[str] | None
    zones: frozenset[str] | None
    regions: frozenset[str] | None
    where: At
    tolerations: tuple[toleration_rules.Toleration, ...] = ()


def _parse_kube(root: At, kind: JobKind, known: set[str]) -> JobInput:
    meta = root.key("metadata")
    meta.mapping(required=True)
    if not meta.key("name").present and meta.key("generateName").present:
        raise meta.key("name").error("required (generateName cannot be placed: the name must be known to "
                                     "render the gang's PodGroup and policies)")
    name = meta.key("name").string()
    if not NAME_RE.match(name) or len(name) > 63:
        raise meta.key("name").error("must be a lowercase RFC 1123 label (a-z, 0-9, '-', at most 63 characters)")
    namespace = meta.key("namespace").opt_string()
    spec = root.key("spec")
    spec.mapping(required=True)
    templates = {
        JobKind.BATCH_JOB: _batch_job,
        JobKind.JOBSET: _jobset,
        JobKind.PYTORCHJOB: _pytorchjob,
        JobKind.TRAINJOB: _trainjob,
    }[kind](spec)
    job = replace(_gang(name, namespace or "default", templates, spec, known), schedule=_schedule(meta, templates))
    pod_sets = tuple(PodSet(t.path, t.pods, t.gpus) for t in templates)
    assert isinstance(root.value, Mapping)
    tolerated = toleration_rules.common(t.tolerations for t in templates if t.gpus > 0)
    return JobInput(kind, job, root.source, root.value, pod_sets, namespace, tolerations=tolerated)


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
    )


def _batch_job(spec: At) -> list[_Template]:
    pods = _indexed_pods(spec)
    return [_template(spec.key("template"), ("spec", "template"), pods)]


def _indexed_pods(spec: At) -> int:
    """A batch Job spec's gang size: all its pods run at once, each with its own index."""
    parallelism = spec.key("parallelism").integer(minimum=1, default=1)
    mode = spec.key("completionMode").string(default="NonIndexed")
    if parallelism > 1 and mode != "Indexed":
        raise spec.key("completionMode").error(
            f"a gang of {parallelism} workers needs completionMode: Indexed (each worker its own rank), got {mode}")
    completions = spec.key("completions")
    if completions.present and completions.integer(minimum=1) != parallelism:
        raise completions.error(f"a gang runs all its workers at once: completions ({completions.value}) must "
                                f"equal parallelism ({parallelism})")
    if mode == "Indexed" and not completions.present:
        raise completions.error("required with completionMode: Indexed")
    return parallelism


def _jobset(spec: At) -> list[_Template]:
    out: list[_Template] = []
    for i, rjob in enumerate(spec.key("replicatedJobs").items(required=True)):
        rjob.key("name").string()
        replicas = rjob.key("replicas").integer(minimum=0, default=1)
        job_spec = rjob.dig("template", "spec")
        job_spec.mapping(required=True)
        pods = replicas * _indexed_pods(job_spec)
        path: tuple[PathKey, ...] = ("spec", "replicatedJobs", i, "template", "spec", "template")
        out.append(_template(job_spec.key("template"), path, pods))
    if not out:
        raise spec.key("replicatedJobs").error("must list at least one replicated job")
    return out


def _pytorchjob(spec: At) -> list[_Template]:
    if spec.key("elasticPolicy").present:
        raise spec.key("elasticPolicy").error("an elastic PyTorchJob has no fixed gang size; geosched places "
                                              "fixed gangs (remove elasticPolicy)")
    out: list[_Template] = []
    for role, replica in spec.key("pytorchReplicaSpecs").entries(required=True):
        if role not in PYTORCH_ROLES:
            raise replica.error(f"unknown replica type (expected {' or '.join(PYTORCH_ROLES)})")
        replicas = replica.key("replicas").integer(minimum=0, default=1)
        if role == "Master" and replicas > 1:
            raise replica.key("replicas").error(f"a PyTorchJob has one Master, got {replicas}")
        out.append(_template(replica.key("template"), ("spec", "pytorchReplicaSpecs", role, "template"), replicas))
    if not out:
        raise spec.key("pytorchReplicaSpecs").error("must define Master and/or Worker")
    return out


def _trainjob(spec: At) -> list[_Template]:
    trainer = spec.key("trainer")
    nodes = trainer.key("numNodes")
    if not nodes.present:
        raise nodes.error("required (the runtime's default node count is not visible in the TrainJob)")
    count = nodes.integer(minimum=1)
    resources = trainer.key("resourcesPerNode")
    gpus = _gpu_limit(resources, required=True)
    products: frozenset[str] | None = None
    zones: frozenset[str] | None = None
    regions: frozenset[str] | None = None
    # The runtime's own tolerations are not visible here, only what the TrainJob adds for its node job.
    tolerated: list[toleration_rules.Toleration] = []
    for override in spec.key("podSpecOverrides").items():
        targets = {t.key("name").value for t in override.key("targetJobs").items()}
        if TRAINJOB_NODE_JOB not in targets:
            continue
        tolerated += toleration_rules.of_pod_spec(override)
        selector = _selector(override.key("nodeSelector"))
        products = _meet(products, selector.get(keys.GPU_PRODUCT))
        zones = _meet(zones, selector.get(keys.ZONE))
        regions = _meet(regions, selector.get(keys.REGION))
    return [_Template(None, count, gpus, trainer.key("image").opt_string(), products, zones, regions, trainer,
                      tuple(tolerated))]


def _template(tmpl: At, path: tuple[PathKey, ...], pods: int) -> _Template:
    tmpl.mapping(required=True)
    pod = tmpl.key("spec")
    pod.mapping(required=True)
    containers = pod.key("containers").items(required=True)
    if not containers:
        raise pod.key("containers").error("must list at least one container")
    # A pod holds the larger of its app containers' sum and its largest init container (init runs alone).
    app = sum(_gpu_limit(c.key("resources")) for c in containers)
    init = max((_gpu_limit(c.key("resources")) for c in pod.key("initContainers").items()), default=0)
    image = next((c.key("image").value for c in containers if _gpu_limit(c.key("resources")) > 0), None)
    selector = _selector(pod.key("nodeSelector"))
    terms = _required_terms(pod)
    return _Template(
        path=path, pods=pods, gpus=max(app, init), image=image if isinstance(image, str) else None,
        products=_meet(selector.get(keys.GPU_PRODUCT), _allowed(terms, keys.GPU_PRODUCT)),
        zones=_meet(selector.get(keys.ZONE), _allowed(terms, keys.ZONE)),
        regions=_meet(selector.get(keys.REGION), _allowed(terms, keys.REGION)),
        where=tmpl,
        tolerations=toleration_rules.of_pod_spec(pod),
    )


def _gpu_limit(resources: At, *, required: bool = False) -> int:
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


def _selector(at: At) -> dict[str, frozenset[str]]:
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
            within = _meet(within, values)
        if within is None:
            return None
        allowed |= within
    return frozenset(allowed) if terms else None


def _meet(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def _gpu_model(workers: Sequence[_Template], known: set[str]) -> str | None:
    models: set[str] = set()
    for t in workers:
        if t.products is None:
            continue
        if not t.products:
            raise t.where.error(f"the {keys.GPU_PRODUCT} constraints allow no product at all")
        for product in sorted(t.products):
            model = model_from_product(product)
            if model is None or model not in known:
                raise t.where.error(f"unknown GPU product {product!r} in {keys.GPU_PRODUCT} (known models: "
                                    f"{', '.join(sorted(known))})")
            models.add(model)
    if len(models) > 1:
        raise workers[0].where.error(f"a gang runs on one GPU model; {keys.GPU_PRODUCT} allows "
                                     f"{', '.join(sorted(models))}")
    return models.pop() if models else None


def _common(templates: Sequence[_Template], attr: str) -> tuple[str, ...]:
    allowed: frozenset[str] | None = None
    for t in templates:
        allowed = _meet(allowed, getattr(t, attr))
    if allowed is not None and not allowed:
        label = keys.ZONE if attr == "zones" else keys.REGION
        raise templates[0].where.error(f"the pod templates' {label} constraints leave no {attr[:-1]} in common")
    return tuple(sorted(allowed)) if allowed else ()
