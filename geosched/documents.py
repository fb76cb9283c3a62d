"""Job, fleet, network and placement documents: parse (strictly) and render (deterministically).

The same shapes serve the CLI's files, the store's snapshot export/import and the GitOps tree. Each input kind is
declared once, in geosched.decl (a pydantic model that parses, writes and gives its JSON Schema); the functions here
are the names the rest of geosched calls them by.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from geosched.decl.base import validate
from geosched.decl.fleet import FleetDoc
from geosched.decl.job import NAME_RE as NAME_RE  # job names: gitops and the job readers check them too
from geosched.decl.job import JobDoc, WeightsDecl
from geosched.decl.network import NetworkDoc
from geosched.gate import Kind, load_document
from geosched.models import (
    Fleet,
    Job,
    NetworkView,
    NoFit,
    Placement,
    Score,
    Weights,
)

# The output formats and the envelope lived here before issue 25 (geosched/output_format.py says why they moved).
from geosched.output_format import API_VERSION as API_VERSION
from geosched.output_format import Output as Output
from geosched.output_format import document as document

# --- jobs and weights (declared in geosched.decl.job) ------------------------------------------------

def parse_job(data: Any, source: str, gpu_models: set[str] | None = None) -> Job:
    return JobDoc.read(data, source, {"gpu_models": gpu_models}).job()


def job_to_dict(job: Job) -> dict[str, Any]:
    return JobDoc.of(job).dump()


def parse_weights(data: Any, source: str, path: str) -> Weights:
    """The `weights` block of a config file (GitOps, scheduler, dispatcher) at `path`."""
    return validate(WeightsDecl, data, source, path).weights()


# --- fleets (declared in geosched.decl.fleet) ------------------------------------------------------

def parse_fleet(data: Any, source: str) -> Fleet:
    return FleetDoc.read(data, source).fleet()


def fleet_to_dict(fleet: Fleet) -> dict[str, Any]:
    return FleetDoc.of(fleet).dump()


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
