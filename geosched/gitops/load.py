"""Reading a GitOps tree's inputs from disk: job specs, the fleet + network snapshot, clusters, settings.

The only I/O on the input side; everything after this works on the returned values. Each input also gets a
canonical digest (of the parsed document, not the file's bytes), so a comment or a reordered key changes
nothing downstream, while any change that can move a job shows in the index.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from geosched.core import catalog
from geosched.core.errors import InputError
from geosched.core.models import CarbonSignal, Fleet, NetworkView
from geosched.files.documents import fleet_to_dict, job_to_dict, network_to_dict, parse_fleet, parse_network
from geosched.files.fields import DNS1123_LABEL_RULE, is_dns1123_label
from geosched.gitops.config import GitOpsConfig, config_to_dict, load_config
from geosched.grid.forecast import GridHistory
from geosched.kube.config import ClusterConfig, cluster_to_dict, load_cluster_config
from geosched.kube.jobinput import JobInput, read_job_file
from geosched.kube.provenance import inputs_digest
from geosched.store.db import read_snapshot

JOB_SUFFIXES = (".yaml", ".yml", ".json")
# Cluster names become directory names (and Argo CD / Flux object names): one safe path segment.
CLUSTER_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


@dataclass(frozen=True)
class JobSpec:
    key: str
    """The job's identity in the tree: its name, or namespace/name when the spec names a namespace."""
    source: str
    """Its file, relative to the jobs directory (POSIX separators, the same on every host)."""
    input: JobInput
    digest: str

    @property
    def name(self) -> str:
        return self.input.name


@dataclass(frozen=True)
class TreeInputs:
    jobs: tuple[JobSpec, ...]
    """In placement order: by name, then key."""
    fleet: Fleet
    network: NetworkView
    clusters: Mapping[str, ClusterConfig]
    config: GitOpsConfig
    digests: Mapping[str, str]
    """Canonical sha256 of each shared input: clusters, config, fleet, network."""
    carbon: CarbonSignal | None = None
    """Grid intensity of the decision's hour (None: the fleet's yearly means)."""
    grid: GridHistory | None = None
    """The hours around it, for flexible jobs' starts (geosched.policies.timeshift); None without a series."""


def load_inputs(jobs_dir: Path, snapshot_dir: Path, clusters_config: Path,
                config_path: Path | None = None) -> TreeInputs:
    fleet, network = load_snapshot(snapshot_dir)
    clusters = load_cluster_config(clusters_config)
    for name, cluster in clusters.items():
        check_cluster(name, cluster, str(clusters_config))
    config = load_config(config_path)
    known = catalog.gpu_models() | set(fleet.gpu_power) | {n.gpu for n in fleet.nodes}
    jobs = read_jobs(jobs_dir, known)
    digests = {
        "clusters": inputs_digest({name: cluster_to_dict(c) for name, c in sorted(clusters.items())}),
        "config": inputs_digest(config_to_dict(config)),
        "fleet": inputs_digest(fleet_to_dict(fleet)),
        "network": inputs_digest(network_to_dict(network)),
    }
    return TreeInputs(jobs, fleet, network, clusters, config, digests)


def repository_root(out_dir: Path) -> Path:
    """The Git work tree the tree is rendered into (the nearest directory, from `out_dir` up, holding `.git`),
    else `out_dir` itself: what a pull request controls, and so what its links may not lead out of
    (geosched.files.gate.confined, docs/security.md)."""
    start = Path(os.path.abspath(out_dir))
    return next((d for d in (start, *start.parents) if os.path.lexists(d / ".git")), start)


def load_snapshot(snapshot_dir: Path) -> tuple[Fleet, NetworkView]:
    """fleet.yaml + network.yaml, both required (a tree placed on a modelled network would move its jobs the
    day real measurements arrive)."""
    if not snapshot_dir.is_dir():
        raise InputError(str(snapshot_dir), "", "not a snapshot directory")
    fleet_doc, network_doc = read_snapshot(snapshot_dir)
    fleet = parse_fleet(fleet_doc.document, str(fleet_doc.path))
    return fleet, parse_network(network_doc.document, str(network_doc.path), fleet)


def read_jobs(jobs_dir: Path, gpu_models: set[str]) -> tuple[JobSpec, ...]:
    if not jobs_dir.is_dir():
        raise InputError(str(jobs_dir), "", "not a directory of job specs")
    specs: dict[str, JobSpec] = {}
    for path in job_files(jobs_dir):
        spec = job_spec(read_job_file(path, gpu_models), path.relative_to(jobs_dir).as_posix())
        other = specs.get(spec.key)
        if other is not None:
            raise InputError(str(path), "", f"job {spec.key!r} is also defined in {other.source}")
        specs[spec.key] = spec
    return tuple(sorted(specs.values(), key=lambda s: (s.name, s.key)))


def job_files(jobs_dir: Path) -> list[Path]:
    """Every YAML/JSON file below the directory, hidden files and folders left out, in a stable order."""
    found = [p for p in jobs_dir.rglob("*") if p.suffix in JOB_SUFFIXES and p.is_file()
             and not any(part.startswith(".") for part in p.relative_to(jobs_dir).parts)]
    return sorted(found, key=lambda p: p.relative_to(jobs_dir).as_posix())


def job_spec(job: JobInput, source: str) -> JobSpec:
    namespace = job.namespace
    if namespace is not None and not is_dns1123_label(namespace):
        # The namespace becomes a directory name: only a valid Kubernetes namespace may. The job readers refuse
        # such a namespace already (one check for every command); kept here, beside the path it guards.
        raise InputError(job.source, "namespace", f"{DNS1123_LABEL_RULE}, got {namespace!r}")
    if not job.kind.served and job.job.image is None:
        # Checked here, not when rendering, so a bad spec fails whether or not it fits anywhere.
        raise InputError(job.source, "image", "required to run the job on Kubernetes (the container image)")
    digest = inputs_digest({"kind": job.kind.label,
                            "job": job.original if job.original is not None else job_to_dict(job.job),
                            "namespace": namespace, "extras": list(job.extras)})
    key = f"{namespace}/{job.name}" if namespace else job.name
    return JobSpec(key=key, source=source, input=job, digest=digest)


def check_cluster(name: str, cluster: ClusterConfig, source: str) -> None:
    """Both names become directories of the tree, so both must be one safe path segment."""
    if not set(name) <= CLUSTER_NAME_CHARS or name.startswith(("-", ".")):
        raise InputError(source, f"clusters.{name}", "a cluster name becomes a directory of the tree: use letters, "
                         "digits, '-', '_' and '.' only, not first '-' or '.'")
    namespace = cluster.namespace
    if namespace is not None and not is_dns1123_label(namespace):
        raise InputError(source, f"clusters.{name}.namespace", f"{DNS1123_LABEL_RULE}, got {namespace!r}")
