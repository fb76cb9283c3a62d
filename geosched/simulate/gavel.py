"""Gavel's measured throughputs, turned into job durations and each model's communication profile.

Data: `geosched/data/gavel/throughputs_alone.json` (provenance in SOURCES.md beside it): steps/s of each
(job type, scale factor) on V100, P100 and K80, on one server ("consolidated") and, under the
`<gpu>_unconsolidated` keys, spread over servers. Only the V100 figures are used: V100 is Gavel's
reference GPU type, the one its traces were generated against.

Duration. Gavel generates a job's steps from its run time as
`num_steps = run_time * throughputs['v100'][(job_type, scale_factor)]['null']` (scheduler/utils.py,
`generate_job`, reference_worker_type='v100'); the inverse is

    duration_s = total_steps / thr_v100(job_type, scale_factor)

Gavel's Philly-derived traces ask for scale factors it never measured (up to 32; most models were measured
up to 8, non-distributed ones only at 1). Then the largest measured scale factor s < sf of the same model
is scaled linearly, thr(sf) = thr(s) * sf / s: perfect scaling, the optimistic choice, so no slow-down is
invented that the network would then be blamed for.

Communication. Throughput counts the steps of all workers, so one iteration (one gradient all-reduce)
takes sf / thr seconds. The consolidated iteration is read as compute only and the extra time of the
unconsolidated one as the all-reduce over the network it was measured on:

    compute_ms = 1000 * sf / thr_consolidated
    comm_ms    = max(0, 1000 * sf / thr_unconsolidated - compute_ms)

That network is taken to be the fleet's same-zone link (`netmodel.SAME_ZONE`, 50 Gbit/s, 0.2 ms RTT):
an assumption, stated here, not fitted to any result. The all-reduce message size then follows from
`geosched.core.comm`'s ring model with one worker per GPU (the unconsolidated layout), and per model we take
the median over the scale factors measured both ways (one noisy pair cannot swing it). A measurement
where spreading was faster than consolidating gives 0 (no measurable communication). Models Gavel never
measured across servers (A3C, CycleGAN, Recommendation: only scale factor 1) get message size 0: we have
no data that they communicate, and say so rather than guess.

A check on the assumption: the derived messages (ResNet-18: 230-290 MB; LM: 240-470 MB; Transformer:
0.6-1.3 GB) are several times the models' fp32 gradients (ResNet-18 has 11.7 M parameters, 47 MB), so
Gavel's spread runs lost more time than a 50 Gbit/s wire explains (a slower network, or a 2019 stack that
did not overlap the all-reduce with compute). The consequence is stated, not corrected: every multi-node
gang pays at least the penalty Gavel measured, whichever policy placed it.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from statistics import median
from typing import Any

from geosched.core import netmodel
from geosched.core.comm import comm_ms
from geosched.core.errors import InputError
from geosched.core.models import CommProfile, LinkStats
from geosched.files.gate import Kind, parse_json, read_text

REFERENCE_GPU = "v100"
REFERENCE_LINK = netmodel.SAME_ZONE
DATA_DIR = "gavel"
THROUGHPUTS_FILE = "throughputs_alone.json"


@dataclass(frozen=True)
class GavelModel:
    """One job type: measured steps/s by scale factor, consolidated and spread, and the derived message."""

    job_type: str
    consolidated: Mapping[int, float]
    unconsolidated: Mapping[int, float]
    message_mb: float

    def throughput(self, scale_factor: int) -> float:
        """Steps/s at `scale_factor`, linearly extrapolated beyond the largest measured one below it."""
        measured = self.consolidated.get(scale_factor)
        if measured:
            return measured
        below = [s for s, t in self.consolidated.items() if s < scale_factor and t > 0]
        if not below:
            raise KeyError(f"no measured throughput for {self.job_type!r} at or below {scale_factor} GPUs")
        s = max(below)
        return self.consolidated[s] * scale_factor / s

    def iteration_ms(self, scale_factor: int) -> float:
        """Compute time of one iteration (one all-reduce) with the whole gang on one server."""
        return 1000.0 * scale_factor / self.throughput(scale_factor)

    def profile(self, scale_factor: int) -> CommProfile:
        return CommProfile(message_mb=self.message_mb, compute_ms=self.iteration_ms(scale_factor))


@dataclass(frozen=True)
class Throughputs:
    source: str
    models: Mapping[str, GavelModel]

    def model(self, job_type: str) -> GavelModel:
        found = self.models.get(job_type)
        if found is None:
            raise KeyError(f"unknown job type {job_type!r} (no measured throughput in {self.source})")
        return found

    def duration_s(self, job_type: str, scale_factor: int, total_steps: int) -> float:
        return total_steps / self.model(job_type).throughput(scale_factor)


def message_mb_for(workers: int, comm_ref_ms: float, reference: LinkStats = REFERENCE_LINK) -> float:
    """The all-reduce message whose ring over `reference` takes `comm_ref_ms` (comm_ms is affine in it)."""
    if workers <= 1 or comm_ref_ms <= 0:
        return 0.0
    args = (reference.rtt_p50_ms, reference.loss, reference.throughput_gbps)
    fixed = comm_ms(workers, 0.0, *args)
    per_mb = comm_ms(workers, 1.0, *args) - fixed
    return max(0.0, (comm_ref_ms - fixed) / per_mb)


def derive_message_mb(consolidated: Mapping[int, float], unconsolidated: Mapping[int, float],
                      reference: LinkStats = REFERENCE_LINK) -> float:
    estimates = []
    for sf, spread in unconsolidated.items():
        packed = consolidated.get(sf, 0.0)
        if sf <= 1 or packed <= 0 or spread <= 0:
            continue
        compute = 1000.0 * sf / packed
        comm = max(0.0, 1000.0 * sf / spread - compute)
        estimates.append(message_mb_for(sf, comm, reference))
    return float(median(estimates)) if estimates else 0.0


def parse_throughputs(raw: Any, source: str, reference: LinkStats = REFERENCE_LINK) -> Throughputs:
    """Gavel's JSON layout: {gpu: {"('<job type>', <sf>)": {"null": steps_per_s, ...}}}."""
    if not isinstance(raw, dict) or REFERENCE_GPU not in raw:
        raise InputError(source, "", f"expected Gavel throughputs with a {REFERENCE_GPU!r} section")
    tables: dict[str, dict[str, dict[int, float]]] = {}
    for section in (REFERENCE_GPU, f"{REFERENCE_GPU}_unconsolidated"):
        entries = raw.get(section, {})
        if not isinstance(entries, dict):
            raise InputError(source, section, "expected a mapping")
        for key, value in entries.items():
            job_type, sf = _parse_key(source, section, key)
            alone = value.get("null") if isinstance(value, dict) else None
            if isinstance(alone, bool) or not isinstance(alone, int | float):
                raise InputError(source, f"{section}.{key}", "expected {\"null\": <steps per second>}")
            tables.setdefault(job_type, {}).setdefault(section, {})[sf] = float(alone)
    models = {}
    for job_type, by_section in tables.items():
        packed = by_section.get(REFERENCE_GPU, {})
        spread = by_section.get(f"{REFERENCE_GPU}_unconsolidated", {})
        models[job_type] = GavelModel(job_type, packed, spread, derive_message_mb(packed, spread, reference))
    return Throughputs(source, models)


def _parse_key(source: str, section: str, key: str) -> tuple[str, int]:
    try:
        parsed = ast.literal_eval(key)
    except (ValueError, SyntaxError):
        parsed = None
    if (not isinstance(parsed, tuple) or len(parsed) != 2 or not isinstance(parsed[0], str)
            or not isinstance(parsed[1], int) or parsed[1] < 1):
        raise InputError(source, f"{section}.{key}", "expected a key like \"('<job type>', <scale factor>)\"")
    return parsed[0], parsed[1]


def load_throughputs(path: Path) -> Throughputs:
    return parse_throughputs(parse_json(read_text(path, Kind.THROUGHPUTS), str(path)), str(path))


@cache
def shipped_throughputs() -> Throughputs:
    ref = resources.files("geosched.data").joinpath(DATA_DIR).joinpath(THROUGHPUTS_FILE)
    source = f"geosched/data/{DATA_DIR}/{THROUGHPUTS_FILE}"
    return parse_throughputs(json.loads(ref.read_text(encoding="utf-8")), source)


def shipped_traces() -> list[Path]:
    """The Gavel traces shipped with geosched, by name."""
    base = resources.files("geosched.data").joinpath(DATA_DIR)
    return sorted(Path(str(p)) for p in base.iterdir() if p.name.endswith(".trace"))
