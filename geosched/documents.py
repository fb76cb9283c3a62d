"""Job, fleet, network and placement documents: parse (strictly) and render (deterministically).

The same shapes serve the CLI's files, the store's snapshot export/import and the GitOps tree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from geosched import catalog
from geosched.decl.base import validate
from geosched.decl.job import NAME_RE as NAME_RE  # job names: gitops and the job readers check them too
from geosched.decl.job import JobDoc, WeightsDecl
from geosched.decl.network import NetworkDoc
from geosched.errors import InputError
from geosched.fields import Fields, each
from geosched.gate import Kind, load_document
from geosched.models import (
    Fleet,
    GpuPower,
    Job,
    NetworkView,
    Node,
    NodeState,
    NoFit,
    Placement,
    Region,
    Score,
    Weights,
    Zone,
    region_key,
)

# The output formats and the envelope lived here before issue 25 (geosched/output_format.py says why they moved).
from geosched.output_format import API_VERSION as API_VERSION
from geosched.output_format import Output as Output
from geosched.output_format import document as document

HEADER = {"apiVersion", "kind"}
STATES = {s.value: s for s in NodeState}


def _header(fields: Fields, kind: str) -> None:
    if fields.has("kind") and fields.raw("kind") != kind:
        raise fields.error("kind", f"expected {kind!r}, got {fields.raw('kind')!r}")


# --- jobs and weights (declared in geosched.decl.job) ------------------------------------------------

def parse_job(data: Any, source: str, gpu_models: set[str] | None = None) -> Job:
    return JobDoc.read(data, source, {"gpu_models": gpu_models}).job()


def job_to_dict(job: Job) -> dict[str, Any]:
    return JobDoc.of(job).dump()


def parse_weights(data: Any, source: str, path: str) -> Weights:
    """The `weights` block of a config file (GitOps, scheduler, dispatcher) at `path`."""
    return validate(WeightsDecl, data, source, path).weights()


# --- fleets ---------------------------------------------------------------------------------------

FLEET_FIELDS = HEADER | {"regions", "gpu_power", "nodes"}
REGION_FIELDS = {"provider", "name", "grid_gco2e_per_kwh", "pue", "cfe_fraction"}
POWER_FIELDS = {"gpu", "idle_watts", "max_watts"}
NODE_FIELDS = {"name", "provider", "region", "zone", "instance_type", "gpu", "gpus", "gpus_free",
               "price_ondemand", "price_spot", "cluster", "addresses", "labels", "state", "provider_id"}


def parse_fleet(data: Any, source: str) -> Fleet:
    f = Fields(data, source, "", FLEET_FIELDS)
    _header(f, "Fleet")
    regions = dict(catalog.regions())
    for path, item in f.items("regions"):
        r = Fields(item, source, path, REGION_FIELDS)
        region = Region(
            provider=r.string("provider"),
            name=r.string("name"),
            grid_gco2e_per_kwh=r.number("grid_gco2e_per_kwh", minimum=0.0),
            pue=r.number("pue", minimum=1.0),
            cfe_fraction=r.opt_number("cfe_fraction", minimum=0.0),
        )
        regions[region.key] = region
    power = dict(catalog.gpu_power())
    for path, item in f.items("gpu_power"):
        p = Fields(item, source, path, POWER_FIELDS)
        idle = p.number("idle_watts", minimum=0.0)
        peak = p.number("max_watts", minimum=idle)
        power[p.string("gpu")] = GpuPower(p.string("gpu"), idle, peak)
    known_gpus = catalog.gpu_models() | set(power)

    zones: dict[str, Zone] = {}
    names: set[str] = set()
    nodes = each(f, "nodes", lambda path, item: _parse_node(item, source, path, regions, known_gpus),
                 required=True)
    for i, node in enumerate(nodes):
        path = f"nodes[{i}]"
        if node.name in names:
            raise InputError(source, f"{path}.name", f"duplicate node name {node.name!r}")
        names.add(node.name)
        zone = Zone(node.zone, node.provider, node.region)
        if zones.setdefault(node.zone, zone) != zone:
            other = zones[node.zone]
            raise InputError(source, f"{path}.zone", f"zone {node.zone!r} is in {other.region_key} elsewhere "
                             f"in this file, here in {zone.region_key}")
    used = {z.region_key for z in zones.values()}
    return Fleet(regions={k: v for k, v in regions.items() if k in used}, zones=zones, nodes=tuple(nodes),
                 gpu_power=power)


def _parse_node(item: Any, source: str, path: str, regions: dict[str, Region], known_gpus: set[str]) -> Node:
    n = Fields(item, source, path, NODE_FIELDS)
    provider, region = n.string("provider"), n.string("region")
    if region_key(provider, region) not in regions:
        raise n.error("region", f"unknown region {provider}:{region} (declare it under regions: with its "
                      "grid_gco2e_per_kwh and pue)")
    zone = n.string("zone")
    instance_type = n.string("instance_type", default="custom")
    offer = catalog.offering_index().get((provider, instance_type, zone))
    gpu = n.opt_string("gpu") or (offer.gpu if offer else None)
    if gpu is None:
        raise n.error("gpu", "required (the instance type is not in the catalog for this zone)")
    if gpu not in known_gpus:
        raise n.error("gpu", f"unknown GPU model {gpu!r} (declare its power under gpu_power:)")
    gpus = n.integer("gpus", minimum=1, default=offer.gpus if offer else None)
    free = n.integer("gpus_free", minimum=0, default=gpus)
    n.check("gpus_free", free <= gpus, f"must be <= gpus ({gpus}), got {free}")
    for key in ("price_ondemand", "price_spot"):
        if n.has(key):
            n.number(key, minimum=0.0)
    addresses = n.strings("addresses")
    return Node(
        name=n.string("name"),
        provider=provider,
        region=region,
        zone=zone,
        instance_type=instance_type,
        gpu=gpu,
        gpus=gpus,
        gpus_free=free,
        price_ondemand=n.opt_number("price_ondemand") if n.has("price_ondemand")
        else (offer.price_ondemand if offer else None),
        price_spot=n.opt_number("price_spot") if n.has("price_spot") else (offer.price_spot if offer else None),
        cluster=n.opt_string("cluster"),
        addresses=addresses,
        labels=n.mapping("labels"),
        state=n.choice("state", STATES, NodeState.READY.value),
        provider_id=n.opt_string("provider_id"),
    )


def fleet_to_dict(fleet: Fleet) -> dict[str, Any]:
    shipped = catalog.regions()
    extra_regions = [
        {"provider": r.provider, "name": r.name, "grid_gco2e_per_kwh": r.grid_gco2e_per_kwh, "pue": r.pue}
        for key, r in sorted(fleet.regions.items()) if shipped.get(key) != r
    ]
    shipped_power = catalog.gpu_power()
    extra_power = [{"gpu": p.gpu, "idle_watts": p.idle_watts, "max_watts": p.max_watts}
                   for name, p in sorted(fleet.gpu_power.items()) if shipped_power.get(name) != p]
    out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Fleet"}
    if extra_regions:
        out["regions"] = extra_regions
    if extra_power:
        out["gpu_power"] = extra_power
    out["nodes"] = [_node_to_dict(n) for n in fleet.nodes]
    return out


def _node_to_dict(n: Node) -> dict[str, Any]:
    out: dict[str, Any] = {"name": n.name, "provider": n.provider, "region": n.region, "zone": n.zone,
                           "instance_type": n.instance_type, "gpu": n.gpu, "gpus": n.gpus,
                           "gpus_free": n.gpus_free}
    optional: dict[str, Any] = {"price_ondemand": n.price_ondemand, "price_spot": n.price_spot,
                                "cluster": n.cluster, "addresses": list(n.addresses),
                                "labels": dict(sorted(n.labels.items())),
                                "provider_id": n.provider_id}
    out.update({k: v for k, v in optional.items() if v is not None and v != [] and v != {}})
    out["state"] = n.state.value
    return out


def load_fleet(path: Path) -> Fleet:
    return parse_fleet(load_document(path, Kind.FLEET), str(path))


# --- network views (declared in geosched.decl.network) ---------------------------------------------

def parse_network(data: Any, source: str, fleet: Fleet | None = None) -> NetworkView:
    return NetworkDoc.read(data, source, {"fleet": fleet}).view()


def network_to_dict(view: NetworkView) -> dict[str, Any]:
    return NetworkDoc.of(view).dump()


def load_network(path: Path, fleet: Fleet | None = None) -> NetworkView:
    return parse_network(load_document(path, Kind.NETWORK), str(path), fleet)


# --- placements -----------------------------------------------------------------------------------

def score_to_dict(score: Score) -> dict[str, Any]:
    tput = score.min_throughput_gbps if score.min_throughput_gbps != float("inf") else None
    hop = None if score.hop is None else {"from": score.hop[0], "to": score.hop[1],
                                          "rtt_ms": score.worst_rtt_ms, "loss": score.worst_loss,
                                          "throughput_gbps": tput}
    return {
        "total": round(score.total, 6),
        "network": round(score.network, 6),
        "cost": round(score.cost, 6),
        "carbon": round(score.carbon, 6),
        "step_ms": round(score.step_ms, 3),
        "comm_ms": round(score.comm_ms, 3),
        "usd_per_hour": round(score.usd_per_hour, 4),
        "gco2e_per_hour": round(score.gco2e_per_hour, 2),
        "worst_rtt_ms": round(score.worst_rtt_ms, 3),
        "worst_loss": score.worst_loss,
        "min_throughput_gbps": tput,
        "bounding_hop": hop,
    }


def placement_to_dict(p: Placement) -> dict[str, Any]:
    return {
        "job": p.job.name,
        "policy": p.policy,
        "cluster": p.cluster,
        "zones": list(p.zones),
        "regions": list(p.regions),
        "gpus": p.job.gpus,
        "nodes": [{"node": a.node, "zone": a.zone, "workers": a.workers} for a in p.assignments],
        "score": score_to_dict(p.score),
        "weights": {"network": p.weights.network, "cost": p.weights.cost, "carbon": p.weights.carbon},
        "rejected": [{"subject": r.subject, "reason": r.reason} for r in p.rejected],
        "alternatives": [{"zones": list(c.zones), "cluster": c.cluster, "score": score_to_dict(c.score)}
                         for c in p.alternatives],
    }


def nofit_to_dict(n: NoFit) -> dict[str, Any]:
    return {"job": n.job.name, "policy": n.policy, "error": "NoFit",
            "rejected": [{"subject": r.subject, "reason": r.reason} for r in n.reasons]}
