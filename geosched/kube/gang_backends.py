"""The gang backends by name: which scheduler (or queue) makes a gang of the pods geosched renders. Names only,
apart from geosched.kube.config (which reads them from the cluster configuration, with pydantic) so that the job
kinds (geosched.kube.kinds), which say which backends take them, load without pydantic: `geosched -h` lists the
kinds from their registry. What each backend renders: geosched.kube.backends.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args


class Backend(StrEnum):
    KUEUE = "kueue"
    COSCHEDULING = "coscheduling"
    VOLCANO = "volcano"
    # Kubernetes' own Workload and PodGroup (scheduling.k8s.io/v1alpha2, 1.36 with GenericWorkload + GangScheduling).
    WORKLOAD_API = "workload-api"
    NONE = "none"


BackendName = Literal["kueue", "coscheduling", "volcano", "workload-api", "none"]
assert set(get_args(BackendName)) == {b.value for b in Backend}
