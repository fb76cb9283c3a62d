"""What moto's EKS cannot do, answered by the fault proxy: a node group that stays CREATING, or ends CREATE_FAILED
with the health issue EKS reports, in the zones a test names.

moto 5 creates a managed node group ACTIVE at once and never fails one (moto/eks/models.py `Nodegroup.__init__`
sets `status = ACTIVE`, `health = {"issues": []}`), so a zone without capacity cannot be shown by moto alone. The
proxy forwards every EKS call to moto and, for DescribeNodegroup (GET /clusters/{name}/node-groups/{group}) of a
group whose subnet lies in an overridden zone, rewrites the answer's `status` and `health.issues` (EKS API
reference, "Nodegroup", "NodegroupHealth", "Issue"). The group itself is moto's: delete and list are moto's own.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._http import HttpRequest, HttpResponse

_GROUP_PATH = re.compile(r"^/clusters/[^/]+/node-groups/[^/]+$")


def capacity_issue(instance_type: str, zone: str) -> dict[str, Any]:
    """The health issue of a group whose Auto Scaling group found no capacity: EKS reports EC2's error inside an
    AsgInstanceLaunchFailures issue (EKS User Guide, "Managed node group errors": AsgInstanceLaunchFailures)."""
    return {"code": "AsgInstanceLaunchFailures",
            "message": f"Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have "
                       f"sufficient {instance_type} capacity in the Availability Zone you requested ({zone}). Our "
                       "system will be working on provisioning additional capacity. Launching EC2 instance failed.",
            "resourceIds": ["eks-emulated-asg"]}


@dataclass
class _Rule:
    zone: str
    status: str
    issues: tuple[Mapping[str, Any], ...]
    remaining: int | None  # answers left to rewrite; None: every one


@dataclass
class NodegroupOverrides:
    """Zone -> the status DescribeNodegroup answers for groups there; `zone_of(subnet id)` maps a group's subnet."""

    zone_of: Callable[[str], str | None]
    _rules: list[_Rule] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, zone: str, status: str, issues: Sequence[Mapping[str, Any]] = (), times: int | None = None) -> None:
        with self._lock:
            self._rules.append(_Rule(zone, status, tuple(issues), times))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def rewrite(self, req: HttpRequest, response: HttpResponse) -> HttpResponse:
        if req.method != "GET" or response.status != 200 or not _GROUP_PATH.match(req.path):
            return response
        try:
            doc = json.loads(response.body)
            group = doc["nodegroup"]
        except (ValueError, KeyError, TypeError):
            return response
        zones = {self.zone_of(s) for s in group.get("subnets") or []}
        with self._lock:
            rule = next((r for r in self._rules if r.zone in zones and r.remaining != 0), None)
            if rule is None:
                return response
            if rule.remaining is not None:
                rule.remaining -= 1
        group["status"] = rule.status
        group["health"] = {"issues": [dict(i) for i in rule.issues]}
        headers = [(k, v) for k, v in response.headers if k.lower() != "content-length"]
        return HttpResponse(200, json.dumps(doc).encode(), headers)
