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
from geosched.decl.placement import NoFitDoc, PlacementDoc, ScoreDecl
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


# --- placements (declared in geosched.decl.placement) ----------------------------------------------

def score_to_dict(score: Score) -> dict[str, Any]:
    return ScoreDecl.of(score).dump()


def placement_to_dict(p: Placement) -> dict[str, Any]:
    return PlacementDoc.of(p).dump()


def nofit_to_dict(n: NoFit) -> dict[str, Any]:
    return NoFitDoc.of(n).dump()
