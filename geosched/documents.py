"""Job, fleet, network and placement documents: parse (strictly) and render (deterministically).

The same shapes serve the CLI's files, the store's snapshot export/import and the GitOps tree.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from geosched import catalog, gpus
from geosched.decl.network import NetworkDoc
from geosched.errors import InputError
from geosched.fields import Fields, describe, each, parse_time
from geosched.gate import Kind, load_document
from geosched.models import (
    CommProfile,
    Fleet,
    GpuPower,
    Job,
    NetworkView,
    Node,
    NodeState,
    NoFit,
    Placement,
    Pricing,
    Region,
    Schedule,
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
# Job names become Kubernetes object names: RFC 1123 labels.
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
PRICING = {p.value: p for p in Pricing}
STATES = {s.value: s for s in NodeState}


def _header(fields: Fields, kind: str) -> None:
    if fields.has("kind") and fields.raw("kind") != kind:
        raise fields.error("kind", f"expected {kind!r}, got {fields.raw('kind')!r}")


# --- jobs -----------------------------------------------------------------------------------------

JOB_FIELDS = HEADER | {"name", "namespace", "image", "workers", "gpus_per_worker", "gpu", "max_zones",
                       "max_regions", "providers", "regions", "zones", "clusters", "pricing", "profile", "schedule"}
SCHEDULE_FIELDS = {"runtime", "start_within", "deadline"}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_DURATION_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
MAX_DURATION_S = 366 * 86400.0


def parse_job(data: Any, source: str, gpu_models: set[str] | None = None) -> Job:
    f = Fields(data, source, "", JOB_FIELDS)
    _header(f, "Job")
    name = f.string("name")
    f.check("name", bool(NAME_RE.match(name)) and len(name) <= 63,
            "must be a lowercase RFC 1123 name (a-z, 0-9, '-', at most 63 characters)")
    gpu = f.opt_string("gpu")
    known = gpu_models if gpu_models is not None else catalog.gpu_models()
    if gpu is not None:
        try:
            gpu = gpus.resolve(gpu, known)
        except gpus.GpuNameError as exc:
            raise f.error("gpu", str(exc)) from None
    profile = CommProfile()
    if f.has("profile"):
        p = Fields(f.raw("profile"), source, "profile", {"message_mb", "compute_ms", "utilisation",
                                                          "latency_sensitive", "checkpoint_minutes",
                                                          "restart_minutes"})
        sensitive = p.raw("latency_sensitive") if p.has("latency_sensitive") else False
        p.check("latency_sensitive", isinstance(sensitive, bool), f"expected true or false, got {sensitive!r}")
        profile = CommProfile(
            message_mb=p.number("message_mb", minimum=0.0, default=profile.message_mb),
            compute_ms=p.number("compute_ms", minimum=0.0, exclusive_minimum=True, default=profile.compute_ms),
            utilisation=p.number("utilisation", minimum=0.0, maximum=1.0, default=profile.utilisation),
            latency_sensitive=bool(sensitive),
            checkpoint_minutes=p.number("checkpoint_minutes", minimum=0.0, default=profile.checkpoint_minutes),
            restart_minutes=p.number("restart_minutes", minimum=0.0, default=profile.restart_minutes),
        )
    return Job(
        schedule=parse_schedule(f.raw("schedule"), source) if f.has("schedule") else None,
        name=name,
        namespace=f.string("namespace", default="default"),
        image=f.opt_string("image"),
        workers=f.integer("workers", minimum=1),
        gpus_per_worker=f.integer("gpus_per_worker", minimum=1),
        gpu=gpu,
        max_zones=f.opt_integer("max_zones", minimum=1),
        max_regions=f.opt_integer("max_regions", minimum=1),
        providers=f.strings("providers"),
        regions=f.strings("regions"),
        zones=f.strings("zones"),
        clusters=f.strings("clusters"),
        pricing=f.choice("pricing", PRICING, Pricing.ON_DEMAND.value),
        profile=profile,
    )


def parse_schedule(data: Any, source: str, path: str = "schedule") -> Schedule:
    """`schedule: {runtime: 6h, start_within: 24h}` or `{runtime: 6h, deadline: 2025-03-02T18:00:00Z}` (both may be
    given: the earlier latest start binds). `runtime` is the predicted run, over which carbon is counted; durations
    are seconds or a number with s, m, h or d."""
    f = Fields(data, source, path, SCHEDULE_FIELDS)
    runtime = parse_duration(f, "runtime", required=True)
    assert runtime is not None
    deadline = parse_time(f.raw("deadline"), source, f.at("deadline")).timestamp() if f.has("deadline") else None
    return Schedule(runtime_s=runtime, start_within_s=parse_duration(f, "start_within"), deadline=deadline)


def parse_duration(f: Fields, key: str, required: bool = False) -> float | None:
    if not f.has(key):
        if required:
            raise f.error(key, "is required (the predicted run time, e.g. 6h)")
        return None
    raw = f.raw(key)
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        seconds = float(raw)
    elif isinstance(raw, str) and (m := _DURATION_RE.match(raw)):
        seconds = float(m.group(1)) * _DURATION_UNIT_S[m.group(2)]
    else:
        raise f.error(key, f"expected a duration such as 90m, 6h or 2d (or seconds), got {describe(raw)}")
    if not 0 < seconds <= MAX_DURATION_S:
        raise f.error(key, f"must be more than 0 and at most 366 days, got {seconds:g} s")
    return seconds


def schedule_to_dict(schedule: Schedule) -> dict[str, Any]:
    out: dict[str, Any] = {"runtime": _duration_text(schedule.runtime_s)}
    if schedule.start_within_s is not None:
        out["start_within"] = _duration_text(schedule.start_within_s)
    if schedule.deadline is not None:
        out["deadline"] = datetime.fromtimestamp(schedule.deadline, UTC).isoformat().replace("+00:00", "Z")
    return out


def _duration_text(seconds: float) -> str | float:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return seconds


WEIGHT_FIELDS = {"network", "cost", "carbon", "zone_tolerance", "spot_risk"}


def parse_weights(data: Any, source: str, path: str) -> Weights:
    """The `weights` block of a config file (GitOps, scheduler): each term's weight, the zone tolerance and the
    weight of a spot job's interruption risk (`spot_risk`)."""
    w, d = Fields(data, source, path, WEIGHT_FIELDS), Weights()
    out = Weights(network=w.number("network", minimum=0.0, default=d.network),
                  cost=w.number("cost", minimum=0.0, default=d.cost),
                  carbon=w.number("carbon", minimum=0.0, default=d.carbon),
                  # A fraction of the best total: 2 would mean "within 200%" (issue 23).
                  zone_tolerance=w.number("zone_tolerance", minimum=0.0, maximum=1.0, default=d.zone_tolerance),
                  spot_risk=w.number("spot_risk", minimum=0.0, default=d.spot_risk))
    if out.network == 0 and out.cost == 0 and out.carbon == 0:
        raise InputError(source, path, "network, cost and carbon are all 0: every candidate would score 0; give "
                         "at least one a weight > 0")
    return out


def job_to_dict(job: Job) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Job", "name": job.name,
                           "namespace": job.namespace, "workers": job.workers,
                           "gpus_per_worker": job.gpus_per_worker}
    optional: dict[str, Any] = {
        "image": job.image, "gpu": job.gpu, "max_zones": job.max_zones, "max_regions": job.max_regions,
        "providers": list(job.providers), "regions": list(job.regions), "zones": list(job.zones),
        "clusters": list(job.clusters),
    }
    out.update({k: v for k, v in optional.items() if v})
    out["pricing"] = job.pricing.value
    out["profile"] = {"message_mb": job.profile.message_mb, "compute_ms": job.profile.compute_ms,
                      "utilisation": job.profile.utilisation}
    if job.profile.latency_sensitive:
        out["profile"]["latency_sensitive"] = True
    for key in ("checkpoint_minutes", "restart_minutes"):  # only when set: existing documents keep their digest
        if getattr(job.profile, key) != getattr(CommProfile(), key):
            out["profile"][key] = getattr(job.profile, key)
    if job.schedule is not None:
        out["schedule"] = schedule_to_dict(job.schedule)
    return out


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
