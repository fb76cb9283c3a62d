"""The probes' library API, under the CLI: run a plan and store it, read the view back, export it.

Every function takes the `Store` it works on; the CLI (or the scheduler mode, or a test) decides which.
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from geosched.core.models import NetworkView, Node
from geosched.files.fields import dump
from geosched.files.inventory import Inventory, SshTarget, check_jump_chains
from geosched.files.writes import PRIVATE, write_file
from geosched.probes import exports, records
from geosched.probes.aggregate import NodeScope, node_pair_links, slow_nodes, to_samples
from geosched.probes.engine import PlanOptions, Progress, run_probes
from geosched.probes.hostkeys import KNOWN_HOSTS_NAME, HostKeys, default_user_files
from geosched.probes.results import RunReport, SlowNode
from geosched.probes.settings import ProbeSettings
from geosched.probes.ssh import SshPool
from geosched.store.db import Store

STATE_NAME = "probes-state.json"
# Descriptors beyond one per node: the store, known_hosts files, the event loop's own.
FD_HEADROOM = 256


@dataclass(frozen=True)
class RunOutcome:
    report: RunReport
    node_samples: int
    zone_samples: int
    slow: tuple[SlowNode, ...]


async def run_async(store: Store, targets: Sequence[SshTarget], settings: ProbeSettings,
                    options: PlanOptions | None = None, *, known_hosts: Sequence[Path] | None = None,
                    progress: Progress | None = None, node_scope: NodeScope = NodeScope.ALL,
                    jumps: Sequence[SshTarget] = ()) -> RunOutcome:
    """Probe the targets, add the samples to the store, and return what happened. `jumps` are jump hosts
    (`proxy_jump`) the targets are reached through, not measured themselves.

    `options.run` < 0 takes the next run number from the store's home, so the sampled plan rotates.
    """
    options = options or PlanOptions(run=-1)
    # Whoever built the targets (an inventory file, the store's inventories and machines, a library caller), a
    # chain that loops would make connections wait on each other until the deadline: refused before dialling.
    check_jump_chains([*targets, *jumps], "probe targets", lambda name: ("probe targets", f"{name}.proxy_jump"))
    _raise_fd_limit(len(targets) + FD_HEADROOM)
    if options.run < 0:
        options = replace(options, run=next_run(store.home))
    hostkeys = HostKeys(store.home / KNOWN_HOSTS_NAME,
                        default_user_files() if known_hosts is None else list(known_hosts))
    hostkeys.check_user_files()
    async with SshPool([*targets, *jumps], hostkeys, settings) as pool:
        report = await run_probes(pool, targets, settings, options, progress)
    zone_of = {t.name: t.zone for t in targets}
    nodes, zones = to_samples(report, zone_of, report.started_at, prior=store.network_view(),
                              no_reply_rtt_ms=settings.ping_reply_timeout_s * 1000.0, node_scope=node_scope)
    store.add_samples([*nodes, *zones])
    flagged = slow_nodes(node_pair_links(report, settings.ping_reply_timeout_s * 1000.0), zone_of)
    return RunOutcome(report, len(nodes), len(zones), tuple(flagged))


def run(store: Store, targets: Sequence[SshTarget], settings: ProbeSettings, options: PlanOptions | None = None,
        *, known_hosts: Sequence[Path] | None = None, progress: Progress | None = None,
        node_scope: NodeScope = NodeScope.ALL, jumps: Sequence[SshTarget] = ()) -> RunOutcome:
    return asyncio.run(run_async(store, targets, settings, options, known_hosts=known_hosts, progress=progress,
                                 node_scope=node_scope, jumps=jumps))


def _raise_fd_limit(wanted: int) -> None:
    """One open socket per node for the whole run: a 1,000-node fleet needs more than the usual soft
    limit of 1,024 descriptors. Raised up to the hard limit; beyond that connections fail by name."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def next_run(home: Path) -> int:
    """A counter kept beside the store: each run gets the next number (rotation of the sampled plan)."""
    path = home / STATE_NAME
    try:
        current = int(json.loads(path.read_text(encoding="utf-8")).get("next_run", 0))
    except (OSError, ValueError, AttributeError):
        current = 0
    write_file(path, json.dumps({"next_run": current + 1, "updated_at": time.time()}) + "\n", mode=PRIVATE)
    return current


def inventory_nodes(inventory: Inventory) -> list[Node]:
    """Every inventory node as a `Node`: the fleet's record when it declares GPUs, else a GPU-less one."""
    fleet = inventory.fleet.by_name if inventory.fleet is not None else {}
    return [fleet.get(t.name) or Node(name=t.name, provider=t.provider, region=t.region, zone=t.zone,
                                      instance_type="custom", gpu="none", gpus=0, gpus_free=0,
                                      addresses=(t.address,))
            for t in inventory.targets]


def known_nodes(store: Store, inventory: Inventory | None) -> list[Node]:
    if inventory is not None:
        return inventory_nodes(inventory)
    fleet = store.load_fleet()
    return list(fleet.nodes) if fleet is not None else []


def show(store: Store, nodes: Sequence[Node], scope: str = "node") -> list[dict[str, Any]]:
    view = store.network_view()
    if scope == "zone":
        return records.zone_records(view)
    return records.pair_records(view, {n.name: n.zone for n in nodes})


def slow_in_view(view: NetworkView, nodes: Sequence[Node]) -> list[SlowNode]:
    """Slow-node flags from the stored (aggregated) intra-zone node links."""
    return slow_nodes(view.node_links, {n.name: n.zone for n in nodes})


@dataclass(frozen=True, slots=True)
class ExportNames:
    topology: str = exports.DEFAULT_NT_NAME
    namespace: str = exports.DEFAULT_NAMESPACE
    configmap: str = exports.DEFAULT_CONFIGMAP
    weights: str = exports.DEFAULT_WEIGHTS


def export(store: Store, nodes: Sequence[Node], paths: Mapping[str, Path], names: ExportNames = ExportNames()
           ) -> list[Path]:
    """Write the requested documents ("networktopology", "configmap", "snapshot") from the store's view.

    Everything is rendered first and written after, so a bad name or an oversized ConfigMap writes nothing.
    """
    view = store.network_view()
    docs: dict[str, dict[str, Any]] = {}
    if "snapshot" in paths:
        docs["snapshot"] = exports.snapshot(view)
    if "networktopology" in paths:
        docs["networktopology"] = exports.network_topology(view, nodes, name=names.topology,
                                                           namespace=names.namespace, configmap_name=names.configmap,
                                                           weights_name=names.weights)
    if "configmap" in paths:
        docs["configmap"] = exports.netperf_configmap(view, nodes, name=names.configmap, namespace=names.namespace)
    written = []
    for key, doc in docs.items():
        path = paths[key]
        write_file(path, dump(doc, "json" if path.suffix == ".json" else "yaml"))
        written.append(path)
    return written
