"""`geosched down GANG` of a gang `up --provisioning-class` queued (cli/provfailover.py): delete what geosched applied
for it and end the charge of the nodes the autoscaler made for it once they are gone (providers/provreqs.py).

Here rather than beside the queueing loop because `down` (providers/cli.py) calls it, and the providers may use the
kube adapter but not the CLI package.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from geosched.core.errors import GeoschedError, one_line
from geosched.kube import provnodes, provwatch
from geosched.kube.client import Kube
from geosched.providers import journal, provreqs
from geosched.store.db import Store


@dataclass(frozen=True, slots=True)
class DownSettings:
    withdraw_s: float = 120.0  # the deleted objects' deadline, as a refused zone's withdrawal (cli/provfailover.py)
    # How long `down` waits for the nodes to be gone once the job is deleted: cluster-autoscaler removes a node
    # unneeded for --scale-down-unneeded-time (10 minutes by default, its FAQ), so a little over that.
    release_s: float = 720.0
    poll_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@dataclass(frozen=True, slots=True)
class Down:
    """What `down` of a ProvisioningRequest gang did: `state` terminated once every object is deleted and every
    charged node seen gone, else terminating (`errors` say what is left)."""

    state: str
    deleted: int  # objects geosched applied that were deleted (or found gone)
    closed: int  # ledger rows of nodes closed
    errors: tuple[str, ...]
    queue: tuple[str, ...] = ()  # what was done with the gang's Kueue queue objects, a line each


def connect(row: provreqs.RequestRecord) -> Kube:
    """The cluster of a request as `up` reached it: its context, in the kubeconfig `up` read (None: the default)."""
    return Kube.open(row.context, None if row.kubeconfig is None else Path(row.kubeconfig), name=row.cluster)


def take_down(store: Store, gang: str, open_kube: Callable[[provreqs.RequestRecord], Kube] = connect, *,
              settings: DownSettings = DownSettings()) -> Down:
    """`geosched down GANG` of a gang `up --provisioning-class` queued: delete what geosched applied for it (the job
    and its companions; without Kueue the request and its PodTemplates; Kueue's request goes with the job's
    Workload), wait until they and the requests are gone, then until the nodes charged for the request are gone
    (the autoscaler removes them once unneeded), closing each node's ledger row at the look that saw it gone.
    Nodes still there after `settings.release_s` stay charged and the gang `terminating`: `down` again closes them.
    A node of the same name with another uid is a new node: the charged one is gone."""
    journal.set_gang(store, gang, "terminating")
    deleted = closed = 0
    errors: list[str] = []
    queue: list[str] = []
    for row in provreqs.requests_of(store, gang):
        if row.state == "deleted":
            continue
        try:
            with open_kube(row) as kube:
                provwatch.withdraw(kube, [o.manifest() for o in row.objects], row.requests,
                                   namespace=row.namespace, timeout_s=settings.withdraw_s,
                                   poll_s=min(settings.poll_s, 1.0), clock=settings.clock, sleep=settings.sleep)
                deleted += len(row.objects)
                queue += _remove_queue(store, kube, row)
                closed += _wait_gone(store, kube, row, settings)
        except Exception as exc:
            why = (str(exc) if isinstance(exc, GeoschedError) else
                   f"the cluster could not be asked ({type(exc).__name__})")
            errors.append(f"cluster {row.cluster}: {one_line(why)}")
            continue
        current = provreqs.request(store, row.id)
        left = provreqs.open_nodes(store, current) if current is not None else []
        if left:
            named = ", ".join(n.name for n in left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
            errors.append(f"node(s) {named} still in cluster {row.cluster} {settings.release_s:g} s after the job "
                          "was deleted: charged until they are gone (the autoscaler removes a node once unneeded, "
                          f"cluster-autoscaler after --scale-down-unneeded-time); run `geosched down {gang}` again")
            continue
        provreqs.mark_deleted(store, row.id)
    state = "terminating" if errors else "terminated"
    journal.set_gang(store, gang, state, message="; ".join(errors) if errors else
                     f"the job and its requests deleted; {closed} node(s) the autoscaler made seen gone")
    return Down(state, deleted, closed, tuple(errors), tuple(queue))


def _remove_queue(store: Store, kube: Kube, row: provreqs.RequestRecord) -> list[str]:
    """Remove the Kueue queue objects geosched applied for the gang (`provwatch.remove_queue`: only objects geosched
    alone made and kept, only while no Workload queues on them) unless another gang of this store, not taken down,
    went through them; and the pre-stop-34 `geosched-provisioning` objects of the gang's namespace on the same
    terms. What was done, a line each (nothing where there was nothing)."""
    lines: list[str] = []
    if row.queue:
        others = provreqs.queue_in_use(store, row)
        if others:
            lines.append(f"Kueue's queue objects of {row.cluster} kept: gang {others[0]} uses them")
        else:
            lines += _said(row.cluster, provwatch.remove_queue(
                kube, [(o.api_version, o.kind, o.name, o.namespace) for o in row.queue]))
    lines += _said(row.cluster, provwatch.remove_queue(kube, provwatch.legacy_queue(row.namespace)))
    return lines


def _said(cluster: str, outcome: tuple[list[str], str | None]) -> list[str]:
    removed, kept = outcome
    lines = [f"removed from {cluster} (geosched made them, no gang queues on them): {', '.join(removed)}"] \
        if removed else []
    return lines + ([f"{cluster}: {kept}"] if kept else [])


def _wait_gone(store: Store, kube: Kube, row: provreqs.RequestRecord, settings: DownSettings) -> int:
    """Poll the request's charged nodes until each is gone, closing its row at the look that saw it; how many were
    closed. Stops at `settings.release_s`."""
    start, closed = settings.clock(), 0
    while True:
        left = provreqs.open_nodes(store, row)
        if not left:
            return closed
        seen = provnodes.nodes_now(kube, [n.name for n in left])
        gone = [n for n in left if seen.get(n.name) is None
                or str((seen[n.name].get("metadata") or {}).get("uid")) != n.uid]
        closed += provreqs.close_nodes(store, gone, time.time())
        waited = settings.clock() - start
        if len(gone) == len(left) or waited >= settings.release_s:
            return closed
        settings.sleep(min(settings.poll_s, max(0.0, settings.release_s - waited)))
