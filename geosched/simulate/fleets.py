"""Fleets sized for a trace: replaying a trace written for a 100-GPU cluster on 4,000 GPUs queues nothing,
so placement would not matter; the replay needs a fleet of the size the trace was written for."""

from __future__ import annotations

from dataclasses import replace

from geosched.models import Fleet, Node

# Gavel's experiments ran on 108 GPUs; 14 nodes of 8 is the nearest whole number of 8-GPU nodes.
GAVEL_NODES = 14


def sized_fleet(fleet: Fleet, nodes: int, cluster: str, gpu: str) -> Fleet:
    """`nodes` nodes of one cluster's `gpu` model, all free, dealt round-robin over its zones (deterministic)."""
    by_zone: dict[str, list[Node]] = {}
    for n in fleet.nodes:
        if n.cluster == cluster and n.gpu == gpu:
            by_zone.setdefault(n.zone, []).append(n)
    available = sum(len(v) for v in by_zone.values())
    if available < nodes:
        raise ValueError(f"cluster {cluster} has {available} {gpu} nodes, not {nodes}")
    picked: list[Node] = []
    while len(picked) < nodes:
        for zone in sorted(by_zone):
            if by_zone[zone] and len(picked) < nodes:
                node = by_zone[zone].pop(0)
                picked.append(replace(node, gpus_free=node.gpus))
    zones = {n.zone: fleet.zones[n.zone] for n in picked}
    regions = {z.region_key: fleet.regions[z.region_key] for z in zones.values()}
    return Fleet(regions=regions, zones=zones, nodes=tuple(picked), gpu_power=fleet.gpu_power)
