"""Capacity geosched chose but does not make, so the usage ledger cannot charge it: the Karpenter NodePools
`provision --karpenter` and `up --karpenter` render for the user's GitOps (`karpenter_renders`). geosched never
applies them: Argo CD or Flux does, and Karpenter launches and removes the nodes, none of which geosched sees. The
report names these gangs in a note, so a total without them is not read as complete (report/METHODOLOGY.md).

Written by the CLI edge after the file (or stdout) was written, read by the report; it depends only on the store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from geosched.store.db import Store


@dataclass(frozen=True, slots=True)
class KarpenterRender:
    gang: str
    cluster: str
    region: str
    pools: tuple[str, ...]  # the NodePools' names: what Karpenter labels their nodes `karpenter.sh/nodepool` with
    instance_type: str
    capacity_type: str  # on-demand | spot (karpenter.sh/capacity-type)
    nodes: int
    destination: str  # the --out file, or "stdout"
    rendered_at: float


def record_karpenter(store: Store, *, gang: str, cluster: str, region: str, pools: Sequence[str],
                     instance_type: str, capacity_type: str, nodes: int, destination: str,
                     at: float | None = None) -> None:
    with store.transaction() as db:
        db.execute("INSERT INTO karpenter_renders (gang, cluster, region, pools, instance_type, capacity_type, nodes, "
                   "destination, rendered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (gang, cluster, region, json.dumps(list(pools)), instance_type, capacity_type, nodes, destination,
                    time.time() if at is None else at))


def karpenter_renders(store: Store, until: float | None = None) -> list[KarpenterRender]:
    """The renders made before `until` (all without it), oldest first: their nodes may have run at any time since."""
    found = store.db.execute(
        "SELECT gang, cluster, region, pools, instance_type, capacity_type, nodes, destination, rendered_at "
        "FROM karpenter_renders WHERE rendered_at < COALESCE(?, rendered_at + 1) ORDER BY id", (until,))
    out = []
    for gang, cluster, region, pools, instance_type, capacity_type, nodes, destination, at in found:
        try:
            names = tuple(str(p) for p in json.loads(pools))
        except (json.JSONDecodeError, TypeError):
            names = ()  # a damaged row still says which gang's capacity is not charged
        out.append(KarpenterRender(str(gang), str(cluster), str(region), names, str(instance_type),
                                   str(capacity_type), int(nodes), str(destination), float(at)))
    return out
