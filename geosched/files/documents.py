"""Job, fleet, network and placement documents: parse (strictly) and render (deterministically).

The same shapes serve the CLI's files, the store's snapshot export/import and the GitOps tree. Each input kind is
declared once, in geosched.files.decl (a pydantic model that parses, writes and gives its JSON Schema); the functions
here are the names the rest of geosched calls them by.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from geosched.core.models import (
    Fleet,
    Job,
    NetworkView,
    NoFit,
    Placement,
    Score,
    Weights,
)
from geosched.files.decl.base import validate
from geosched.files.decl.fleet import FleetDoc
from geosched.files.decl.job import JobDoc, WeightsDecl
from geosched.files.decl.network import NetworkDoc
from geosched.files.decl.placement import NoFitDoc, PlacementDoc, ScoreDecl

# The output formats and the envelope lived here before issue 25 (geosched/files/formats.py says why they moved).
from geosched.files.formats import API_VERSION as API_VERSION
from geosched.files.formats import Output as Output
from geosched.files.formats import document as document
from geosched.files.gate import Kind, load_document

# --- jobs and weights (declared in geosched.files.decl.job) ------------------------------------------------

def parse_job(data: Any, source: str, gpu_models: set[str] | None = None) -> Job:
    return JobDoc.read(data, source, {"gpu_models": gpu_models}).job()


def job_to_dict(job: Job) -> dict[str, Any]:
    return JobDoc.of(job).dump()


def parse_weights(data: Any, source: str, path: str) -> Weights:
    """The `weights` block of a config file (GitOps, scheduler, dispatcher) at `path`."""
    return validate(WeightsDecl, data, source, path).weights()


# --- fleets (declared in geosched.files.decl.fleet) ------------------------------------------------------

def parse_fleet(data: Any, source: str) -> Fleet:
    return FleetDoc.read(data, source).fleet()


def fleet_to_dict(fleet: Fleet) -> dict[str, Any]:
    return FleetDoc.of(fleet).dump()


def load_fleet(path: Path) -> Fleet:
    return parse_fleet(load_document(path, Kind.FLEET), str(path))


# --- network views (declared in geosched.files.decl.network) ---------------------------------------------

def parse_network(data: Any, source: str, fleet: Fleet | None = None) -> NetworkView:
    return NetworkDoc.read(data, source, {"fleet": fleet}).view()


def network_to_dict(view: NetworkView) -> dict[str, Any]:
    return NetworkDoc.of(view).dump()


def load_network(path: Path, fleet: Fleet | None = None) -> NetworkView:
    return parse_network(load_document(path, Kind.NETWORK), str(path), fleet)


# --- placements (declared in geosched.files.decl.placement) ----------------------------------------------

def score_to_dict(score: Score) -> dict[str, Any]:
    return ScoreDecl.of(score).dump()


def placement_to_dict(p: Placement) -> dict[str, Any]:
    return PlacementDoc.of(p).dump()


def nofit_to_dict(n: NoFit) -> dict[str, Any]:
    return NoFitDoc.of(n).dump()
