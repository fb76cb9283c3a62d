"""Shared pieces of the kube tests: schema validators for rendered manifests and placements to render.
(A uniquely named module rather than conftest, so another test folder's conftest cannot shadow it.)

Custom resources are checked against the upstream CRDs in shared/schemas/crds the way the API server reads
them: `x-kubernetes-*` keys are annotations to jsonschema, `nullable` admits null, and an object schema with
`properties` rejects unknown fields unless it preserves them (the API server would silently prune them, which
for us is a silent bug). Built-in kinds, and the pod templates embedded in custom resources, are checked
against the Kubernetes OpenAPI carried offline by the kubernetes-validate package, in strict mode.
Metadata gets the checks no OpenAPI schema states: label and annotation key and value syntax.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml
from packaging.version import Version
from referencing import Registry, Resource

from geosched.core.models import Assignment, Job, Placement, Score, Weights
from geosched.kube import kinds
from geosched.kube.objpath import At

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
# Upstream CRDs of job kinds that shared/schemas/crds does not hold (each file's header names its release).
OWN_CRDS = DATA / "crds"
REPO = HERE.parents[1]
# The Kubernetes versions built-in objects are checked against: a floor still in common use, and the newest
# the installed kubernetes-validate carries.
K8S_VERSIONS = ("1.29", kubernetes_validate.utils.latest_version())
# The only release that serves Kubernetes' gang API as the workload-api backend writes it (scheduling.k8s.io/v1alpha2
# and the pods' spec.schedulingGroup): 1.35 has v1alpha1, 1.37 v1alpha3/v1beta1.
WORKLOAD_API_VERSIONS = ("1.36",)
BUILTIN_GROUPS = {"", "batch", "apps", "scheduling.k8s.io"}
NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def crd_dir() -> Path:
    env = os.environ.get("GEOSCHED_CRD_DIR")
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared" / "schemas" / "crds", Path("/work/shared/schemas/crds")]
    for path in candidates:
        if path.is_dir():
            return path
    message = "CRD schemas not found (set GEOSCHED_CRD_DIR to shared/schemas/crds)"
    if os.environ.get("CI"):
        pytest.fail(message)  # CI always has shared/ beside the checkout: a skip there would hide a failure
    pytest.skip(message)
    raise AssertionError("unreachable")


@cache
def _crd_schemas(directory: Path) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(directory.glob("*.yaml")):
        crd = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            out[(f"{group}/{version['name']}", kind)] = _structural(version["schema"]["openAPIV3Schema"])
    return out


def _structural(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _structural(v) for k, v in schema.items()}
    pattern = out.get("pattern")
    if isinstance(pattern, str) and pattern.startswith("^(?i)"):
        out["pattern"] = "(?i)^" + pattern[5:]  # Go's RE2 takes flags after ^ (Kueue's names); Python at the start
    if out.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    preserve = out.get("x-kubernetes-preserve-unknown-fields") is True
    if "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    return out


@cache
def _crd_validator(directory: Path, api_version: str, kind: str) -> jsonschema.protocols.Validator:
    schema = _crd_schemas(directory).get((api_version, kind)) or _crd_schemas(OWN_CRDS).get((api_version, kind))
    if schema is None:
        raise AssertionError(f"no CRD schema for {api_version} {kind} in {directory}")
    return jsonschema.Draft4Validator(schema)


QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def check_metadata(meta: Mapping[str, Any], where: str) -> None:
    """Kubernetes' own validation of label and annotation keys and values (not expressible in OpenAPI)."""
    for key, value in (meta.get("labels") or {}).items():
        name = key.split("/")[-1]
        assert QUALIFIED.match(key) and len(name) <= 63 and len(key) - len(name) <= 254, f"{where}: label key {key}"
        assert isinstance(value, str) and len(value) <= 63 and LABEL_VALUE.match(value), \
            f"{where}: label {key}={value!r}"
    annotations = meta.get("annotations") or {}
    for key, value in annotations.items():
        assert QUALIFIED.match(key), f"{where}: annotation key {key}"
        assert isinstance(value, str), f"{where}: annotation {key} must be a string"
    assert sum(len(k) + len(v) for k, v in annotations.items()) <= 256 * 1024, f"{where}: annotations too large"


@cache
def _k8s_validator(version: str, api_version: str, kind: str) -> jsonschema.protocols.Validator:
    """kubernetes_validate.validate, with the schema and its registry built once per kind, not per call
    (it re-reads the multi-megabyte definitions file every time)."""
    utils = kubernetes_validate.utils
    actual = [v for v in utils.all_versions() if Version(utils.major_minor(v)) <= Version(version)][-1]
    folder = f"kubernetes-json-schema/v{actual}-local-strict"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = utils.schema_contents(f"{folder}/{kind.lower()}-{group_version}.json", version)
    definitions = utils.schema_contents(f"{folder}/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


Versions = tuple[str, ...]


def _builtin(obj: Mapping[str, Any], where: str, versions: Versions) -> None:
    for version in versions:
        validator = _k8s_validator(version, obj["apiVersion"], obj["kind"])
        error = jsonschema.exceptions.best_match(validator.iter_errors(dict(obj)))
        if error is not None:
            path = ".".join(str(p) for p in error.path)
            raise AssertionError(f"{where} invalid for Kubernetes {version} at {path}: {error.message}")


def _pod_template(template: Mapping[str, Any], where: str, versions: Versions) -> None:
    _builtin({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"},
              "template": template}, where, versions)
    check_metadata(template.get("metadata") or {}, where)


def _job_template(template: Mapping[str, Any], where: str, versions: Versions) -> None:
    _builtin({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "check"},
              "spec": template["spec"]}, where, versions)
    check_metadata(template.get("metadata") or {}, where)
    check_metadata(template["spec"]["template"].get("metadata") or {}, where + ".spec.template")


def embedded_templates(obj: Mapping[str, Any]) -> Iterator[tuple[
        str, Callable[[Mapping[str, Any], str, Versions], None], Mapping[str, Any]]]:
    """The built-in objects inside a custom resource, each with its checker: a JobSet's Job templates, and the pod
    template of every pod set its job kind reads (geosched.kube.kinds)."""
    if obj["kind"] == "JobSet":
        for i, rjob in enumerate(obj["spec"]["replicatedJobs"]):
            yield f"spec.replicatedJobs[{i}].template", _job_template, rjob["template"]
        return
    kind = kinds.lookup(obj["apiVersion"], obj["kind"])
    if kind is None:
        return
    for pod_set in kind.pod_sets(At(obj["spec"], "manifest", "spec")):
        if pod_set.path is not None:
            template: Any = obj
            for step in pod_set.path:
                template = template[step]
            yield ".".join(str(s) for s in pod_set.path), _pod_template, template


def validate_manifest(obj: Mapping[str, Any], versions: Versions = K8S_VERSIONS) -> None:
    """Valid for every Kubernetes release in `versions` (built-in kinds and the pod templates inside custom ones)."""
    where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    check_metadata(obj.get("metadata") or {}, where)
    api_version = obj["apiVersion"]
    group = api_version.split("/")[0] if "/" in api_version else ""
    if group in BUILTIN_GROUPS:
        _builtin(obj, where, versions)
        if obj["kind"] == "Job":
            check_metadata(obj["spec"]["template"].get("metadata") or {}, where + ".spec.template")
        return
    validator = _crd_validator(crd_dir(), api_version, obj["kind"])
    errors = sorted(validator.iter_errors(copy.deepcopy(dict(obj))), key=lambda e: list(e.path))
    if errors:
        details = "; ".join(f"{'.'.join(str(p) for p in e.path)}: {e.message}" for e in errors[:5])
        raise AssertionError(f"{where} does not match its CRD: {details}")
    # ObjectMeta is `type: object` in every CRD; the API server checks it as the built-in ObjectMeta.
    _builtin({"apiVersion": "v1", "kind": "ConfigMap", "metadata": obj["metadata"]}, where + ".metadata", versions)
    for path, check, template in embedded_templates(obj):
        check(template, f"{where}.{path}", versions)


# --- placements -----------------------------------------------------------------------------------

SCORE = Score(total=1.0523, network=1.0, cost=0.523, carbon=0.0, step_ms=1234.5, comm_ms=234.5,
              usd_per_hour=131.0904, gco2e_per_hour=12345.678, worst_rtt_ms=0.4, worst_loss=0.0,
              min_throughput_gbps=100.0)

# name -> (cluster, zones, regions, assignments as (node, zone, workers))
SCENARIOS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[tuple[str, str, int], ...]]] = {
    "one-zone": ("eks-east", ("use1-az1",), ("aws:us-east-1",),
                 (("ip-10-0-1-1", "use1-az1", 2), ("ip-10-0-1-2", "use1-az1", 2))),
    "two-zones": ("eks-east", ("use1-az1", "use1-az2"), ("aws:us-east-1",),
                  (("ip-10-0-1-1", "use1-az1", 2), ("ip-10-0-2-1", "use1-az2", 2))),
    "two-regions": ("eks-east", ("use1-az1", "use2-az1"), ("aws:us-east-1", "aws:us-east-2"),
                    (("ip-10-0-1-1", "use1-az1", 2), ("ip-10-1-1-1", "use2-az1", 2))),
}


def make_placement(job: Job, scenario: str = "one-zone", policy: str = "zone-first") -> Placement:
    cluster, zones, regions, assignments = SCENARIOS[scenario]
    # Split the gang's workers over the scenario's nodes as evenly as it goes.
    nodes = [a[0] for a in assignments]
    per = [job.workers // len(nodes) + (1 if i < job.workers % len(nodes) else 0) for i in range(len(nodes))]
    placed = tuple(Assignment(node=n, zone=a[1], workers=k)
                   for n, a, k in zip(nodes, assignments, per, strict=True) if k > 0)
    return Placement(job=job, policy=policy, cluster=cluster, zones=zones, regions=regions,
                     assignments=placed, score=SCORE, weights=Weights())
