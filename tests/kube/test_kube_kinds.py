"""The job kind registry (geosched/kube/kinds): every kind is one module the registry finds, and what the rest of
geosched derives from it (the resources `geosched jobs` lists, the scheduler's RBAC) stays in step with it."""

from __future__ import annotations

import pkgutil
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
import yaml
from kube_support import REPO
from typer.testing import CliRunner

from geosched.cli.main import app
from geosched.core.errors import InputError
from geosched.kube import flex, kinds, submit
from geosched.kube.kinds.base import JobKind
from geosched.kube.kinds.template import Template
from geosched.kube.objpath import At

SCHEDULER_RBAC = REPO / "deploy" / "scheduler" / "rbac.yaml"


def test_every_kind_module_defines_one_registered_kind() -> None:
    modules = {m.name for m in pkgutil.iter_modules(kinds.__path__)} - {"base", "template"}
    found = kinds.registered()
    assert {type(k).__module__.rsplit(".", 1)[-1] for k in found} == modules
    assert len({k.label for k in found}) == len(found)
    assert [k for k in found if not k.served] == [kinds.compact()]
    for kind in kinds.served():
        assert kind.group and kind.plural and kind.plural == kind.plural.lower(), kind
        assert kinds.lookup(kind.api_version, kind.kind) is kind
        assert kinds.by_name(kind.kind) is kind, f"{kind.kind}: served kinds are told apart by name in status reads"


def test_geosched_jobs_lists_every_served_kind() -> None:
    assert set(submit.JOB_RESOURCES) == {(k.api_version, k.kind) for k in kinds.served()}


def test_the_help_names_every_served_kind_and_no_other() -> None:
    # Every command's help says which job objects it reads from the registry itself (LeaderWorkerSet was read since
    # it was added but missing from all five help texts while they were written out: issue 25 audit).
    listed = kinds.help_names()
    named = [item.split()[-1] for item in listed.split(", ")]
    assert sorted(named) == sorted(k.kind for k in kinds.served())
    assert "batch/v1 Job" in listed  # the built-in Job is named with its group: JobSet and TrainJob are Jobs too
    result = CliRunner().invoke(app, ["place", "-h"])
    assert result.exit_code == 0 and listed in " ".join(result.output.split())  # as wrapped for the terminal


def missing_grants(rules: Sequence[Mapping[str, Any]], needed: Iterable[JobKind]) -> list[str]:
    """The kinds whose owned pods' gang size the scheduler reads but its ClusterRole does not let it get."""
    out = []
    for kind in needed:
        if not any(kind.group in r.get("apiGroups", ()) and kind.plural in r.get("resources", ())
                   and "get" in r.get("verbs", ()) for r in rules):
            out.append(kind.label)
    return out


def scheduler_rules() -> list[dict[str, Any]]:
    documents = list(yaml.safe_load_all(SCHEDULER_RBAC.read_text(encoding="utf-8")))
    role = next(d for d in documents if d["kind"] == "ClusterRole")
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def test_the_scheduler_may_get_every_kind_whose_pods_it_sizes() -> None:
    owning = [k for k in kinds.served() if k.owns_pods]
    assert owning, "the batch Job at least owns its pods"
    assert missing_grants(scheduler_rules(), owning) == []


def test_the_rbac_check_can_fail() -> None:
    class Owner(JobKind):
        api_version = "example.com/v1"
        kind = "Trainer"
        plural = "trainers"
        owns_pods = True

        def pod_sets(self, spec: At) -> list[Template]:
            return []

    assert missing_grants(scheduler_rules(), [Owner()]) == ["example.com/v1 Trainer"]


def test_the_scheduler_rbac_grants_no_job_resource_no_kind_needs() -> None:
    """Least privilege the other way: a job resource in the ClusterRole belongs to a kind that owns its pods."""
    owned = {(k.group, k.plural) for k in kinds.served() if k.owns_pods}
    served = {(k.group, k.plural) for k in kinds.served()}
    granted = {(g, r) for rule in scheduler_rules() for g in rule.get("apiGroups", ())
               for r in rule.get("resources", ())}
    assert granted & served == owned


def test_a_kind_without_suspend_cannot_be_held(monkeypatch: pytest.MonkeyPatch) -> None:
    class Service(JobKind):
        api_version = "example.com/v1"
        kind = "Service"
        suspend_path = None

        def pod_sets(self, spec: At) -> list[Template]:
            return []

    obj: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "a"}, "spec": {}}
    flex.hold(obj, 3600.0, 0.0, source="jobs/a.yaml")
    assert obj["spec"]["suspend"] is True
    registered = kinds.by_name
    monkeypatch.setattr(kinds, "by_name", lambda name: Service() if name == "Service" else registered(name))
    service: dict[str, Any] = {"kind": "Service", "metadata": {}, "spec": {}}
    with pytest.raises(InputError, match=r"jobs/a.yaml: metadata.annotations: example.com/v1 Service has no suspend"):
        flex.hold(service, 3600.0, 0.0, source="jobs/a.yaml")
    flex.release(service)  # never held: nothing to release
    assert service == {"kind": "Service", "metadata": {}, "spec": {}}
