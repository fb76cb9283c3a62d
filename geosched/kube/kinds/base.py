"""The job kind adapter: everything geosched knows about one kind of Kubernetes job object, in one place.

After Kueue's `jobframework.GenericJob` (kubernetes-sigs/kueue pkg/controller/jobframework/interface.go: pod sets,
suspend, run with pod-set info): a kind says

- what it is (`api_version`, `kind`, `plural`: the resource the API serves it as);
- its pod sets (`pod_sets`: name, pods, GPUs, where its pod template is), from which the gang is read;
- how to suspend it (`suspend_path`; None: the kind has no suspend field, and geosched cannot hold it);
- how its pods are pinned: on their pod templates (the default, done by the renderer), or, for a kind whose pod
  template lives elsewhere, by `pin_untemplated`;
- which gang backends take it (`refusal`), and whether its operator makes the gang's PodGroup itself
  (`scheduling_policy_path`: the backend states the gang there instead of rendering a second group);
- in scheduler mode, the gang size of pods it owns directly (`owned_pods_gang`; the scheduler's ClusterRole in
  deploy/scheduler grants `get` on its resource, which tests/kube/test_kube_kinds.py checks);
- in `geosched jobs`, when a run started (`started_at`, `run_began`).

Each kind is one module beside this one defining `KIND`; `kinds/__init__.py` finds them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from geosched.kube import tolerations as toleration_rules
from geosched.kube.affinity import Requirement
from geosched.kube.gang_backends import Backend
from geosched.kube.kinds.template import Template
from geosched.kube.objpath import At


@dataclass(frozen=True, slots=True)
class PinRequest:
    """What the renderer asks of a kind whose pods have no template in the object (`JobKind.pin_untemplated`)."""

    requirements: Sequence[Requirement]
    tolerations: Sequence[toleration_rules.Toleration]  # the job's own and its cluster's
    cluster_tolerations: bool  # whether the cluster config adds any (else the object's own are enough)
    pod_level_required: bool  # the backend needs labels or a scheduler name on the pods
    backend: str
    source: str


class JobKind(ABC):
    """One kind of job object. Subclasses set the class attributes and `pod_sets`; instances are registered."""

    api_version: str = ""
    kind: str = ""
    plural: str = ""
    # Where the kind's suspend flag is (Kubernetes and Kueue suspend a job by it); None: it has none.
    suspend_path: tuple[str, ...] | None = ("spec", "suspend")
    # Where the kind's operator reads the gang's scheduling policy and makes the PodGroup itself (Kubeflow's
    # runPolicy.schedulingPolicy); None: the backend renders its own PodGroup beside the object.
    scheduling_policy_path: tuple[str, ...] | None = None
    # Whether the object is one a user writes (False: geosched's own compact form, never sent to a cluster).
    served: bool = True

    @property
    def label(self) -> str:
        """`apiVersion kind`, as errors and the render digest name the kind."""
        return f"{self.api_version} {self.kind}"

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def __repr__(self) -> str:
        return f"<JobKind {self.label}>"

    def __str__(self) -> str:
        return self.label

    @abstractmethod
    def pod_sets(self, spec: At) -> list[Template]:
        """The object's pod sets, read from its `spec` (each with its pods and its template's path)."""

    def refusal(self, backend: Backend) -> str | None:
        """Why the kind cannot be handed to `backend` at all; None when it can."""
        return None

    def pin_untemplated(self, obj: dict[str, Any], request: PinRequest) -> None:
        """Pin the pods of a pod set without a template (path None). Only kinds that have such sets override it."""
        raise AssertionError(f"{self.label} has no pod set without a template")

    # --- scheduler mode -------------------------------------------------------------------------

    # Whether the kind's object owns its pods directly and says how many make the gang (`owned_pods_gang`);
    # False: its Jobs or StatefulSets own them, and the scheduler counts the pods that exist.
    owns_pods: bool = False

    def owned_pods_gang(self, obj: Mapping[str, Any]) -> int | None:
        """The gang size of the pods `obj` owns (None: it does not say)."""
        return None

    # --- `geosched jobs`: when a run began --------------------------------------------------------

    # Conditions of the kind's own (status True) and the state `geosched jobs` shows for them, after the ones
    # job kinds share (`geosched.kube.submit.STATE_OF_CONDITION`).
    state_conditions: tuple[tuple[str, str], ...] = ()

    # Whether the kind's status states its run's start (`started_at`); False: it is read from its Suspended
    # condition or its creation (`geosched.kube.submit.job_times`).
    states_start: bool = False

    def started_at(self, status: Mapping[str, Any], true: Mapping[str, float | None]) -> float | None:
        """The run's start as its status states it; `true` maps the conditions now True to their times."""
        return None

    def run_began(self, status: Mapping[str, Any]) -> bool:
        """Whether anything in the status shows the run began (a child job counted active, ready, done)."""
        children = [*(status.get("replicatedJobsStatus") or []), *(status.get("jobsStatus") or [])]
        return any(int(c.get(k) or 0) > 0 for c in children if isinstance(c, Mapping)
                   for k in ("active", "ready", "succeeded", "failed"))


class UnknownKind(JobKind):
    """A kind geosched does not know (`geosched jobs` lists every job of a namespace): it has no pod sets geosched
    can read, states no start, and its run began once a child job counts (the shared `run_began`)."""

    def pod_sets(self, spec: At) -> list[Template]:
        return []


UNKNOWN = UnknownKind()


def when(value: Any) -> float | None:
    """An RFC 3339 time as Unix seconds; None for anything else (a status is read, not validated)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
