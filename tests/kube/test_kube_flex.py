"""Flexible jobs in Kubernetes (issue 24 item 4): slack read from a job's or its pods' annotations, a job object held
(suspended, start-at) and released for every kind, and scheduler mode binding a flexible gang only at its hour."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from geosched.core.errors import InputError
from geosched.core.models import HOUR_S, CarbonSignal, Weights
from geosched.grid.carbon import GridInput, grid_history
from geosched.grid.formats import Basis
from geosched.grid.shipped import shipped_series
from geosched.kube import flex, keys
from geosched.kube.cluster_inventory import fleet_from_nodes, network_for
from geosched.kube.jobinput import parse_job_object
from geosched.kube.scheduler.decide import Decision, Refusal, View, decide
from geosched.kube.scheduler.gangs import group
from geosched.kube.scheduler.pods import pod_info
from geosched.policies import PlacementContext
from tests.handmade import node

NOTES = {flex.RUNTIME: "3h", flex.START_WITHIN: "24h", flex.DEADLINE: "2023-06-11T08:00:00Z"}


def test_annotations_declare_the_slack_and_bad_values_are_one_line() -> None:
    s = flex.schedule_of(NOTES, "job.yaml", "metadata.annotations")
    assert s is not None and (s.runtime_s, s.start_within_s) == (3 * HOUR_S, 24 * HOUR_S)
    assert s.deadline == datetime(2023, 6, 11, 8, tzinfo=UTC).timestamp()
    assert flex.schedule_of({"other": "x"}, "job.yaml", "metadata.annotations") is None
    with pytest.raises(InputError, match=r"job.yaml: metadata.annotations.geosched.io/runtime: is required"):
        flex.schedule_of({flex.START_WITHIN: "2h"}, "job.yaml", "metadata.annotations")
    with pytest.raises(InputError, match=r"geosched.io/start-within: expected a duration such as 90m"):
        flex.schedule_of({flex.RUNTIME: "1h", flex.START_WITHIN: "soon"}, "job.yaml", "metadata.annotations")
    with pytest.raises(InputError, match=r"geosched.io/deadline: the time needs an offset"):
        flex.schedule_of({flex.RUNTIME: "1h", flex.DEADLINE: "2023-06-11T08:00:00"}, "job.yaml",
                         "metadata.annotations")


def batch_job(meta_notes: dict[str, str] | None = None, pod_notes: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "t", "image": "x", "resources": {"limits": {keys.GPU: 8}}}]}}
    if pod_notes:
        template["metadata"] = {"annotations": pod_notes}
    meta: dict[str, Any] = {"name": "flex", "namespace": "ml"}
    if meta_notes:
        meta["annotations"] = meta_notes
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"completions": 2, "parallelism": 2, "completionMode": "Indexed", "template": template}}


def test_job_objects_read_the_slack_from_their_own_or_their_pods_annotations() -> None:
    on_object = parse_job_object(batch_job(NOTES), "job.yaml")
    on_pods = parse_job_object(batch_job(pod_notes=NOTES), "job.yaml")
    assert on_object.job.flexible and on_pods.job.schedule == on_object.job.schedule
    assert not parse_job_object(batch_job(), "job.yaml").job.flexible
    with pytest.raises(InputError, match=r"job.yaml: spec.template.metadata.annotations.geosched.io/runtime"):
        parse_job_object(batch_job(pod_notes={flex.DEADLINE: "2023-06-11T08:00:00Z"}), "job.yaml")


@pytest.mark.parametrize(("kind", "path"), [("Job", ("spec", "suspend")), ("JobSet", ("spec", "suspend")),
                                            ("TrainJob", ("spec", "suspend")),
                                            ("PyTorchJob", ("spec", "runPolicy", "suspend"))])
def test_a_held_job_is_suspended_with_its_start_and_released_at_it(kind: str, path: tuple[str, ...]) -> None:
    obj: dict[str, Any] = {"kind": kind, "metadata": {"name": "j", "annotations": {"a": "b"}}, "spec": {}}
    start = datetime(2023, 6, 10, 21, tzinfo=UTC).timestamp()
    flex.hold(obj, start, start - 13 * HOUR_S)
    here: Any = obj
    for key in path:
        here = here[key]
    assert here is True
    assert obj["metadata"]["annotations"] == {"a": "b", flex.START_AT: "2023-06-10T21:00:00Z",
                                              flex.SUBMITTED_AT: "2023-06-10T08:00:00Z"}
    assert flex.held_until(obj) == (start, start - 13 * HOUR_S)
    assert not flex.released(obj, start - 1) and flex.released(obj, start)
    flex.release(obj)
    here = obj
    for key in path:
        here = here[key]
    assert here is False


def pod(name: str, index: int, notes: dict[str, str]) -> Any:
    return pod_info({"metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}",
                                  "labels": {keys.COSCHED_POD_GROUP: "flex"},
                                  "annotations": {**notes, "batch.kubernetes.io/job-completion-index": str(index)},
                                  "creationTimestamp": "2023-06-10T08:00:00Z"},
                     "spec": {"containers": [{"name": "c", "resources": {"limits": {keys.GPU: "8"}}}]},
                     "status": {"phase": "Pending"}})


def test_scheduler_mode_binds_a_flexible_gang_at_its_hour_never_after_its_latest_start() -> None:
    nodes = [*(node(f"w{i}", "usw1-az1", "us-west-1", provider="aws", gpu="H100", cluster="c") for i in range(2)),
             *(node(f"e{i}", "use1-az1", "us-east-1", provider="aws", gpu="H100", cluster="c") for i in range(2))]
    fleet, _, _ = fleet_from_nodes(nodes)
    ctx = PlacementContext(fleet, network_for(fleet))
    view = View(ctx, ctx.gpus_free.copy(), [{keys.ZONE: n.zone} for n in fleet.nodes], [() for _ in fleet.nodes])
    hourly = {"aws:us-west-1": dict(shipped_series("US-CAL-CISO").hours),
              "aws:us-east-1": dict(shipped_series("US-MIDA-PJM").hours)}
    grid = grid_history(fleet, GridInput(CarbonSignal({}, hourly), None, Basis.LIFECYCLE))
    (gang,) = group([pod(f"w-{i}", i, NOTES) for i in range(2)], [], {("pod-group", "ml", "flex"): 2}, {})
    weights = Weights(carbon=1.0)
    at = datetime(2023, 6, 10, 8, tzinfo=UTC).timestamp()
    held = decide(gang, view, weights=weights, grid=grid, now=at)
    assert isinstance(held, Refusal) and held.held_until is not None and held.held_until > at
    assert held.reason.startswith("held for a greener grid: starts at 2023-06-10T") and not held.release
    bound = decide(gang, view, weights=weights, grid=grid, now=held.held_until)
    assert isinstance(bound, Decision) and bound.zones == ("usw1-az1",)  # California, in its solar hours
    latest = datetime(2023, 6, 11, 5, tzinfo=UTC).timestamp()  # deadline 08:00 less the 3 h run
    on_time = decide(gang, view, weights=weights, grid=grid, now=latest)
    assert isinstance(on_time, Decision) and on_time.late is None  # it ends at 08:00 on the dot
    # An hour past its latest start: bound at once, and said so (before: bound without a word).
    late = decide(gang, view, weights=weights, grid=grid, now=latest + HOUR_S)
    assert isinstance(late, Decision) and late.late == ("job ml/flex cannot finish by its deadline 2023-06-11T08:00Z: "
                                                       "it starts now (its predicted 3 h run ends 2023-06-11T09:00Z "
                                                       "at the earliest)")
    assert isinstance(decide(gang, view, weights=weights), Decision)  # no grid: bound as any gang
    (bad,) = group([pod(f"b-{i}", i, {flex.START_WITHIN: "1h"}) for i in range(2)], [],
                   {("pod-group", "ml", "flex"): 2}, {})
    refused = decide(bad, view, weights=weights, grid=grid, now=at)
    assert isinstance(refused, Refusal) and "geosched.io/runtime: is required" in refused.reason
