"""The Python API: what the CLI does, as functions (docs/python-api.md). Re-exported by `geosched`:

    import geosched
    job = geosched.load_job("examples/jobs/train-64.yaml")
    placement = geosched.place(job)                   # the embedded default fleet and network
    print(placement.cluster, placement.zones, placement.score.step_ms)

Files are read through the same loaders as the CLI (one-line `InputError`s naming file, field and reason); the
fleet defaults to the embedded one, the network to the fleet's modelled links.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from geosched import policies
from geosched.core import netmodel
from geosched.core.default_fleet import default_fleet, default_network
from geosched.core.models import Fleet, Job, NetworkView, NoFit, Placement, Weights
from geosched.files.documents import load_network as _load_network
from geosched.kube.jobinput import load_job as _load_job
from geosched.simulate.engine import SimOptions
from geosched.simulate.engine import simulate as _simulate
from geosched.simulate.metrics import PolicyResult
from geosched.simulate.traces import read_trace
from geosched.store.sources import load_fleet_file

DEFAULT_WEIGHTS = Weights()


def load_job(path: str | Path) -> Job:
    """A job file: geosched's compact form (YAML or JSON), or a Kubernetes job object of a kind geosched reads
    (`geosched.kube.kinds.help_names()`)."""
    return _load_job(Path(path))


def load_fleet(path: str | Path) -> Fleet:
    """A fleet file, or an inventory file whose machines declare their GPUs."""
    return load_fleet_file(Path(path))


def load_network(path: str | Path, fleet: Fleet) -> NetworkView:
    """A network view file, checked against `fleet`."""
    return _load_network(Path(path), fleet)


def place(job: Job | str | Path, fleet: Fleet | None = None, network: NetworkView | None = None, *,
          policy: str = policies.DEFAULT_POLICY, network_weight: float = DEFAULT_WEIGHTS.network,
          cost_weight: float = DEFAULT_WEIGHTS.cost, carbon_weight: float = DEFAULT_WEIGHTS.carbon,
          waited_s: float | None = None) -> Placement | NoFit:
    """Place one job, as `geosched place` does: a `Placement` (cluster, zones, nodes, every score term, the
    alternatives and why each zone was rejected) or a `NoFit` with the reasons. `waited_s`, as `--waited`: how long
    the job has waited, which turns on zone-first's patience (a `NoFit` with `waiting` True while it waits for a
    healthy ring; policies/README.md, "Patience")."""
    from geosched.policies.patience import Waiting

    gang = job if isinstance(job, Job) else load_job(job)
    fleet, network = _snapshot(fleet, network)
    weights = Weights(network_weight, cost_weight, carbon_weight)
    waiting = Waiting(waited_s) if waited_s is not None else None
    return policies.place(gang, policies.PlacementContext(fleet, network), policy, weights, waiting=waiting)


def simulate(trace: str | Path, fleet: Fleet | None = None, network: NetworkView | None = None, *,
             policies_: Sequence[str] = (policies.DEFAULT_POLICY,), gpu: str | None = None,
             backfill: bool = False) -> list[PolicyResult]:
    """Replay a job trace (Gavel, Alibaba 2023, Philly, CSV) once per policy, side by side; pure given its inputs."""
    fleet, network = _snapshot(fleet, network)
    read = read_trace(Path(trace))
    ctx = policies.PlacementContext(fleet, network)
    return _simulate(read.jobs, ctx, list(policies_), options=SimOptions(backfill=backfill, gpu=gpu))


def _snapshot(fleet: Fleet | None, network: NetworkView | None) -> tuple[Fleet, NetworkView]:
    if fleet is None:
        return default_fleet(), network or default_network()
    return fleet, network or NetworkView(zone_links=netmodel.zone_links(fleet.zones.values()))


__all__ = ["load_fleet", "load_job", "load_network", "place", "simulate"]
